"use strict";

// The counterpart of child.js running the ORIGINAL library, dynamodb-lock-client 0.7.3, with an
// aws-sdk v2 DocumentClient. Reads a JSON job from argv[2]:
//   { kind: "FailOpen"|"FailClosed", config: {..., dynamodb: {endpoint, region, credentials}},
//     id, then: "hold"|"release", clockOffsetMs? }
// prints JSON lines ({"acquired":..., "fencingToken":...}, {"released":true}, {"error":...})
// and, with "hold", keeps the lock (heartbeating) until it is killed.

const job = JSON.parse(process.argv[2]);
// `clockOffsetMs`: this process's clock runs that far from the machine's (negative: behind).
if (job.clockOffsetMs)
{
    const RealDate = Date;
    const offset = job.clockOffsetMs;
    global.Date = class extends RealDate
    {
        constructor(...args)
        {
            super(...(args.length ? args : [RealDate.now() + offset]));
        }

        static now()
        {
            return RealDate.now() + offset;
        }
    };
}
const { documentClient } = require("./v2.js");
const Original = require("dynamodb-lock-client");

const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");
const config = Object.assign({}, job.config, { dynamodb: documentClient(job.config.dynamodb) });
const client = new Original[job.kind](config);

client.acquireLock(job.id, (error, lock) =>
    {
        if (error)
        {
            return say({ error: error.code, message: error.message });
        }
        say({ acquired: true, fencingToken: lock.fencingToken === undefined ? null : lock.fencingToken });
        // Without a listener the original crashes the process on a failed heartbeat.
        lock.on("error", e => say({ heartbeatError: e.code }));
        if (job.then === "release")
        {
            lock.release(e => say({ released: !e, error: e && e.code }));
        }
    }
);
