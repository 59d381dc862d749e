"use strict";

// A process that acquires one lock (FailOpen or FailClosed) and then just stays alive holding
// it, whatever the kind (a FailClosed lock does not keep a process alive by itself), until it
// is killed. Used by __test__/faults.test.js to kill a holder with SIGKILL.
//
// Job (JSON in argv[2]): { kind, config: {... with dynamodb}, id }
// Prints {"acquired":true,"fencingToken":n|null} or {"error":code}; then
// {"heartbeatError":code} / {"lost":code} as they happen.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");
const client = new DynamoDBLockClient[job.kind](job.config);

// Bounded: even if nobody kills it, it is gone after a minute.
const keepAlive = setTimeout(() => process.exit(3), 60000);

client.acquireLock(job.id, (error, lock) =>
    {
        if (error)
        {
            say({ error: error.code, message: error.message });
            clearTimeout(keepAlive);
            return;
        }
        say({ acquired: true, fencingToken: lock.fencingToken === undefined ? null : lock.fencingToken });
        lock.on("error", e => say({ heartbeatError: e.code }));
        lock.on("lost", e => say({ lost: e.code }));
    }
);
