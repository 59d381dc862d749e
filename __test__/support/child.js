"use strict";

// A lock-holding child process for tests. Reads a JSON job from argv[2]:
//   { kind: "FailOpen"|"FailClosed", config: {...}, id, then: "hold"|"release"|"exit" }
//   (and `stamp: true` to add "at": Date.now() to the lines of acquisition and loss)
// prints JSON lines ({"acquired":..., "fencingToken":...}, {"released":true}, {"error":...})
// and, with "hold", keeps the lock (heartbeating) until it is killed.

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");
const client = new DynamoDBLockClient[job.kind](job.config);

client.acquireLock(job.id, (error, lock) =>
    {
        if (error)
        {
            return say({ error: error.code, message: error.message });
        }
        // `stamp`: each line carries its time (Date.now()), for tests that order events.
        const at = () => (job.stamp ? { at: Date.now() } : {});
        say(Object.assign({ acquired: true, fencingToken: lock.fencingToken === undefined ? null : lock.fencingToken }, at()));
        lock.on("error", e => say({ heartbeatError: e.code }));
        lock.on("lost", e => say(Object.assign({ lost: e.code }, at())));
        if (job.then === "release")
        {
            lock.release(e => say({ released: !e, error: e ? e.code : undefined }));
        }
    }
);
