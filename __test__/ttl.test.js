"use strict";

// TTL self-cleaning: with `ttlAttribute`, every write of a FailClosed or FailOpen lock item
// sets that Number attribute (Unix seconds) for DynamoDB's TTL; fencing tokens keep rising
// when DynamoDB has deleted a released item. The attribute is asserted on both engines; the
// table's TTL setting on DynamoDB Local (dynalite has no UpdateTimeToLive).

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { DescribeTimeToLiveCommand } = require("@aws-sdk/client-dynamodb");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, failClosed, failOpen, uniqueId, until, dynamodbOptions } = require("./helpers.js");

const nowS = () => Math.floor(Date.now() / 1000);

// `value` lies within [low, high] seconds, with a second of rounding either side.
function within(value, low, high, what)
{
    assert.ok(value >= low - 1 && value <= high + 1, `${what}: ${value} not in [${low}, ${high}]`);
}

for (const engineName of selectedEngines())
{
    describe(`TTL on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
            }
        );
        after(async () => engine && engine.stop());

        const item = id => engine.getItem("locks", { id: { S: id } });

        it("FailOpen: acquisition and heartbeats set lease + ttlSeconds ahead, release ttlSeconds ahead", async () =>
            {
                const id = uniqueId("ttl-open");
                const client = failOpen(engine, { ttlAttribute: "expires", ttlSeconds: 600, leaseDurationMs: 2000, heartbeatPeriodMs: 300 });
                const t0 = nowS();
                const lock = await client.acquireLock(id);
                within(Number((await item(id)).expires.N), t0 + 2 + 600, nowS() + 2 + 600, "acquired");
                const guid = Buffer.from((await item(id)).guid.B).toString("hex");
                await until(async () => Buffer.from((await item(id)).guid.B).toString("hex") !== guid, 3000, "a heartbeat");
                const t1 = nowS();
                const afterHeartbeat = await item(id);
                within(Number(afterHeartbeat.expires.N), t0 + 2 + 600, t1 + 2 + 600, "heartbeat");
                const t2 = nowS();
                await lock.release();
                const released = await item(id);
                assert.equal(released.leaseDurationMs.N, "1");
                within(Number(released.expires.N), t2 + 600, nowS() + 600, "released");
            }
        );

        it("FailOpen: the default ttlSeconds is an hour past the lease", async () =>
            {
                const id = uniqueId("ttl-default");
                const t0 = nowS();
                const lock = await failOpen(engine, { ttlAttribute: "expires" }).acquireLock(id);
                within(Number((await item(id)).expires.N), t0 + 1 + 3600, nowS() + 1 + 3600, "held");
                await lock.release();
            }
        );

        it("FailOpen: fencing tokens keep rising after DynamoDB deleted the released item", async () =>
            {
                const id = uniqueId("ttl-floor");
                const client = failOpen(engine, { ttlAttribute: "expires" });
                const before = Date.now();
                const first = await client.acquireLock(id);
                assert.ok(Number.isSafeInteger(first.fencingToken), `${first.fencingToken}`);
                assert.ok(first.fencingToken > before * 1000, "a new item's first token is above the time in microseconds");
                await first.release();
                const second = await client.acquireLock(id);
                assert.equal(second.fencingToken, first.fencingToken + 1, "an existing item counts on by one");
                await second.release();
                // What DynamoDB's TTL does to a released item, done at once.
                await engine.deleteItem("locks", { id: { S: id } });
                await new Promise(resolve => setTimeout(resolve, 5));
                const third = await client.acquireLock(id);
                assert.ok(third.fencingToken > second.fencingToken, `${third.fencingToken} > ${second.fencingToken}`);
                await third.release();
                // Without TTL a new item starts at 1, as the original's do.
                const plain = await failOpen(engine).acquireLock(uniqueId("ttl-none"));
                assert.equal(plain.fencingToken, 1);
                await plain.release();
            }
        );

        it("FailClosed: the item carries ttlSeconds from its write; without ttlAttribute it has none", async () =>
            {
                const id = uniqueId("ttl-closed");
                const t0 = nowS();
                const lock = await failClosed(engine, { ttlAttribute: "expires", ttlSeconds: 86400 }).acquireLock(id, { data: "d" });
                const held = await item(id);
                within(Number(held.expires.N), t0 + 86400, nowS() + 86400, "held");
                assert.deepEqual(Object.keys(held).sort(), ["expires", "guid", "id", "lockData", "lockWrittenUnixMs", "owner"]);
                await lock.update({ data: "e" });
                within(Number((await item(id)).expires.N), t0 + 86400, nowS() + 86400, "updated");
                await lock.release();
                assert.equal(await item(id), undefined);
                const plain = await failClosed(engine).acquireLock(id);
                assert.deepEqual(Object.keys(await item(id)).sort(), ["guid", "id", "lockWrittenUnixMs", "owner"]);
                await plain.release();
            }
        );

        it("validates the options: FailClosed needs ttlSeconds, ttlSeconds needs ttlAttribute, no key names", () =>
            {
                const base = { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id" };
                assert.throws(() => new DynamoDBLockClient.FailClosed(Object.assign({ acquirePeriodMs: 1, ttlAttribute: "expires" }, base)),
                    { name: "ValidationError", message: "\"ttlAttribute\" missing required peer \"ttlSeconds\"" });
                assert.throws(() => new DynamoDBLockClient.FailOpen(Object.assign({ leaseDurationMs: 1000, ttlSeconds: 60 }, base)),
                    { name: "ValidationError", message: "\"ttlSeconds\" missing required peer \"ttlAttribute\"" });
                assert.throws(() => new DynamoDBLockClient.FailOpen(Object.assign({ leaseDurationMs: 1000, ttlAttribute: "id" }, base)),
                    { name: "ValidationError", message: "\"ttlAttribute\" must differ from partitionKey and sortKey" });
                assert.throws(() => new DynamoDBLockClient.FailOpen(Object.assign({ leaseDurationMs: 1000, ttlAttribute: "fencingToken" }, base)),
                    { name: "ValidationError", message: "\"ttlAttribute\" contains an invalid value" });
                const db = { get() {}, put() {}, delete() {} };
                assert.throws(() => new DynamoDBLockClient.FailOpen(Object.assign({}, base, { dynamodb: db, leaseDurationMs: 1000, ttlAttribute: "expires" })),
                    { name: "ValidationError" });
            }
        );

        if (engineName === "dynamodb-local")
        {
            it("a table made by createTable has TTL enabled on the attribute the locks write", async () =>
                {
                    const lockTable = uniqueId("ttl-table").replace(/[^a-zA-Z0-9_.-]/g, "_");
                    await DynamoDBLockClient.createTable({ dynamodb: dynamodbOptions(engine), lockTable, partitionKey: "id", ttlAttribute: "expires" });
                    const ttl = (await engine.client.send(new DescribeTimeToLiveCommand({ TableName: lockTable }))).TimeToLiveDescription;
                    assert.equal(ttl.AttributeName, "expires");
                    assert.ok(["ENABLED", "ENABLING"].includes(ttl.TimeToLiveStatus), ttl.TimeToLiveStatus);
                    const client = failOpen(engine, { lockTable, ttlAttribute: "expires" });
                    const lock = await client.acquireLock("a");
                    const written = await engine.getItem(lockTable, { id: { S: "a" } });
                    assert.equal(Number.isSafeInteger(Number(written.expires.N)), true);
                    await lock.release();
                }
            );
        }
    });
}
