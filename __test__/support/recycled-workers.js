"use strict";

// Loads the package only inside worker_threads Workers, never on this thread, the way worker
// pools replace their workers: ten Workers one after another, each ended a different way, then
// five that overlap. Each Worker takes and releases a FailOpen and a FailClosed lock and reports
// its fencing token; it also holds a FailOpen lock through a user `dynamodb` object (a Map),
// heartbeating, which Workers that end by `process.exit` or `terminate()` still hold as they
// end. Prints one JSON line per Worker; exits 0 when every Worker did its work.
//
//   node recycled-workers.js <endpoint> <table>

const { Worker, isMainThread, parentPort, workerData } = require("node:worker_threads");
const path = require("node:path");

if (!isMainThread)
{
    const DynamoDBLockClient = require(path.join(__dirname, "..", ".."));
    const { endpoint, table, id, ending } = workerData;
    const dynamodb = { endpoint, region: "us-east-1", credentials: { accessKeyId: "dummy", secretAccessKey: "dummy" } };
    // A user object over a Map, with the two conditions a fresh lock meets.
    const items = new Map();
    let puts = 0;
    const conditionFailed = () => Object.assign(new Error("The conditional request failed"), { code: "ConditionalCheckFailedException" });
    const userObject =
    {
        get: (p, cb) => setImmediate(cb, null, { Item: items.get(p.Key.id) }),
        put: (p, cb) => setImmediate(() =>
        {
            puts++;
            const current = items.get(p.Item.id);
            const ok = p.ConditionExpression === "attribute_not_exists(#partitionKey)" ? !current
                : Boolean(current) && current.guid.equals(p.ExpressionAttributeValues[":guid"]);
            if (!ok)
            {
                return cb(conditionFailed());
            }
            items.set(p.Item.id, p.Item);
            cb(null, {});
        }),
        delete: (p, cb) => setImmediate(cb, null, {}),
    };
    (async () =>
    {
        const viaObject = DynamoDBLockClient.FailOpen({ dynamodb: userObject, lockTable: table, partitionKey: "id", leaseDurationMs: 2000, heartbeatPeriodMs: 100 });
        const objectLock = await viaObject.acquireLock(`${id}-object`);
        const open = DynamoDBLockClient.FailOpen({ dynamodb, lockTable: table, partitionKey: "id", leaseDurationMs: 2000, heartbeatPeriodMs: 200 });
        const closed = DynamoDBLockClient.FailClosed({ dynamodb, lockTable: table, partitionKey: "id", acquirePeriodMs: 50 });
        const lock = await open.acquireLock(`${id}-open`);
        await new Promise(resolve => setTimeout(resolve, 250));
        const held = lock.leaseRemainingMs;
        await lock.release();
        const other = await closed.acquireLock(`${id}-closed`);
        await other.release();
        const objectHeartbeats = puts - 1;
        // A Worker that ends on its own must have nothing left that keeps it alive.
        if (ending === "natural" || ending === "close")
        {
            await objectLock.release();
        }
        parentPort.postMessage({ fencingToken: lock.fencingToken, held, objectToken: objectLock.fencingToken, objectHeartbeats });
        if (ending === "exit")
        {
            process.exit(0);
        }
        if (ending === "close")
        {
            parentPort.close();
        }
        // "natural": nothing keeps the Worker alive; "terminate": the parent ends it.
        if (ending === "terminate")
        {
            setInterval(() => {}, 1000);
        }
    })().catch(error =>
    {
        parentPort.postMessage({ error: `${error.code || error.name}: ${error.message}` });
    });
    return;
}

const [endpoint, table] = process.argv.slice(2);
const ENDINGS = ["natural", "exit", "terminate", "close"];

function run(id, ending)
{
    return new Promise((resolve, reject) =>
    {
        const worker = new Worker(__filename, { workerData: { endpoint, table, id, ending } });
        let report = null;
        const timer = setTimeout(() => reject(new Error(`worker ${id} did not finish in 20 s`)), 20_000);
        worker.on("message", m =>
        {
            report = m;
            if (ending === "terminate" || m.error)
            {
                worker.terminate();
            }
        });
        worker.on("error", error => { clearTimeout(timer); reject(error); });
        worker.on("exit", code =>
        {
            clearTimeout(timer);
            console.log(JSON.stringify({ id, ending, code, report }));
            if (!report || report.error)
            {
                reject(new Error(`worker ${id} (${ending}): ${report ? report.error : "no report"}`));
            }
            else
            {
                resolve(report);
            }
        });
    });
}

(async () =>
{
    for (let i = 0; i < 10; i++)
    {
        await run(`seq-${i}`, ENDINGS[i % ENDINGS.length]);
    }
    // Overlapping: started a little apart, so some end while others are still loading.
    const overlapping = [];
    for (let i = 0; i < 5; i++)
    {
        overlapping.push(run(`par-${i}`, ENDINGS[i % ENDINGS.length]));
        await new Promise(resolve => setTimeout(resolve, 60));
    }
    await Promise.all(overlapping);
    console.log("all workers done");
})().catch(error =>
{
    console.error(error.stack || String(error));
    process.exit(1);
});
