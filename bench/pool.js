"use strict";

// One client, several async tasks contending for ONE lock in one process (scenario 5, "pool").
// Started by bench/run.js with a JSON job in argv[2]:
//   { lib, kind: "FailOpen"|"FailClosed"|"Fifo", endpoint, region, credentials, config,
//     id, tasks, holdMs, durationMs, maxAcquisitionsPerTask }
// After a warm-up on a private id it zeroes the parent proxy's counts, then runs `tasks` async
// loops for `durationMs`, each:
//   acquire(id), note acquiredAt, hold `holdMs`, note releaseAt, release, note releasedAt
// on the wall clock (performance.timeOrigin + performance.now()). An acquisition still pending
// at the end is abandoned and reported with how long it had waited. Every loop is bounded in
// count (maxAcquisitionsPerTask) and in time (durationMs).

process.env.AWS_EC2_METADATA_DISABLED = "true";

const { openLibrary } = require("./clients.js");
const { rpc, finish, fail, sleep, wallMs } = require("./ipc.js");

const job = JSON.parse(process.argv[2]);
const lib = openLibrary(job.lib, job);

const cpuUs = () =>
{
    const u = process.cpuUsage();
    return u.user + u.system;
};

const codeOf = e => (e && (e.code || e.name)) || String(e);

async function main()
{
    if (!lib.has(job.kind))
    {
        finish({ skipped: `${job.kind} not available in this build` });
        return;
    }
    const client = lib.create(job.kind, job.config);

    // Warm-up on a private id: client initialisation and a connection.
    await client.release(await client.acquire(`warm-${job.kind}`));
    await rpc("reset");

    const errors = {};
    const count = key => (errors[key] = (errors[key] || 0) + 1);
    const records = [];
    const pendingAtEnd = [];
    const perTask = new Array(job.tasks).fill(0);

    const startAt = wallMs();
    const end = startAt + job.durationMs;
    let stopTimer;
    const stopped = new Promise(resolve => (stopTimer = setTimeout(() => resolve({ stopped: true }), job.durationMs)));
    const cpu0 = cpuUs();

    async function task(t)
    {
        for (let i = 0; i < job.maxAcquisitionsPerTask && wallMs() < end; i++)
        {
            const callAt = wallMs();
            const attempt = client.acquire(job.id).then(lock => ({ lock }), error => ({ error }));
            const r = await Promise.race([attempt, stopped]);
            if (r.stopped)
            {
                pendingAtEnd.push({ task: t, waitedMs: wallMs() - callAt });
                // Should it still succeed, give the lock back so that nobody else is blocked.
                attempt.then(x => x.lock && client.release(x.lock).catch(() => {}));
                return;
            }
            if (r.error)
            {
                count(`acquire ${codeOf(r.error)}`);
                continue;
            }
            const acquiredAt = wallMs();
            const lock = r.lock;
            if (lock && typeof lock.on === "function")
            {
                lock.on("error", e => count(`lock error ${codeOf(e)}`));
                lock.on("lost", () => count("lost"));
            }
            await sleep(job.holdMs);
            const releaseAt = wallMs();
            try
            {
                await client.release(lock);
            }
            catch (e)
            {
                count(`release ${codeOf(e)}`);
            }
            const releasedAt = wallMs();
            perTask[t]++;
            let token = lock ? lock.fencingToken : undefined;
            if (typeof token === "bigint" || (typeof token === "string" && token !== "" && Number.isFinite(Number(token))))
            {
                token = Number(token);
            }
            records.push({ task: t, callAt, acquiredAt, releaseAt, releasedAt, fencingToken: typeof token === "number" ? token : null });
        }
    }

    await Promise.all(Array.from({ length: job.tasks }, (_, t) => task(t)));
    const cpu = cpuUs() - cpu0;
    clearTimeout(stopTimer);
    const counts = await rpc("counts");
    // Let an abandoned acquisition's release go out if it lands quickly.
    await sleep(300);
    finish({ kind: job.kind, tasks: job.tasks, startAt, records, perTask, pendingAtEnd, errors, cpuUs: cpu, counts });
}

main().catch(fail);
