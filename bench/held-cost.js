"use strict";
// The cost of many held FailOpen locks on an engine that cannot keep up with their heartbeats,
// ours only, in one short bounded run (the full comparison is `node bench/run.js --only held`).
//
//   node --expose-gc bench/held-cost.js [--locks 10000] [--period 1000] [--lease 5000]
//                                       [--window 5000] [--engine dynalite|dynamodb-local]
//
// A client on a fresh engine on 127.0.0.1 is warmed up (1,000 acquire/release cycles on other
// ids), then takes `locks` locks, 64 at a time (60 s at most), waits a period, and holds them
// for `window` ms. Printed: acquisitions/s, RSS per held lock over the warmed-up process (both
// after gc()), heartbeats sent per second in the window (the client's own count of writes),
// client CPU per heartbeat, and "error"/"lost" events.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const path = require("node:path");
const { startEngine } = require("../__test__/engines.js");
const D = require(path.join(__dirname, ".."));

const CONCURRENCY = 64;
const ACQUIRE_DEADLINE_MS = 60_000;
const WARMUP_CYCLES = 1000;

function options()
{
    const o = { locks: 10000, period: 1000, lease: 5000, window: 5000, engine: "dynalite" };
    const argv = process.argv.slice(2);
    for (let i = 0; i < argv.length; i += 2)
    {
        const name = argv[i].replace(/^--/, "");
        if (!(name in o) || argv[i + 1] === undefined)
        {
            console.error(`usage: node --expose-gc bench/held-cost.js [--locks N] [--period ms] [--lease ms] [--window ms] [--engine dynalite|dynamodb-local]`);
            process.exit(2);
        }
        o[name] = name === "engine" ? argv[i + 1] : Number(argv[i + 1]);
    }
    return o;
}

function rss()
{
    if (global.gc)
    {
        global.gc();
        global.gc();
    }
    return process.memoryUsage().rss;
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

async function main()
{
    const o = options();
    const engine = await startEngine(o.engine);
    // Whatever happens, the run ends.
    const guard = setTimeout(() =>
    {
        console.error("held-cost: time limit reached");
        process.exit(1);
    }, ACQUIRE_DEADLINE_MS + o.window + o.period + 60_000);
    guard.unref();
    await engine.createTable("held", { partitionKey: "id" });
    const client = new D.FailOpen({
        dynamodb: { endpoint: engine.endpoint, region: engine.region || "us-east-1", credentials: engine.credentials },
        lockTable: "held",
        partitionKey: "id",
        leaseDurationMs: o.lease,
        heartbeatPeriodMs: o.period,
    });
    const events = { error: 0, lost: 0 };

    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () =>
    {
        while (next < WARMUP_CYCLES)
        {
            const lock = await client.acquireLock(`warm${next++}`);
            await lock.release();
        }
    }));
    const rss0 = rss();

    const locks = [];
    next = 0;
    const t0 = performance.now();
    const cpuAcq = process.cpuUsage();
    await Promise.all(Array.from({ length: CONCURRENCY }, async () =>
    {
        while (next < o.locks && performance.now() - t0 < ACQUIRE_DEADLINE_MS)
        {
            const lock = await client.acquireLock(`k${next++}`);
            lock.on("error", () => events.error++);
            lock.on("lost", () => events.lost++);
            locks.push(lock);
        }
    }));
    const acquireMs = performance.now() - t0;
    const acqCpu = process.cpuUsage(cpuAcq);

    await sleep(o.period);
    const sent0 = client.metrics().heartbeats.sent;
    const cpu0 = process.cpuUsage();
    const w0 = performance.now();
    await sleep(o.window);
    const windowMs = performance.now() - w0;
    const cpu = process.cpuUsage(cpu0);
    const sent = client.metrics().heartbeats.sent - sent0;
    const rss1 = rss();

    const perSecond = sent / windowMs * 1000;
    const result = {
        engine: o.engine,
        locks: locks.length,
        periodMs: o.period,
        leaseMs: o.lease,
        acquisitionsPerSecond: Math.round(locks.length / acquireMs * 1000),
        acquireMs: Math.round(acquireMs),
        acquireCpuMs: Math.round((acqCpu.user + acqCpu.system) / 1000),
        heartbeatsPerSecond: Math.round(perSecond),
        heartbeatTarget: Math.round(o.locks * 1000 / o.period),
        cpuUsPerHeartbeat: sent > 0 ? +((cpu.user + cpu.system) / sent).toFixed(1) : null,
        clientCpuPercent: +((cpu.user + cpu.system) / 1000 / windowMs * 100).toFixed(1),
        rssPerLockBytes: Math.round((rss1 - rss0) / Math.max(1, locks.length)),
        events,
    };
    console.log(JSON.stringify(result));
    await client.close();
    await engine.stop();
    process.exit(0);
}

main().catch(e =>
{
    console.error(e);
    process.exit(1);
});
