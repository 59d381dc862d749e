"use strict";

// The tracing channels around acquisitions and releases (start, end, asyncStart, asyncEnd and
// error with one context object, as OpenTelemetry instrumentations subscribe to them), the
// message of every acquisition that did not grant a lock (failed, aborted or closed), and the
// messages of contention: a wait that starts, and a hand-over that ends it.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const diagnostics = require("node:diagnostics_channel");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, failOpen, failClosed, uniqueId, until } = require("./helpers.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

// Every event of the acquire and release tracing channels, and the acquire-failed messages,
// while `fn` runs.
async function traced(fn)
{
    const events = [];
    const handlers = {};
    for (const name of ["acquire", "release"])
    {
        const channel = diagnostics.tracingChannel(`dynamodb-lock-native:${name}`);
        handlers[name] = {};
        for (const event of ["start", "end", "asyncStart", "asyncEnd", "error"])
        {
            handlers[name][event] = context => events.push({ name, event, context });
        }
        channel.subscribe(handlers[name]);
    }
    const failed = [];
    const onFailed = message => failed.push(message);
    diagnostics.subscribe("dynamodb-lock-native:acquire-failed", onFailed);
    try
    {
        await fn();
    }
    finally
    {
        for (const name of Object.keys(handlers))
        {
            diagnostics.tracingChannel(`dynamodb-lock-native:${name}`).unsubscribe(handlers[name]);
        }
        diagnostics.unsubscribe("dynamodb-lock-native:acquire-failed", onFailed);
    }
    return { events, failed };
}

// The messages of the `waiting`, `handed-over` and `acquired` channels while they are recorded;
// `stop()` unsubscribes.
function contention()
{
    const seen = { waiting: [], handedOver: [], acquired: [] };
    const names = { waiting: "waiting", handedOver: "handed-over", acquired: "acquired" };
    const handlers = {};
    for (const key of Object.keys(names))
    {
        handlers[key] = message => seen[key].push(message);
        diagnostics.subscribe(`dynamodb-lock-native:${names[key]}`, handlers[key]);
    }
    seen.stop = () => Object.keys(names).forEach(key => diagnostics.unsubscribe(`dynamodb-lock-native:${names[key]}`, handlers[key]));
    return seen;
}

