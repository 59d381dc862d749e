"use strict";

// Where the original (dynamodb-lock-client 0.7.3 over an aws-sdk v2 DocumentClient) and this
// library meet the same caller code, side by side on one engine: a heartbeat period as long as
// the lease, the release callback's first argument, and an options object an SDK has written to.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const AWS = require("aws-sdk");
const Original = require("dynamodb-lock-client");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, uniqueId } = require("./helpers.js");

const UNSAFE_HEARTBEAT = "DYNAMODB_LOCK_NATIVE_UNSAFE_HEARTBEAT";

// The warnings emitted while `fn` runs (process warnings are emitted on a later tick).
async function warningsOf(fn)
{
    const seen = [];
    const listener = w => seen.push(w);
    process.on("warning", listener);
    try
    {
        const value = fn();
        await new Promise(resolve => setImmediate(resolve));
        return { value, warnings: seen.filter(w => w.code === UNSAFE_HEARTBEAT) };
    }
    finally
    {
        process.off("warning", listener);
    }
}

const offline = { region: "us-east-1", endpoint: "http://127.0.0.1:9", credentials: { accessKeyId: "a", secretAccessKey: "b" } };

describe("a FailOpen heartbeat period not shorter than the lease", () =>
{
    for (const [hb, lease] of [[1000, 1000], [5000, 1000]])
    {
        it(`heartbeatPeriodMs ${hb} with leaseDurationMs ${lease}: accepted as by the original, with a warning that says why it is unsafe`, async () =>
            {
                const config = { lockTable: "locks", partitionKey: "id", heartbeatPeriodMs: hb, leaseDurationMs: lease };
                assert.doesNotThrow(() => Original.FailOpen(Object.assign({ dynamodb: new AWS.DynamoDB.DocumentClient(offline) }, config)));
                const { value, warnings } = await warningsOf(() => new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: offline }, config)));
                assert.ok(value, "constructed");
                assert.equal(warnings.length, 1);
                assert.equal(warnings[0].name, "DynamoDBLockNativeWarning");
                assert.match(warnings[0].message, new RegExp(`heartbeatPeriodMs \\(${hb}\\) is not shorter than leaseDurationMs \\(${lease}\\)`));
                assert.match(warnings[0].message, /another process may acquire a lock its holder still uses/);
            }
        );
    }

    it("a shorter period, and no heartbeats (0), warn of nothing; Fifo still refuses a period as long as the lease", async () =>
        {
            for (const hb of [300, 0])
            {
                const { warnings } = await warningsOf(() => new DynamoDBLockClient.FailOpen({ dynamodb: offline, lockTable: "locks", partitionKey: "id", heartbeatPeriodMs: hb, leaseDurationMs: 1000 }));
                assert.deepEqual(warnings, []);
            }
            assert.throws(() => new DynamoDBLockClient.Fifo({ dynamodb: offline, lockTable: "t", partitionKey: "p", sortKey: "s", leaseDurationMs: 100, heartbeatPeriodMs: 100 }),
                /"heartbeatPeriodMs" must be less than leaseDurationMs/);
        }
    );
});

it("an options object the SDK v2 DocumentClient has written attrValue into is accepted; a misspelt key still is not", () =>
    {
        const options = Object.assign({}, offline);
        new AWS.DynamoDB.DocumentClient(options);
        assert.ok("attrValue" in options, "the SDK v2 adds attrValue to the options it is given");
        assert.doesNotThrow(() => new DynamoDBLockClient.FailClosed({ dynamodb: options, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50 }));
        assert.throws(() => new DynamoDBLockClient.FailClosed({ dynamodb: Object.assign({ regoin: "us-east-1" }, offline), lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50 }),
            e => e.name === "ValidationError" && /"dynamodb\.regoin" is not allowed/.test(e.message));
    }
);

for (const engineName of selectedEngines())
{
    describe(`side by side with the original on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
            }
        );
        after(async () => engine && engine.stop());

        const options = () => ({ endpoint: engine.endpoint, region: engine.region, credentials: Object.assign({}, engine.credentials) });
        const configs =
        {
            FailClosed: { lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50, retryCount: 0 },
            FailOpen: { lockTable: "locks", partitionKey: "id", leaseDurationMs: 2000, heartbeatPeriodMs: 500, retryCount: 0 },
        };
        const acquire = (client, id) => new Promise((resolve, reject) => client.acquireLock(id, (err, lock) => (err ? reject(err) : resolve(lock))));
        const releaseArgs = lock => new Promise(resolve => lock.release((...args) => resolve(args)));

        for (const [kind, config] of Object.entries(configs))
        {
            it(`${kind}: the release callback's first argument is null in both`, async () =>
                {
                    // The options object is given to the SDK v2 first, as a migrating service does,
                    // and then to this library as it is.
                    const shared = options();
                    const original = Original[kind](Object.assign({ dynamodb: new AWS.DynamoDB.DocumentClient(shared) }, config));
                    const ours = DynamoDBLockClient[kind](Object.assign({ dynamodb: shared }, config));
                    const theirs = await acquire(original, uniqueId(`orig-${kind}`));
                    theirs.on("error", () => {});
                    const mine = await acquire(ours, uniqueId(`ours-${kind}`));
                    const [originalArgs, ourArgs] = await Promise.all([releaseArgs(theirs), releaseArgs(mine)]);
                    assert.equal(originalArgs[0], null, "the original passes null");
                    assert.equal(ourArgs[0], null);
                    await ours.close();
                }
            );
        }

        it("FailOpen with a heartbeat period as long as the lease acquires and releases, as the original does", async () =>
            {
                const config = { lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 1000, retryCount: 0 };
                const { value: ours } = await warningsOf(() => DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: options() }, config)));
                const original = Original.FailOpen(Object.assign({ dynamodb: new AWS.DynamoDB.DocumentClient(options()) }, config));
                const theirs = await acquire(original, uniqueId("orig-slow-heartbeat"));
                theirs.on("error", () => {});
                const mine = await acquire(ours, uniqueId("ours-slow-heartbeat"));
                assert.equal(typeof mine.fencingToken, "number");
                assert.deepEqual(await releaseArgs(theirs), [null]);
                assert.equal((await releaseArgs(mine))[0], null);
                await ours.close();
            }
        );
    });
}
