"use strict";

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { EventEmitter } = require("events");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, acquireCb, releaseCb, uniqueId, sleep, until, dynamodbOptions } = require("./helpers.js");
const { runScript } = require("./support/spawn.js");
const { startProxy } = require("./support/proxy.js");

const LEASE = 1000;

for (const engineName of selectedEngines())
{
    describe(`Fifo on ${engineName}`, { timeout: 240000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("fifo", { partitionKey: "pk", sortKey: "sk" });
                await engine.createTable("fifo-numeric-sort", { partitionKey: "pk", sortKey: "sk", sortType: "N" });
            }
        );
        after(async () => engine && engine.stop());

        const config = extra => Object.assign(
            { dynamodb: dynamodbOptions(engine), lockTable: "fifo", partitionKey: "pk", sortKey: "sk", leaseDurationMs: LEASE },
            extra);
        const fifo = extra => new DynamoDBLockClient.Fifo(config(extra));
        const head = id => engine.getItem("fifo", { pk: { S: id }, sk: { S: "lock" } });
        const entries = async id => (await engine.scan("fifo"))
            .filter(i => i.pk.S === id && i.sk.S.startsWith("q#"))
            .sort((a, b) => (a.sk.S < b.sk.S ? -1 : 1));
        // A granted acquisition removes its entries right after it returns the lock.
        const noEntries = (id, what) => until(async () => (await entries(id)).length === 0, 5000, what || "no queue entry left");
        const worker = (job, options) => runScript("fifo-worker.js", Object.assign({ config: config(job.extra) }, job), options);

        it("acquires and releases with the callback and Promise forms; the token rises by one", async () =>
            {
                const id = uniqueId("basic");
                const client = DynamoDBLockClient.Fifo(config({ owner: "me" }));
                assert.ok(client instanceof DynamoDBLockClient.Fifo, "callable without new");
                const first = await acquireCb(client, id);
                assert.equal(first.error, undefined);
                assert.ok(first.lock instanceof EventEmitter);
                assert.equal(first.lock.fencingToken, 1);
                const item = await head(id);
                assert.deepEqual(Object.keys(item).sort(),
                    ["fencingToken", "guid", "leaseDurationMs", "lockWrittenUnixMs", "owner", "pk", "queueGranted", "sk", "ticketNext"]);
                assert.equal(item.owner.S, "me");
                assert.equal(item.leaseDurationMs.N, String(LEASE));
                assert.equal(Buffer.from(item.guid.B).length, 64);
                assert.equal(await releaseCb(first.lock), null);
                assert.equal((await head(id)).leaseDurationMs.N, "1", "released: the item stays");
                const second = await client.acquireLock(id);
                assert.equal(second.fencingToken, 2);
                await second.release();
                assert.equal(await releaseCb(second), null, "a second release is quiet");
                assert.deepEqual(await entries(id), [], "no queue entry for uncontended locks");
            }
        );

        it("takes an uncontended lock with one request and hands over within the process without reads", async () =>
            {
                const proxy = await startProxy({ target: engine.endpoint });
                try
                {
                    const id = uniqueId("requests");
                    const client = fifo({ dynamodb: dynamodbOptions(engine, proxy.endpoint), leaseDurationMs: 3000 });
                    const first = await client.acquireLock(id);
                    assert.deepEqual({ ...proxy.counts }, { UpdateItem: 1 }, "one UpdateItem");
                    const waiting = client.acquireLock(id);
                    await until(async () => (await entries(id)).length === 1, 5000, "the waiter's entry");
                    proxy.resetCounts();
                    await sleep(1500);
                    assert.equal(proxy.counts.GetItem || 0, 0, "the waiter behind a holder in its process does not poll");
                    await first.release();
                    const second = await waiting;
                    assert.equal(second.fencingToken, 2);
                    assert.equal(proxy.counts.GetItem || 0, 0, "handed over without a read");
                    await second.release();
                    await noEntries(id);
                }
                finally
                {
                    await proxy.close();
                }
            }
        );

        it("a head whose only ticket was given back before any grant is still taken with one request", async () =>
            {
                const proxy = await startProxy({ target: engine.endpoint });
                try
                {
                    const id = uniqueId("given-back");
                    // What giving back the first ticket of a resource leaves: no token, ticketNext 0.
                    await engine.putItem("fifo", { pk: { S: id }, sk: { S: "lock" }, ticketNext: { N: "0" }, queueNext: { N: "0" } });
                    const client = fifo({ dynamodb: dynamodbOptions(engine, proxy.endpoint), leaseDurationMs: 3000 });
                    const lock = await client.acquireLock(id);
                    assert.equal(lock.fencingToken, 1);
                    assert.deepEqual({ ...proxy.counts }, { UpdateItem: 1 }, "the uncontended path, one UpdateItem");
                    await lock.release();
                    await noEntries(id);
                }
                finally
                {
                    await proxy.close();
                }
            }
        );

        it("a take or a grant whose response is lost is a lock held, with its token", async () =>
            {
                const proxy = await startProxy({ target: engine.endpoint });
                try
                {
                    const via = { dynamodb: dynamodbOptions(engine, proxy.endpoint), requestTimeoutMs: 300 };
                    const id = uniqueId("lost-response");
                    let dropped = 0;
                    const dropFirst = marker => (op, body) =>
                    {
                        if (op === "UpdateItem" && dropped === 0 && body.UpdateExpression.includes(marker))
                        {
                            dropped++;
                            return "dropAfter";
                        }
                        return undefined;
                    };
                    proxy.onRequest = dropFirst("#tn = ");
                    const taken = await fifo(via).acquireLock(id);
                    assert.equal(dropped, 1, "the take's response was dropped");
                    assert.equal(taken.fencingToken, 1);
                    assert.equal((await head(id)).ticketNext.N, "1", "applied once");
                    dropped = 0;
                    proxy.onRequest = dropFirst("#ft = :tk");
                    const waiting = fifo(via).acquireLock(id);
                    await until(async () => (await entries(id)).length === 1, 15000, "the waiter's entry");
                    await taken.release();
                    const granted = await waiting;
                    assert.equal(dropped, 1, "the grant's response was dropped");
                    assert.equal(granted.fencingToken, 2);
                    const item = await head(id);
                    assert.equal(item.fencingToken.N, "2");
                    assert.notEqual(item.leaseDurationMs.N, "1", "held");
                    await granted.release();
                    assert.equal((await head(id)).leaseDurationMs.N, "1", "and released by its holder");
                    await noEntries(id);
                }
                finally
                {
                    await proxy.close();
                }
            }
        );

        it("grants waiters in several processes in ticket order", async () =>
            {
                const id = uniqueId("order");
                const holder = await fifo().acquireLock(id);
                const workers = [0, 1, 2, 3].map(i => worker({ ids: id, holdMs: 150, go: true, extra: { owner: `w${i}` } }));
                await Promise.all(workers.map(w => w.next(l => l.ready)));
                workers.forEach(w => w.send("go\n"));
                await until(async () => (await entries(id)).length === 4, 15000, "four entries");
                const queued = await entries(id);
                const ticketOf = new Map(queued.map(e => [e.owner.S, Number(e.fencingToken.N)]));
                const expected = Math.floor(Date.now() / 1000) + LEASE / 1000 + 3600;
                for (const e of queued)
                {
                    assert.ok(Math.abs(Number(e.ttl.N) - expected) <= 30, `TTL in epoch seconds: ${e.ttl.N} vs ${expected}`);
                }
                assert.equal((await head(id)).ttl, undefined, "the head item has no TTL");
                assert.deepEqual([...ticketOf.values()].sort(), [2, 3, 4, 5]);
                await holder.release();
                const grants = await Promise.all(workers.map(async (w, i) =>
                    {
                        const acquired = await w.next(l => l.acquired || l.error, 30000);
                        const releasing = await w.next(l => l.releasing || l.error, 30000);
                        return { owner: `w${i}`, token: acquired.fencingToken, from: acquired.at, to: releasing.at };
                    }));
                const exits = await Promise.all(workers.map(w => w.exited));
                assert.deepEqual(exits.map(e => [e.code, e.signal]), exits.map(() => [0, null]),
                    "each process exits on its own once its lock is released");
                grants.sort((a, b) => a.from - b.from);
                assert.deepEqual(grants.map(g => g.token), [2, 3, 4, 5], "granted in ticket order");
                for (const g of grants)
                {
                    assert.equal(g.token, ticketOf.get(g.owner), "the token is the ticket");
                }
                for (let i = 1; i < grants.length; i++)
                {
                    assert.ok(grants[i].from >= grants[i - 1].to, "one holder at a time");
                }
                await noEntries(id);
            }
        );

        it("lets the queue proceed within about a lease when a waiter in the middle is SIGKILLed", async () =>
            {
                const id = uniqueId("deadwaiter");
                const holder = await fifo().acquireLock(id);
                const first = worker({ ids: id, holdMs: 50, extra: { owner: "first" } });
                await until(async () => (await entries(id)).length === 1, 15000, "the first entry");
                const dies = worker({ ids: id, holdMs: 50, extra: { owner: "dies" } });
                await until(async () => (await entries(id)).length === 2, 15000, "the second entry");
                const last = worker({ ids: id, holdMs: 50, extra: { owner: "last" } });
                await until(async () => (await entries(id)).length === 3, 15000, "the third entry");
                dies.kill();
                await dies.exited;
                const killedAt = Date.now();
                await holder.release();
                const firstGrant = await first.next(l => l.acquired || l.error, 15000);
                assert.equal(firstGrant.fencingToken, 2);
                const lastGrant = await last.next(l => l.acquired || l.error, 15000);
                assert.equal(lastGrant.fencingToken, 4, "the dead waiter's ticket 3 was skipped");
                const delay = lastGrant.at - killedAt;
                assert.ok(delay <= LEASE + 1500, `the dead waiter held the queue ${delay} ms (lease ${LEASE} ms)`);
                await Promise.all([first.exited, last.exited]);
                await until(async () => (await entries(id)).length === 0, 5000, "the dead entry removed");
            }
        );

        it("waits out a holder SIGKILLed while it held the lock", async () =>
            {
                const id = uniqueId("deadholder");
                const holder = worker({ ids: id, extra: { heartbeatPeriodMs: 250 } });
                const held = await holder.next(l => l.acquired || l.error, 15000);
                assert.equal(held.fencingToken, 1);
                const waiting = fifo().acquireLock(id);
                await until(async () => (await entries(id)).length === 1, 15000, "the waiter's entry");
                await sleep(2 * LEASE);
                holder.kill();
                await holder.exited;
                const killedAt = Date.now();
                const lock = await waiting;
                const waited = Date.now() - killedAt;
                assert.equal(lock.fencingToken, 2);
                assert.ok(waited >= LEASE - 300, `the holder's lease was waited out (${waited} ms)`);
                assert.ok(waited <= LEASE + 1500, `and not much more (${waited} ms)`);
                await lock.release();
            }
        );

        it("waitMs 0 fails at once when the lock is held and leaves no entry", async () =>
            {
                const id = uniqueId("nowait");
                const holder = await fifo().acquireLock(id);
                const started = Date.now();
                const { error } = await new Promise(resolve =>
                    fifo().acquireLock(id, { waitMs: 0 }, (error, lock) => resolve({ error, lock })));
                assert.equal(error.code, "FailedToAcquireLock");
                assert.ok(Date.now() - started < LEASE / 2, "at once");
                await noEntries(id);
                const item = await head(id);
                assert.equal(item.ticketNext.N, item.fencingToken.N, "no ticket left out");
                await holder.release();
                const free = await fifo().acquireLock(id, { waitMs: 0 });
                assert.equal(free.fencingToken, 2);
                await free.release();
            }
        );

        it("a finite waitMs fails when it ends and removes the entry; Infinity waits past several leases", async () =>
            {
                const id = uniqueId("waits");
                const holder = await fifo({ heartbeatPeriodMs: 250 }).acquireLock(id);
                const started = Date.now();
                await assert.rejects(fifo().acquireLock(id, { waitMs: 600 }), e => e.code === "FailedToAcquireLock");
                const waited = Date.now() - started;
                assert.ok(waited >= 550 && waited < 5000, `gave up after ${waited} ms`);
                await noEntries(id);
                const patient = fifo().acquireLock(id, { waitMs: Infinity });
                let settled = false;
                patient.then(() => (settled = true), () => (settled = true));
                await sleep(3 * LEASE);
                assert.equal(settled, false, "still waiting after three leases");
                await holder.release();
                const lock = await patient;
                assert.equal(lock.fencingToken, 2, "the waiter that gave up gave ticket 2 back");
                await lock.release();
                await assert.rejects(fifo().acquireLock(id, { waitMs: -1 }), e => e.code === "InvalidArgument");
            }
        );

        it("an abort while queued rejects with AbortError and leaves no entry", async () =>
            {
                const id = uniqueId("abort");
                const holder = await fifo().acquireLock(id);
                const behind = fifo();
                const controller = new AbortController();
                const aborted = fifo().acquireLock(id, { signal: controller.signal });
                await until(async () => (await entries(id)).length === 1, 15000, "the entry");
                const waiting = behind.acquireLock(id);
                await until(async () => (await entries(id)).length === 2, 15000, "the entry behind");
                controller.abort();
                await assert.rejects(aborted, e => e.name === "AbortError" && e.code === "AbortError");
                await holder.release();
                const lock = await waiting;
                assert.equal(lock.fencingToken, 3);
                await noEntries(id, "nothing of the aborted waiter is left");
                const last = new AbortController();
                const alone = fifo().acquireLock(id, { signal: last.signal });
                await until(async () => (await entries(id)).length === 1, 15000, "the last entry");
                last.abort();
                await assert.rejects(alone, e => e.name === "AbortError");
                await noEntries(id);
                await lock.release();
            }
        );

        it("acquires several resources with one ticket, in opposite orders without deadlock", async () =>
            {
                const [a, b] = [uniqueId("res-a"), uniqueId("res-b")];
                const warm = fifo();
                for (let i = 0; i < 3; i++)
                {
                    await (await warm.acquireLock(a)).release();
                }
                const spans = [];
                const run = async (client, ids) =>
                {
                    for (let i = 0; i < 6; i++)
                    {
                        const lock = await client.acquireLock(ids, { waitMs: 30000 });
                        const from = Date.now();
                        await sleep(20);
                        spans.push({ token: lock.fencingToken, from, to: Date.now() });
                        await lock.release();
                    }
                };
                await Promise.all([run(fifo(), [a, b]), run(fifo(), [b, a]), run(fifo(), [b, a])]);
                assert.equal(spans.length, 18);
                spans.sort((x, y) => x.from - y.from);
                for (let i = 1; i < spans.length; i++)
                {
                    assert.ok(spans[i].token > spans[i - 1].token, "tokens rise in grant order");
                    assert.ok(spans[i].from >= spans[i - 1].to, "one holder of both at a time");
                }
                const [ha, hb] = [await head(a), await head(b)];
                assert.equal(ha.fencingToken.N, hb.fencingToken.N, "the last ticket is the same on both");
                assert.deepEqual([...await entries(a), ...await entries(b)], []);
            }
        );

        // A head as another writer left it: the attributes of a lock released with token 3,
        // then `attributes`.
        const putHead = (id, attributes) => engine.putItem("fifo", Object.assign({
            pk: { S: id }, sk: { S: "lock" }, owner: { S: "tool" }, guid: { B: Buffer.alloc(64, 7) },
            fencingToken: { N: "3" }, ticketNext: { N: "3" }, queueNext: { N: "0" }, leaseDurationMs: { N: "1" },
        }, attributes));
        const assertRefused = (error, id, attributes, found) =>
        {
            assert.ok(error, "the acquisition fails");
            assert.equal(error.code, "CorruptLockItem", error.message);
            assert.ok([].concat(attributes).includes(error.attribute), `${error.attribute}: ${error.message}`);
            assert.ok(error.message.includes(`pk "${id}", sk "lock" in the table "fifo"`), error.message);
            if (found)
            {
                assert.ok(error.message.includes(`its ${error.attribute} holds ${found}`), error.message);
            }
        };
        // One acquisition with `waitMs` 2000 through a proxy: its error, its time and its requests.
        const acquireCounted = async (id, extra) =>
        {
            const proxy = await startProxy({ target: engine.endpoint });
            const client = fifo({ dynamodb: dynamodbOptions(engine, proxy.endpoint) });
            try
            {
                const started = Date.now();
                const outcome = await client.acquireLock(id, Object.assign({ waitMs: 2000 }, extra))
                    .then(lock => ({ lock }), error => ({ error }));
                const ms = Date.now() - started;
                const requests = Object.values(proxy.counts).reduce((a, b) => a + b, 0);
                await client.close();
                return Object.assign(outcome, { ms, requests });
            }
            finally
            {
                await proxy.close();
            }
        };

        for (const [what, attributes, found] of [
            ["fencingToken is a string", { fencingToken: { S: "x" } }, "the string \"x\""],
            ["fencingToken is a string and the head is held", { fencingToken: { S: "x" }, leaseDurationMs: { N: "3000" } }, "the string \"x\""],
            ["ticketNext is a string", { ticketNext: { S: "x" } }, "the string \"x\""],
            ["ticketNext is 2^53", { ticketNext: { N: "9007199254740992" } }, "the number 9007199254740992"],
            ["queueNext is a string", { queueNext: { S: "x" } }, "the string \"x\""],
            ["queueGranted is negative", { queueGranted: { N: "-1" } }, "the number -1"],
        ])
        {
            it(`refuses a head whose ${what} by name, at once, in a few requests, and close() resolves`, async () =>
                {
                    const id = uniqueId("corrupt");
                    await putHead(id, attributes);
                    const { lock, error, ms, requests } = await acquireCounted(id);
                    assert.equal(lock, undefined, `no lock is handed out (token ${lock && lock.fencingToken})`);
                    assertRefused(error, id, Object.keys(attributes).filter(a => a !== "leaseDurationMs"), found);
                    assert.ok(ms < 2000, `refused in ${ms} ms, within waitMs`);
                    assert.ok(requests <= 12, `${requests} requests`);
                    await noEntries(id, "no queue entry is left");
                    const left = await head(id);
                    for (const [name, value] of Object.entries(attributes))
                    {
                        assert.deepEqual(left[name], value, `${name} is left as it was`);
                    }
                }
            );
        }

        it("hands out 2^53 - 1 once from a head at 2^53 - 2, then refuses by name: never a token at or below one handed out", async () =>
            {
                const id = uniqueId("top");
                await putHead(id, { fencingToken: { N: "9007199254740990" }, ticketNext: { N: "9007199254740990" } });
                const client = fifo();
                const first = await client.acquireLock(id, { waitMs: 2000 });
                assert.equal(first.fencingToken, Number.MAX_SAFE_INTEGER);
                // A waiter queued behind the holder of the last token is refused too, at once.
                const behind = await acquireCounted(id);
                assertRefused(behind.error, id, ["ticketNext", "fencingToken"], "the number 9007199254740991");
                assert.ok(behind.ms < 2000, `${behind.ms} ms`);
                await first.release();
                for (let k = 0; k < 2; k++)
                {
                    const { lock, error, ms, requests } = await acquireCounted(id);
                    assert.equal(lock, undefined, `no lock is handed out (token ${lock && lock.fencingToken})`);
                    assertRefused(error, id, ["ticketNext", "fencingToken"], "the number 9007199254740991");
                    assert.ok(ms < 2000 && requests <= 6, `${ms} ms, ${requests} requests`);
                }
                const left = await head(id);
                assert.deepEqual([left.fencingToken.N, left.ticketNext.N, left.leaseDurationMs.N], ["9007199254740991", "9007199254740991", "1"]);
                await noEntries(id);
                await client.close();
            }
        );

        it("refuses a head at 2^53 - 1 by name rather than failing after many tickets", async () =>
            {
                const id = uniqueId("top");
                await putHead(id, { fencingToken: { N: "9007199254740991" }, ticketNext: { N: "9007199254740991" } });
                const { error, ms, requests } = await acquireCounted(id);
                assertRefused(error, id, ["ticketNext", "fencingToken"], "the number 9007199254740991");
                assert.ok(ms < 2000 && requests <= 6, `${ms} ms, ${requests} requests`);
                assert.equal((await head(id)).ticketNext.N, "9007199254740991", "no ticket was taken");
            }
        );

        it("refuses ids it cannot queue", async () =>
            {
                const client = fifo();
                await assert.rejects(client.acquireLock([]), e => e.code === "InvalidLockId");
                await assert.rejects(client.acquireLock({ pk: "x" }), e => e.code === "InvalidLockId");
                await assert.rejects(client.acquireLock(["x", null]), e => e.code === "InvalidLockId");
            }
        );

        it("fails the first acquisition on a table whose sort key is not a string, naming table and key", async () =>
            {
                const client = fifo({ lockTable: "fifo-numeric-sort" });
                await assert.rejects(client.acquireLock(uniqueId("typed")), e =>
                    e.code === "ValidationException" && e.name === "ValidationException"
                    && e.message.includes("\"fifo-numeric-sort\"") && e.message.includes("sort key \"sk\"")
                    && e.message.includes("string (S)"));
            }
        );
    });
}

