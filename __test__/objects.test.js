"use strict";

// A user `dynamodb` object (get/put/delete) through the native core: the caller gets the very
// error objects the object gave, heartbeats retry a failure while the lease lasts, a failed
// heartbeat condition loses the lock, a release waits for a heartbeat in flight and writes its
// guid, and a lease counts from when the winning put was sent. The object here keeps items in
// a Map and checks the original's conditions; each method may be slowed down or made to fail.

const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { DynamoDBLockClient, sleep } = require("./helpers.js");

function conditionFailed()
{
    return Object.assign(new Error("The conditional request failed"), { code: "ConditionalCheckFailedException" });
}

// The original's conditions over a Map keyed by the partition value.
function mapObject()
{
    const items = new Map();
    const log = [];
    const hooks = { put: [], get: [], delete: [] };
    const sameGuid = (item, g) => Boolean(item) && Buffer.from(item.guid).equals(Buffer.from(g));
    const holds = (p, current) =>
    {
        const v = p.ExpressionAttributeValues || {};
        switch (p.ConditionExpression)
        {
            case "attribute_not_exists(#partitionKey)":
                return !current;
            case "attribute_not_exists(#partitionKey) or (guid = :guid and fencingToken = :fencingToken)":
                return !current || (sameGuid(current, v[":guid"]) && current.fencingToken === v[":fencingToken"]);
            case "attribute_exists(#partitionKey) and guid = :guid":
                return sameGuid(current, v[":guid"]);
            default:
                throw new Error(`unexpected condition ${p.ConditionExpression}`);
        }
    };
    // Runs the next hook for `method`, if any: it may answer instead (an error) or delay.
    const hooked = async (method, p) =>
    {
        const hook = hooks[method].shift();
        return hook ? hook(p) : undefined;
    };
    const db =
    {
        get: (p, cb) =>
        {
            log.push(["get", p]);
            hooked("get", p).then(error => setImmediate(() => (error ? cb(error) : cb(null, { Item: items.get(p.Key.id) }))));
        },
        put: (p, cb) =>
        {
            log.push(["put", p]);
            hooked("put", p).then(error => setImmediate(() =>
            {
                if (error)
                {
                    return cb(error);
                }
                if (!holds(p, items.get(p.Item.id)))
                {
                    return cb(conditionFailed());
                }
                items.set(p.Item.id, p.Item);
                cb(null, {});
            }));
        },
        delete: (p, cb) =>
        {
            log.push(["delete", p]);
            hooked("delete", p).then(error => setImmediate(() =>
            {
                if (error)
                {
                    return cb(error);
                }
                if (!holds(p, items.get(p.Key.id)))
                {
                    return cb(conditionFailed());
                }
                items.delete(p.Key.id);
                cb(null, {});
            }));
        },
    };
    return { db, items, log, hooks };
}

const config = { lockTable: "locks", partitionKey: "id" };

