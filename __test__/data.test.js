"use strict";

// Lock data: acquireLock(id, { data }), lock.data and lock.update({ data }), stored in the
// item's `lockData` attribute (S for a string, B for bytes), guarded by the lock's guid.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, failClosed, failOpen, uniqueId, until, dynamodbOptions } = require("./helpers.js");

const acquireWith = (client, id, options) => new Promise(resolve => client.acquireLock(id, options, (error, lock) => resolve({ error, lock })));
const updateCb = (lock, options) => new Promise(resolve => lock.update(options, error => resolve(error)));

for (const engineName of selectedEngines())
{
    describe(`lock data on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("fifo", { partitionKey: "pk", sortKey: "sk" });
            }
        );
        after(async () => engine && engine.stop());

        const item = id => engine.getItem("locks", { id: { S: id } });

        it("FailOpen: stored with the acquisition, kept by heartbeats, replaced and removed by update", async () =>
            {
                const id = uniqueId("data-open");
                const client = failOpen(engine, { heartbeatPeriodMs: 50, leaseDurationMs: 3000 });
                const lock = await client.acquireLock(id, { data: "job 7, step 1" });
                assert.equal(lock.data, "job 7, step 1");
                assert.deepEqual((await item(id)).lockData, { S: "job 7, step 1" });
                const guid = Buffer.from((await item(id)).guid.B).toString("hex");
                await until(async () => Buffer.from((await item(id)).guid.B).toString("hex") !== guid, 3000, "a heartbeat");
                assert.deepEqual((await item(id)).lockData, { S: "job 7, step 1" }, "a heartbeat keeps the data");

                const bytes = Buffer.from([0, 1, 2, 255]);
                assert.equal(await updateCb(lock, { data: bytes }), undefined);
                assert.deepEqual(lock.data, bytes);
                assert.deepEqual(Buffer.from((await item(id)).lockData.B), bytes);
                bytes[0] = 9;
                assert.equal(lock.data[0], 0, "lock.data is a copy");
                const seen = await failOpen(engine).getLock(id);
                assert.deepEqual(seen.data, Buffer.from([0, 1, 2, 255]), "another client reads it");

                await lock.update({ data: undefined });
                assert.equal(lock.data, undefined);
                assert.equal((await item(id)).lockData, undefined);
                await lock.update({ data: "again" });
                await lock.release();
                assert.equal((await item(id)).lockData.S, "again", "a released item keeps its last holder's data");

                const next = await failOpen(engine).acquireLock(id);
                assert.equal(next.data, undefined);
                assert.equal((await item(id)).lockData, undefined, "the next holder without data leaves none of the last one's");
                await next.release();
            }
        );

        it("FailClosed, callback form: Buffer data; an update after the item was taken away fails with LockLost", async () =>
            {
                const id = uniqueId("data-closed");
                const client = failClosed(engine);
                const { error, lock } = await acquireWith(client, id, { data: Buffer.from("hello") });
                assert.equal(error, undefined);
                assert.deepEqual(lock.data, Buffer.from("hello"));
                assert.deepEqual(Buffer.from((await item(id)).lockData.B), Buffer.from("hello"));
                assert.equal(await updateCb(lock, { data: "text now" }), undefined);
                assert.deepEqual((await item(id)).lockData, { S: "text now" });
                assert.equal((await client.getLock(id)).data, "text now");

                // Someone deletes the item and another holder writes its own.
                await engine.deleteItem("locks", { id: { S: id } });
                const other = await failClosed(engine).acquireLock(id, { data: "theirs" });
                const lost = new Promise(resolve => lock.once("lost", resolve));
                const err = await updateCb(lock, { data: "mine" });
                assert.equal(err.code, "LockLost");
                assert.equal((await lost).code, "LockLost");
                assert.equal(lock.lost, true);
                assert.deepEqual((await item(id)).lockData, { S: "theirs" }, "nothing written over the new holder's");
                await other.release();
            }
        );

        it("a hand-over inside one client writes the next holder's data", async () =>
            {
                const id = uniqueId("data-line");
                const client = failOpen(engine, { heartbeatPeriodMs: 200 });
                const first = await client.acquireLock(id, { data: "first" });
                const second = client.acquireLock(id, { data: "second" });
                const third = client.acquireLock(id);
                await new Promise(resolve => setTimeout(resolve, 50));
                await first.release();
                const lock2 = await second;
                assert.equal(lock2.fencingToken, first.fencingToken + 1);
                assert.deepEqual((await item(id)).lockData, { S: "second" });
                await lock2.release();
                const lock3 = await third;
                assert.equal((await item(id)).lockData, undefined);
                await lock3.release();
            }
        );

        it("refuses data that is not a string or bytes, on Fifo, and with a user object", async () =>
            {
                const client = failOpen(engine);
                await assert.rejects(client.acquireLock(uniqueId("bad"), { data: 5 }), { code: "InvalidArgument" });
                await assert.rejects(client.acquireLock(uniqueId("bad"), { data: { a: 1 } }), { code: "InvalidArgument" });
                const lock = await client.acquireLock(uniqueId("ok"));
                await assert.rejects(lock.update({ data: 5 }), { code: "InvalidArgument" });
                await assert.rejects(lock.update({}), { code: "InvalidArgument" });
                await lock.release();
                await assert.rejects(lock.update({ data: "late" }), { code: "LockLost" });

                const fifo = new DynamoDBLockClient.Fifo({ dynamodb: dynamodbOptions(engine), lockTable: "fifo", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 1000 });
                await assert.rejects(fifo.acquireLock(uniqueId("fifo"), { data: "x" }), { code: "InvalidArgument" });
                const fifoLock = await fifo.acquireLock(uniqueId("fifo"));
                await assert.rejects(fifoLock.update({ data: "x" }), { code: "InvalidArgument" });
                await fifoLock.release();

                const db = { get() {}, put() {}, delete() {} };
                const objectClient = new DynamoDBLockClient.FailClosed({ dynamodb: db, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 10 });
                await assert.rejects(objectClient.acquireLock("x", { data: "x" }), { code: "InvalidArgument" });
            }
        );
    });
}
