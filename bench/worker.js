"use strict";

// One benchmark scenario for one library, in a fresh Node process so that CPU time and RSS
// belong to that library alone. Started by bench/run.js with a JSON job in argv[2]:
//   { scenario: "requests"|"cycles"|"held"|"latency"|"waiting", lib: "ours"|"original", endpoint, region,
//     credentials, tables: {...}, params: {...} }
// All traffic goes to `endpoint`, the parent's counting proxy on 127.0.0.1. Every loop is
// bounded in count and in time.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const fs = require("fs");
const { performance } = require("perf_hooks");
const { openLibrary } = require("./clients.js");
const { rpc, finish, fail, sleep, gc } = require("./ipc.js");
const { summary } = require("./stats.js");

const job = JSON.parse(process.argv[2]);
const lib = openLibrary(job.lib, job);

const cpuUs = () =>
{
    const u = process.cpuUsage();
    return u.user + u.system;
};

/** Sockets this process has open (its HTTP connections, plus the IPC channel). */
function openSockets()
{
    try
    {
        let n = 0;
        for (const fd of fs.readdirSync("/proc/self/fd"))
        {
            try
            {
                if (fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith("socket:"))
                {
                    n++;
                }
            }
            catch (_)
            {
                // closed meanwhile
            }
        }
        return n;
    }
    catch (_)
    {
        return null;
    }
}

const total = counts => Object.values(counts).reduce((a, b) => a + b, 0);

function failOpenConfig(table, extra)
{
    return Object.assign({ lockTable: table, partitionKey: "id", leaseDurationMs: 5000, heartbeatPeriodMs: 1000 }, extra);
}

function failClosedConfig(table, extra)
{
    return Object.assign({ lockTable: table, partitionKey: "id", acquirePeriodMs: 50 }, extra);
}

function watch(lock, tally)
{
    lock.on("error", e =>
        {
            tally.errors++;
            tally.lastError = e && (e.code || e.name || String(e));
        }
    );
    lock.on("lost", () => tally.lost++);
}

// ---------------------------------------------------------------------------------------
// 1. Requests per operation, by DynamoDB operation type.

async function requests()
{
    const p = job.params;
    const tally = { errors: 0, lost: 0 };
    const fc = lib.create("FailClosed", failClosedConfig(job.tables.failClosed));
    // Without heartbeats: a lock's first heartbeat falls at a random point of its period,
    // sometimes inside the settle time, and heartbeats are counted on their own below.
    const foConfig = failOpenConfig(job.tables.failOpen);
    delete foConfig.heartbeatPeriodMs;
    const fo = lib.create("FailOpen", foConfig);
    // Warm-up: SDK initialisation and connections, not counted.
    await fc.release(await fc.acquire("warm"));
    await fo.release(await fo.acquire("warm"));

    async function measure(fn)
    {
        await rpc("reset");
        const t0 = performance.now();
        await fn();
        const ms = performance.now() - t0;
        await sleep(p.settleMs); // anything the operation left in flight
        const counts = await rpc("counts");
        return { counts, total: total(counts), ms };
    }

    const out = {};
    let lock;
    out.failClosedAcquire = await measure(async () => (lock = await fc.acquire("fc-1")));
    out.failClosedRelease = await measure(() => fc.release(lock));
    out.failOpenAcquireNew = await measure(async () =>
        {
            lock = await fo.acquire("fo-1");
            watch(lock, tally);
        }
    );
    out.failOpenRelease = await measure(() => fo.release(lock));
    out.failOpenAcquireReleased = await measure(async () =>
        {
            lock = await fo.acquire("fo-1");
            watch(lock, tally);
        }
    );
    await fo.release(lock);

    // Heartbeats: hold one lock for a window of several periods; count what it sends.
    const hb = lib.create("FailOpen", failOpenConfig(job.tables.failOpen, { leaseDurationMs: p.hbLeaseMs, heartbeatPeriodMs: p.hbPeriodMs }));
    lock = await hb.acquire("hb-1");
    watch(lock, tally);
    await rpc("reset");
    await sleep(p.hbWindowMs);
    const counts = await rpc("counts");
    await hb.release(lock);
    const writes = (counts.UpdateItem || 0) + (counts.PutItem || 0);
    out.heartbeat = {
        counts,
        total: total(counts),
        heartbeatWrites: writes,
        requestsPerHeartbeat: writes ? total(counts) / writes : null,
        windowMs: p.hbWindowMs,
        periodMs: p.hbPeriodMs,
    };
    out.lockErrors = tally;
    return out;
}

