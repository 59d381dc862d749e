"use strict";

// Semaphore and ReadWriteLock (lib/semaphore.js) on both engines: permits counted and granted
// in ticket order, shared and exclusive holds, validation, a holder SIGKILLed and reclaimed, and
// histories of several processes (support/semaphore-worker.js) through the fault proxy under
// throttling and dropped requests, with a process SIGKILLed mid-run, checked offline
// (support/permits-history.js): never more than the permits held at once, unique tokens rising
// in grant order, every reported release visible.
//
//   node --test --test-concurrency=1 __test__/semaphore.test.js                (both engines)
//   DDB_ENGINES=dynalite node --test __test__/semaphore.test.js

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { EventEmitter } = require("events");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, uniqueId, sleep, until, dynamodbOptions } = require("./helpers.js");
const { runScript } = require("./support/spawn.js");
const { startProxy } = require("./support/proxy.js");
const { mulberry32 } = require("./support/random.js");
const { checkPermitHistory, peakPermits, holdersOfItem } = require("./support/permits-history.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const { Semaphore, ReadWriteLock, Fifo, createTable, showLock } = DynamoDBLockClient;

const TABLE = "sem";
const LEASE = 1000;
const READ_WRITE_PERMITS = 2 ** 40;

// Whether a promise has settled, without waiting for it.
function track(promise)
{
    const state = { settled: false, value: undefined, error: undefined, at: undefined };
    state.promise = promise.then(
        value =>
        {
            Object.assign(state, { settled: true, value, at: Date.now() });
            return value;
        },
        error =>
        {
            Object.assign(state, { settled: true, error, at: Date.now() });
            throw error;
        });
    state.promise.catch(() => {});
    return state;
}

describe("permit history checker", () =>
{
    let n = 0;
    const s = (owner, token, permits, start, end, extra) => Object.assign(
        { process: owner.slice(0, 2), owner, token, permits, asked: start - 5, start, end, releaseOk: true, after: { heldBySelf: false }, i: n++ }, extra);
    const sound = () => [
        s("p1c0", 1, 1, 0, 30),
        s("p1c1", 2, 2, 5, 20),
        s("p2c0", 3, 2, 21, 40),
        s("p2c1", 4, 1, 31, 50),
        s("p3c0", 5, 3, 51, 60),
    ];

    it("accepts a sound history, with its final holders", () =>
    {
        assert.deepEqual(checkPermitHistory(sound(), { limit: 3 }), []);
        const crashed = s("p3c1", 6, 2, 70, 80, { crashed: true, releaseOk: undefined });
        assert.deepEqual(checkPermitHistory([...sound(), crashed], { limit: 3, finalHolders: [{ owner: "p3c1", permits: 2 }], finalPermitsHeld: 2 }), []);
    });

    it("rejects more than the permits held at once, beyond the clock bound only", () =>
    {
        const over = sound().map(x => (x.token === 2 ? Object.assign(x, { permits: 3 }) : x));
        const v = checkPermitHistory(over, { limit: 3 });
        assert.equal(v.length, 1, v.join("\n"));
        assert.match(v[0], /more than 3 permits held at .*: 4 by /);
        // Holds of 2 and 2 overlapping by 2 ms are within the bound; by 3 ms they are not.
        const pair = overlap => [s("a", 1, 2, 0, 10), s("b", 2, 2, 10 - overlap, 20, { asked: -1 })];
        assert.deepEqual(checkPermitHistory(pair(2), { limit: 3 }), []);
        assert.equal(checkPermitHistory(pair(3), { limit: 3 }).length, 1);
        assert.equal(checkPermitHistory(pair(1), { limit: 3, clockBoundMs: 0 }).length, 1);
        // An exclusive hold of a ReadWriteLock overlapping a shared one.
        const rw = [s("a", 1, 1, 0, 10), s("b", 2, READ_WRITE_PERMITS, 5, 20, { asked: -1 })];
        assert.equal(checkPermitHistory(rw, { limit: READ_WRITE_PERMITS }).length, 1);
        assert.deepEqual(checkPermitHistory([s("a", 1, 1, 0, 10), s("b", 2, 1, 5, 20, { asked: -1 })], { limit: READ_WRITE_PERMITS }), [],
            "shared holds overlap");
    });

    it("ends a hold where it was reported lost", () =>
    {
        const h = [s("a", 1, 3, 0, 100, { lostAt: 40 }), s("b", 2, 1, 50, 60)];
        assert.deepEqual(checkPermitHistory(h, { limit: 3 }), []);
        assert.equal(checkPermitHistory([s("a", 1, 3, 0, 100, { lostAt: 55 }), s("b", 2, 1, 50, 60)], { limit: 3 }).length, 1);
    });

    it("rejects a token granted twice", () =>
    {
        // Two sections granted together, neither before the other was asked for.
        const v = checkPermitHistory(sound().map(x => (x.token === 2 ? Object.assign(x, { token: 1 }) : x)), { limit: 3 });
        assert.equal(v.length, 1, v.join("\n"));
        assert.match(v[0], /token 1 granted twice/);
    });

    it("rejects a token below one granted before it was asked for, and allows any order otherwise", () =>
    {
        const v = checkPermitHistory([s("a", 5, 1, 0, 10), s("b", 4, 1, 20, 30, { asked: 12 })], { limit: 3 });
        assert.equal(v.length, 1, v.join("\n"));
        assert.match(v[0], /tokens out of order/);
        // b asked before a's grant reached a: b may have been granted first and learnt it late.
        assert.deepEqual(checkPermitHistory([s("a", 5, 1, 0, 10), s("b", 4, 1, 20, 30, { asked: -3 })], { limit: 3 }), []);
        assert.deepEqual(checkPermitHistory([s("a", 5, 1, 0, 10), s("b", 4, 1, 20, 30, { asked: 2 })], { limit: 3 }), [], "within the clock bound");
    });

    it("rejects a reported release that is not visible", () =>
    {
        const v = checkPermitHistory([s("a", 1, 1, 0, 10, { after: { heldBySelf: true } })], { limit: 3 });
        assert.match(v[0], /reported success, and the head read after it still names its client/);
        const f = checkPermitHistory(sound(), { limit: 3, finalHolders: [{ owner: "p2c1", permits: 1 }], finalPermitsHeld: 1 });
        assert.equal(f.length, 1, f.join("\n"));
        assert.match(f[0], /the final read names p2c1/);
        const sum = checkPermitHistory(sound(), { limit: 3, finalHolders: [], finalPermitsHeld: 2 });
        assert.match(sum[0], /counts 2 permits held, and its holders hold 0/);
        assert.deepEqual(checkPermitHistory([s("a", 1, 1, 0, 10, { releaseOk: false, after: { heldBySelf: true } })], { limit: 3 }), [],
            "a release that reported failure promises nothing");
    });
});

describe("Semaphore and ReadWriteLock configuration", () =>
{
    // Never used to reach a table: nothing listens there.
    const dynamodb = { endpoint: "http://127.0.0.1:9", region: "us-east-1", credentials: { accessKeyId: "dummy", secretAccessKey: "dummy" } };
    const base = { dynamodb, lockTable: TABLE, partitionKey: "id", sortKey: "entry", leaseDurationMs: LEASE };

    it("refuses permits that are not an integer from 1 to 2^31 - 1, synchronously", () =>
    {
        for (const permits of [undefined, 0, -1, 1.5, "3", NaN, Infinity, 2 ** 31, null])
        {
            assert.throws(() => new Semaphore(Object.assign({}, base, { permits })),
                e => e.name === "ValidationError" && /"permits" must be an integer from 1 to 2147483647/.test(e.message)
                    && e.details[0].path[0] === "permits",
                `permits ${String(permits)}`);
        }
        const made = [new Semaphore(Object.assign({}, base, { permits: 2 ** 31 - 1 })), Semaphore(Object.assign({}, base, { permits: 1 }))];
        assert.ok(made.every(c => c instanceof Semaphore), "2^31 - 1 is allowed; callable without new");
        return Promise.all(made.map(c => c.close()));
    });

    it("refuses permits on a ReadWriteLock, and the options of Fifo are still checked", () =>
    {
        assert.throws(() => new ReadWriteLock(Object.assign({}, base, { permits: 2 })),
            e => e.name === "ValidationError" && /"permits" is not an option of ReadWriteLock/.test(e.message));
        const rw = ReadWriteLock(base);
        assert.ok(rw instanceof ReadWriteLock, "callable without new");
        assert.throws(() => new Semaphore({ lockTable: TABLE, partitionKey: "id", leaseDurationMs: LEASE, permits: 2 }),
            e => e.name === "ValidationError" && /"sortKey" is required/.test(e.message));
        assert.throws(() => new ReadWriteLock({ lockTable: TABLE, partitionKey: "id", leaseDurationMs: LEASE }),
            e => e.name === "ValidationError" && /"sortKey" is required/.test(e.message));
        return rw.close();
    });
});

for (const engineName of selectedEngines())
{
    describe(`Semaphore and ReadWriteLock on ${engineName}`, { timeout: 300000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                // No ttlAttribute: dynalite has no UpdateTimeToLive.
                await createTable({ dynamodb: dynamodbOptions(engine), lockTable: TABLE, partitionKey: "id", sortKey: "entry" });
            }
        );
        after(async () => engine && engine.stop());

        const config = extra => Object.assign(
            { dynamodb: dynamodbOptions(engine), lockTable: TABLE, partitionKey: "id", sortKey: "entry", leaseDurationMs: LEASE },
            extra);
        const semaphore = (permits, extra) => new Semaphore(config(Object.assign({ permits }, extra)));
        const readWrite = extra => new ReadWriteLock(config(extra));
        const show = id => showLock({ dynamodb: dynamodbOptions(engine), lockTable: TABLE, id });
        const headItem = id => engine.getItem(TABLE, { id: { S: id }, entry: { S: "lock" } });
        const waitersOf = async id => ((await show(id)) || { waiters: 0 }).waiters;
        const entries = async id => (await engine.scan(TABLE)).filter(i => i.id.S === id && i.entry.S.startsWith("q#"));
        const noEntries = id => until(async () => (await entries(id)).length === 0, 5000, "no queue entry left");
        const worker = (job, options) => runScript("semaphore-worker.js", Object.assign({
            lockEndpoint: engine.endpoint,
            engine: { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials },
            lockTable: TABLE,
            partitionKey: "id",
            sortKey: "entry",
        }, job), options);

        it("holds three 1-permit holds of three at once, queues a fourth and a 2-permit request until permits are free", async () =>
            {
                const id = uniqueId("basic");
                const [a, b, c, d, e, f] = ["a", "b", "c", "d", "e", "f"].map(owner => semaphore(3, { owner }));
                const grants = [];
                const granted = lock =>
                {
                    grants.push(lock.fencingToken);
                    return lock;
                };
                const held = [await a.acquireLock(id).then(granted), await b.acquireLock(id).then(granted), await c.acquireLock(id).then(granted)];
                for (const lock of held)
                {
                    assert.ok(lock instanceof EventEmitter);
                    assert.equal(lock.permits, 1);
                    assert.equal(lock.mode, undefined, "a Semaphore's lock has no mode");
                    assert.ok(lock.leaseRemainingMs > 0 && lock.leaseRemainingMs <= LEASE);
                }
                assert.deepEqual(held.map(l => l.fencingToken), [1, 2, 3]);
                let info = await show(id);
                assert.equal(info.kind, "Semaphore");
                assert.equal(info.permits, 3);
                assert.equal(info.permitsHeld, 3);
                assert.equal(info.state, "held");
                assert.deepEqual(info.holders.map(h => [h.owner, h.permits, h.state]).sort(), [["a", 1, "held"], ["b", 1, "held"], ["c", 1, "held"]]);

                const started = Date.now();
                await assert.rejects(d.acquireLock(id, { waitMs: 0 }), err => err.code === "FailedToAcquireLock");
                assert.ok(Date.now() - started < LEASE, "waitMs 0 fails at once");
                await noEntries(id);

                const fourth = track(d.acquireLock(id, { waitMs: 15000 }).then(granted));
                await until(async () => (await waitersOf(id)) === 1, 5000, "the fourth request queued");
                await sleep(600);
                assert.equal(fourth.settled, false, "the fourth waits while three permits are held");
                assert.equal(await held[1].release(), undefined, "release() resolves");
                const fourthLock = await fourth.promise;
                assert.equal(fourthLock.fencingToken, 4);

                const two = track(e.acquireLock(id, { permits: 2, waitMs: 15000 }).then(granted));
                await until(async () => (await waitersOf(id)) === 1, 5000, "the 2-permit request queued");
                await held[0].release();
                await sleep(600);
                assert.equal(two.settled, false, "one permit free is not enough for a request of two");
                info = await show(id);
                assert.equal(info.permitsHeld, 2);
                await held[2].release();
                const twoLock = await two.promise;
                assert.equal(twoLock.permits, 2);
                assert.equal(twoLock.fencingToken, 5);
                info = await show(id);
                assert.equal(info.permitsHeld, 3);
                assert.deepEqual(info.holders.map(h => [h.owner, h.permits]).sort(), [["d", 1], ["e", 2]]);
                await assert.rejects(f.acquireLock(id, { waitMs: 0 }), err => err.code === "FailedToAcquireLock");

                await fourthLock.release();
                await twoLock.release();
                await twoLock.release();
                assert.deepEqual(grants, [1, 2, 3, 4, 5], "tokens unique and rising in grant order");
                info = await show(id);
                assert.equal(info.permitsHeld, 0);
                assert.deepEqual(info.holders, []);
                const all = await f.acquireLock(id, { permits: 3, waitMs: 0 });
                assert.equal(all.fencingToken, 6);
                await all.release();
                await noEntries(id);
                await Promise.all([a, b, c, d, e, f].map(x => x.close()));
            }
        );

        it("keeps permits past several leases by heartbeats: another client cannot exceed the permits, and nothing is lost", async () =>
            {
                const id = uniqueId("heartbeat");
                const lease = 600;
                const holders = [semaphore(3, { owner: "two", leaseDurationMs: lease }), semaphore(3, { owner: "one", leaseDurationMs: lease })];
                const locks = [await holders[0].acquireLock(id, { permits: 2 }), await holders[1].acquireLock(id)];
                const events = [];
                for (const lock of locks)
                {
                    lock.on("lost", () => events.push("lost"));
                    lock.on("error", err => events.push(`error ${err.code}`));
                }
                await sleep(2000);
                // A dead holder would be reclaimed a lease after its last write: this waiter waits
                // 2.5 leases and gets nothing.
                const other = semaphore(3, { owner: "other", leaseDurationMs: lease });
                await assert.rejects(other.acquireLock(id, { waitMs: 1500 }), err => err.code === "FailedToAcquireLock");
                const info = await show(id);
                assert.equal(info.permitsHeld, 3);
                assert.deepEqual(info.holders.map(h => h.owner).sort(), ["one", "two"]);
                for (const h of info.holders)
                {
                    assert.ok(h.silentMs < lease, `renewed within the lease (${h.silentMs} ms ago)`);
                }
                assert.deepEqual(events, [], "no lost or error event");
                assert.ok(locks.every(l => !l.lost && l.leaseRemainingMs > 0));
                await Promise.all(locks.map(l => l.release()));
                const all = await other.acquireLock(id, { permits: 3, waitMs: 0 });
                assert.equal(all.fencingToken, locks[1].fencingToken + 1, "the waiter that gave up gave its ticket back");
                await all.release();
                await Promise.all([...holders, other].map(x => x.close()));
            }
        );

        it("grants in ticket order: a waiting request for two holds back a later request for one, though one is free", async () =>
            {
                const id = uniqueId("order");
                const [a, b, c] = ["a", "b", "c"].map(owner => semaphore(2, { owner }));
                const order = [];
                const first = await a.acquireLock(id);
                const two = track(b.acquireLock(id, { permits: 2, waitMs: 15000 }).then(l => (order.push("two"), l)));
                await until(async () => (await waitersOf(id)) === 1, 5000, "the request for two queued");
                const one = track(c.acquireLock(id, { waitMs: 15000 }).then(l => (order.push("one"), l)));
                await until(async () => (await waitersOf(id)) === 2, 5000, "the request for one queued");
                await sleep(2 * LEASE);
                assert.equal(one.settled, false, "the later request for one is not granted before the request for two");
                assert.equal(two.settled, false);
                assert.equal((await show(id)).permitsHeld, 1);
                await first.release();
                const twoLock = await two.promise;
                await sleep(500);
                assert.equal(one.settled, false, "two permits held: none for the request for one");
                await twoLock.release();
                const oneLock = await one.promise;
                assert.deepEqual(order, ["two", "one"]);
                assert.deepEqual([first.fencingToken, twoLock.fencingToken, oneLock.fencingToken], [1, 2, 3]);
                await oneLock.release();
                await noEntries(id);
                await Promise.all([a, b, c].map(x => x.close()));
            }
        );

        it("ReadWriteLock: shared holders together, an exclusive one alone, and a shared request behind a waiting exclusive waits for it", async () =>
            {
                const id = uniqueId("rw");
                const clients = ["r1", "r2", "r3", "w", "r4"].map(owner => readWrite({ owner }));
                const order = [];
                const shared = await Promise.all(clients.slice(0, 3).map(c => c.acquireLock(id, { mode: "shared" })));
                assert.deepEqual(shared.map(l => l.mode), ["shared", "shared", "shared"]);
                assert.deepEqual(shared.map(l => l.fencingToken).sort(), [1, 2, 3]);
                let info = await show(id);
                assert.equal(info.kind, "ReadWriteLock");
                assert.deepEqual(info.holders.map(h => [h.owner, h.mode]).sort(), [["r1", "shared"], ["r2", "shared"], ["r3", "shared"]]);
                const exclusive = track(clients[3].acquireLock(id, { waitMs: 15000 }).then(l => (order.push("exclusive"), l)));
                await until(async () => (await waitersOf(id)) === 1, 5000, "the exclusive request queued");
                const late = track(clients[4].acquireLock(id, { mode: "shared", waitMs: 15000 }).then(l => (order.push("shared"), l)));
                await until(async () => (await waitersOf(id)) === 2, 5000, "the shared request queued");
                await sleep(LEASE);
                assert.equal(exclusive.settled, false, "the exclusive request waits for the shared holders");
                assert.equal(late.settled, false, "a shared request behind a waiting exclusive one waits too");
                await shared[0].release();
                await shared[1].release();
                await sleep(300);
                assert.equal(exclusive.settled, false, "one shared holder is still there");
                await shared[2].release();
                const w = await exclusive.promise;
                assert.equal(w.mode, "exclusive", "exclusive by default");
                assert.equal(w.fencingToken, 4);
                info = await show(id);
                assert.deepEqual(info.holders.map(h => [h.owner, h.mode]), [["w", "exclusive"]]);
                await sleep(300);
                assert.equal(late.settled, false, "nothing shared while the exclusive holder holds");
                await w.release();
                const r4 = await late.promise;
                assert.equal(r4.fencingToken, 5);
                assert.deepEqual(order, ["exclusive", "shared"]);
                const r5 = await clients[0].acquireLock(id, { mode: "shared", waitMs: 0 });
                await assert.rejects(clients[1].acquireLock(id, { mode: "exclusive", waitMs: 0 }), e => e.code === "FailedToAcquireLock");
                await Promise.all([r4.release(), r5.release()]);
                await noEntries(id);
                await assert.rejects(clients[0].acquireLock(id, { mode: "shard" }),
                    e => e.code === "InvalidArgument" && e.message.includes("\"shard\""));
                await assert.rejects(clients[0].acquireLock(id, { mode: "Exclusive" }), e => e.code === "InvalidArgument");
                await Promise.all(clients.map(x => x.close()));
            }
        );

        it("refuses permits outside 1..N, an array id and a mode typo, with InvalidArgument and no ticket taken", async () =>
            {
                const id = uniqueId("invalid");
                const client = semaphore(3);
                for (const permits of [0, 4, -1, 1.5, "2", null])
                {
                    await assert.rejects(client.acquireLock(id, { permits }),
                        e => e.code === "InvalidArgument" && e.message.includes("from 1 to 3"), `permits ${String(permits)}`);
                }
                await assert.rejects(client.acquireLock([id]), e => e.code === "InvalidArgument");
                await assert.rejects(client.acquireLock([id, uniqueId("other")], { permits: 1 }), e => e.code === "InvalidArgument");
                await assert.rejects(readWrite().acquireLock([id]), e => e.code === "InvalidArgument");
                const error = await new Promise(resolve => client.acquireLock(id, { permits: 4 }, err => resolve(err)));
                assert.equal(error.code, "InvalidArgument", "the callback form too");
                assert.equal(await headItem(id), undefined, "nothing was written");
                const lock = await client.acquireLock(id, { permits: 3 });
                assert.equal(lock.fencingToken, 1);
                await lock.release();
                await client.close();
            }
        );

        it("refuses a client with other permits, and a ReadWriteLock, on a semaphore's id with PermitsMismatch, at once", async () =>
            {
                const id = uniqueId("mismatch");
                const three = semaphore(3);
                const held = await three.acquireLock(id);
                const five = semaphore(5);
                const started = Date.now();
                await assert.rejects(five.acquireLock(id, { waitMs: 5000 }),
                    e => e.code === "PermitsMismatch" && e.message.includes("counts 3 permits, and this client 5"));
                await assert.rejects(readWrite().acquireLock(id, { waitMs: 5000 }), e => e.code === "PermitsMismatch");
                assert.ok(Date.now() - started < 5000, "refused before waitMs");
                await held.release();
                await assert.rejects(five.acquireLock(id, { waitMs: 5000 }), e => e.code === "PermitsMismatch", "released: the item still counts 3");
                const again = await three.acquireLock(id, { waitMs: 0 });
                assert.equal(again.fencingToken, 2);
                await again.release();
                // A ReadWriteLock's id refuses a Semaphore the same way.
                const rwId = uniqueId("rw-mismatch");
                const shared = await readWrite().acquireLock(rwId, { mode: "shared" });
                await assert.rejects(three.acquireLock(rwId, { waitMs: 5000 }), e => e.code === "PermitsMismatch");
                await shared.release();
                await Promise.all([three.close(), five.close()]);
            }
        );

        it("refuses a Semaphore or ReadWriteLock on a Fifo lock's id with PermitsMismatch, held or released, and leaves the Fifo lock alone", async () =>
            {
                const id = uniqueId("fifo-id");
                const fifo = new Fifo(config());
                const lock = await fifo.acquireLock(id);
                const sem = semaphore(3);
                const started = Date.now();
                await assert.rejects(sem.acquireLock(id, { waitMs: 5000 }),
                    e => e.code === "PermitsMismatch" && e.message.includes("is a Fifo lock's"));
                await assert.rejects(readWrite().acquireLock(id, { waitMs: 5000, mode: "shared" }),
                    e => e.code === "PermitsMismatch" && e.message.includes("is a Fifo lock's"));
                await assert.rejects(sem.acquireLock(id, { waitMs: 0 }), e => e.code === "PermitsMismatch");
                assert.ok(Date.now() - started < 5000, "refused before waitMs");
                const item = await headItem(id);
                assert.equal(item.fencingToken.N, "1", "the Fifo lock is still its holder's");
                assert.notEqual(item.leaseDurationMs.N, "1");
                assert.equal(item.permits, undefined);
                await lock.release();
                await assert.rejects(sem.acquireLock(id, { waitMs: 5000 }), e => e.code === "PermitsMismatch");
                const next = await fifo.acquireLock(id, { waitMs: 0 });
                assert.equal(next.fencingToken, 2);
                await next.release();
                await noEntries(id);
                await Promise.all([fifo.close(), sem.close()]);
            }
        );

        // The reverse case: a Fifo client on a semaphore's id is refused at once, draws no ticket,
        // and holds back nobody.
        it("refuses a Fifo client on a semaphore's id at once, without holding back its queue", async () =>
            {
                const id = uniqueId("sem-id");
                const sem = semaphore(3);
                const held = await sem.acquireLock(id);
                const fifo = new Fifo(config());
                const started = Date.now();
                const fifoWait = track(fifo.acquireLock(id, { waitMs: 1500 }));
                await sleep(200);
                const behind = track(sem.acquireLock(id, { waitMs: 5000 }));
                await Promise.all([fifoWait.promise.catch(() => {}), behind.promise.catch(() => {})]);
                await Promise.all([held.release(), behind.value && behind.value.release()]);
                await Promise.all([fifo.close(), sem.close()]);
                assert.ok(fifoWait.error, "the Fifo client is not granted a lock");
                assert.equal(fifoWait.error.code, "PermitsMismatch");
                assert.match(fifoWait.error.message, /is a Semaphore's of 3 permits, and this client a Fifo client/);
                assert.ok(fifoWait.at - started < 1000, `the Fifo client is refused at once (${fifoWait.at - started} ms, ${fifoWait.error.code})`);
                assert.ok(behind.at - started < 1000, `a Semaphore request behind it is granted at once (${behind.at - started} ms)`);
            }
        );

        it("grants a SIGKILLed holder's permits to a waiter in another process within 1.5 leases, with a higher token", async () =>
            {
                const id = uniqueId("crash");
                const local = semaphore(3, { owner: "local" });
                const procs = [];
                try
                {
                    const holder = worker({ name: "holder", kind: "Semaphore", id, config: { permits: 3, leaseDurationMs: LEASE, heartbeatPeriodMs: 250 }, hold: { permits: 2 } });
                    procs.push(holder);
                    const held = await holder.next(l => l.acquired || l.failed || l.error, 30000);
                    assert.equal(held.permits, 2, JSON.stringify(held));
                    const mine = await local.acquireLock(id, { waitMs: 5000 });
                    const waiter = worker({ name: "waiter", kind: "Semaphore", id, waitMs: 30000, config: { permits: 3, leaseDurationMs: LEASE }, hold: { permits: 2 } });
                    procs.push(waiter);
                    await until(async () => (await waitersOf(id)) === 1, 15000, "the waiter's request queued");
                    await sleep(2 * LEASE);
                    assert.ok(!waiter.lines.some(l => l.acquired), "the holder's heartbeats keep its permits");
                    holder.kill();
                    assert.equal((await holder.exited).signal, "SIGKILL");
                    const killedAt = Date.now();
                    const granted = await waiter.next(l => l.acquired || l.failed || l.error, 15000);
                    assert.ok(granted.acquired, JSON.stringify(granted));
                    const delay = granted.start - killedAt;
                    assert.ok(delay <= 1.5 * LEASE + 1000, `granted ${delay} ms after the kill (lease ${LEASE} ms)`);
                    assert.ok(delay >= LEASE - 300, `not before the dead holder's lease was out (${delay} ms)`);
                    assert.ok(granted.token > held.token && granted.token > mine.fencingToken, `higher token (${granted.token})`);
                    const info = await show(id);
                    assert.equal(info.permitsHeld, 3);
                    assert.deepEqual(info.holders.map(h => [h.owner, h.permits]).sort(), [["local", 1], ["waiter", 2]], "the dead holder is gone");
                    await mine.release();
                    waiter.kill();
                    await waiter.exited;
                }
                finally
                {
                    procs.forEach(p => p.kill());
                    await local.close();
                }
            }
        );

        for (const kind of ["Semaphore", "ReadWriteLock"])
        {
            it(`${kind}: a take that landed and whose answer was lost is counted once: after its release every permit is free`, async () =>
                {
                    const proxy = await startProxy({ target: engine.endpoint });
                    try
                    {
                        // The first uncontended take is applied and its connection dropped
                        // before the answer: the client sends it again.
                        let takes = 0;
                        proxy.onRequest = (op, body) =>
                        {
                            const take = op === "UpdateItem" && /#h = :hv/.test(body.UpdateExpression || "") && /#tn = if_not_exists/.test(body.UpdateExpression || "");
                            return take && takes++ === 0 ? "dropAfter" : undefined;
                        };
                        const id = uniqueId(`lost-take-${kind}`);
                        const via = { dynamodb: dynamodbOptions(engine, proxy.endpoint) };
                        const holder = kind === "Semaphore" ? semaphore(2, via) : readWrite(via);
                        const lock = await holder.acquireLock(id, kind === "Semaphore" ? { permits: 1 } : { mode: "shared" });
                        assert.ok(takes >= 2, `the take was sent again (${takes})`);
                        await lock.release();
                        const head = await headItem(id);
                        assert.equal(Number(head.permitsHeld.N), 0, `no permit counted for no holder: ${JSON.stringify(head)}`);
                        assert.deepEqual(holdersOfItem(head), []);
                        // Every permit at once, without waiting.
                        const all = kind === "Semaphore" ? semaphore(2) : readWrite();
                        const whole = await all.acquireLock(id, kind === "Semaphore" ? { permits: 2, waitMs: 0 } : { mode: "exclusive", waitMs: 0 });
                        await whole.release();
                        await Promise.all([holder.close(), all.close()]);
                    }
                    finally
                    {
                        await proxy.close();
                    }
                }
            );
        }

        it("counts requests: an uncontended acquisition is one UpdateItem, its release one UpdateItem", async t =>
            {
                const proxy = await startProxy({ target: engine.endpoint });
                // A holder's first heartbeat comes at a random point of its first period (the
                // scheduler spreads them, src/heartbeat.rs): it may fall between an acquisition
                // and its release. Heartbeats are the UpdateItems that leave permitsHeld alone;
                // `work()` counts the others.
                let beats = 0;
                proxy.onRequest = (op, body) =>
                {
                    if (op === "UpdateItem" && body && !/#held\b/.test(body.UpdateExpression || ""))
                    {
                        beats++;
                    }
                    return undefined;
                };
                const reset = () =>
                {
                    proxy.resetCounts();
                    beats = 0;
                };
                const work = () =>
                {
                    const counts = Object.assign({}, proxy.counts);
                    counts.UpdateItem = (counts.UpdateItem || 0) - beats;
                    if (counts.UpdateItem === 0)
                    {
                        delete counts.UpdateItem;
                    }
                    return counts;
                };
                const via = { dynamodb: dynamodbOptions(engine, proxy.endpoint), leaseDurationMs: 3000 };
                const clients = [];
                try
                {
                    const id = uniqueId("requests");
                    const sem = semaphore(2, via);
                    clients.push(sem);
                    const lock = await sem.acquireLock(id);
                    assert.deepEqual(work(), { UpdateItem: 1 }, "uncontended acquisition: one UpdateItem");
                    reset();
                    const two = await sem.acquireLock(id);
                    assert.deepEqual(work(), { UpdateItem: 1 }, "a second holder while permits are free: one UpdateItem");
                    reset();
                    await lock.release();
                    assert.deepEqual(work(), { UpdateItem: 1 }, "release: one UpdateItem");
                    await two.release();

                    // Heartbeats: one UpdateItem per heartbeatPeriodMs.
                    const beating = semaphore(2, Object.assign({}, via, { heartbeatPeriodMs: 500 }));
                    clients.push(beating);
                    const hb = await beating.acquireLock(id);
                    reset();
                    await sleep(2600);
                    const heartbeats = { ...proxy.counts };
                    await hb.release();
                    t.diagnostic(`a holder over 2600 ms at heartbeatPeriodMs 500: ${JSON.stringify(heartbeats)}`);
                    assert.ok(heartbeats.UpdateItem >= 3 && !heartbeats.GetItem, JSON.stringify(heartbeats));

                    // Contended: the permits are held by a client that does not go through the proxy.
                    const holder = semaphore(2, { leaseDurationMs: 3000 });
                    clients.push(holder);
                    const full = await holder.acquireLock(id, { permits: 2 });
                    const waiter = semaphore(2, via);
                    clients.push(waiter);
                    reset();
                    const waiting = waiter.acquireLock(id, { waitMs: 20000 });
                    await until(async () => (await waitersOf(id)) === 1, 5000, "the waiter queued");
                    const queuedCounts = { ...proxy.counts };
                    await sleep(3000);
                    const waitingCounts = { ...proxy.counts };
                    await full.release();
                    const granted = await waiting;
                    // The entry is deleted in the background once the permits are granted.
                    await until(() => proxy.counts.DeleteItem >= 1, 5000, "the entry deleted");
                    await sleep(200);
                    const contended = { ...proxy.counts };
                    t.diagnostic(`contended acquisition until queued: ${JSON.stringify(queuedCounts)}`);
                    const over = Object.fromEntries(Object.entries(waitingCounts).map(([op, k]) => [op, k - (queuedCounts[op] || 0)]).filter(([, k]) => k > 0));
                    t.diagnostic(`the waiter next in line over 3000 ms of waiting (lease 3000 ms, holder in another client): ${JSON.stringify(over)}`);
                    t.diagnostic(`the whole contended acquisition, cleanup included: ${JSON.stringify(contended)}`);
                    assert.equal(contended.PutItem, 1, "one queue entry written");
                    assert.equal(contended.DeleteItem, 1, "and deleted once granted");
                    assert.ok(contended.UpdateItem >= 3, "refused take, ticket and grant");
                    reset();
                    await granted.release();
                    assert.deepEqual(work(), { UpdateItem: 1 }, "release after a contended grant: one UpdateItem");
                    await noEntries(id);
                }
                finally
                {
                    await Promise.all(clients.map(c => c.close()));
                    await proxy.close();
                }
            }
        );

        // ---- Histories across processes -----------------------------------------------------

        const HISTORY_CONFIG = { leaseDurationMs: LEASE, heartbeatPeriodMs: 200, requestTimeoutMs: 600 };

        // Runs `processes` workers of `clients` clients each on one id through `proxy`; SIGKILLs
        // the first worker during the long hold of its client 0's first grant. Returns the
        // history and what happened.
        async function record(proxy, { kind, permits, choices, processes, clients, seed, runMs, iterations })
        {
            const id = uniqueId(`h-${kind}`);
            const procs = [];
            for (let p = 0; p < processes; p++)
            {
                procs.push(worker(
                    {
                        name: `p${p}`,
                        kind,
                        id,
                        lockEndpoint: proxy.endpoint,
                        waitMs: 60000,
                        config: Object.assign({}, HISTORY_CONFIG, kind === "Semaphore" ? { permits } : {}),
                        loop: {
                            clients,
                            seed: seed * 10 + p,
                            iterations,
                            runMs,
                            choices,
                            // Holds about as long as a hand-over through the queue takes, so
                            // that several holders hold together and the limit is exercised.
                            holdMs: [10, 250],
                            pauseMs: [0, 20],
                            longHold: p === 0 ? { client: 0, i: 0, ms: 400 } : undefined,
                        },
                    }, { timeoutMs: 90000 }));
            }
            let killed;
            try
            {
                await Promise.all(procs.map(p => p.next(l => l.ready || l.error || l.unparsed, 30000)));
                procs.forEach(p => p.send("go\n"));
                const victim = procs[0];
                const long = await victim.next(l => (l.acquired && l.long) || l.error, 30000);
                victim.kill();
                const exit = await victim.exited;
                killed = { at: Date.now(), signal: exit.signal, long };
                await Promise.all(procs.slice(1).map(p => p.next(l => l.done || l.error, 60000)));
                await Promise.all(procs.map(p => p.exited));
            }
            finally
            {
                procs.forEach(p => p.kill());
            }
            const lines = procs.flatMap(p => p.lines);
            const sections = lines.filter(l => l.section);
            // The victim's grants without a section: held until it died, or until it called
            // release() if it was releasing when it died.
            for (const g of procs[0].lines.filter(l => l.acquired))
            {
                if (!sections.some(x => x.owner === g.owner && x.i === g.i))
                {
                    const releasing = procs[0].lines.find(l => l.releasing && l.owner === g.owner && l.i === g.i);
                    sections.push(Object.assign({}, g, { acquired: undefined, end: releasing ? releasing.end : killed.at, crashed: true }));
                }
            }
            const item = await headItem(id);
            return {
                id,
                killed,
                sections,
                finalHolders: holdersOfItem(item),
                finalPermitsHeld: item && item.permitsHeld ? Number(item.permitsHeld.N) : 0,
                granted: lines.filter(l => l.acquired),
                failed: lines.filter(l => l.failed),
                errors: lines.filter(l => l.error || l.unparsed),
                dones: lines.filter(l => l.done),
            };
        }

        async function withProxy(profile, fn)
        {
            const proxy = await startProxy({ target: engine.endpoint });
            try
            {
                if (profile.faults)
                {
                    proxy.setFaults(Object.assign({ random: mulberry32(profile.seed) }, profile.faults));
                }
                return await fn(proxy);
            }
            finally
            {
                proxy.clearFaults();
                await proxy.close();
            }
        }

        // What every history must show; `limit` is the id's permits.
        async function assertSound(t, run, proxy, { kind, limit, processes, profile, minSections })
        {
            const crashed = run.sections.filter(s => s.crashed);
            const lost = run.sections.filter(s => s.lostAt);
            t.diagnostic(`${run.sections.length} critical sections (${crashed.length} cut by the kill, ${lost.length} lost), ` +
                `at most ${peakPermits(run.sections) === READ_WRITE_PERMITS ? "all" : peakPermits(run.sections)} permits held together, ` +
                `${run.failed.length} failed acquisitions ${JSON.stringify(run.failed.map(f => f.code))}, ${run.sections.flatMap(s => s.errors || []).length} heartbeat errors; ` +
                `requests ${JSON.stringify(proxy.counts)}; faults ${JSON.stringify(proxy.faultCounts)}`);
            assert.deepEqual(run.errors, [], "no worker crashed");
            assert.equal(run.killed.signal, "SIGKILL");
            assert.equal(run.dones.length, processes - 1, "every surviving worker finished");
            // A request gets 4 attempts (README, requestTimeoutMs): under 10% throttling, one
            // throttled 4 times in a row fails its acquisition now and then (1 in 10^4 requests).
            // The worker goes on; nothing else may fail an acquisition.
            const allowed = run.failed.filter(f => profile.mayFail && f.code === profile.mayFail);
            assert.deepEqual(run.failed.filter(f => !allowed.includes(f)), [], "no acquisition failed but for the injected faults");
            assert.ok(allowed.length <= 2, `at most 2 acquisitions failed by 4 faults in a row: ${JSON.stringify(allowed)}`);
            assert.ok(run.sections.length >= minSections, `enough critical sections (${run.sections.length})`);
            assert.ok(crashed.some(s => s.long), "the victim was killed while it held permits");
            const survivors = run.sections.filter(s => !s.crashed);
            assert.ok(survivors.every(s => s.releaseOk), `every release reported success: ${JSON.stringify(survivors.filter(s => !s.releaseOk))}`);
            assert.ok(survivors.every(s => s.after && s.after.readError === undefined), "every head read after a release succeeded");
            assert.ok(run.sections.some(s => s.start > run.killed.at + LEASE), "grants went on after the kill");
            assert.deepEqual(checkPermitHistory(run.sections, { limit, finalHolders: run.finalHolders, finalPermitsHeld: kind === "Semaphore" ? run.finalPermitsHeld : undefined }), []);
            if (profile.faults)
            {
                assert.ok(proxy.faultCounts[profile.injected] > 0, `faults were injected (${JSON.stringify(proxy.faultCounts)})`);
            }
            // Whatever the dead process held is reclaimable: a client takes every permit, with a
            // token above all, and leaves none held.
            const client = kind === "Semaphore" ? semaphore(limit, HISTORY_CONFIG) : readWrite(HISTORY_CONFIG);
            const all = await client.acquireLock(run.id, kind === "Semaphore" ? { permits: limit, waitMs: 2 * LEASE + 2000 } : { mode: "exclusive", waitMs: 2 * LEASE + 2000 });
            const top = Math.max(...run.sections.map(s => s.token));
            assert.ok(all.fencingToken > top, `the token rises past the history (${all.fencingToken} > ${top})`);
            await all.release();
            const after = await headItem(run.id);
            assert.deepEqual(holdersOfItem(after), [], "no holder left");
            if (kind === "Semaphore")
            {
                assert.equal(after.permitsHeld.N, "0");
            }
            await client.close();
            // Every live client removed its queue entries; only the killed process may have left
            // its own, granted just before it died and not yet removed (TTL removes those).
            const left = await entries(run.id);
            t.diagnostic(`queue entries left at the end: ${left.map(e => `${e.owner && e.owner.S} (${e.entry.S})`).join(", ") || "none"}`);
            assert.ok(left.every(e => e.owner && e.owner.S.startsWith("p0c")),
                `queue entries left by a live client: ${JSON.stringify(left.filter(e => !(e.owner && e.owner.S.startsWith("p0c"))))}`);
        }

        const PROFILES = [
            { name: "no faults", seed: 21 },
            { name: "10% throttling", faults: { throttleRate: 0.1 }, injected: "throttled", seed: 22, mayFail: "ProvisionedThroughputExceededException" },
            { name: "5% of replies dropped after the request applied", faults: { dropAfterRate: 0.05 }, injected: "droppedAfter", seed: 23 },
        ];
        for (const profile of PROFILES)
        {
            it(`Semaphore history of 4 processes x 3 clients, N = 3, ${profile.name}, one process SIGKILLed: never more than N permits, rising tokens, releases visible`, async t =>
                {
                    await withProxy(profile, async proxy =>
                        {
                            const run = await record(proxy, { kind: "Semaphore", permits: 3, choices: [1, 2], processes: 4, clients: 3, seed: profile.seed, runMs: 8000, iterations: 40 });
                            await assertSound(t, run, proxy, { kind: "Semaphore", limit: 3, processes: 4, profile, minSections: 12 });
                            assert.ok(run.sections.some(s => s.permits === 2) && run.sections.some(s => s.permits === 1), "both sizes were granted");
                        });
                }
            );
        }

        it("ReadWriteLock history of 3 processes x 2 clients, random modes, 5% dropped replies, one process SIGKILLed: no exclusive hold overlaps another", async t =>
            {
                const profile = PROFILES[2];
                await withProxy(profile, async proxy =>
                    {
                        const run = await record(proxy, { kind: "ReadWriteLock", choices: ["shared", "exclusive"], processes: 3, clients: 2, seed: 31, runMs: 5000, iterations: 40 });
                        for (const s of run.sections)
                        {
                            assert.equal(s.permits, s.mode === "exclusive" ? READ_WRITE_PERMITS : 1, `the lock's mode and permits agree: ${JSON.stringify(s)}`);
                        }
                        await assertSound(t, run, proxy, { kind: "ReadWriteLock", limit: READ_WRITE_PERMITS, processes: 3, profile, minSections: 8 });
                        const shared = run.sections.filter(s => s.mode === "shared").sort((a, b) => a.start - b.start);
                        let together = 0;
                        for (let i = 1; i < shared.length; i++)
                        {
                            together += shared.slice(0, i).some(x => x.end > shared[i].start + 2) ? 1 : 0;
                        }
                        t.diagnostic(`${shared.length} shared and ${run.sections.length - shared.length} exclusive sections; ${together} shared sections began while another was held`);
                        assert.ok(shared.length > 0 && shared.length < run.sections.length, "both modes were granted");
                    });
            }
        );
    });
}
