"use strict";

// Errors that name what is wrong, on each engine: a lock table whose key is named or typed
// otherwise than the client's options and lock ids is named with the key attribute and the
// type expected (FailClosed and FailOpen, as Fifo), and a refused connection names the
// endpoint (without the credentials of its URL).

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const net = require("net");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, uniqueId } = require("./helpers.js");

// A port on 127.0.0.1 that refuses connections: one that was just free.
function refusingPort()
{
    return new Promise((resolve, reject) =>
    {
        const server = net.createServer();
        server.on("error", reject);
        server.listen(0, "127.0.0.1", () =>
        {
            const { port } = server.address();
            server.close(() => resolve(port));
        });
    });
}

for (const engineName of selectedEngines())
{
    describe(`messages that name what is wrong (${engineName})`, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(engineName);
            await engine.createTable("by_pk", { partitionKey: "pk" });
            await engine.createTable("by_number", { partitionKey: "id", partitionType: "N" });
            await engine.createTable("with_sort", { partitionKey: "id", sortKey: "shard" });
        });
        after(async () => engine && engine.stop());

        const dynamodb = () => ({ endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials });
        const make = (kind, extra) => new DynamoDBLockClient[kind](Object.assign({ dynamodb: dynamodb(), partitionKey: "id",
            requestTimeoutMs: 2000 }, kind === "FailOpen" ? { leaseDurationMs: 1000 } : { acquirePeriodMs: 10 }, extra));
        const failure = promise => promise.then(l => { throw new Error(`acquired ${l && l.fencingToken}`); }, e => e);

        for (const kind of ["FailClosed", "FailOpen"])
        {
            it(`${kind}: a partition key named otherwise names the table, the key and the type`, async () =>
            {
                const error = await failure(make(kind, { lockTable: "by_pk" }).acquireLock(uniqueId("schema")));
                assert.equal(error.code, "ValidationException");
                assert.match(error.message, /^The lock table "by_pk" does not fit this client's lock ids: /);
                assert.match(error.message, /its partition key must be "id" of type S \(a string\), as the lock id is/);
                assert.match(error.message, /with no sort key \(set `sortKey` for a table that has one\)/);
                assert.match(error.message, /DynamoDB said: .*(key element does not match the schema|[Kk]ey)/);
            });

            it(`${kind}: a lock id of the wrong type names the type the key must have`, async () =>
            {
                const error = await failure(make(kind, { lockTable: "by_number" }).acquireLock(uniqueId("typed")));
                assert.equal(error.code, "ValidationException");
                assert.match(error.message, /^The lock table "by_number" does not fit this client's lock ids: /);
                assert.match(error.message, /its partition key must be "id" of type S \(a string\), as the lock id is/);
                // And the other way: a number id against a string key.
                const numeric = await failure(make(kind, { lockTable: "by_pk", partitionKey: "pk" }).acquireLock(Date.now()));
                assert.equal(numeric.code, "ValidationException");
                assert.match(numeric.message, /its partition key must be "pk" of type N \(a number\), as the lock id is/);
            });

            it(`${kind}: a table with a sort key the client does not name says to set sortKey`, async () =>
            {
                const error = await failure(make(kind, { lockTable: "with_sort" }).acquireLock(uniqueId("unsorted")));
                assert.equal(error.code, "ValidationException");
                assert.match(error.message, /^The lock table "with_sort" does not fit/);
                assert.match(error.message, /set `sortKey`/);
            });

            it(`${kind}: a sort value of the wrong type names the sort key and its type`, async () =>
            {
                const client = make(kind, { lockTable: "with_sort", sortKey: "shard" });
                const error = await failure(client.acquireLock({ id: uniqueId("sorted"), shard: 7 }));
                assert.equal(error.code, "ValidationException");
                assert.match(error.message, /its partition key must be "id" of type S \(a string\), as the lock id is, and its sort key "shard" of type N \(a number\)/);
            });

            it(`${kind}: a lock table that fits is acquired as before`, async () =>
            {
                const lock = await make(kind, { lockTable: "by_pk", partitionKey: "pk" }).acquireLock(uniqueId("fits"));
                await lock.release();
            });
        }

        it("a refused connection names the endpoint, without the credentials of its URL", async () =>
        {
            const port = await refusingPort();
            for (const endpoint of [`http://127.0.0.1:${port}`, `http://someone:hunter2@127.0.0.1:${port}/`])
            {
                const client = new DynamoDBLockClient.FailClosed({
                    dynamodb: { endpoint, region: engine.region, credentials: engine.credentials },
                    lockTable: "by_pk", partitionKey: "pk", acquirePeriodMs: 10, requestTimeoutMs: 500,
                });
                const error = await failure(client.acquireLock(uniqueId("refused")));
                assert.equal(error.code, "NetworkingError", error.message);
                assert.ok(error.message.includes(`(endpoint http://127.0.0.1:${port})`), error.message);
                assert.ok(!error.message.includes("hunter2") && !error.message.includes("someone"), error.message);
            }
        });
    });
}