// ---------------------------------------------------------------------------------------
// 2. Acquire/release cycles, sequential (workers = 1) or concurrent, on one id per worker.

async function cycles()
{
    const p = job.params;
    const client = p.kind === "FailOpen"
        ? lib.create("FailOpen", failOpenConfig(job.tables.main))
        : lib.create("FailClosed", failClosedConfig(job.tables.main));
    const tally = { errors: 0, lost: 0 };
    let failures = 0;
    let lastFailure;

    async function one(id, latencies)
    {
        const t0 = performance.now();
        try
        {
            const lock = await client.acquire(id);
            watch(lock, tally);
            await client.release(lock);
        }
        catch (e)
        {
            failures++;
            lastFailure = e && (e.code || String(e));
            return;
        }
        if (latencies)
        {
            latencies.push(performance.now() - t0);
        }
    }

    const ids = Array.from({ length: p.workers }, (_, w) => `${p.kind}-w${w}`);
    // Warm-up, not measured: connections, JIT, the native runtime.
    await Promise.all(ids.map(async id =>
        {
            for (let i = 0; i < p.warmupCycles; i++)
            {
                await one(id);
            }
        }
    ));
    gc();
    await sleep(50);

    const latencies = [];
    await rpc("reset");
    const deadline = performance.now() + p.timeLimitMs;
    const cpu0 = cpuUs();
    const sys0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(ids.map(async id =>
        {
            for (let i = 0; i < p.cycles && performance.now() < deadline; i++)
            {
                await one(id, latencies);
            }
        }
    ));
    const elapsedMs = performance.now() - t0;
    const cpu = cpuUs() - cpu0;
    const sys = process.cpuUsage(sys0).system;
    const counts = await rpc("counts");
    const done = latencies.length;
    return {
        kind: p.kind,
        workers: p.workers,
        cyclesPlanned: p.workers * p.cycles,
        cycles: done,
        failures,
        lastFailure,
        timeLimited: done + failures < p.workers * p.cycles,
        elapsedMs,
        cyclesPerSecond: done / (elapsedMs / 1000),
        latencyMs: summary(latencies),
        cpuUs: cpu,
        cpuUsPerCycle: done ? cpu / done : null,
        systemCpuUsPerCycle: done ? sys / done : null,
        counts,
        requestsPerCycle: done ? total(counts) / done : null,
        lockErrors: tally,
    };
}

// ---------------------------------------------------------------------------------------
// 3. N held, heartbeating FailOpen locks.

