"use strict";

// client.metrics() counts a scripted run exactly, and the diagnostics channels carry each
// acquisition, release, failed heartbeat and loss. Every client under test talks to the engine
// through its own loopback proxy, whose request counts are the independent tally.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const diagnostics = require("node:diagnostics_channel");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, failClosed, failOpen, uniqueId, sleep, until } = require("./helpers.js");
const { startProxy } = require("./support/proxy.js");
const path = require("path");
const { spawn } = require("child_process");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const OPERATIONS = ["GetItem", "PutItem", "UpdateItem", "DeleteItem"];

// Requests by operation, all outcomes together.
function totals(metrics)
{
    const out = {};
    for (const op of OPERATIONS)
    {
        const r = metrics.requests[op];
        out[op] = r.ok + r.conditionFailed + r.throttled + r.error;
    }
    return out;
}

function proxied(proxy)
{
    const out = {};
    for (const op of OPERATIONS)
    {
        out[op] = proxy.counts[op] || 0;
    }
    return out;
}

// Collects the messages of every channel while `fn` runs.
async function listening(fn)
{
    const seen = [];
    const handlers = {};
    for (const name of ["acquired", "released", "heartbeat-failed", "lost"])
    {
        handlers[name] = message => seen.push(Object.assign({ channel: name }, message));
        diagnostics.subscribe(`dynamodb-lock-native:${name}`, handlers[name]);
    }
    try
    {
        await fn();
    }
    finally
    {
        for (const name of Object.keys(handlers))
        {
            diagnostics.unsubscribe(`dynamodb-lock-native:${name}`, handlers[name]);
        }
    }
    return seen;
}

const zero = { ok: 0, conditionFailed: 0, throttled: 0, error: 0 };

// The histogram bounds every client uses, in ms; a last bucket counts what is above them.
const BOUNDS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000];

