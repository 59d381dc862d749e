"use strict";

// client.getLock(id): the lock item as one consistent read finds it, for every kind, with the
// callback and Promise forms, and without writing anything.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, failClosed, failOpen, uniqueId, dynamodbOptions, until } = require("./helpers.js");
const { documentClient } = require("./support/v2.js");
const Original = require("dynamodb-lock-client");

const getLockCb = (client, id) => new Promise(resolve => client.getLock(id, (error, info) => resolve({ error, info })));

for (const engineName of selectedEngines())
{
    describe(`getLock on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("ranged", { partitionKey: "pk", sortKey: "sk", sortType: "N" });
                await engine.createTable("fifo", { partitionKey: "pk", sortKey: "sk" });
            }
        );
        after(async () => engine && engine.stop());

        it("FailOpen: null for an unknown id; held, then released, with owner, token and lease", async () =>
            {
                const id = uniqueId("inspect-open");
                // A lease no busy engine outlasts between the acquisition and the read.
                const mine = failOpen(engine, { owner: "me", heartbeatPeriodMs: 1000, leaseDurationMs: 5000 });
                const other = failOpen(engine, { owner: "other" });
                assert.equal(await mine.getLock(id), null);
                const lock = await mine.acquireLock(id);
                const t0 = Date.now();
                const seen = await mine.getLock(id);
                // When the item was last written (its writer's clock), for people.
                assert.ok(Math.abs(seen.lastWrittenUnixMs - t0) < 5000, JSON.stringify(seen));
                delete seen.lastWrittenUnixMs;
                assert.deepEqual(seen, {
                    owner: "me",
                    fencingToken: lock.fencingToken,
                    leaseDurationMs: 5000,
                    released: false,
                    data: undefined,
                    heldByThisClient: true,
                });
                const fromOther = await other.getLock(id);
                assert.equal(fromOther.heldByThisClient, false, "another client does not hold it");
                assert.equal(fromOther.fencingToken, lock.fencingToken);
                await lock.release();
                const released = await mine.getLock(id);
                assert.equal(released.released, true);
                assert.equal(released.leaseDurationMs, 1);
                assert.equal(released.heldByThisClient, false);
                assert.equal(released.fencingToken, lock.fencingToken, "the released item keeps its token");
            }
        );

        it("stays right across heartbeats that rotate the guid, and reads without writing", async () =>
            {
                const id = uniqueId("inspect-hb");
                const client = failOpen(engine, { heartbeatPeriodMs: 50, leaseDurationMs: 3000 });
                const lock = await client.acquireLock(id);
                const guidOf = async () => Buffer.from((await engine.getItem("locks", { id: { S: id } })).guid.B).toString("hex");
                const first = await guidOf();
                await until(async () => (await guidOf()) !== first, 3000, "a heartbeat");
                for (let i = 0; i < 10; i++)
                {
                    assert.equal((await client.getLock(id)).heldByThisClient, true, `read ${i}`);
                }
                await lock.release();
                // A read leaves the item as it is: the same guid and lease after it as before.
                const before = await engine.getItem("locks", { id: { S: id } });
                await client.getLock(id);
                assert.deepEqual(await engine.getItem("locks", { id: { S: id } }), before);
            }
        );

        it("FailClosed, callback form: held by this client, gone after release; object ids with a sort key", async () =>
            {
                const id = uniqueId("inspect-closed");
                const client = failClosed(engine, { owner: "closer" });
                const lock = await client.acquireLock(id);
                const { error, info } = await getLockCb(client, id);
                assert.equal(error, undefined);
                assert.ok(Math.abs(info.lastWrittenUnixMs - Date.now()) < 5000, JSON.stringify(info));
                delete info.lastWrittenUnixMs;
                assert.deepEqual(info, {
                    owner: "closer",
                    fencingToken: undefined,
                    leaseDurationMs: undefined,
                    released: false,
                    data: undefined,
                    heldByThisClient: true,
                });
                await lock.release();
                assert.deepEqual(await getLockCb(client, id), { error: undefined, info: null });

                const ranged = failClosed(engine, { lockTable: "ranged", partitionKey: "pk", sortKey: "sk" });
                const key = { pk: uniqueId("inspect-ranged"), sk: 0 };
                const held = await ranged.acquireLock(key);
                assert.equal((await ranged.getLock(key)).heldByThisClient, true);
                assert.equal(await ranged.getLock({ pk: key.pk, sk: 1 }), null);
                await held.release();
            }
        );

        it("reads a lock the original library holds", async () =>
            {
                const id = uniqueId("inspect-original");
                const original = new Original.FailOpen({
                    dynamodb: documentClient(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000, owner: "original",
                });
                const lock = await new Promise((resolve, reject) => original.acquireLock(id, (e, l) => (e ? reject(e) : resolve(l))));
                lock.on("error", () => {});
                const info = await failOpen(engine).getLock(id);
                assert.equal(info.owner, "original");
                assert.equal(info.fencingToken, lock.fencingToken);
                assert.equal(info.released, false);
                assert.equal(info.heldByThisClient, false);
                await new Promise(resolve => lock.release(() => resolve()));
                assert.equal((await failOpen(engine).getLock(id)).released, true);
            }
        );

        it("Fifo: reads a resource's lock by its id", async () =>
            {
                const id = uniqueId("inspect-fifo");
                const fifo = new DynamoDBLockClient.Fifo({
                    dynamodb: dynamodbOptions(engine), lockTable: "fifo", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 1000,
                });
                assert.equal(await fifo.getLock(id), null);
                const lock = await fifo.acquireLock(id);
                const info = await fifo.getLock(id);
                assert.equal(info.fencingToken, lock.fencingToken);
                assert.equal(info.released, false);
                assert.equal(info.heldByThisClient, true);
                await lock.release();
                const after = await fifo.getLock(id);
                assert.equal(after.released, true);
                assert.equal(after.heldByThisClient, false);
            }
        );

        it("rejects an invalid id with InvalidLockId, and a user object of get/put/delete", async () =>
            {
                await assert.rejects(failOpen(engine).getLock(undefined), { code: "InvalidLockId" });
                const db = { get() {}, put() {}, delete() {} };
                const client = new DynamoDBLockClient.FailOpen({ dynamodb: db, lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000 });
                await assert.rejects(client.getLock("x"), { code: "InvalidArgument" });
            }
        );
    });
}
