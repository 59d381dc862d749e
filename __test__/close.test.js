"use strict";

// client.close({ releaseLocks }): pending acquisitions fail with ClientClosed, held locks are
// released each on its own (or abandoned), later acquisitions fail, and the process exits.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, failClosed, failOpen, uniqueId, sleep, until } = require("./helpers.js");
const { runScript } = require("./support/spawn.js");
const { startProxy } = require("./support/proxy.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

for (const engineName of selectedEngines())
{
    describe(`close on ${engineName}`, { timeout: 180000 }, () =>
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

        const fifo = extra => new DynamoDBLockClient.Fifo(Object.assign(
            { dynamodb: dynamodbOptions(engine), lockTable: "fifo", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 1000 }, extra));

        it("FailOpen: releases every held lock, fails the pending acquisition with ClientClosed, refuses new ones", async () =>
            {
                const [a, b, busy] = [uniqueId("close-a"), uniqueId("close-b"), uniqueId("close-busy")];
                const other = failOpen(engine, { heartbeatPeriodMs: 200 });
                const blocker = await other.acquireLock(busy);
                const client = failOpen(engine, { heartbeatPeriodMs: 200, retryCount: 100 });
                const la = await client.acquireLock(a);
                const lb = await client.acquireLock(b);
                const pending = client.acquireLock(busy).then(() => "acquired", e => e.code);
                await sleep(100);
                const outcomes = await client.close({ releaseLocks: true });
                assert.deepEqual(outcomes.map(o => [o.id, o.fencingToken, o.released, o.error]).sort(),
                    [[a, 1, true, undefined], [b, 1, true, undefined]]);
                assert.equal(await pending, "ClientClosed");
                for (const id of [a, b])
                {
                    const item = await engine.getItem("locks", { id: { S: id } });
                    assert.equal(item.leaseDurationMs.N, "1", `${id} is released`);
                }
                assert.equal(la.lost, false);
                assert.equal(lb.lost, false);
                // After close: Promise and callback forms fail with ClientClosed.
                await assert.rejects(client.acquireLock(uniqueId("after")), { code: "ClientClosed" });
                const viaCallback = await new Promise(resolve => client.acquireLock(uniqueId("after"), (error, lock) => resolve({ error, lock })));
                assert.equal(viaCallback.error.code, "ClientClosed");
                assert.equal(viaCallback.lock, undefined);
                // The blocker still holds its lock: the cancelled waiter left it alone.
                const item = await engine.getItem("locks", { id: { S: busy } });
                assert.equal(item.leaseDurationMs.N, "1000");
                await blocker.release();
                // Closing again answers the first close's outcomes.
                assert.deepEqual(await client.close(), outcomes);
                await other.close();
            }
        );

        it("FailOpen without releaseLocks: heartbeats stop, the lease lapses, another client takes over", async () =>
            {
                const id = uniqueId("close-abandon");
                const client = failOpen(engine, { leaseDurationMs: 800, heartbeatPeriodMs: 200 });
                const lock = await client.acquireLock(id);
                const outcomes = await new Promise((resolve, reject) =>
                    client.close({ releaseLocks: false }, (error, value) => (error ? reject(error) : resolve(value))));
                assert.deepEqual(outcomes, [{ id, fencingToken: 1, released: false }]);
                // A heartbeat already on the wire when close() was called (the first one is due
                // at a random point of the period, so now and then within the acquisition's
                // round trip) may still land, at whatever moment a busy engine gets to it. Over
                // the next second (five periods) the item may change that once, and no more:
                // heartbeats that went on would rotate its guid about every 200 ms.
                const guids = [];
                for (let t = 0; t < 20; t++)
                {
                    guids.push(Buffer.from((await engine.getItem("locks", { id: { S: id } })).guid.B).toString("hex"));
                    await sleep(50);
                }
                const changes = guids.filter((g, i) => i > 0 && g !== guids[i - 1]).length;
                assert.ok(changes <= 1, `no heartbeat after close: the guid changed ${changes} times in a second`);
                const after = await engine.getItem("locks", { id: { S: id } });
                assert.equal(after.leaseDurationMs.N, "800", "not released");
                const next = await failOpen(engine, { leaseDurationMs: 800, retryCount: 5 }).acquireLock(id);
                assert.equal(next.fencingToken, 2);
                // The abandoned lock's lease ended before the rival was granted: it is lost.
                assert.equal(lock.lost, true);
                assert.equal(lock.signal.reason.code, "LeaseExpired");
                await next.release();
            }
        );

        for (const kind of ["FailOpen", "Fifo"])
        {
            it(`${kind} without releaseLocks: the abandoned lock counts its lease down, then is lost once at its end`, async () =>
                {
                    const id = uniqueId("close-lapse");
                    const client = kind === "Fifo" ? fifo({ leaseDurationMs: 2000 }) : failOpen(engine, { leaseDurationMs: 2000, heartbeatPeriodMs: 500 });
                    const lock = await client.acquireLock(id);
                    const lost = [];
                    lock.on("lost", error => lost.push({ error, at: Date.now() }));
                    const signal = lock.signal;
                    const closedAt = Date.now();
                    await client.close();
                    const closeMs = Date.now() - closedAt;
                    assert.ok(closeMs < 1000, `close() does not wait for the lease: ${closeMs} ms`);
                    // Held until its lease ends, and it says so.
                    const first = lock.leaseRemainingMs;
                    assert.ok(first > 500 && first <= 2000, `lease left after close: ${first}`);
                    assert.equal(lock.lost, false);
                    assert.equal(signal.aborted, false);
                    await sleep(300);
                    const second = lock.leaseRemainingMs;
                    assert.ok(second < first && second > 0, `it counts down: ${first} then ${second}`);
                    await until(async () => lost.length > 0, 4000, "the lost event");
                    const lostMs = lost[0].at - closedAt;
                    assert.ok(lostMs >= first - 300 && lostMs <= first + 1000, `"lost" ${lostMs} ms after close, lease left was ${first}`);
                    assert.equal(lost[0].error.code, "LeaseExpired");
                    assert.equal(lock.lost, true);
                    assert.equal(lock.leaseRemainingMs, 0);
                    assert.equal(signal.aborted, true);
                    assert.equal(signal.reason.code, "LeaseExpired");
                    if (kind === "FailOpen")
                    {
                        await assert.rejects(lock.update({ data: "late" }), { code: "LeaseExpired" });
                    }
                    await sleep(500);
                    assert.equal(lost.length, 1, "\"lost\" is emitted once");
                }
            );
        }

        it("releaseLocks releases a lock whose lease ran out when its item is still ours, and not one a rival took", async () =>
            {
                const [mine, taken] = [uniqueId("close-lapsed"), uniqueId("close-lapsed-taken")];
                // Heartbeats slower than the lease: each lock lapses.
                const client = failOpen(engine, { leaseDurationMs: 1000, heartbeatPeriodMs: 3000 });
                const locks = [await client.acquireLock(mine), await client.acquireLock(taken)];
                const lost = locks.map(lock => new Promise(resolve => lock.once("lost", resolve)));
                assert.deepEqual((await Promise.all(lost)).map(e => e.code), ["LeaseExpired", "LeaseExpired"]);
                const rival = failOpen(engine, { leaseDurationMs: 10000, retryCount: 5 });
                const rivals = await rival.acquireLock(taken);
                assert.equal(rivals.fencingToken, 2);
                const outcomes = await client.close({ releaseLocks: true });
                const byId = Object.fromEntries(outcomes.map(o => [o.id, o]));
                assert.equal(outcomes.length, 2, JSON.stringify(outcomes));
                assert.equal(byId[mine].released, true);
                assert.equal(byId[mine].fencingToken, 1);
                assert.equal((await engine.getItem("locks", { id: { S: mine } })).leaseDurationMs.N, "1", "released: a waiter need not wait");
                assert.equal(byId[taken].released, false);
                assert.equal(byId[taken].error.code, "FailedToReleaseLock");
                assert.equal((await engine.getItem("locks", { id: { S: taken } })).fencingToken.N, "2", "the rival's lock is left alone");
                await rivals.release();
                await rival.close();
            }
        );

        it("releaseLocks does not report as released a lock a rival was granted before the holder heard of it", async () =>
            {
                const id = uniqueId("close-rival");
                const client = failOpen(engine, { leaseDurationMs: 10000, heartbeatPeriodMs: 5000 });
                const lock = await client.acquireLock(id);
                // A rival's grant, as a forced release followed by another acquisition leaves it.
                const item = await engine.getItem("locks", { id: { S: id } });
                await engine.putItem("locks", Object.assign({}, item,
                    { owner: { S: "rival" }, guid: { B: Buffer.alloc(64, 9) }, fencingToken: { N: "2" } }));
                const outcomes = await client.close({ releaseLocks: true });
                assert.equal(outcomes.length, 1);
                assert.equal(outcomes[0].released, false);
                assert.equal(outcomes[0].error.code, "FailedToReleaseLock");
                const after = await engine.getItem("locks", { id: { S: id } });
                assert.equal(after.owner.S, "rival");
                assert.equal(after.leaseDurationMs.N, "10000");
                // The lock's own release stays quiet, as the original's.
                await lock.release();
            }
        );

        it("FailClosed: one failed release does not stop the others", async () =>
            {
                const ids = [uniqueId("close-c1"), uniqueId("close-c2"), uniqueId("close-c3")];
                const client = failClosed(engine);
                for (const id of ids)
                {
                    await client.acquireLock(id);
                }
                // The second lock's item changes under it: its guid is no longer ours.
                await engine.putItem("locks", { id: { S: ids[1] }, owner: { S: "someone else" }, guid: { B: Buffer.alloc(64, 7) } });
                const outcomes = await client.close({ releaseLocks: true });
                const byId = Object.fromEntries(outcomes.map(o => [o.id, o]));
                assert.equal(byId[ids[0]].released, true);
                assert.equal(byId[ids[1]].released, false);
                assert.equal(byId[ids[1]].error.code, "FailedToReleaseLock");
                assert.equal(byId[ids[2]].released, true);
                assert.equal(await engine.getItem("locks", { id: { S: ids[0] } }), undefined);
                assert.equal((await engine.getItem("locks", { id: { S: ids[1] } })).owner.S, "someone else");
                assert.equal(await engine.getItem("locks", { id: { S: ids[2] } }), undefined);
                assert.deepEqual(client.metrics().releases, { succeeded: 2, failed: 1 });
                assert.equal(client.metrics().locks.held, 0);
            }
        );

        it("FailOpen through a faulty connection: the release that keeps failing is reported, the others succeed", async () =>
            {
                const proxy = await startProxy({ target: engine.endpoint });
                try
                {
                    const ids = [uniqueId("close-f1"), uniqueId("close-f2")];
                    const client = failOpen(engine, { dynamodb: dynamodbOptions(engine, proxy.endpoint), requestTimeoutMs: 300 });
                    for (const id of ids)
                    {
                        await client.acquireLock(id);
                    }
                    // Every write for the first id is refused by the service.
                    proxy.onRequest = (op, body) => (JSON.stringify(body).includes(ids[0])
                        ? { respond: { status: 400, type: "com.amazonaws.dynamodb.v20120810#ValidationException", message: "refused" } }
                        : null);
                    const outcomes = await client.close({ releaseLocks: true });
                    const byId = Object.fromEntries(outcomes.map(o => [o.id, o]));
                    assert.equal(byId[ids[0]].released, false);
                    assert.equal(byId[ids[0]].error.code, "ValidationException");
                    assert.equal(byId[ids[1]].released, true);
                    assert.equal((await engine.getItem("locks", { id: { S: ids[0] } })).leaseDurationMs.N, "1000");
                    assert.equal((await engine.getItem("locks", { id: { S: ids[1] } })).leaseDurationMs.N, "1");
                }
                finally
                {
                    await proxy.close();
                }
            }
        );

        it("Fifo: releases the held lock and cancels a waiter in the queue", async () =>
            {
                const resource = uniqueId("close-fifo");
                const other = fifo();
                const first = await other.acquireLock(resource);
                const client = fifo();
                const waiting = client.acquireLock(resource, { waitMs: 20000 }).then(() => "acquired", e => e.code);
                const mine = await client.acquireLock(uniqueId("close-fifo-own"));
                await sleep(200);
                const outcomes = await client.close({ releaseLocks: true });
                assert.equal(await waiting, "ClientClosed");
                assert.equal(outcomes.length, 1);
                assert.equal(outcomes[0].released, true);
                assert.equal(outcomes[0].fencingToken, mine.fencingToken);
                // The cancelled waiter left the queue: the next one is served after `first`.
                await first.release();
                const next = await other.acquireLock(resource, { waitMs: 5000 });
                assert.ok(next.fencingToken > first.fencingToken);
                await next.release();
                await other.close();
            }
        );

        it("a duck-typed dynamodb object: close cancels the wait and releases", async () =>
            {
                const items = new Map();
                const db =
                {
                    get: (p, cb) => setImmediate(cb, null, { Item: items.get(p.Key.id) }),
                    put: (p, cb) => setImmediate(() =>
                    {
                        if (p.ConditionExpression && p.ConditionExpression.startsWith("attribute_not_exists") && items.has(p.Item.id))
                        {
                            return cb(Object.assign(new Error("held"), { code: "ConditionalCheckFailedException" }));
                        }
                        items.set(p.Item.id, p.Item);
                        cb(null, {});
                    }),
                    delete: (p, cb) => setImmediate(() => { items.delete(p.Key.id); cb(null, {}); }),
                };
                const client = new DynamoDBLockClient.FailClosed({ dynamodb: db, lockTable: "t", partitionKey: "id", acquirePeriodMs: 20, retryCount: 1000 });
                const other = new DynamoDBLockClient.FailClosed({ dynamodb: db, lockTable: "t", partitionKey: "id", acquirePeriodMs: 20 });
                await other.acquireLock("busy");
                await client.acquireLock("mine");
                const waiting = client.acquireLock("busy").then(() => "acquired", e => e.code);
                await sleep(60);
                const outcomes = await client.close({ releaseLocks: true });
                assert.equal(await waiting, "ClientClosed");
                assert.deepEqual(outcomes, [{ id: "mine", fencingToken: undefined, released: true }]);
                assert.equal(items.has("mine"), false);
                assert.equal(items.has("busy"), true);
            }
        );

        for (const releaseLocks of [true, false])
        {
            it(`a process that closes its client (releaseLocks: ${releaseLocks}) exits by itself`, async () =>
                {
                    const busy = uniqueId("close-child-busy");
                    const blocker = await failOpen(engine, { heartbeatPeriodMs: 200 }).acquireLock(busy);
                    const ids = [uniqueId("close-child-1"), uniqueId("close-child-2")];
                    const child = runScript("close-child.js", {
                        kind: "FailOpen",
                        config: { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 2000, heartbeatPeriodMs: 200, retryCount: 1000 },
                        ids,
                        pendingId: busy,
                        releaseLocks,
                    }, { timeoutMs: 20000 });
                    const exit = await child.exited;
                    assert.equal(exit.signal, null, `exited by itself, not killed after 20 s: ${JSON.stringify(child.lines)}`);
                    assert.equal(exit.code, 0);
                    assert.deepEqual(child.lines, [
                        { held: 2 },
                        { pending: "ClientClosed" },
                        { closed: ids.map(id => ({ id, released: releaseLocks })) },
                    ]);
                    for (const id of ids)
                    {
                        const item = await engine.getItem("locks", { id: { S: id } });
                        assert.equal(item.leaseDurationMs.N, releaseLocks ? "1" : "2000");
                    }
                    await blocker.release();
                }
            );
        }
    });
}
