"use strict";

// A Fifo waiter in a child process. Reads a JSON job from argv[2]:
//   { config, ids, waitMs?, holdMs?, go? }
// With `go`, prints {"ready":true} and acquires when "go" arrives on stdin. Prints JSON lines:
// {"acquired":true,"fencingToken":n,"at":ms}, {"releasing":true,"at":ms} (then releases
// after `holdMs`), {"released":true}, or {"error":code}. Without `holdMs` it holds the lock
// until it is killed.

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");
const client = new DynamoDBLockClient.Fifo(job.config);

function start()
{
    const options = job.waitMs === undefined ? {} : { waitMs: job.waitMs === null ? Infinity : job.waitMs };
    client.acquireLock(job.ids, options, (error, lock) =>
        {
            if (error)
            {
                say({ error: error.code, message: error.message });
                return;
            }
            say({ acquired: true, fencingToken: lock.fencingToken, at: Date.now() });
            lock.on("lost", e => say({ lost: e.code }));
            if (job.holdMs === undefined)
            {
                return;
            }
            setTimeout(() =>
                {
                    say({ releasing: true, at: Date.now() });
                    lock.release(e => say({ released: !e, error: e ? e.code : undefined }));
                }, job.holdMs);
        }
    );
}

if (job.go)
{
    say({ ready: true });
    process.stdin.setEncoding("utf8");
    process.stdin.once("data", () =>
        {
            // Reading stdin would keep the process alive: the lock alone decides.
            process.stdin.destroy();
            start();
        });
}
else
{
    start();
}