async function held()
{
    const p = job.params;
    const extra = { leaseDurationMs: p.leaseMs, heartbeatPeriodMs: p.periodMs };
    if (p.maxHeartbeatsPerSecond)
    {
        extra.maxHeartbeatsPerSecond = p.maxHeartbeatsPerSecond;
    }
    const client = lib.create("FailOpen", failOpenConfig(job.tables.main, extra));
    const tally = { errors: 0, lost: 0, lastError: undefined };

    // Cold baseline: the library loaded, the client made and used once.
    await client.release(await client.acquire("warm"));
    gc();
    await sleep(200);
    gc();
    const cold = process.memoryUsage();

    // Warm baseline: the same process after the kind of work that follows, on other ids:
    // up to 1,000 acquire/release cycles with the same concurrency (no lock held at the
    // end). What this leaves (V8's optimised code and compiler memory, HTTP connections,
    // allocator arenas) is a one-off cost of the process, not a cost per held lock.
    const warmCycles = Math.min(p.locks, 1000);
    let warmNext = 0;
    const warmDeadline = performance.now() + p.acquireDeadlineMs / 2;
    await Promise.all(Array.from({ length: p.acquireConcurrency }, async (_, w) =>
        {
            while (warmNext < warmCycles && performance.now() < warmDeadline)
            {
                warmNext++;
                try
                {
                    const lock = await client.acquire(`warm-${w}`);
                    lock.on("error", () => {});
                    await client.release(lock);
                }
                catch (_)
                {
                    // counted by the measured phase, not here
                }
            }
        }
    ));
    gc();
    await sleep(200);
    gc();
    const base = process.memoryUsage();
    const socketsBaseline = openSockets();

    // Acquisition, bounded in count, concurrency and time.
    const locks = [];
    let next = 0;
    let acquireFailures = 0;
    let lastAcquireFailure;
    const acqDeadline = performance.now() + p.acquireDeadlineMs;
    const acq0 = performance.now();
    const acqCpu0 = cpuUs();
    await Promise.all(Array.from({ length: p.acquireConcurrency }, async () =>
        {
            while (next < p.locks && performance.now() < acqDeadline)
            {
                const i = next++;
                try
                {
                    const lock = await client.acquire(`held-${i}`);
                    watch(lock, tally);
                    locks.push(lock);
                }
                catch (e)
                {
                    acquireFailures++;
                    lastAcquireFailure = e && (e.code || String(e));
                }
            }
        }
    ));
    const acquisitionMs = performance.now() - acq0;
    const acquisitionCpuUs = cpuUs() - acqCpu0;
    const lostBeforeWindow = tally.lost;
    const errorsBeforeWindow = tally.errors;

    await sleep(p.settleMs);

    // The measurement window: heartbeats counted and bucketed by the proxy.
    await rpc("startRecord", { ops: ["UpdateItem", "PutItem"], bucketMs: p.bucketMs });
    const cpu0 = cpuUs();
    const sys0 = process.cpuUsage();
    const t0 = performance.now();
    await sleep(p.windowMs);
    const cpu = cpuUs() - cpu0;
    const sys = process.cpuUsage(sys0).system;
    const windowMs = performance.now() - t0;
    const rec = await rpc("stopRecord", { leaseMs: p.leaseMs });

    gc();
    await sleep(100);
    gc();
    const after = process.memoryUsage();
    const socketsAfter = openSockets();
    const n = locks.length;
    const heartbeats = (rec.counts.UpdateItem || 0) + (rec.counts.PutItem || 0);
    // The proxy counted over its own window (startRecord to stopRecord as it handled them),
    // which the IPC round trips make longer than this process's CPU window when the machine
    // is busy: the rate comes from the proxy's window, and CPU per heartbeat from the
    // heartbeats that rate puts in this process's window.
    const rate = heartbeats / (rec.elapsedMs / 1000);
    const inWindow = rate * (windowMs / 1000);
    return {
        locksPlanned: p.locks,
        locksAcquired: n,
        acquireFailures,
        lastAcquireFailure,
        acquisitionMs,
        acquisitionsPerSecond: n / (acquisitionMs / 1000),
        acquisitionCpuUsPerLock: n ? acquisitionCpuUs / n : null,
        acquisitionTimeLimited: next < p.locks,
        periodMs: p.periodMs,
        leaseMs: p.leaseMs,
        maxHeartbeatsPerSecond: p.maxHeartbeatsPerSecond || null,
        windowMs,
        windowCounts: rec.counts,
        heartbeats,
        proxyWindowMs: rec.elapsedMs,
        heartbeatsPerSecond: rate,
        targetHeartbeatsPerSecond: n * 1000 / p.periodMs,
        cpuUs: cpu,
        cpuUsPerHeartbeat: heartbeats ? cpu / inWindow : null,
        systemCpuUsPerHeartbeat: heartbeats ? sys / inWindow : null,
        cpuPercentOfOneCore: 100 * cpu / (windowMs * 1000),
        engineCpuUsPerHeartbeat: heartbeats && rec.engineCpuUs !== null ? rec.engineCpuUs / heartbeats : null,
        engineCpuPercentOfOneCore: rec.engineCpuUs === null ? null : 100 * rec.engineCpuUs / (rec.elapsedMs * 1000),
        proxyCpuPercentOfOneCore: 100 * rec.proxyCpuUs / (rec.elapsedMs * 1000),
        locksRenewedInWindow: rec.keysRenewed,
        renewalIntervalMs: rec.renewalIntervalMs,
        renewalsOverLease: rec.renewalsOverLease,
        buckets: rec.buckets,
        bucketMs: p.bucketMs,
        rssColdBaseline: cold.rss,
        rssBaseline: base.rss,
        rssWithLocks: after.rss,
        rssPerLockBytes: n ? (after.rss - base.rss) / n : null,
        rssPerLockColdBytes: n ? (after.rss - cold.rss) / n : null,
        heapUsedPerLockBytes: n ? (after.heapUsed - base.heapUsed) / n : null,
        externalPerLockBytes: n ? (after.external - base.external) / n : null,
        heldLockCountNative: lib.heldLockCount(),
        socketsBaseline,
        socketsAfter,
        lockErrors: { errorsBeforeWindow, lostBeforeWindow, errors: tally.errors, lost: tally.lost, lastError: tally.lastError },
    };
}

