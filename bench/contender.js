"use strict";

// One of several processes contending for ONE FailOpen lock (scenario 4). Started by
// bench/run.js with a JSON job in argv[2]. Sends {type: "ready"} once warmed up, waits for
// {type: "go", startAt, durationMs}, then loops until startAt + durationMs:
//   acquire, hold `holdMs`, release
// recording wall-clock times (comparable across processes on this machine). An acquisition
// still pending at the end is abandoned and reported with how long it had waited.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const { openLibrary } = require("./clients.js");
const { finish, fail, sleep, wallMs } = require("./ipc.js");

const job = JSON.parse(process.argv[2]);
const lib = openLibrary(job.lib, job);

const cpuUs = () =>
{
    const u = process.cpuUsage();
    return u.user + u.system;
};

const config = {
    lockTable: job.table,
    partitionKey: "id",
    leaseDurationMs: job.leaseMs,
    heartbeatPeriodMs: job.heartbeatMs,
    retryCount: job.retryCount,
};
if (job.rereadMs)
{
    config.rereadPeriodMs = job.rereadMs;
}
const client = lib.create("FailOpen", config);

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

(async () =>
{
    // Warm-up on a private id: SDK initialisation and a connection.
    await client.release(await client.acquire(`warm-${job.index}`));
    process.send({ type: "ready" });
    const { startAt, durationMs } = await waitForGo();
    await sleep(Math.max(0, startAt - wallMs()));
    const end = startAt + durationMs;

    let stopTimer;
    const stopped = new Promise(resolve => (stopTimer = setTimeout(() => resolve({ stopped: true }), Math.max(0, end - wallMs()))));

    const records = [];
    const failures = [];
    const tally = { errors: 0, lost: 0 };
    let pendingAtEnd = null;
    const cpu0 = cpuUs();
    // Bounded by time (the loop ends at `end`) and by count (a safety cap).
    for (let i = 0; i < 100000 && wallMs() < end; i++)
    {
        const callAt = wallMs();
        const attempt = client.acquire(job.id).then(lock => ({ lock }), error => ({ error }));
        const r = await Promise.race([attempt, stopped]);
        if (r.stopped)
        {
            pendingAtEnd = { callAt, waitedMs: wallMs() - callAt };
            // Should it still succeed, give the lock back so that nobody else is blocked.
            attempt.then(x => x.lock && client.release(x.lock).catch(() => {}));
            break;
        }
        if (r.error)
        {
            failures.push({ callAt, at: wallMs(), code: r.error.code || String(r.error) });
            continue;
        }
        const acquiredAt = wallMs();
        const lock = r.lock;
        lock.on("error", () => tally.errors++);
        lock.on("lost", () => tally.lost++);
        await sleep(job.holdMs);
        const releaseAt = wallMs();
        let releaseError;
        try
        {
            await client.release(lock);
        }
        catch (e)
        {
            releaseError = e.code || String(e);
        }
        const releasedAt = wallMs();
        records.push({ callAt, acquiredAt, releaseAt, releasedAt, fencingToken: lock.fencingToken, releaseError });
    }
    const cpu = cpuUs() - cpu0;
    clearTimeout(stopTimer);
    // Let an abandoned acquisition's release go out if it lands quickly.
    await sleep(300);
    finish({ index: job.index, records, failures, pendingAtEnd, cpuUs: cpu, lockErrors: tally });
})().catch(fail);