describe("latency histograms", () =>
{
    const { Metrics } = require("../lib/metrics.js");

    it("count each sample in the bucket whose bound is the first at or above it, and add up across clients", () =>
        {
            const a = new Metrics("FailOpen");
            const b = new Metrics("FailOpen");
            for (const ms of [0.2, 1, 1.01, 5, 5.5, 60000, 60001, 1e9])
            {
                a.waits.record(ms);
            }
            for (let i = 0; i < 2000; i++)
            {
                b.waits.record(3);
            }
            const ha = a.snapshot().waits.histogram;
            const hb = b.snapshot().waits.histogram;
            assert.deepEqual(ha.boundsMs, BOUNDS);
            assert.deepEqual(ha.counts, [2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
            assert.equal(ha.sumMs, 0.2 + 1 + 1.01 + 5 + 5.5 + 60000 + 60001 + 1e9);
            // Counts since the client started, past the 1,024 samples of the percentiles.
            assert.equal(hb.counts[2], 2000);
            assert.equal(b.snapshot().waits.count, 2000);
            assert.equal(b.snapshot().waits.p99Ms, 3);
            const fleet = ha.counts.map((n, i) => n + hb.counts[i]);
            assert.equal(fleet[2], 2001);
            assert.equal(fleet.reduce((x, y) => x + y, 0), 2008);
            // A snapshot is a copy: changing it changes nothing in the client.
            ha.counts[0] = 99;
            ha.boundsMs[0] = 99;
            assert.equal(a.snapshot().waits.histogram.counts[0], 2);
            assert.equal(a.snapshot().waits.histogram.boundsMs[0], 1);
        }
    );
});

for (const engineName of selectedEngines())
{
    describe(`metrics on ${engineName}`, { timeout: 180000 }, () =>
    {
        let engine, proxy;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("fifo", { partitionKey: "pk", sortKey: "sk" });
                // DynamoDB Local's first requests can outlast the 1 s leases below on a busy
                // machine: warm it up with a long lease first.
                const warm = failOpen(engine, { leaseDurationMs: 60000 });
                for (let i = 0; i < 3; i++)
                {
                    await (await warm.acquireLock(uniqueId("m-warm"))).release();
                }
                await warm.close();
            }
        );
        after(async () => engine && engine.stop());

        const viaProxy = async () =>
        {
            proxy = await startProxy({ target: engine.endpoint });
            return dynamodbOptions(engine, proxy.endpoint);
        };
        const closeProxy = () => proxy && proxy.close();

        it("FailOpen: acquisitions, releases, failures by code, waits and requests per operation", async () =>
            {
                try
                {
                    const client = failOpen(engine, { dynamodb: await viaProxy() });
                    assert.deepEqual(client.metrics(), {
                        kind: "FailOpen",
                        acquisitions: { succeeded: 0, failed: 0, byCode: {}, waited: 0, handedOver: 0, pending: 0, waiting: 0 },
                        waits: { count: 0, p50Ms: 0, p99Ms: 0, histogram: { boundsMs: BOUNDS, counts: new Array(16).fill(0), sumMs: 0 } },
                        holds: { count: 0, p50Ms: 0, p99Ms: 0, histogram: { boundsMs: BOUNDS, counts: new Array(16).fill(0), sumMs: 0 } },
                        releases: { succeeded: 0, failed: 0 },
                        heartbeats: { sent: 0, retried: 0, failed: 0 },
                        locks: { held: 0, lost: 0 },
                        requests: { GetItem: zero, PutItem: zero, UpdateItem: zero, DeleteItem: zero },
                        requestsByPurpose: { acquiring: 0, waiting: 0, heartbeats: 0, releasing: 0 },
                        throttles: 0,
                    });
                    const ids = [uniqueId("m-a"), uniqueId("m-b"), uniqueId("m-c")];
                    let locks;
                    const seen = await listening(async () =>
                        {
                            locks = [];
                            for (const id of ids)
                            {
                                locks.push(await client.acquireLock(id));
                            }
                            await locks[0].release();
                            await new Promise((resolve, reject) => locks[1].release(e => (e ? reject(e) : resolve())));
                            await assert.rejects(client.acquireLock(null), { code: "InvalidLockId" });
                            await assert.rejects(client.acquireLock(uniqueId("m-x"), { signal: AbortSignal.abort() }), { code: "AbortError" });
                        });
                    const m = client.metrics();
                    assert.deepEqual(m.acquisitions, { succeeded: 3, failed: 2, byCode: { InvalidLockId: 1, AbortError: 1 }, waited: 0, handedOver: 0, pending: 0, waiting: 0 });
                    assert.deepEqual(m.releases, { succeeded: 2, failed: 0 });
                    assert.deepEqual(m.locks, { held: 1, lost: 0 });
                    assert.deepEqual(m.heartbeats, { sent: 0, retried: 0, failed: 0 });
                    assert.equal(m.waits.count, 3);
                    assert.ok(m.waits.p50Ms > 0 && m.waits.p50Ms <= m.waits.p99Ms, JSON.stringify(m.waits));
                    // Every wait in the histogram, each in the bucket its value falls in.
                    assert.deepEqual(m.waits.histogram.boundsMs, BOUNDS);
                    assert.equal(m.waits.histogram.counts.reduce((a, b) => a + b, 0), 3);
                    const bucketOf = ms => BOUNDS.findIndex(b => ms <= b) < 0 ? BOUNDS.length : BOUNDS.findIndex(b => ms <= b);
                    assert.equal(m.waits.histogram.counts[bucketOf(m.waits.p99Ms)] > 0, true, JSON.stringify(m.waits));
                    assert.ok(m.waits.histogram.sumMs >= m.waits.p99Ms, JSON.stringify(m.waits));
                    // Two locks released: two holds.
                    assert.equal(m.holds.count, 2);
                    assert.equal(m.holds.histogram.counts.reduce((a, b) => a + b, 0), 2);
                    // One UpdateItem per acquisition and per release, nothing else.
                    assert.deepEqual(m.requests, { GetItem: zero, PutItem: zero, UpdateItem: Object.assign({}, zero, { ok: 5 }), DeleteItem: zero });
                    assert.deepEqual(m.requestsByPurpose, { acquiring: 3, waiting: 0, heartbeats: 0, releasing: 2 });
                    assert.deepEqual(totals(m), proxied(proxy));
                    assert.equal(m.throttles, 0);
                    // The channels saw the same run.
                    assert.deepEqual(seen.map(s => [s.channel, s.id, s.kind, s.fencingToken]), [
                        ["acquired", ids[0], "FailOpen", 1],
                        ["acquired", ids[1], "FailOpen", 1],
                        ["acquired", ids[2], "FailOpen", 1],
                        ["released", ids[0], "FailOpen", 1],
                        ["released", ids[1], "FailOpen", 1],
                    ]);
                    assert.ok(seen.filter(s => s.channel === "acquired").every(s => s.waitMs >= 0));
                    assert.ok(seen.filter(s => s.channel === "released").every(s => s.heldMs >= 0));
                    await locks[2].release();
                    assert.equal(client.metrics().locks.held, 0);
                }
                finally
                {
                    await closeProxy();
                }
            }
        );

        it("FailOpen: a throttled heartbeat is counted as failed and retried, then the lock is lost", async () =>
            {
                try
                {
                    const client = failOpen(engine, { dynamodb: await viaProxy(), leaseDurationMs: 1000, heartbeatPeriodMs: 100 });
                    const id = uniqueId("m-hb");
                    let lock;
                    const seen = await listening(async () =>
                        {
                            lock = await client.acquireLock(id);
                            lock.on("error", () => {});
                            const throttled = proxy.nextFault("throttle", { operation: "UpdateItem" });
                            await throttled;
                            await until(() => client.metrics().heartbeats.sent >= 3, 5000, "heartbeats after the throttle");
                            // The item changes under the lock: the next heartbeat finds it is not ours.
                            await engine.putItem("locks", { id: { S: id }, owner: { S: "thief" }, guid: { B: Buffer.alloc(64, 9) }, fencingToken: { N: "7" }, leaseDurationMs: { N: "1000" } });
                            await until(() => lock.lost, 5000, "the lock to be lost");
                        });
                    await sleep(50);
                    const m = client.metrics();
                    assert.equal(m.heartbeats.failed, 2, "the throttled attempt and the one that found the item changed");
                    assert.equal(m.heartbeats.retried, 1, "the throttled attempt was retried");
                    assert.equal(m.throttles, 1);
                    assert.equal(m.requests.UpdateItem.throttled, 1);
                    assert.equal(m.requests.UpdateItem.conditionFailed, 1);
                    // Every UpdateItem is the acquisition or a heartbeat.
                    const updates = m.requests.UpdateItem;
                    assert.equal(updates.ok + updates.throttled + updates.conditionFailed + updates.error, 1 + m.heartbeats.sent);
                    assert.deepEqual(m.locks, { held: 0, lost: 1 });
                    assert.deepEqual(totals(m), proxied(proxy));
                    const failed = seen.filter(s => s.channel === "heartbeat-failed");
                    assert.deepEqual(failed.map(s => [s.id, s.kind, s.fencingToken, s.error.code]),
                        [[id, "FailOpen", 1, "ProvisionedThroughputExceededException"], [id, "FailOpen", 1, "ConditionalCheckFailedException"]]);
                    const lost = seen.filter(s => s.channel === "lost");
                    assert.deepEqual(lost.map(s => [s.id, s.kind, s.fencingToken, s.error.code]), [[id, "FailOpen", 1, "LockLost"]]);
                    assert.ok(lost[0].heldMs > 0);
                    await lock.release();
                    assert.deepEqual(client.metrics().releases, { succeeded: 1, failed: 0 }, "releasing a lost FailOpen lock is quiet");
                }
                finally
                {
                    await closeProxy();
                }
            }
        );

        it("FailClosed: a failed acquisition by FailedToAcquireLock and a failed release", async () =>
            {
                try
                {
                    const id = uniqueId("m-fc");
                    const holder = await failClosed(engine).acquireLock(id);
                    const client = failClosed(engine, { dynamodb: await viaProxy(), acquirePeriodMs: 30, retryCount: 2 });
                    await assert.rejects(client.acquireLock(id), { code: "FailedToAcquireLock" });
                    await holder.release();
                    const lock = await client.acquireLock(id);
                    await engine.deleteItem("locks", { id: { S: id } });
                    await assert.rejects(lock.release(), { code: "FailedToReleaseLock" });
                    const m = client.metrics();
                    assert.deepEqual(m.acquisitions, { succeeded: 1, failed: 1, byCode: { FailedToAcquireLock: 1 }, waited: 1, handedOver: 0, pending: 0, waiting: 0 });
                    assert.deepEqual(m.releases, { succeeded: 0, failed: 1 });
                    assert.deepEqual(m.locks, { held: 0, lost: 0 });
                    assert.equal(m.requests.PutItem.ok, 1);
                    // The first attempt is refused; how many more fit in retryCount pauses
                    // depends on how long the waiter's own reads take: the proxy's tally below
                    // pins the exact number.
                    assert.ok(m.requests.PutItem.conditionFailed >= 1, JSON.stringify(m.requests.PutItem));
                    assert.deepEqual(m.requests.DeleteItem, Object.assign({}, zero, { conditionFailed: 1 }));
                    assert.deepEqual(totals(m), proxied(proxy));
                }
                finally
                {
                    await closeProxy();
                }
            }
        );

        it("a user dynamodb object: its requests and heartbeats are counted the same way", async () =>
            {
                const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
                const { DynamoDBDocument } = require("@aws-sdk/lib-dynamodb");
                const doc = DynamoDBDocument.from(new DynamoDBClient(dynamodbOptions(engine)));
                const calls = { get: 0, put: 0, delete: 0 };
                let throttleHeartbeat = false;
                const db =
                {
                    get: p => (calls.get++, doc.get(p)),
                    put: p =>
                    {
                        calls.put++;
                        if (throttleHeartbeat && p.Item.leaseDurationMs !== 1)
                        {
                            throttleHeartbeat = false;
                            return Promise.reject(Object.assign(new Error("slow down"), { code: "ProvisionedThroughputExceededException" }));
                        }
                        return doc.put(p);
                    },
                    delete: p => (calls.delete++, doc.delete(p)),
                };
                try
                {
                    const client = failOpen(engine, { dynamodb: db, leaseDurationMs: 1000, heartbeatPeriodMs: 100 });
                    const ids = [uniqueId("m-obj"), uniqueId("m-obj")];
                    const locks = [];
                    for (const id of ids)
                    {
                        locks.push(await client.acquireLock(id));
                    }
                    locks[0].on("error", () => {});
                    throttleHeartbeat = true;
                    await until(() => !throttleHeartbeat && client.metrics().heartbeats.sent >= 6, 5000, "heartbeats");
                    for (const lock of locks)
                    {
                        await lock.release();
                    }
                    const m = client.metrics();
                    assert.deepEqual(m.acquisitions, { succeeded: 2, failed: 0, byCode: {}, waited: 0, handedOver: 0, pending: 0, waiting: 0 });
                    assert.deepEqual(m.releases, { succeeded: 2, failed: 0 });
                    assert.equal(m.heartbeats.failed, 1);
                    assert.equal(m.heartbeats.retried, 1);
                    assert.equal(m.throttles, 1);
                    assert.equal(m.requests.PutItem.throttled, 1);
                    assert.deepEqual(totals(m), { GetItem: calls.get, PutItem: calls.put, UpdateItem: 0, DeleteItem: calls.delete });
                    // Each acquisition reads and writes once, each release writes once: the rest are heartbeats.
                    assert.equal(m.heartbeats.sent, calls.put - 4);
                }
                finally
                {
                    doc.destroy();
                }
            }
        );

        it("Fifo: acquisitions, releases and requests per operation", async () =>
            {
                try
                {
                    const client = new DynamoDBLockClient.Fifo({ dynamodb: await viaProxy(), lockTable: "fifo", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 2000 });
                    const one = await client.acquireLock(uniqueId("m-fifo"));
                    const two = await client.acquireLock([uniqueId("m-fifo"), uniqueId("m-fifo")]);
                    assert.equal(client.metrics().locks.held, 2);
                    await one.release();
                    await two.release();
                    await assert.rejects(client.acquireLock([]), { code: "InvalidLockId" });
                    await sleep(100);
                    const m = client.metrics();
                    assert.deepEqual(m.acquisitions, { succeeded: 2, failed: 1, byCode: { InvalidLockId: 1 }, waited: 0, handedOver: 0, pending: 0, waiting: 0 });
                    assert.deepEqual(m.releases, { succeeded: 2, failed: 0 });
                    assert.deepEqual(m.locks, { held: 0, lost: 0 });
                    assert.equal(m.waits.count, 2);
                    assert.ok(m.requests.UpdateItem.ok >= 6, "a take and a release per resource");
                    assert.deepEqual(totals(m), proxied(proxy));
                }
                finally
                {
                    await closeProxy();
                }
            }
        );

        for (const kind of ["FailClosed", "FailOpen", "Fifo"])
        {
            it(`${kind}: gauges of the acquisitions under way, those waiting for a holder, and the locks held, now`, async () =>
                {
                    const client = kind === "FailClosed" ? failClosed(engine, { acquirePeriodMs: 20, retryCount: 1000 })
                        : kind === "FailOpen" ? failOpen(engine, { leaseDurationMs: 10000, heartbeatPeriodMs: 3000, retryCount: 1000 })
                            : new DynamoDBLockClient.Fifo({ dynamodb: dynamodbOptions(engine), lockTable: "fifo", partitionKey: "pk", sortKey: "sk",
                                leaseDurationMs: 10000 });
                    const gauges = () =>
                    {
                        const m = client.metrics();
                        return { pending: m.acquisitions.pending, waiting: m.acquisitions.waiting, held: m.locks.held };
                    };
                    assert.deepEqual(gauges(), { pending: 0, waiting: 0, held: 0 });
                    const id = uniqueId("m-gauge");
                    const first = await client.acquireLock(id);
                    const other = await client.acquireLock(uniqueId("m-gauge"));
                    assert.deepEqual(gauges(), { pending: 0, waiting: 0, held: 2 });
                    // Two acquisitions of the held id wait; one of another id is under way until
                    // its answer.
                    const waiters = [client.acquireLock(id), client.acquireLock(id)];
                    const third = client.acquireLock(uniqueId("m-gauge"));
                    assert.deepEqual(gauges(), { pending: 3, waiting: 0, held: 2 });
                    await (await third).release();
                    await until(() => gauges().waiting === 2, 10000, "both waiters to find the lock held");
                    assert.deepEqual(gauges(), { pending: 2, waiting: 2, held: 2 });
                    await first.release();
                    const next = await Promise.race(waiters);
                    await until(() => gauges().pending === 1, 5000, "one waiter granted");
                    assert.deepEqual(gauges(), { pending: 1, waiting: 1, held: 2 });
                    await next.release();
                    const last = (await Promise.all(waiters)).find(l => l !== next);
                    assert.deepEqual(gauges(), { pending: 0, waiting: 0, held: 2 });
                    await last.release();
                    await other.release();
                    assert.deepEqual(gauges(), { pending: 0, waiting: 0, held: 0 });
                    await client.close();
                }
            );
        }

        it("NODE_DEBUG=dynamodb-lock-native logs requests, outcomes and decisions with timings; without it, nothing", async () =>
            {
                const script = `
                    const { FailOpen } = require(${JSON.stringify(path.join(__dirname, ".."))});
                    const make = () => new FailOpen({ dynamodb: ${JSON.stringify(dynamodbOptions(engine))}, lockTable: "locks",
                        partitionKey: "id", leaseDurationMs: 10000, heartbeatPeriodMs: 3000, retryCount: 100 });
                    const [holder, waiter] = [make(), make()];
                    (async () =>
                    {
                        const id = process.env.LOCK_ID;
                        const first = await holder.acquireLock(id, { data: "secret-payload" });
                        const second = waiter.acquireLock(id);
                        await new Promise(resolve => setTimeout(resolve, 300));
                        await first.release();
                        await (await second).release();
                        await Promise.all([holder.close(), waiter.close()]);
                    })();`;
                const run = env => new Promise((resolve, reject) =>
                {
                    const child = spawn(process.execPath, ["-e", script], { env: Object.assign({}, process.env,
                        { AWS_EC2_METADATA_DISABLED: "true", LOCK_ID: uniqueId("m-debug") }, env), stdio: ["ignore", "pipe", "pipe"] });
                    let err = "";
                    child.stderr.on("data", d => (err += d));
                    const killer = setTimeout(() => child.kill("SIGKILL"), 60000);
                    child.on("error", reject);
                    child.on("exit", code =>
                    {
                        clearTimeout(killer);
                        resolve({ code, err });
                    });
                });
                const quiet = await run({ NODE_DEBUG: "" });
                assert.equal(quiet.code, 0, quiet.err);
                assert.doesNotMatch(quiet.err, /DYNAMODB-LOCK-NATIVE/);
                for (const setting of ["dynamodb-lock-native", "http,dynamodb-lock-*"])
                {
                    const { code, err } = await run({ NODE_DEBUG: setting });
                    assert.equal(code, 0, err);
                    const lines = err.split("\n").filter(l => l.startsWith("DYNAMODB-LOCK-NATIVE "));
                    const log = lines.join("\n");
                    const pid = "\\d+";
                    const expected = [
                        // JavaScript: the acquisition, its grant with timings.
                        new RegExp(`^DYNAMODB-LOCK-NATIVE ${pid}: acquire "m-debug[^"]*" \\(FailOpen\\): started$`, "m"),
                        new RegExp(`: acquire "m-debug[^"]*" \\(FailOpen\\): granted, fencing token 1, after [\\d.]+ ms$`, "m"),
                        // The native core: each request with its key, outcome and time.
                        new RegExp(`: take id "m-debug[^"]*" in "locks": done, fencing token 1 in [\\d.]+ ms$`, "m"),
                        new RegExp(`: take id "m-debug[^"]*" in "locks": condition failed.* in [\\d.]+ ms$`, "m"),
                        new RegExp(`: (read|take) id "m-debug[^"]*" in "locks": .*owner "[^"]+", fencing token 1, lease 10000 ms in [\\d.]+ ms$`, "m"),
                        // A decision: the waiter's pause, with its length.
                        /: lock "m-debug[^"]*" \((acquiring|waiting)\): pauses [\d.]+ ms before its next request$/m,
                        new RegExp(`: acquire "m-debug[^"]*" \\(FailOpen\\): granted, fencing token 2, after [\\d.]+ ms, of which [\\d.]+ ms waiting for a holder$`, "m"),
                        new RegExp(`: release id "m-debug[^"]*" in "locks": done in [\\d.]+ ms$`, "m"),
                        new RegExp(`: release "m-debug[^"]*" \\(FailOpen, fencing token 2\\): released after holding it [\\d.]+ ms$`, "m"),
                        /: close \(FailOpen on "locks"\): done in [\d.]+ ms, 0 of 0 locks released$/m,
                        /: table check of "locks": (locks are safe on it|DescribeTable failed: .*)$/m,
                    ];
                    for (const line of expected)
                    {
                        assert.match(log, line, `${setting}:\n${log}`);
                    }
                    assert.ok(lines.length === err.split("\n").filter(l => l.includes("DYNAMODB-LOCK-NATIVE")).length, "every line starts with the prefix");
                    assert.doesNotMatch(log, /secret-payload|dummy/, "neither lock data nor credentials");
                }
            }
        );
    });
}
