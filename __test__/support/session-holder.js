"use strict";

// A process holding several FailOpen locks through one session (`session: true`), for
// __test__/sessions.test.js, until it is killed (or 30 s pass). It works in 10 ms steps and
// notices a pause of its own (SIGSTOP/SIGCONT) as a gap between steps.
//
// Job (JSON in argv[2]): { config: {... with dynamodb, session: true}, ids: [...] }
// Prints {"acquired":true,"tokens":[...],"remaining":[...]} once every lock is held, then, with
// `at` = Date.now():
//   {"sigcont":true,"leaseRemainingMs":[...],"at":n}   in the SIGCONT handler;
//   {"resumed":true,"gapMs":n,"leaseRemainingMs":[...],"at":n}  on the first step after a gap;
//   {"danger":i,"at":n} / {"lost":i,"code":c,"at":n} / {"error":i,"code":c} per lock i.
// On any failure to acquire: {"failed":code,"message":...}.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");
const client = new DynamoDBLockClient.FailOpen(job.config);
const bound = setTimeout(() => process.exit(3), 30000);

(async () =>
{
    const locks = [];
    for (const id of job.ids)
    {
        locks.push(await client.acquireLock(id));
    }
    const remaining = () => locks.map(l => l.leaseRemainingMs);
    locks.forEach((lock, i) =>
    {
        lock.on("error", e => say({ error: i, code: e.code }));
        lock.on("danger", () => say({ danger: i, at: Date.now() }));
        lock.on("lost", e => say({ lost: i, code: e && e.code, at: Date.now() }));
    });
    process.on("SIGCONT", () => say({ sigcont: true, leaseRemainingMs: remaining(), at: Date.now() }));
    say({ acquired: true, tokens: locks.map(l => l.fencingToken), remaining: remaining() });
    let last = Date.now();
    let resumed = false;
    setInterval(() =>
    {
        const now = Date.now();
        if (!resumed && now - last > 500)
        {
            resumed = true;
            say({ resumed: true, gapMs: now - last, leaseRemainingMs: remaining(), at: now });
        }
        last = now;
    }, 10);
})().catch(e =>
{
    say({ failed: e.code, message: e.message });
    clearTimeout(bound);
    client.close().then(() => process.exit(0), () => process.exit(0));
});
