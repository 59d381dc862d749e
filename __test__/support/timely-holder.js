"use strict";

// A process that takes one FailOpen lock and then works under it in 10 ms steps, reading
// `lock.leaseRemainingMs` before each step, until the lock is lost (or 20 s pass). It notices a
// pause of its own (SIGSTOP/SIGCONT) as a gap between steps. Used by timely-loss.test.js.
//
// Job (JSON in argv[2]): { config: {... with dynamodb}, id }
// Prints {"acquired":true,"fencingToken":n}, then, with `at` = Date.now():
// {"resumed":true,"gapMs":n,"leaseRemainingMs":n,"at":n} on the first step after a pause,
// {"danger":n,"at":n}, {"lost":code,"at":n,"stepsAfterResume":n}.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");
const client = new DynamoDBLockClient.FailOpen(job.config);
const bound = setTimeout(() => process.exit(3), 20000);

client.acquireLock(job.id, (error, lock) =>
{
    if (error)
    {
        say({ error: error.code, message: error.message });
        clearTimeout(bound);
        return;
    }
    say({ acquired: true, fencingToken: lock.fencingToken });
    let last = Date.now();
    let resumed = false;
    let stepsAfterResume = 0;
    const steps = setInterval(() =>
    {
        const now = Date.now();
        const left = lock.leaseRemainingMs;
        if (!resumed && now - last > 500)
        {
            resumed = true;
            say({ resumed: true, gapMs: now - last, leaseRemainingMs: left, at: now });
        }
        // A step of work is done only while the lease has time left.
        if (resumed && left > 0)
        {
            stepsAfterResume++;
        }
        last = now;
    }, 10);
    lock.on("error", () => {});
    lock.on("danger", d => say({ danger: d.remainingMs, at: Date.now() }));
    lock.on("lost", e =>
    {
        say({ lost: e.code, at: Date.now(), stepsAfterResume });
        clearInterval(steps);
        clearTimeout(bound);
        lock.release().then(() => process.exit(0), () => process.exit(0));
    });
});
