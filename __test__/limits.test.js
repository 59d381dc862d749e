"use strict";

// DynamoDB's size limits are checked before any request, with errors that name the limit; a
// lock id of the wrong key type is explained the same way by getLock as by acquireLock.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions } = require("./helpers.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

describe("size limits, before any request", () =>
{
    let server;
    let requests = 0;
    let endpoint;
    before(async () =>
    {
        server = http.createServer((req, res) =>
        {
            requests++;
            res.writeHead(500);
            res.end();
        });
        await new Promise(resolve => server.listen(0, "127.0.0.1", resolve));
        endpoint = `http://127.0.0.1:${server.address().port}`;
    });
    after(() => new Promise(resolve => server.close(resolve)));

    const options = extra => Object.assign({
        dynamodb: { endpoint, region: "us-east-1", credentials: { accessKeyId: "a", secretAccessKey: "b" } },
        lockTable: "locks", partitionKey: "id", leaseDurationMs: 10000,
    }, extra);

    it("a partition value over 2,048 bytes, a sort value over 1,024 and data over the item's 400 KB are refused by name", async () =>
    {
        const open = new DynamoDBLockClient.FailOpen(options());
        await assert.rejects(open.acquireLock("x".repeat(3000)), e => e.code === "InvalidLockId" && /3000 bytes/.test(e.message) && /2048 bytes for a partition key value/.test(e.message));
        // UTF-8 bytes count, not characters: 700 three-byte characters are 2,100 bytes.
        await assert.rejects(open.acquireLock("€".repeat(700)), e => e.code === "InvalidLockId" && /2100 bytes/.test(e.message));
        await assert.rejects(open.acquireLock(Buffer.alloc(2049)), { code: "InvalidLockId" });
        await assert.rejects(open.getLock("x".repeat(3000)), { code: "InvalidLockId" });
        await assert.rejects(open.acquireLock("ok", { data: "d".repeat(500 * 1024) }), e => e.code === "InvalidArgument" && /400 KB/.test(e.message));
        const { leaseDurationMs, ...closedOptions } = options({ sortKey: "sk", acquirePeriodMs: 10 });
        assert.equal(leaseDurationMs, 10000);
        const sorted = new DynamoDBLockClient.FailClosed(closedOptions);
        await assert.rejects(sorted.acquireLock({ id: "a", sk: "s".repeat(1025) }), e => e.code === "InvalidLockId" && /1024 bytes for a sort key value/.test(e.message));
        const fifo = new DynamoDBLockClient.Fifo(options({ sortKey: "sk" }));
        await assert.rejects(fifo.acquireLock("r".repeat(2049)), { code: "InvalidLockId" });
        assert.equal(requests, 0, "nothing reached DynamoDB");
        await Promise.all([open.close(), sorted.close(), fifo.close()]);
    });
});

for (const name of selectedEngines())
{
    describe(`key errors (${name})`, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(name);
            await engine.createTable("locks", { partitionKey: "id" });
        });
        after(async () => engine && engine.stop());

        it("getLock with an id of the wrong key type names the table and the key it needs, as acquireLock does", async () =>
        {
            const client = new DynamoDBLockClient.FailOpen({ dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000 });
            const viaGet = await client.getLock(42).then(() => null, e => e);
            const viaAcquire = await client.acquireLock(42).then(() => null, e => e);
            for (const e of [viaGet, viaAcquire])
            {
                assert.ok(e, "refused");
                assert.equal(e.code, "ValidationException");
                assert.match(e.message, /The lock table "locks" does not fit/);
                assert.match(e.message, /N \(a number\)/);
            }
            await client.close();
        });
    });
}
