"use strict";

// Nothing a client starts outlives its owner: acquisitions of a terminated Worker take no lock,
// close() resolves only once an aborted write is undone and sends nothing after that, and a
// heartbeat period longer than the lease still brings "lost" before a rival's grant.

const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const { Worker } = require("node:worker_threads");
const { selectedEngines } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId, sleep } = require("./helpers.js");
const { runScript } = require("./support/spawn.js");
const { engineAndProxy } = require("./support/engine-and-proxy.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const TABLE = "outlives";

function config(engine, endpoint, extra)
{
    return Object.assign({ dynamodb: dynamodbOptions(engine, endpoint), lockTable: TABLE, partitionKey: "id" }, extra);
}

function total(counts)
{
    return Object.values(counts).reduce((a, b) => a + b, 0);
}

for (const name of selectedEngines())
{
    describe(`nothing outlives its owner (${name})`, { timeout: 180000 }, () =>
    {
        const env = engineAndProxy(name, { [TABLE]: { partitionKey: "id" } });

        it("a Worker terminated while its acquisitions wait takes no lock: the holder's releases leave the items free", async () =>
        {
            const ids = [0, 1, 2].map(i => uniqueId(`worker-wait-${i}`));
            const settings = { leaseDurationMs: 2000, heartbeatPeriodMs: 500 };
            const main = new DynamoDBLockClient.FailOpen(config(env.engine, undefined, Object.assign({ owner: "main" }, settings)));
            const held = await Promise.all(ids.map(id => main.acquireLock(id)));
            const worker = new Worker(path.join(__dirname, "support", "waiting-worker.js"), {
                workerData: { ids, config: config(env.engine, undefined, Object.assign({ owner: "worker", retryCount: 100 }, settings)) },
            });
            const messages = [];
            worker.on("message", m => messages.push(m));
            const deadline = Date.now() + 10000;
            while (!messages.some(m => m.waiting) && Date.now() < deadline)
            {
                await sleep(20);
            }
            assert.ok(messages.some(m => m.waiting), JSON.stringify(messages));
            await worker.terminate();
            await Promise.all(held.map(lock => lock.release()));
            // Three heartbeat periods: a lock the terminated Worker's acquisitions took would
            // show as a held item, its guid rotating.
            await sleep(1500);
            for (const id of ids)
            {
                const item = await env.engine.getItem(TABLE, { id: { S: id } });
                assert.equal(item.leaseDurationMs.N, "1", `${id} stays released: ${JSON.stringify(item)}`);
                assert.equal(item.owner.S, "main", `${id} was not taken by the Worker`);
            }
            assert.deepEqual(messages.filter(m => m.granted), [], "nothing was granted to the Worker");
            // The lock is free: taken at once, with one request.
            const t0 = Date.now();
            const again = await main.acquireLock(ids[0]);
            assert.ok(Date.now() - t0 < 1000, `taken after ${Date.now() - t0} ms`);
            assert.equal(again.fencingToken, 2);
            await again.release();
            await main.close();
        });

        for (const kind of ["FailOpen", "FailClosed"])
        {
            it(`${kind}: close() resolves only once an aborted write that landed is undone, so process.exit leaves the lock free`, async () =>
            {
                const id = uniqueId(`abort-exit-${kind}`);
                env.proxy.clearFaults();
                // Each request is applied at once and answered 300 ms later.
                env.proxy.replyDelayMs = 300;
                try
                {
                    const child = runScript("abort-exit-child.js", {
                        kind,
                        id,
                        abortMs: 100,
                        config: config(env.engine, env.proxy.endpoint, kind === "FailOpen" ? { leaseDurationMs: 60000, heartbeatPeriodMs: 10000 } : { acquirePeriodMs: 100 }),
                    }, { timeoutMs: 30000 });
                    const closed = await child.next(l => l.closed || l.failed);
                    assert.ok(closed.closed, JSON.stringify(child.lines));
                    assert.equal(child.lines[0].aborted, "AbortError", JSON.stringify(child.lines));
                    assert.deepEqual(closed.closed, []);
                    await child.exited;
                }
                finally
                {
                    env.proxy.replyDelayMs = 0;
                }
                const item = await env.engine.getItem(TABLE, { id: { S: id } });
                if (kind === "FailClosed")
                {
                    assert.equal(item, undefined, `the aborted write's item is deleted: ${JSON.stringify(item)}`);
                }
                else
                {
                    assert.ok(item, "the aborted write landed");
                    assert.equal(item.leaseDurationMs.N, "1", `the aborted write is released: ${JSON.stringify(item)}`);
                }
            });
        }

        for (const kind of ["FailOpen", "FailClosed"])
        {
            it(`${kind}: a Worker terminated while its acquisition's write is on the wire leaves the lock free: the write that landed is undone`, async () =>
            {
                const id = uniqueId(`worker-in-flight-${kind}`);
                env.proxy.clearFaults();
                // Each request is applied at once and answered 400 ms later.
                env.proxy.replyDelayMs = 400;
                try
                {
                    const settings = kind === "FailOpen" ? { leaseDurationMs: 60000, heartbeatPeriodMs: 10000 } : { acquirePeriodMs: 100 };
                    const worker = new Worker(path.join(__dirname, "support", "terminated-worker.js"), {
                        workerData: { kind, id, config: config(env.engine, env.proxy.endpoint, Object.assign({ owner: "worker" }, settings)) },
                    });
                    const messages = [];
                    worker.on("message", m => messages.push(m));
                    const deadline = Date.now() + 10000;
                    while (!messages.some(m => m.started) && Date.now() < deadline)
                    {
                        await sleep(10);
                    }
                    assert.ok(messages.some(m => m.started), JSON.stringify(messages));
                    // The write has reached the engine; its answer is 400 ms away.
                    let landed;
                    while (!landed && Date.now() < deadline)
                    {
                        await sleep(10);
                        landed = await env.engine.getItem(TABLE, { id: { S: id } });
                    }
                    assert.ok(landed, "the acquisition's write landed");
                    assert.equal(landed.owner.S, "worker");
                    await worker.terminate();
                    assert.deepEqual(messages.filter(m => m.granted), [], "nothing was granted to the Worker");
                }
                finally
                {
                    env.proxy.replyDelayMs = 0;
                }
                // The undo goes out once the write's answer comes in (400 ms), and is itself
                // answered at once.
                let item;
                const until = Date.now() + 5000;
                do
                {
                    await sleep(100);
                    item = await env.engine.getItem(TABLE, { id: { S: id } });
                }
                while (Date.now() < until && (kind === "FailClosed" ? item !== undefined : item.leaseDurationMs.N !== "1"));
                if (kind === "FailClosed")
                {
                    assert.equal(item, undefined, `the landed write's item is deleted: ${JSON.stringify(item)}`);
                }
                else
                {
                    assert.equal(item.leaseDurationMs.N, "1", `the landed write is released: ${JSON.stringify(item)}`);
                }
                // Free: taken at once by another client.
                const other = new DynamoDBLockClient[kind](config(env.engine, undefined, kind === "FailOpen" ? { leaseDurationMs: 60000, heartbeatPeriodMs: 10000, retryCount: 0 } : { acquirePeriodMs: 100, retryCount: 0 }));
                const lock = await other.acquireLock(id);
                await lock.release();
                await other.close();
            });
        }

        it("once close() resolves the client sends nothing: held locks' heartbeats and pending acquisitions end with it", async () =>
        {
            env.proxy.clearFaults();
            // A lease long enough for 20 acquisitions at once on a busy machine (a grant that
            // comes after its whole lease is refused as LeaseExpired); heartbeats every 100 ms.
            const settings = { leaseDurationMs: 4000, heartbeatPeriodMs: 100 };
            const ids = Array.from({ length: 20 }, (_, i) => uniqueId(`after-close-${i}`));
            const busy = Array.from({ length: 10 }, (_, i) => uniqueId(`after-close-busy-${i}`));
            const other = new DynamoDBLockClient.FailOpen(config(env.engine, undefined, Object.assign({ owner: "other" }, settings)));
            const blockers = await Promise.all(busy.map(id => other.acquireLock(id)));
            const client = new DynamoDBLockClient.FailOpen(config(env.engine, env.proxy.endpoint, Object.assign({ retryCount: 100 }, settings)));
            await Promise.all(ids.map(id => client.acquireLock(id)));
            // Pending: waiting on the other client's locks, and in line behind this client's own.
            const pending = [...busy, ...ids.slice(0, 10)].map(id => client.acquireLock(id).then(() => "acquired", e => e.code));
            await sleep(300);
            const before = total(env.proxy.counts);
            assert.ok(before > 0);
            await client.close();
            assert.deepEqual([...new Set(await Promise.all(pending))], ["ClientClosed"]);
            // Requests sent before close() resolved may reach the proxy (in this process) a
            // little after it: one heartbeat period for them to arrive, then ten more in which
            // nothing may come. A client that went on heartbeating would send every period.
            await sleep(100);
            env.proxy.resetCounts();
            await sleep(1000);
            assert.deepEqual(env.proxy.counts, {}, "no request after close() resolved");
            await Promise.all(blockers.map(lock => lock.release()));
            await other.close();
        });

        it("with heartbeatPeriodMs 1.5 leases, \"lost\" comes before a rival in another process is granted, in every trial", async () =>
        {
            for (let trial = 0; trial < 3; trial++)
            {
                const id = uniqueId(`long-period-${trial}`);
                const holder = runScript("timely-holder.js", {
                    id,
                    config: config(env.engine, undefined, { leaseDurationMs: 1000, heartbeatPeriodMs: 1500 }),
                }, { timeoutMs: 30000 });
                try
                {
                    const first = await holder.next(l => l.acquired || l.error);
                    assert.ok(first.acquired, JSON.stringify(holder.lines));
                    const rival = new DynamoDBLockClient.FailOpen(config(env.engine, undefined, { leaseDurationMs: 1000, heartbeatPeriodMs: 300, retryCount: 20, owner: "rival" }));
                    const lock = await rival.acquireLock(id);
                    const grantedAt = Date.now();
                    const lost = await holder.next(l => l.lost);
                    assert.equal(lost.lost, "LeaseExpired");
                    assert.ok(lost.at <= grantedAt, `trial ${trial}: "lost" at ${lost.at}, the rival granted at ${grantedAt} (${lost.at - grantedAt} ms after)`);
                    assert.ok(lock.fencingToken >= 2);
                    await lock.release();
                    await rival.close();
                }
                finally
                {
                    holder.child.kill("SIGKILL");
                }
            }
        });
    });
}
