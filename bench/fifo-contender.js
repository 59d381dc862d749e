"use strict";

// One of several processes contending for ONE Fifo lock of ours (scenario 6, "fifo"). Started
// by bench/run.js with a JSON job in argv[2]:
//   { lib: "ours", endpoint, region, credentials, table, sortKey, id, index, leaseMs,
//     heartbeatMs, holdMs, reportState }
// Sends {type: "ready"} once warmed up (one acquisition on a private id), waits for
// {type: "go", startAt, durationMs}, then loops until startAt + durationMs:
//   acquire, hold `holdMs`, release
// recording wall-clock times (performance.timeOrigin + performance.now(), comparable across
// processes on this machine) and each grant's fencing token. With `reportState` it also tells
// the parent, over IPC, when it starts waiting ({type: "state", state: "waiting", at}), when it
// is granted ({state: "acquired", at, fencingToken}) and each finished hold ({type: "record"}),
// so that the parent can pick a waiter to SIGKILL and still know that process's grants.
// An acquisition still pending at the end is aborted (its `signal`) and reported with how long
// it had waited. Every loop is bounded in count and in time.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const { openLibrary } = require("./clients.js");
const { finish, fail, sleep, wallMs } = require("./ipc.js");

const job = JSON.parse(process.argv[2]);
const lib = openLibrary(job.lib, job);

const MAX_ITERATIONS = 100000;

const cpuUs = () =>
{
    const u = process.cpuUsage();
    return u.user + u.system;
};

const codeOf = e => (e && (e.code || e.name)) || String(e);

function tokenOf(lock)
{
    let token = lock ? lock.fencingToken : undefined;
    if (typeof token === "bigint" || (typeof token === "string" && token !== "" && Number.isFinite(Number(token))))
    {
        token = Number(token);
    }
    return typeof token === "number" ? token : null;
}

function tell(msg)
{
    if (job.reportState && process.connected)
    {
        process.send(msg);
    }
}

function waitForGo()
{
    return new Promise(resolve =>
        {
            const on = msg =>
            {
                if (msg && msg.type === "go")
                {
                    process.off("message", on);
                    resolve(msg);
                }
            };
            process.on("message", on);
        }
    );
}

async function main()
{
    if (!lib.has("Fifo"))
    {
        finish({ skipped: "Fifo not available in this build" });
        return;
    }
    const fifo = lib.create("Fifo", {
        lockTable: job.table,
        partitionKey: "id",
        sortKey: job.sortKey,
        leaseDurationMs: job.leaseMs,
        heartbeatPeriodMs: job.heartbeatMs,
    });
    const raw = fifo.raw;

    // Warm-up on a private id: client initialisation and a connection.
    await fifo.release(await fifo.acquire(`warm-${job.index}`));
    process.send({ type: "ready" });
    const { startAt, durationMs } = await waitForGo();
    await sleep(Math.max(0, startAt - wallMs()));
    const end = startAt + durationMs;

    let stopTimer;
    const stopped = new Promise(resolve => (stopTimer = setTimeout(() => resolve({ stopped: true }), Math.max(0, end - wallMs()))));

    const records = [];
    const errors = {};
    const count = key => (errors[key] = (errors[key] || 0) + 1);
    let pendingAtEnd = null;
    const cpu0 = cpuUs();
    for (let i = 0; i < MAX_ITERATIONS && wallMs() < end; i++)
    {
        const callAt = wallMs();
        tell({ type: "state", state: "waiting", at: callAt });
        const abort = new AbortController();
        const attempt = Promise.resolve()
            .then(() => raw.acquireLock(job.id, { signal: abort.signal }))
            .then(lock => ({ lock }), error => ({ error }));
        const r = await Promise.race([attempt, stopped]);
        if (r.stopped)
        {
            pendingAtEnd = { callAt, waitedMs: wallMs() - callAt };
            abort.abort();
            // Granted all the same just before the abort: give the lock back.
            attempt.then(x => x.lock && fifo.release(x.lock).catch(() => {}));
            break;
        }
        if (r.error)
        {
            count(`acquire ${codeOf(r.error)}`);
            continue;
        }
        const acquiredAt = wallMs();
        const lock = r.lock;
        const fencingToken = tokenOf(lock);
        tell({ type: "state", state: "acquired", at: acquiredAt, fencingToken });
        if (typeof lock.on === "function")
        {
            lock.on("error", e => count(`lock error ${codeOf(e)}`));
            lock.on("lost", () => count("lost"));
        }
        await sleep(job.holdMs);
        const releaseAt = wallMs();
        try
        {
            await fifo.release(lock);
        }
        catch (e)
        {
            count(`release ${codeOf(e)}`);
        }
        const releasedAt = wallMs();
        const record = { callAt, acquiredAt, releaseAt, releasedAt, fencingToken };
        records.push(record);
        tell({ type: "record", record });
    }
    const cpu = cpuUs() - cpu0;
    clearTimeout(stopTimer);
    // Let an abandoned acquisition's abort or release go out.
    await sleep(300);
    finish({ index: job.index, records, errors, pendingAtEnd, cpuUs: cpu });
}

main().catch(fail);