describe("Fifo configuration", () =>
{
    it("throws a ValidationError naming the missing sortKey, synchronously", () =>
        {
            assert.throws(() => new DynamoDBLockClient.Fifo({ lockTable: "t", partitionKey: "pk", leaseDurationMs: 1000 }),
                e => e.name === "ValidationError" && e.message === "\"sortKey\" is required"
                    && e.details[0].path[0] === "sortKey");
        }
    );

    it("lists every problem, and refuses a heartbeat that is not shorter than the lease", () =>
        {
            assert.throws(() => DynamoDBLockClient.Fifo({ partitionKey: "pk", sortKey: "ticketNext", heartbeatPeriodMs: "5" }),
                e => e.name === "ValidationError"
                    && e.message === "\"lockTable\" is required. \"sortKey\" contains an invalid value. \"leaseDurationMs\" is required. \"heartbeatPeriodMs\" must be a number");
            assert.throws(() => DynamoDBLockClient.Fifo({ lockTable: "t", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 100, heartbeatPeriodMs: 100 }),
                /"heartbeatPeriodMs" must be less than leaseDurationMs/);
            assert.throws(() => DynamoDBLockClient.Fifo({ lockTable: "t", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 100, retryCount: 1 }),
                /"retryCount" is not allowed/);
        }
    );
});