// ---------------------------------------------------------------------------------------
// 7. Leases kept against added round trip: N FailOpen locks taken with no added latency, then
// held for `holdMs` while the parent's proxy adds `latencyMs` to every request. The parent
// records, per lock id, when each write that the engine answered with 200 was sent; this
// process reports its locks' ids and the "error" and "lost" events they emitted.

async function latency()
{
    const p = job.params;
    const client = lib.create("FailOpen", Object.assign({ lockTable: job.tables.main, partitionKey: "id" }, p.config));
    const tally = { errors: 0, lost: 0, lastError: undefined };
    await client.release(await client.acquire("warm"));

    await rpc("latencyRecord", { ops: ["PutItem", "UpdateItem"] });
    const ids = [];
    let next = 0;
    let acquireFailures = 0;
    let lastAcquireFailure;
    const acqDeadline = performance.now() + p.acquireDeadlineMs;
    const acq0 = performance.now();
    await Promise.all(Array.from({ length: p.acquireConcurrency }, async () =>
        {
            while (next < p.locks && performance.now() < acqDeadline)
            {
                const id = `lat-${next++}`;
                try
                {
                    const lock = await client.acquire(id);
                    watch(lock, tally);
                    ids.push(id);
                }
                catch (e)
                {
                    acquireFailures++;
                    lastAcquireFailure = e && (e.code || String(e));
                }
            }
        }
    ));
    const acquisitionMs = performance.now() - acq0;
    await sleep(p.settleMs);
    const before = { errors: tally.errors, lost: tally.lost };

    // Ours counts its own heartbeat writes (started, of which extra attempts; failed or reported slow).
    const heartbeatCounters = () => (typeof client.raw.metrics === "function" ? client.raw.metrics().heartbeats : null);
    const hb0 = heartbeatCounters();
    await rpc("latencyOn", { latencyMs: p.latencyMs });
    const cpu0 = cpuUs();
    await sleep(p.holdMs);
    const cpu = cpuUs() - cpu0;
    await rpc("latencyEnd");
    const hb1 = heartbeatCounters();
    const heartbeats = hb0 && hb1 ? { sent: hb1.sent - hb0.sent, retried: hb1.retried - hb0.retried, failed: hb1.failed - hb0.failed } : null;
    const during = { errors: tally.errors - before.errors, lost: tally.lost - before.lost, lastError: tally.lastError };
    // Writes sent before the end are answered up to one added round trip later.
    await sleep(p.drainMs);
    const rec = await rpc("latencyReport", { ids, leaseMs: p.config.leaseDurationMs });
    // The locks are abandoned with the process; the parent drops the table.
    return Object.assign({
        latencyMs: p.latencyMs,
        locksPlanned: p.locks,
        locksAcquired: ids.length,
        acquireFailures,
        lastAcquireFailure,
        acquisitionTimeLimited: next < p.locks,
        acquisitionMs,
        holdMs: p.holdMs,
        leaseMs: p.config.leaseDurationMs,
        periodMs: p.config.heartbeatPeriodMs,
        cpuUs: cpu,
        eventsBeforeLatency: before,
        events: during,
        heartbeats,
    }, rec);
}

