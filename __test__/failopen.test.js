"use strict";

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, failOpen, acquireCb, releaseCb, uniqueId, sleep, until, dynamodbOptions } = require("./helpers.js");
const { startChild } = require("./support/spawn.js");

for (const engineName of selectedEngines())
{
    describe(`FailOpen on ${engineName}`, { timeout: 180000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("ranged", { partitionKey: "pk", sortKey: "sk", sortType: "N" });
            }
        );
        after(async () => engine && engine.stop());

        const childConfig = extra => Object.assign(
            { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000 }, extra);

        it("writes the original's item and raises the fencing token on every acquisition", async () =>
            {
                const id = uniqueId("fo");
                const client = failOpen(engine, { owner: "w1" });
                const first = await acquireCb(client, id);
                assert.equal(first.error, undefined);
                assert.equal(first.lock.fencingToken, 1);
                const item = await engine.getItem("locks", { id: { S: id } });
                assert.deepEqual(Object.keys(item).sort(), ["fencingToken", "guid", "id", "leaseDurationMs", "lockAcquiredTimeUnixMs", "lockWrittenUnixMs", "owner"]);
                assert.equal(item.owner.S, "w1");
                assert.equal(item.leaseDurationMs.N, "1000");
                assert.equal(item.fencingToken.N, "1");
                assert.equal(Buffer.from(item.guid.B).length, 64);
                assert.equal(await releaseCb(first.lock), null);
                const released = await engine.getItem("locks", { id: { S: id } });
                assert.equal(released.leaseDurationMs.N, "1", "release keeps the item with leaseDurationMs 1");
                assert.equal(released.fencingToken.N, "1");
                const started = Date.now();
                const second = await client.acquireLock(id);
                assert.ok(Date.now() - started < 900, "a released lock is taken at once");
                assert.equal(second.fencingToken, 2);
                await second.release();
                const third = await client.acquireLock(id);
                assert.equal(third.fencingToken, 3);
                await third.release();
            }
        );

        it("writes lockAcquiredTimeUnixMs on every write, with or without trustLocalTime", async () =>
            {
                const id = uniqueId("trust");
                const key = { id: { S: id } };
                const trusting = await failOpen(engine, { trustLocalTime: true }).acquireLock(id);
                const item = await engine.getItem("locks", key);
                assert.ok(Math.abs(Number(item.lockAcquiredTimeUnixMs.N) - Date.now()) < 5000);
                await trusting.release();
                await sleep(20);
                // The original with trustLocalTime counts a lease from it: without it, it waits nothing.
                const plain = await failOpen(engine, { heartbeatPeriodMs: 100 }).acquireLock(id);
                const taken = await engine.getItem("locks", key);
                assert.ok(Math.abs(Number(taken.lockAcquiredTimeUnixMs.N) - Date.now()) < 5000, JSON.stringify(taken));
                assert.ok(Number(taken.lockAcquiredTimeUnixMs.N) > Number(item.lockAcquiredTimeUnixMs.N), "the acquisition's own time");
                await sleep(350);
                const renewed = await engine.getItem("locks", key);
                assert.notDeepEqual(renewed.guid, taken.guid, "a heartbeat went out");
                assert.ok(Number(renewed.lockAcquiredTimeUnixMs.N) > Number(taken.lockAcquiredTimeUnixMs.N), "a heartbeat writes its time");
                await plain.release();
                const released = await engine.getItem("locks", key);
                assert.ok(released.lockAcquiredTimeUnixMs, "the release carries it too");
            }
        );

        it("waits out a live holder's lease and fails after retryCount with FailedToAcquireLock", async () =>
            {
                const id = uniqueId("busy");
                const holder = await failOpen(engine, { leaseDurationMs: 600, heartbeatPeriodMs: 150 }).acquireLock(id);
                const started = Date.now();
                const { error } = await acquireCb(failOpen(engine, { leaseDurationMs: 600, retryCount: 1 }), id);
                const took = Date.now() - started;
                assert.equal(error.code, "FailedToAcquireLock");
                assert.equal(error.originalError.code, "ConditionalCheckFailedException");
                assert.ok(took >= 550, `waited at least a lease (${took} ms)`);
                await holder.release();
            }
        );

        it("takes over a lock whose holder was killed with SIGKILL, with a larger token", async () =>
            {
                const id = uniqueId("killed");
                const holder = startChild({ kind: "FailOpen", config: childConfig({ leaseDurationMs: 800, heartbeatPeriodMs: 200 }), id, then: "hold" });
                const { fencingToken } = await holder.next(l => l.acquired);
                await sleep(500);
                holder.kill();
                await holder.exited;
                const started = Date.now();
                const lock = await failOpen(engine, { leaseDurationMs: 800 }).acquireLock(id);
                assert.ok(Date.now() - started >= 300, "the dead holder's lease was waited out");
                assert.ok(lock.fencingToken > fencingToken);
                await lock.release();
            }
        );

        it("heartbeats keep a lock alive past several leases", async () =>
            {
                const id = uniqueId("alive");
                // A write slower than half of what is left of the lease is reported as an
                // "error": the lease leaves room for an engine that stalls a few hundred
                // milliseconds on a loaded machine, and the run still spans three leases.
                const lock = await failOpen(engine, { leaseDurationMs: 1000, heartbeatPeriodMs: 150 }).acquireLock(id);
                const errors = [];
                lock.on("error", e => errors.push(e));
                const guids = new Set();
                for (let i = 0; i < 8; i++)
                {
                    await sleep(400);
                    guids.add(Buffer.from((await engine.getItem("locks", { id: { S: id } })).guid.B).toString("hex"));
                }
                assert.ok(guids.size >= 5, `guid rotated (${guids.size} distinct)`);
                const { error } = await acquireCb(failOpen(engine, { leaseDurationMs: 1000, retryCount: 0 }), id);
                assert.equal(error.code, "FailedToAcquireLock");
                assert.deepEqual(errors, []);
                assert.equal(lock.lost, false);
                await lock.release();
            }
        );

        it("emits error and lost when a heartbeat finds the lock taken, and aborts lock.signal", async () =>
            {
                const id = uniqueId("lost");
                const lock = await failOpen(engine, { leaseDurationMs: 1000, heartbeatPeriodMs: 100 }).acquireLock(id);
                const errors = [];
                lock.on("error", e => errors.push(e));
                const lost = new Promise(resolve => lock.on("lost", resolve));
                await engine.putItem("locks", { id: { S: id }, guid: { B: Buffer.alloc(64, 7) }, fencingToken: { N: "99" }, leaseDurationMs: { N: "1000" }, owner: { S: "usurper" } });
                const reason = await lost;
                assert.equal(reason.code, "LockLost");
                assert.equal(errors[0].code, "ConditionalCheckFailedException");
                assert.ok(lock.signal.aborted);
                assert.equal(lock.signal.reason, reason);
                assert.equal(await releaseCb(lock), null, "a lost lock releases quietly");
                const item = await engine.getItem("locks", { id: { S: id } });
                assert.equal(item.owner.S, "usurper", "the new owner's item is untouched");
            }
        );

        it("does not crash a process that has no error listener when a heartbeat fails", async () =>
            {
                const id = uniqueId("nolistener");
                const lock = await failOpen(engine, { leaseDurationMs: 1000, heartbeatPeriodMs: 100 }).acquireLock(id);
                const lost = new Promise(resolve => lock.once("lost", resolve));
                await engine.putItem("locks", { id: { S: id }, guid: { B: Buffer.alloc(64, 8) }, leaseDurationMs: { N: "1000" } });
                assert.equal((await lost).code, "LockLost");
            }
        );

        it("reports the lease of a lock without heartbeats lapsing, unless it was released", async () =>
            {
                const client = failOpen(engine, { leaseDurationMs: 300 });
                const kept = await client.acquireLock(uniqueId("lapse"));
                const released = await client.acquireLock(uniqueId("lapse"));
                let releasedLost = false;
                released.on("lost", () => (releasedLost = true));
                await released.release();
                const started = Date.now();
                // A lock without heartbeats does not hold the event loop (as in the original).
                const keepAlive = setTimeout(() => {}, 5000);
                const reason = await new Promise(resolve => kept.once("lost", resolve));
                clearTimeout(keepAlive);
                assert.equal(reason.code, "LeaseExpired");
                assert.ok(Date.now() - started <= 1500);
                assert.ok(kept.signal.aborted);
                await sleep(100);
                assert.equal(releasedLost, false);
                await kept.release();
            }
        );

        it("supports sort keys with a falsy sort value", async () =>
            {
                const client = failOpen(engine, { lockTable: "ranged", partitionKey: "pk", sortKey: "sk" });
                const pk = uniqueId("fo-ranged");
                const lock = await client.acquireLock({ pk, sk: 0 });
                assert.equal(lock.fencingToken, 1);
                const item = await engine.getItem("ranged", { pk: { S: pk }, sk: { N: "0" } });
                assert.equal(item.fencingToken.N, "1");
                await lock.release();
            }
        );

        it("a heartbeating lock keeps its process alive; after release the process exits", async () =>
            {
                const held = startChild({ kind: "FailOpen", config: childConfig({ heartbeatPeriodMs: 200 }), id: uniqueId("life"), then: "hold" });
                await held.next(l => l.acquired);
                const result = await Promise.race([held.exited, sleep(1500).then(() => "alive")]);
                assert.equal(result, "alive");
                held.kill();
                await held.exited;
                const released = startChild({ kind: "FailOpen", config: childConfig({ heartbeatPeriodMs: 200 }), id: uniqueId("life"), then: "release" }, { timeoutMs: 20000 });
                await released.next(l => l.released);
                const exit = await released.exited;
                assert.equal(exit.code, 0);
                assert.equal(exit.signal, null, "exited on its own, not killed");
            }
        );
    });
}

describe("FailOpen configuration", () =>
{
    it("validates like the original, listing every problem", () =>
        {
            assert.throws(
                () => DynamoDBLockClient.FailOpen({ lockTable: "t", partitionKey: "fencingToken", sortKey: "leaseDurationMs", leaseDurationMs: NaN, heartbeatPeriodMs: Infinity, trustLocalTime: "yes" }),
                e => e.name === "ValidationError"
                    && e.message === "\"partitionKey\" contains an invalid value. \"sortKey\" contains an invalid value. \"heartbeatPeriodMs\" cannot be infinity. \"leaseDurationMs\" must be a number. \"trustLocalTime\" must be a boolean"
            );
        }
    );

    it("accepts a heartbeat period that is not shorter than the lease, as the original does, with a warning", async () =>
        {
            const warned = new Promise(resolve => process.once("warning", resolve));
            assert.doesNotThrow(() => DynamoDBLockClient.FailOpen({ lockTable: "t", partitionKey: "p", leaseDurationMs: 100, heartbeatPeriodMs: 100 }));
            assert.equal((await warned).code, "DYNAMODB_LOCK_NATIVE_UNSAFE_HEARTBEAT");
        }
    );
});
