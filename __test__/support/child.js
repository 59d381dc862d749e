"use strict";

// A lock-holding child process for tests. Reads a JSON job from argv[2]:
//   { kind: "FailOpen"|"FailClosed", config: {...}, id, then: "hold"|"release"|"exit" }
// prints JSON lines ({"acquired":..., "fencingToken":..., "at": <Date.now()>}, {"released":true}, {"error":...})
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
        say({ acquired: true, fencingToken: lock.fencingToken === undefined ? null : lock.fencingToken, at: Date.now() });
        lock.on("error", e => say({ heartbeatError: e.code }));
        lock.on("lost", e => say({ lost: e.code, at: Date.now() }));
        if (job.then === "release")
        {
            lock.release(e => say({ released: !e, error: e ? e.code : undefined }));
        }
    }
);
