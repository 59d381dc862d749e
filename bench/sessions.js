"use strict";

// Scenario 9 (sessions), the child side: one part of the scenario in a fresh Node process,
// started by bench/run.js with a JSON job in argv[2]:
//   { part, lib, endpoint, region, credentials, tables: { main }, params: {...} }
// All traffic goes to `endpoint` (the parent's counting proxy, a holder's own proxy, or the
// stub engine, all on 127.0.0.1). Every loop is bounded in count and in time.
//
// Parts:
// - "writes": `locks` FailOpen locks held for `holdMs`, through one session (`mode: "session"`)
//   or each with its own heartbeats (`mode: "per-lock"`, either library); the parent's proxy
//   counts what the hold sends.
// - "many": `locks` locks acquired through one session, `acquireConcurrency` at a time, then
//   held for `holdMs`: acquisition rate, RSS before and after acquiring, events.
// - "holder": takes `ids` through one session, reports over IPC ("acquired", per lock
//   "danger"/"lost"/"error", "sigcont" with leaseRemainingMs read in the SIGCONT handler,
//   "resumed" on the first timer step after a pause), then waits to be killed (bounded).
// - "waiter": acquires `ids` (FailOpen without a session; with `waitForGo`, once the parent
//   sends { type: "go" }), reports each grant over IPC with its wall-clock time and fencing
//   token, then exits.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const { performance } = require("perf_hooks");
const { openLibrary } = require("./clients.js");
const { rpc, finish, fail, sleep, wallMs, gc } = require("./ipc.js");

const job = JSON.parse(process.argv[2]);
const lib = openLibrary(job.lib || "ours", job);
const p = job.params;

const cpuUs = () =>
{
    const u = process.cpuUsage();
    return u.user + u.system;
};

function config(extra)
{
    return Object.assign({ lockTable: job.tables.main, partitionKey: "id", leaseDurationMs: p.leaseMs, heartbeatPeriodMs: p.periodMs }, extra);
}

function tallyOf()
{
    return { errors: 0, lost: 0, danger: 0, lastError: undefined };
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
    lock.on("danger", () => tally.danger++);
}

/** Acquires `count` ids (`prefix`0..), `concurrency` at a time, within `deadlineMs`. */
async function acquireMany(client, prefix, count, concurrency, deadlineMs, tally)
{
    const locks = [];
    const ids = [];
    let next = 0;
    let failures = 0;
    let lastFailure;
    const deadline = performance.now() + deadlineMs;
    await Promise.all(Array.from({ length: concurrency }, async () =>
        {
            while (next < count && performance.now() < deadline)
            {
                const i = next++;
                try
                {
                    const lock = await client.acquire(`${prefix}${i}`);
                    watch(lock, tally);
                    locks.push(lock);
                    ids.push(`${prefix}${i}`);
                }
                catch (e)
                {
                    failures++;
                    lastFailure = e && (e.code || String(e));
                }
            }
        }
    ));
    return { locks, ids, failures, lastFailure, timeLimited: next < count };
}

/** The sessions named by the items of the first, middle and last locks held (3 GetItem). */
async function sessionsOf(client, ids)
{
    if (!ids.length || typeof client.raw.getLock !== "function")
    {
        return null;
    }
    const sample = [...new Set([ids[0], ids[ids.length >> 1], ids[ids.length - 1]])];
    const infos = await Promise.all(sample.map(id => client.raw.getLock(id)));
    return { sampled: sample.length, sessions: [...new Set(infos.map(i => i && i.session).filter(Boolean))] };
}

const total = counts => Object.values(counts || {}).reduce((a, b) => a + b, 0);
const writesOf = counts => (counts.UpdateItem || 0) + (counts.PutItem || 0) + (counts.DeleteItem || 0);

// ---------------------------------------------------------------------------------------