describe("a user dynamodb object through the native core", () =>
{
    it("FailedToAcquireLock carries the object's own condition error; other errors are the object's own", async () =>
        {
            const { db } = mapObject();
            const client = new DynamoDBLockClient.FailClosed(Object.assign({ dynamodb: db, acquirePeriodMs: 10, retryCount: 1 }, config));
            const held = await client.acquireLock("a");
            const err = await client.acquireLock("a").then(() => assert.fail("acquired a held lock"), e => e);
            assert.equal(err.code, "FailedToAcquireLock");
            assert.equal(err.message, "Failed to acquire lock.", "the original's message");
            assert.equal(err.originalError.message, "The conditional request failed");
            assert.equal(err.originalError.code, "ConditionalCheckFailedException");
            const boom = Object.assign(new Error("boom"), { code: "SomethingElse", extra: 42 });
            const other = mapObject();
            other.hooks.put.push(async () => boom);
            const failing = new DynamoDBLockClient.FailClosed(Object.assign({ dynamodb: other.db, acquirePeriodMs: 10 }, config));
            await assert.rejects(failing.acquireLock("b"), e => e === boom);
            await held.release();
        }
    );

    it("a failed heartbeat emits the object's error and is retried while the lease lasts; the lock is kept", async () =>
        {
            const { db, hooks, log } = mapObject();
            const client = new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: db, leaseDurationMs: 1000, heartbeatPeriodMs: 100 }, config));
            const lock = await client.acquireLock("hb");
            const boom = Object.assign(new Error("slow down"), { code: "ProvisionedThroughputExceededException" });
            hooks.put.push(async () => boom);
            const errors = [];
            lock.on("error", e => errors.push(e));
            const puts = () => log.filter(l => l[0] === "put").length;
            const before = puts();
            for (let i = 0; i < 100 && puts() < before + 3; i++)
            {
                await sleep(20);
            }
            assert.ok(puts() >= before + 3, "heartbeats went on after the failure");
            assert.equal(errors[0], boom, "the object's own error");
            assert.equal(lock.lost, false);
            assert.ok(lock.leaseRemainingMs > 0);
            const m = client.metrics();
            assert.equal(m.heartbeats.failed, 1);
            assert.equal(m.requests.PutItem.throttled, 1);
            await lock.release();
            assert.equal(lock.leaseRemainingMs, 0);
        }
    );

    it("a heartbeat refused by its condition loses the lock", async () =>
        {
            const { db, items } = mapObject();
            const client = new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: db, leaseDurationMs: 1000, heartbeatPeriodMs: 50 }, config));
            const lock = await client.acquireLock("taken");
            lock.on("error", () => {});
            const lost = new Promise(resolve => lock.once("lost", resolve));
            items.set("taken", Object.assign({}, items.get("taken"), { guid: Buffer.alloc(64, 9) }));
            const err = await Promise.race([lost, sleep(2000).then(() => assert.fail("no lost event"))]);
            assert.equal(err.code, "LockLost");
            assert.equal(lock.lost, true);
            await lock.release();
        }
    );

    it("a slow heartbeat warns with \"danger\"; one that never answers loses the lock at the lease's end", async () =>
        {
            const { db, hooks } = mapObject();
            const client = new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: db, leaseDurationMs: 600, heartbeatPeriodMs: 100 }, config));
            const lock = await client.acquireLock("hung");
            lock.on("error", () => {});
            const danger = new Promise(resolve => lock.once("danger", resolve));
            const lost = new Promise(resolve => lock.once("lost", resolve));
            // Every heartbeat from now on hangs: the object never calls back.
            for (let i = 0; i < 20; i++)
            {
                hooks.put.push(() => new Promise(() => {}));
            }
            const warned = await Promise.race([danger, sleep(2000).then(() => assert.fail("no danger event"))]);
            assert.ok(warned.remainingMs > 0 && warned.remainingMs <= 600, JSON.stringify(warned));
            const err = await Promise.race([lost, sleep(2000).then(() => assert.fail("no lost event while the heartbeat hangs"))]);
            assert.equal(err.code, "LeaseExpired");
            assert.equal(lock.leaseRemainingMs, 0);
            hooks.put.length = 0;
        }
    );

    it("a release waits for a heartbeat in flight and writes its guid; no heartbeat follows", async () =>
        {
            const { db, hooks, log } = mapObject();
            const client = new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: db, leaseDurationMs: 2000, heartbeatPeriodMs: 100 }, config));
            const lock = await client.acquireLock("order");
            let inFlight;
            const started = new Promise(resolve => hooks.put.push(p => (resolve(p), (inFlight = sleep(150)).then(() => undefined))));
            const beat = await started;
            await lock.release();
            await inFlight;
            const puts = log.filter(l => l[0] === "put").map(l => l[1]);
            const release = puts[puts.length - 1];
            assert.equal(release.Item.leaseDurationMs, 1);
            assert.ok(Buffer.from(release.ExpressionAttributeValues[":guid"]).equals(beat.Item.guid), "the heartbeat's new guid");
            assert.ok(Buffer.from(release.Item.guid).equals(beat.Item.guid));
            const count = puts.length;
            await sleep(300);
            assert.equal(log.filter(l => l[0] === "put").length, count, "no heartbeat after release");
        }
    );

    it("a lease counts from when the winning put was sent, not from its answer", async () =>
        {
            const { db, hooks } = mapObject();
            const client = new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: db, leaseDurationMs: 1000 }, config));
            hooks.put.push(() => sleep(400).then(() => undefined));
            const lock = await client.acquireLock("slow");
            assert.ok(lock.leaseRemainingMs <= 620, `${lock.leaseRemainingMs} ms left of a 1000 ms lease whose put took 400 ms`);
            assert.ok(lock.leaseRemainingMs > 0);
            await lock.release();
        }
    );

    it("two acquisitions of one id by one client each speak to the object, as in the original", async () =>
        {
            const { db, log } = mapObject();
            const client = new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: db, leaseDurationMs: 200, retryCount: 0 }, config));
            const first = await client.acquireLock("twice");
            const second = client.acquireLock("twice");
            await sleep(50);
            await first.release();
            const lock = await second;
            assert.equal(lock.fencingToken, 2);
            assert.deepEqual(log.map(l => l[0]), ["get", "put", "get", "put", "put"], "read, put; read, release, put after the wait");
            await lock.release();
        }
    );
});
