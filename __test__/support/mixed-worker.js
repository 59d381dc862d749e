"use strict";

// A contention worker for the mixed-fleet suite: runs either the ORIGINAL library
// (dynamodb-lock-client 0.7.3 over an aws-sdk v2 DocumentClient) or OURS, and loops
//   acquireLock(id) -> read counter, sleep, write counter + 1 (deliberately non-atomic)
//   -> release
// a bounded number of times, and never past a deadline.
//
// Job (JSON in argv[2]):
//   { name, lib: "original"|"native", transport: "options"|"documentClient" (native only),
//     kind: "FailOpen"|"FailClosed", config: {lock options without dynamodb},
//     engine: {endpoint, region, credentials}, id, counterTable, counterId,
//     iterations, criticalSleepMs, pauseMs: [min, max], softDeadlineMs (from "go") }
//
// Protocol: prints {"ready":true}, waits for a line on stdin, then prints one line per
// acquisition {"i", "token", "read", "start", "end"}, {"error"...} on a failure, and finally
// {"done":true, "acquisitions":n, "lateGrants":n, "stoppedEarly":bool}, then exits. A native
// grant refused as LeaseExpired (its answer came after the whole lease) is asked for again,
// up to 3 times an iteration, and counted in lateGrants.

const { runOnGo } = require("./go.js");
const { documentClient } = require("./v2.js");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(Object.assign({ worker: job.name }, obj)) + "\n");
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

const doc = documentClient(job.engine);
let client;
if (job.lib === "original")
{
    const Original = require("dynamodb-lock-client");
    client = new Original[job.kind](Object.assign({}, job.config, { dynamodb: doc }));
}
else
{
    const Native = require("../..");
    const dynamodb = job.transport === "documentClient"
        ? doc
        : { endpoint: job.engine.endpoint, region: job.engine.region, credentials: job.engine.credentials };
    client = new Native[job.kind](Object.assign({}, job.config, { dynamodb }));
}

const acquire = id => new Promise(resolve => client.acquireLock(id, (error, lock) => resolve({ error, lock })));
const release = lock => new Promise(resolve => lock.release(error => resolve(error)));
const get = params => doc.get(params).promise();
const put = params => doc.put(params).promise();

async function main()
{
    const startedAt = Date.now();
    const deadline = startedAt + job.softDeadlineMs;
    let acquisitions = 0;
    let lateGrants = 0;
    let stoppedEarly = false;
    for (let i = 0; i < job.iterations; i++)
    {
        if (Date.now() >= deadline)
        {
            stoppedEarly = true;
            break;
        }
        let { error, lock } = await acquire(job.id);
        // Ours refuses a grant whose answer came after its whole lease (another waiter may
        // have waited that lease out) with LeaseExpired, having given the lock back: a caller
        // asks again. Such a take raised the fencing token; the test counts it.
        for (let late = 0; error && error.code === "LeaseExpired" && job.lib === "native" && late < 3; late++)
        {
            lateGrants++;
            ({ error, lock } = await acquire(job.id));
        }
        if (error)
        {
            say({ error: error.code || error.name, message: error.message, i, after: Date.now() - startedAt });
            break;
        }
        const start = Date.now();
        const heartbeatErrors = [];
        // The original crashes the process on a heartbeat error without a listener.
        lock.on("error", e => heartbeatErrors.push(e.code || e.name || String(e)));
        let read;
        try
        {
            const { Item } = await get({ TableName: job.counterTable, Key: { id: job.counterId }, ConsistentRead: true });
            read = Item ? Item.count : 0;
            await sleep(job.criticalSleepMs);
            await put({ TableName: job.counterTable, Item: { id: job.counterId, count: read + 1 } });
        }
        catch (e)
        {
            say({ error: "CounterIO", message: e.message, i });
            await release(lock);
            break;
        }
        const end = Date.now();
        acquisitions++;
        const releaseError = await release(lock);
        say(
            {
                i,
                token: lock.fencingToken === undefined ? null : lock.fencingToken,
                read,
                start,
                end,
                heartbeatErrors,
                releaseError: releaseError ? (releaseError.code || releaseError.message) : null,
            }
        );
        const [lo, hi] = job.pauseMs;
        await sleep(lo + Math.floor(Math.random() * (hi - lo + 1)));
    }
    say({ done: true, acquisitions, lateGrants, stoppedEarly, ms: Date.now() - startedAt });
}

runOnGo(main, say);