async function writes()
{
    const session = p.mode === "session";
    const client = lib.create("FailOpen", config(session ? { session: true } : {}));
    const tally = tallyOf();
    // Warm-up on another id (connections, the SDK); with a session this also starts it.
    const warm = await client.acquire("warm");
    await client.release(warm);
    const t0 = performance.now();
    const acq = await acquireMany(client, "w-", p.locks, p.acquireConcurrency, p.acquireDeadlineMs, tally);
    const acquisitionMs = performance.now() - t0;
    // The hold: counted by the proxy from here.
    await rpc("reset");
    const h0 = performance.now();
    const cpu0 = cpuUs();
    await sleep(p.holdMs);
    const counts = await rpc("counts");
    const holdMs = performance.now() - h0;
    const cpu = cpuUs() - cpu0;
    const remaining = acq.locks.map(l => l.leaseRemainingMs).filter(v => typeof v === "number");
    const held = acq.locks.length;
    const w = writesOf(counts);
    return {
        lib: job.lib,
        mode: p.mode,
        locksPlanned: p.locks,
        locksAcquired: held,
        acquireFailures: acq.failures,
        lastAcquireFailure: acq.lastFailure,
        acquisitionMs,
        holdMs,
        counts,
        requests: total(counts),
        writes: w,
        writesPerSecond: w / (holdMs / 1000),
        cpuUs: cpu,
        leaseRemainingMinMs: remaining.length ? Math.min(...remaining) : null,
        sessions: session ? await sessionsOf(client, acq.ids) : null,
        events: tally,
    };
}

async function many()
{
    const client = lib.create("FailOpen", config({ session: true }));
    const tally = tallyOf();
    // Cold baseline: the library loaded, the client made and used once (the session started).
    await client.release(await client.acquire("warm"));
    gc();
    await sleep(200);
    gc();
    const cold = process.memoryUsage();
    // Warm baseline, as in the held scenario: up to 1,000 acquire/release cycles on other ids
    // with the same concurrency (nothing held at the end). What they leave (V8's optimised
    // code, connections, allocator arenas) is a one-off cost of the process, not per lock.
    let warmNext = 0;
    const warmCycles = Math.min(p.locks, p.warmupCycles);
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
                    // the measured phase counts failures
                }
            }
        }
    ));
    gc();
    await sleep(200);
    gc();
    const base = process.memoryUsage();

    if (p.countRequests)
    {
        await rpc("reset");
    }
    const t0 = performance.now();
    const acqCpu0 = cpuUs();
    const acq = await acquireMany(client, "m-", p.locks, p.acquireConcurrency, p.acquireDeadlineMs, tally);
    const acquisitionMs = performance.now() - t0;
    const acquisitionCpuUs = cpuUs() - acqCpu0;
    const acqCounts = p.countRequests ? await rpc("counts") : null;
    gc();
    await sleep(200);
    gc();
    const afterAcquire = process.memoryUsage();
    const n = acq.locks.length;

    let hold = null;
    if (p.holdMs > 0)
    {
        if (p.countRequests)
        {
            await rpc("reset");
        }
        const before = { errors: tally.errors, lost: tally.lost, danger: tally.danger };
        const h0 = performance.now();
        const cpu0 = cpuUs();
        // Sampled each second: the smallest leaseRemainingMs of a few locks (a whole pass over
        // 10,000 would be work the hold itself does not do).
        let minRemaining = Infinity;
        const sample = acq.locks.filter((_, i) => i % Math.max(1, Math.floor(n / 20)) === 0);
        while (performance.now() - h0 < p.holdMs)
        {
            await sleep(Math.min(1000, Math.max(1, p.holdMs - (performance.now() - h0))));
            for (const l of sample)
            {
                minRemaining = Math.min(minRemaining, l.leaseRemainingMs);
            }
        }
        const holdMs = performance.now() - h0;
        const cpu = cpuUs() - cpu0;
        const counts = p.countRequests ? await rpc("counts") : null;
        gc();
        await sleep(100);
        gc();
        const after = process.memoryUsage();
        hold = {
            holdMs,
            cpuUs: cpu,
            counts,
            writes: counts ? writesOf(counts) : null,
            writesPerSecond: counts ? writesOf(counts) / (holdMs / 1000) : null,
            events: { errors: tally.errors - before.errors, lost: tally.lost - before.lost, danger: tally.danger - before.danger, lastError: tally.lastError },
            leaseRemainingMinMs: Number.isFinite(minRemaining) ? minRemaining : null,
            rssAfterHold: after.rss,
            rssPerLockAfterHoldBytes: n ? (after.rss - base.rss) / n : null,
            heapUsedPerLockAfterHoldBytes: n ? (after.heapUsed - base.heapUsed) / n : null,
            heapTotalPerLockAfterHoldBytes: n ? (after.heapTotal - base.heapTotal) / n : null,
        };
    }
    return {
        locksPlanned: p.locks,
        locksAcquired: n,
        acquireFailures: acq.failures,
        lastAcquireFailure: acq.lastFailure,
        acquisitionTimeLimited: acq.timeLimited,
        acquisitionMs,
        acquisitionsPerSecond: n / (acquisitionMs / 1000),
        acquisitionCpuUsPerLock: n ? acquisitionCpuUs / n : null,
        acquisitionCounts: acqCounts,
        rssColdBaseline: cold.rss,
        rssBaseline: base.rss,
        rssAfterAcquire: afterAcquire.rss,
        rssPerLockBytes: n ? (afterAcquire.rss - base.rss) / n : null,
        rssPerLockColdBytes: n ? (afterAcquire.rss - cold.rss) / n : null,
        heapUsedPerLockBytes: n ? (afterAcquire.heapUsed - base.heapUsed) / n : null,
        // V8's committed heap: what the acquisitions' garbage grew it by, until V8 shrinks it.
        heapTotalPerLockBytes: n ? (afterAcquire.heapTotal - base.heapTotal) / n : null,
        externalPerLockBytes: n ? (afterAcquire.external - base.external) / n : null,
        heldLockCountNative: lib.heldLockCount(),
        eventsDuringAcquisition: { errors: tally.errors, lost: tally.lost, danger: tally.danger },
        hold,
        // Read after the counts: 3 GetItem.
        sessions: await sessionsOf(client, acq.ids),
    };
}