for (const engineName of selectedEngines())
{
    describe(`tracing channels on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(engineName);
            await engine.createTable("locks", { partitionKey: "id" });
            await engine.createTable("fifo", { partitionKey: "pk", sortKey: "sk" });
        });
        after(async () => engine && engine.stop());

        it("an acquisition and its release each make one span: start, end, asyncStart, asyncEnd on one context", async () =>
        {
            const client = failOpen(engine, { leaseDurationMs: 60000 });
            const id = uniqueId("trace");
            let lock;
            const { events, failed } = await traced(async () =>
            {
                lock = await client.acquireLock(id);
                await lock.release();
            });
            assert.deepEqual(events.map(e => `${e.name}:${e.event}`),
                ["acquire:start", "acquire:end", "acquire:asyncStart", "acquire:asyncEnd", "release:start", "release:end", "release:asyncStart", "release:asyncEnd"]);
            const acquire = events.filter(e => e.name === "acquire").map(e => e.context);
            assert.ok(acquire.every(c => c === acquire[0]), "one context across the async boundary");
            assert.equal(acquire[0].id, id);
            assert.equal(acquire[0].kind, "FailOpen");
            assert.equal(acquire[0].result, lock, "the span ends with the lock");
            const release = events.filter(e => e.name === "release").map(e => e.context);
            assert.ok(release.every(c => c === release[0]));
            assert.deepEqual([release[0].id, release[0].fencingToken], [id, lock.fencingToken]);
            assert.deepEqual(failed, []);
            await client.close();
        });

        it("every acquisition that grants no lock says how it ended: failed, aborted, closed; its span ends in error", async () =>
        {
            const holder = failOpen(engine, { leaseDurationMs: 60000 });
            const busy = uniqueId("trace-busy");
            const held = await holder.acquireLock(busy);
            const client = failOpen(engine, { leaseDurationMs: 60000, retryCount: 0, rereadPeriodMs: 50 });
            const { events, failed } = await traced(async () =>
            {
                await assert.rejects(client.acquireLock(busy, { signal: AbortSignal.timeout(200) }), { code: "AbortError" });
                const waiting = client.acquireLock(busy).catch(e => e);
                await new Promise(resolve => setTimeout(resolve, 100));
                await client.close();
                assert.equal((await waiting).code, "ClientClosed");
                await assert.rejects(client.acquireLock(busy), { code: "ClientClosed" });
            });
            // FailClosed with no retries: a held lock fails the acquisition at once.
            const closedHolder = failClosed(engine);
            const closedId = uniqueId("trace-closed");
            const closedLock = await closedHolder.acquireLock(closedId);
            const failing = await traced(() => assert.rejects(failClosed(engine, { retryCount: 0 }).acquireLock(closedId), { code: "FailedToAcquireLock" }));
            assert.deepEqual(failed.map(f => f.outcome), ["aborted", "closed", "closed"]);
            assert.ok(failed.every(f => f.id === busy && f.kind === "FailOpen" && f.waitMs >= 0 && f.error instanceof Error));
            const errors = events.filter(e => e.name === "acquire" && e.event === "error");
            assert.equal(errors.length, 3);
            assert.deepEqual(errors.map(e => e.context.error.code), ["AbortError", "ClientClosed", "ClientClosed"]);
            assert.deepEqual(failing.failed.map(f => [f.id, f.kind, f.outcome, f.error.code]), [[closedId, "FailClosed", "failed", "FailedToAcquireLock"]]);
            assert.deepEqual(failing.events.map(e => `${e.name}:${e.event}`), ["acquire:start", "acquire:end", "acquire:error", "acquire:asyncStart", "acquire:asyncEnd"]);
            await held.release();
            await closedLock.release();
            await Promise.all([holder.close(), closedHolder.close()]);
        });

        it("an acquisition that finds the lock held publishes waiting once; granted after the release, handed-over", async () =>
        {
            const holder = failOpen(engine, { leaseDurationMs: 60000 });
            const waiter = failOpen(engine, { leaseDurationMs: 60000, rereadPeriodMs: 50 });
            const id = uniqueId("trace-wait");
            const free = uniqueId("trace-free");
            const seen = contention();
            try
            {
                const held = await holder.acquireLock(id);
                const uncontended = await waiter.acquireLock(free);
                assert.deepEqual([seen.waiting.length, seen.handedOver.length], [0, 0], "an uncontended acquisition is no wait");
                const waiting = waiter.acquireLock(id);
                await until(async () => seen.waiting.length > 0, 10000, "the waiting message");
                assert.equal(seen.waiting.length, 1);
                assert.equal(seen.waiting[0].id, id);
                assert.equal(seen.waiting[0].kind, "FailOpen");
                assert.ok(seen.waiting[0].waitMs >= 0 && seen.waiting[0].waitMs < 10000, JSON.stringify(seen.waiting[0]));
                // Re-reads go on while the lock is held, with no second message.
                await new Promise(resolve => setTimeout(resolve, 300));
                assert.equal(seen.waiting.length, 1);
                assert.equal(seen.handedOver.length, 0);
                await held.release();
                const lock = await waiting;
                assert.equal(seen.handedOver.length, 1);
                const handed = seen.handedOver[0];
                assert.deepEqual([handed.id, handed.kind, handed.fencingToken], [id, "FailOpen", lock.fencingToken]);
                assert.ok(handed.waitedMs >= 300 && handed.waitMs >= handed.waitedMs, JSON.stringify(handed));
                const acquired = seen.acquired.find(m => m.id === id && m.fencingToken === lock.fencingToken);
                assert.equal(acquired.waitMs, handed.waitMs);
                const { acquisitions } = waiter.metrics();
                assert.deepEqual([acquisitions.succeeded, acquisitions.waited, acquisitions.handedOver], [2, 1, 1]);
                await Promise.all([lock.release(), uncontended.release()]);
            }
            finally
            {
                seen.stop();
                await Promise.all([holder.close(), waiter.close()]);
            }
        });

        it("a second acquisition of one id by one client waits in line and is handed the lock by the first's release", async () =>
        {
            const client = failOpen(engine, { leaseDurationMs: 60000 });
            const id = uniqueId("trace-line");
            const seen = contention();
            try
            {
                const first = await client.acquireLock(id);
                const second = client.acquireLock(id);
                await until(async () => seen.waiting.length > 0, 10000, "the waiting message");
                assert.deepEqual(seen.waiting.map(m => [m.id, m.kind]), [[id, "FailOpen"]]);
                await first.release();
                const lock = await second;
                assert.deepEqual(seen.handedOver.map(m => [m.id, m.fencingToken]), [[id, lock.fencingToken]]);
                assert.equal(lock.fencingToken, first.fencingToken + 1);
                await lock.release();
            }
            finally
            {
                seen.stop();
                await client.close();
            }
        });

        it("a Fifo acquisition that joins the queue publishes waiting once, and handed-over when its turn comes", async () =>
        {
            const fifo = owner => new DynamoDBLockClient.Fifo({ dynamodb: dynamodbOptions(engine), lockTable: "fifo",
                partitionKey: "pk", sortKey: "sk", leaseDurationMs: 60000, heartbeatPeriodMs: 20000, owner });
            const holder = fifo("holder");
            const waiter = fifo("waiter");
            const id = uniqueId("trace-fifo");
            const seen = contention();
            try
            {
                const held = await holder.acquireLock(id);
                assert.equal(seen.waiting.length, 0, "an uncontended Fifo acquisition is no wait");
                const waiting = waiter.acquireLock(id);
                await until(async () => seen.waiting.length > 0, 10000, "the waiting message");
                assert.deepEqual(seen.waiting.map(m => [m.id, m.kind]), [[id, "Fifo"]]);
                await held.release();
                const lock = await waiting;
                assert.deepEqual(seen.handedOver.map(m => [m.id, m.kind, m.fencingToken]), [[id, "Fifo", lock.fencingToken]]);
                assert.deepEqual([waiter.metrics().acquisitions.waited, waiter.metrics().acquisitions.handedOver], [1, 1]);
                await lock.release();
            }
            finally
            {
                seen.stop();
                await Promise.all([holder.close(), waiter.close()]);
            }
        });

        it("a FailClosed acquisition refused for a held lock publishes waiting, then acquire-failed, and no hand-over", async () =>
        {
            const holder = failClosed(engine);
            const id = uniqueId("trace-refused");
            const held = await holder.acquireLock(id);
            const seen = contention();
            const client = failClosed(engine, { retryCount: 0 });
            try
            {
                const { failed } = await traced(() => assert.rejects(client.acquireLock(id), { code: "FailedToAcquireLock" }));
                assert.deepEqual(seen.waiting.map(m => [m.id, m.kind]), [[id, "FailClosed"]]);
                assert.equal(seen.handedOver.length, 0);
                assert.deepEqual(failed.map(f => f.outcome), ["failed"]);
                assert.deepEqual([client.metrics().acquisitions.waited, client.metrics().acquisitions.handedOver], [1, 0]);
            }
            finally
            {
                seen.stop();
                await held.release();
                await Promise.all([holder.close(), client.close()]);
            }
        });
    });
}
