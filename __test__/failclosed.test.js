"use strict";

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const os = require("os");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, failClosed, acquireCb, releaseCb, uniqueId, dynamodbOptions } = require("./helpers.js");
const pkg = require("../package.json");

for (const engineName of selectedEngines())
{
    describe(`FailClosed on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("numeric", { partitionKey: "id", partitionType: "N" });
                await engine.createTable("binary", { partitionKey: "id", partitionType: "B" });
                await engine.createTable("ranged", { partitionKey: "pk", sortKey: "sk", sortType: "N" });
                await engine.createTable("ranged_s", { partitionKey: "pk", sortKey: "sk" });
            }
        );
        after(async () => engine && engine.stop());

        it("acquires with a conditional write of owner and a 64-byte guid, and release deletes it", async () =>
            {
                const id = uniqueId("fc");
                const { error, lock } = await acquireCb(failClosed(engine, { owner: "worker-1" }), id);
                assert.equal(error, undefined);
                assert.equal(lock.fencingToken, undefined);
                const item = await engine.getItem("locks", { id: { S: id } });
                assert.deepEqual(Object.keys(item).sort(), ["guid", "id", "lockWrittenUnixMs", "owner"]);
                assert.equal(item.owner.S, "worker-1");
                assert.equal(Buffer.from(item.guid.B).length, 64);
                assert.equal(await releaseCb(lock), null);
                assert.equal(await engine.getItem("locks", { id: { S: id } }), undefined);
            }
        );

        it("names the default owner after the package, user and host", async () =>
            {
                const id = uniqueId("owner");
                const lock = await failClosed(engine).acquireLock(id);
                const item = await engine.getItem("locks", { id: { S: id } });
                assert.equal(item.owner.S, `${pkg.name}@${pkg.version}_${os.userInfo().username}@${os.hostname()}`);
                await lock.release();
            }
        );

        it("takes number and Buffer ids on N and B keyed tables", async () =>
            {
                const n = await failClosed(engine, { lockTable: "numeric" }).acquireLock(4242);
                assert.ok(await engine.getItem("numeric", { id: { N: "4242" } }));
                await n.release();
                assert.equal(await engine.getItem("numeric", { id: { N: "4242" } }), undefined);
                const bytes = Buffer.from([0, 1, 2, 255]);
                const b = await failClosed(engine, { lockTable: "binary" }).acquireLock(bytes);
                assert.ok(await engine.getItem("binary", { id: { B: bytes } }));
                await b.release();
            }
        );

        it("supports a sort key, including a falsy sort value of 0", async () =>
            {
                const client = failClosed(engine, { lockTable: "ranged", partitionKey: "pk", sortKey: "sk" });
                const pk = uniqueId("ranged");
                const zero = await client.acquireLock({ pk, sk: 0 });
                const one = await client.acquireLock({ pk, sk: 1 });
                assert.ok(await engine.getItem("ranged", { pk: { S: pk }, sk: { N: "0" } }));
                const refused = await acquireCb(failClosed(engine, { lockTable: "ranged", partitionKey: "pk", sortKey: "sk", retryCount: 0 }), { pk, sk: 0 });
                assert.equal(refused.error.code, "FailedToAcquireLock");
                await zero.release();
                await one.release();
                assert.equal(await engine.getItem("ranged", { pk: { S: pk }, sk: { N: "0" } }), undefined);
            }
        );

        it("refuses an empty-string sort value as empty (DynamoDB would refuse it), not as missing", async () =>
            {
                const client = failClosed(engine, { lockTable: "ranged_s", partitionKey: "pk", sortKey: "sk" });
                const { error } = await acquireCb(client, { pk: uniqueId("empty"), sk: "" });
                assert.ok(error);
                assert.notEqual(error.message, "Lock ID is missing required sortKey value");
                assert.equal(error.code, "InvalidLockId");
                assert.match(error.message, /must not be empty/);
            }
        );

        it("reports a missing sort value, null and undefined ids through the callback", async () =>
            {
                const ranged = failClosed(engine, { lockTable: "ranged", partitionKey: "pk", sortKey: "sk" });
                const missing = await acquireCb(ranged, { pk: "x" });
                assert.equal(missing.error.message, "Lock ID is missing required sortKey value");
                assert.equal(missing.error.code, "InvalidLockId");
                assert.equal(missing.lock, undefined);
                for (const id of [null, undefined])
                {
                    const r = await acquireCb(failClosed(engine), id);
                    assert.equal(r.error.code, "InvalidLockId");
                }
                const wrongType = await acquireCb(failClosed(engine), { id: { nested: true } });
                assert.equal(wrongType.error.code, "InvalidLockId");
            }
        );

        it("retries a held lock retryCount times, acquirePeriodMs apart, then fails with FailedToAcquireLock", async () =>
            {
                const id = uniqueId("held");
                const held = await failClosed(engine).acquireLock(id);
                const started = Date.now();
                const { error, lock } = await acquireCb(failClosed(engine, { retryCount: 2, acquirePeriodMs: 100 }), id);
                assert.ok(Date.now() - started >= 200, "two pauses of acquirePeriodMs");
                assert.equal(lock, undefined);
                assert.equal(error.code, "FailedToAcquireLock");
                assert.match(error.message, /^Failed to acquire lock /);
                assert.equal(error.originalError.code, "ConditionalCheckFailedException");
                await held.release();
            }
        );

        it("acquires a lock released while it waits", async () =>
            {
                const id = uniqueId("handoff");
                const held = await failClosed(engine).acquireLock(id);
                const waiting = failClosed(engine, { retryCount: 20, acquirePeriodMs: 50 }).acquireLock(id);
                setTimeout(() => held.release(), 150);
                const lock = await waiting;
                const item = await engine.getItem("locks", { id: { S: id } });
                assert.ok(item);
                await lock.release();
            }
        );

        it("refuses to release a lock that is no longer ours with FailedToReleaseLock", async () =>
            {
                const id = uniqueId("stolen");
                const lock = await failClosed(engine).acquireLock(id);
                await engine.deleteItem("locks", { id: { S: id } });
                const thief = await failClosed(engine, { owner: "thief" }).acquireLock(id);
                const error = await releaseCb(lock);
                assert.equal(error.code, "FailedToReleaseLock");
                assert.equal(error.originalError.code, "ConditionalCheckFailedException");
                assert.equal((await engine.getItem("locks", { id: { S: id } })).owner.S, "thief");
                await thief.release();
                const again = await releaseCb(thief);
                assert.equal(again.code, "FailedToReleaseLock", "a second release is refused");
            }
        );

        it("reports other DynamoDB errors under their AWS name", async () =>
            {
                const { error } = await acquireCb(failClosed(engine, { lockTable: "no-such-table" }), "x");
                assert.equal(error.code, "ResourceNotFoundException");
                assert.equal(error.name, "ResourceNotFoundException");
                assert.match(error.message, /not found|non-existent/i);
            }
        );

        it("reports an unreachable endpoint as a networking error, promptly", async () =>
            {
                const client = new DynamoDBLockClient.FailClosed(
                    {
                        dynamodb: dynamodbOptions(engine, "http://127.0.0.1:9"),
                        lockTable: "locks",
                        partitionKey: "id",
                        acquirePeriodMs: 10,
                        requestTimeoutMs: 500,
                    });
                const started = Date.now();
                const { error } = await acquireCb(client, "x");
                assert.equal(error.code, "NetworkingError");
                assert.ok(Date.now() - started < 10000);
            }
        );

        it("works without new, and as Promises", async () =>
            {
                const client = DynamoDBLockClient.FailClosed({ dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", acquirePeriodMs: 1 });
                assert.ok(client instanceof DynamoDBLockClient.FailClosed);
                const lock = await client.acquireLock(uniqueId("promise"));
                assert.equal(await lock.release(), undefined);
                await assert.rejects(client.acquireLock(null), e => e.code === "InvalidLockId");
            }
        );
    });
}

describe("FailClosed configuration", () =>
{
    it("throws one ValidationError listing every problem", () =>
        {
            assert.throws(
                () => new DynamoDBLockClient.FailClosed({ lockTable: 5, partitionKey: "guid", acquirePeriodMs: "10", retryCount: -1, surprise: true }),
                e =>
                {
                    assert.equal(e.name, "ValidationError");
                    assert.ok(e instanceof Error);
                    assert.equal(e.message, "\"lockTable\" must be a string. \"partitionKey\" contains an invalid value. \"acquirePeriodMs\" must be a number. \"retryCount\" must be larger than or equal to 0. \"surprise\" is not allowed");
                    assert.deepEqual(e.details.map(d => d.path.join(".")), ["lockTable", "partitionKey", "acquirePeriodMs", "retryCount", "surprise"]);
                    assert.deepEqual(e.details[3].context, { label: "retryCount", key: "retryCount", limit: 0, value: -1 });
                    assert.equal(e.details[2].type, "number.base");
                    return true;
                }
            );
        }
    );

    it("refuses every reserved attribute name as a key", () =>
        {
            for (const name of ["fencingToken", "leaseDurationMs", "lockAcquiredTimeUnixMs", "owner", "guid"])
            {
                assert.throws(() => DynamoDBLockClient.FailClosed({ lockTable: "t", partitionKey: name, acquirePeriodMs: 1 }), /"partitionKey" contains an invalid value/);
                assert.throws(() => DynamoDBLockClient.FailClosed({ lockTable: "t", partitionKey: "p", sortKey: name, acquirePeriodMs: 1 }), /"sortKey" contains an invalid value/);
            }
        }
    );

    it("refuses a missing or non-object config", () =>
        {
            assert.throws(() => DynamoDBLockClient.FailClosed(), /"value" is required/);
            assert.throws(() => DynamoDBLockClient.FailClosed("x"), /"value" must be of type object/);
            assert.throws(() => DynamoDBLockClient.FailClosed({ dynamodb: null, lockTable: "t", partitionKey: "p", acquirePeriodMs: 1 }), /"dynamodb" must be of type object/);
        }
    );
});