// ---------------------------------------------------------------------------------------
// Holder and waiter: report through IPC messages of type "event", read by the parent.

const say = obj => process.send && process.send(Object.assign({ type: "event", at: wallMs() }, obj));

async function holder()
{
    const client = lib.create("FailOpen", config({ session: true }));
    // Bounded: a holder nobody kills ends by itself.
    setTimeout(() => process.exit(3), p.maxLifeMs).unref();
    await client.release(await client.acquire("warm-holder"));
    const locks = [];
    for (const id of p.ids)
    {
        locks.push(await client.acquire(id));
    }
    const remaining = () => locks.map(l => l.leaseRemainingMs);
    locks.forEach((lock, i) =>
        {
            lock.on("error", e => say({ event: "error", index: i, code: e && e.code }));
            lock.on("danger", () => say({ event: "danger", index: i }));
            lock.on("lost", e => say({ event: "lost", index: i, code: e && e.code }));
        }
    );
    // The first read after SIGCONT: in the handler, before any timer of this process has run.
    process.on("SIGCONT", () => say({ event: "sigcont", leaseRemainingMs: remaining() }));
    say({ event: "acquired", tokens: locks.map(l => l.fencingToken), leaseRemainingMs: remaining() });
    // 10 ms steps; a gap between steps is a pause of this process.
    let last = performance.now();
    let resumed = false;
    const step = setInterval(() =>
        {
            const now = performance.now();
            if (!resumed && now - last > 500)
            {
                resumed = true;
                say({ event: "resumed", gapMs: now - last, leaseRemainingMs: remaining() });
            }
            last = now;
        }, 10
    );
    step.unref();
    await new Promise(resolve => setTimeout(resolve, p.maxLifeMs));
}

async function waiter()
{
    const client = lib.create("FailOpen", config({ retryCount: p.retryCount, owner: p.owner }));
    setTimeout(() => process.exit(3), p.maxLifeMs).unref();
    await client.release(await client.acquire(`warm-${p.owner}`));
    say({ event: "ready" });
    if (p.waitForGo)
    {
        await new Promise(resolve => process.on("message", m => m && m.type === "go" && resolve()));
    }
    await Promise.all(p.ids.map(async (id, i) =>
        {
            try
            {
                const lock = await client.acquire(id);
                lock.on("error", () => {});
                say({ event: "granted", id, index: i, token: lock.fencingToken });
            }
            catch (e)
            {
                say({ event: "failed", id, index: i, code: e && (e.code || String(e)) });
            }
        }
    ));
    return { done: true };
}

const PARTS = { writes, many, holder, waiter };

(async () =>
{
    const fn = PARTS[job.part];
    if (!fn)
    {
        throw new Error(`unknown part ${job.part}`);
    }
    finish(await fn());
})().catch(fail);