// Waiting: what waiting for a held lock costs. A holder of the same library holds the lock
// (heartbeats at the README's settings) for a window alone, then for the same window with the
// waiters; the waiters' requests are the difference. Then the holder releases and the
// hand-over is timed. `p.waiter`: "one" (one FailOpen client waiting), "five" (five FailOpen
// clients on the one key), "follower" (a campaign() follower of a leader that keeps leading),
// "fifo" (a Fifo waiter behind a holder that keeps holding).
async function waiting()
{
    const p = job.params;
    const fifo = p.waiter === "fifo";
    const kind = fifo ? "Fifo" : "FailOpen";
    const table = fifo ? { lockTable: job.tables.main, partitionKey: "id", sortKey: "sk" } : {};
    // A Fifo waiter waits as long as it takes (it has no retryCount).
    const config = Object.assign(
        failOpenConfig(job.tables.main, Object.assign({ leaseDurationMs: p.leaseMs, heartbeatPeriodMs: p.periodMs }, fifo ? {} : { retryCount: 1000000 })),
        table);
    const holder = lib.create(kind, Object.assign({}, config, { owner: "holder" }));
    const count = p.waiter === "five" ? 5 : 1;
    const waiters = Array.from({ length: count }, (_, i) => lib.create(kind, Object.assign({}, config, { owner: `waiter-${i}` })));
    // Warm-up of every client's connections, not counted.
    await holder.release(await holder.acquire("warm-h"));
    for (const [i, w] of waiters.entries())
    {
        await w.release(await w.acquire(`warm-w${i}`));
    }
    const lock = await holder.acquire("w-1");
    await rpc("reset");
    await sleep(p.windowMs);
    const alone = await rpc("counts");
    await rpc("reset");
    const t0 = performance.now();
    let grantedAt;
    let campaign;
    let waited;
    if (p.waiter === "follower")
    {
        campaign = waiters[0].raw.campaign("w-1");
        waited = new Promise(resolve => campaign.once("elected", () => resolve((grantedAt = performance.now()))));
    }
    else
    {
        // A Fifo waiter gives up after `waitMs` (60 s by default): it waits longer than the window.
        const acquire = w => (fifo ? w.raw.acquireLock("w-1", { waitMs: 10 * p.windowMs }) : w.acquire("w-1"));
        waited = Promise.all(waiters.map(w => acquire(w).then(l => ((grantedAt = grantedAt || performance.now()), w.release(l)))));
    }
    await sleep(p.windowMs);
    const both = await rpc("counts");
    const releasedAt = performance.now();
    await holder.release(lock);
    await waited;
    if (campaign)
    {
        await campaign.resign();
    }
    const counts = {};
    for (const op of new Set([...Object.keys(alone), ...Object.keys(both)]))
    {
        counts[op] = Math.max(0, (both[op] || 0) - (alone[op] || 0));
    }
    const reads = counts.GetItem || 0;
    const writes = (counts.UpdateItem || 0) + (counts.PutItem || 0);
    return {
        waiter: p.waiter,
        waiters: count,
        windowMs: p.windowMs,
        waitedMs: releasedAt - t0,
        counts,
        readsPerSecond: reads / (p.windowMs / 1000),
        writesPerSecond: writes / (p.windowMs / 1000),
        handOverMs: grantedAt - releasedAt,
    };
}

const SCENARIOS = { requests, cycles, held, latency, waiting };

(async () =>
{
    const fn = SCENARIOS[job.scenario];
    if (!fn)
    {
        throw new Error(`unknown scenario ${job.scenario}`);
    }
    finish(await fn());
})().catch(fail);
