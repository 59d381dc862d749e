"use strict";

// Contended locks: acquisitions of one client wait in a local line and are handed the lock
// in arrival order without polling; waiting for a busy lock is not a failed attempt; the
// original library sharing the lock is still excluded and fencing tokens keep rising.

const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, sleep, uniqueId } = require("./helpers.js");
const { engineAndProxy } = require("./support/engine-and-proxy.js");
const { documentClient } = require("./support/v2.js");
const Original = require("dynamodb-lock-client");

// `tasks` async tasks of one client loop `rounds` times: acquire, hold `holdMs`, release.
// Task i first asks i * 3 ms after the start. Returns every grant in grant order.
async function pool(client, id, { tasks, rounds, holdMs })
{
    const grants = [];
    await Promise.all(Array.from({ length: tasks }, async (_, task) =>
        {
            await sleep(task * 3);
            for (let round = 0; round < rounds; round++)
            {
                const lock = await client.acquireLock(id);
                const start = performance.now();
                await sleep(holdMs);
                const end = performance.now();
                grants.push({ task, round, token: lock.fencingToken, start, end });
                await lock.release();
            }
        }));
    return grants.sort((a, b) => a.start - b.start);
}

function assertExclusive(grants)
{
    for (let k = 1; k < grants.length; k++)
    {
        assert.ok(grants[k].start >= grants[k - 1].end,
            `holds overlap: ${JSON.stringify(grants[k - 1])} and ${JSON.stringify(grants[k])}`);
    }
}

for (const engineName of selectedEngines())
{
    describe(`contended locks on ${engineName}`, { timeout: 120000 }, () =>
    {
        const env = engineAndProxy(engineName, { locks: { partitionKey: "id" } });

        const viaProxy = extra => Object.assign(
            { dynamodb: dynamodbOptions(env.engine, env.proxy.endpoint), lockTable: "locks", partitionKey: "id" }, extra);
        const counted = async run =>
        {
            const before = Object.assign({}, env.proxy.counts);
            await run();
            const delta = {};
            for (const [op, n] of Object.entries(env.proxy.counts))
            {
                delta[op] = n - (before[op] || 0);
            }
            return delta;
        };

        it("FailOpen: five tasks of one client are served in turn, handed over without polling", async () =>
            {
                const client = new DynamoDBLockClient.FailOpen(viaProxy({ leaseDurationMs: 10000, heartbeatPeriodMs: 3000 }));
                const id = uniqueId("pool-open");
                let grants;
                const requests = await counted(async () => (grants = await pool(client, id, { tasks: 5, rounds: 4, holdMs: 10 })));
                assert.equal(grants.length, 20);
                assertExclusive(grants);
                assert.deepEqual(grants.map(g => g.token), grants.map((_, k) => k + 1), "tokens rise by one per grant");
                // While others wait, each task comes back after the four others: turns in arrival order.
                assert.deepEqual(grants.slice(0, 10).map(g => g.task), [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
                assert.equal(requests.GetItem || 0, 0, `no waiter polled: ${JSON.stringify(requests)}`);
                // One write per grant and one release: the first acquisition, then hand-overs,
                // and whatever the line's end costs (a task that finds the lock released).
                assert.ok(requests.UpdateItem <= 20 + 5, `requests: ${JSON.stringify(requests)}`);
                const item = await env.engine.getItem("locks", { id: { S: id } });
                assert.equal(item.leaseDurationMs.N, "1", "released at the end");
                assert.equal(item.fencingToken.N, "20");
            });

        it("FailClosed: five tasks of one client are served in turn, handed over without polling", async () =>
            {
                // A waiter in the line gives up after acquirePeriodMs × retryCount with one
                // holder: 2 s, well past a hold and its hand-over write on a busy engine.
                const client = new DynamoDBLockClient.FailClosed(viaProxy({ acquirePeriodMs: 100, retryCount: 20 }));
                const id = uniqueId("pool-closed");
                let grants;
                const requests = await counted(async () => (grants = await pool(client, id, { tasks: 5, rounds: 4, holdMs: 10 })));
                assert.equal(grants.length, 20);
                assertExclusive(grants);
                assert.deepEqual(grants.slice(0, 10).map(g => g.task), [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]);
                assert.equal(requests.GetItem || 0, 0, `no waiter polled: ${JSON.stringify(requests)}`);
                assert.ok(requests.UpdateItem >= 15, `hand-overs are writes: ${JSON.stringify(requests)}`);
                assert.equal(await env.engine.getItem("locks", { id: { S: id } }), undefined, "deleted at the end");
            });

        it("a local waiter gives up on one holder after retryCount + 1 leases", async () =>
            {
                const client = new DynamoDBLockClient.FailOpen(viaProxy({ leaseDurationMs: 400, heartbeatPeriodMs: 100 }));
                const id = uniqueId("patience");
                // Patience runs from when the holder's acquisition began (its turn in the line).
                const t0 = performance.now();
                const held = await client.acquireLock(id);
                await assert.rejects(client.acquireLock(id), e => e.code === "FailedToAcquireLock");
                const waited = performance.now() - t0;
                assert.ok(waited >= 790 && waited < 2000, `waited ${waited} ms`);
                await held.release();
                const again = await client.acquireLock(id);
                await again.release();
            });

        it("an aborted waiter leaves the line; the next one is still handed the lock", async () =>
            {
                const client = new DynamoDBLockClient.FailOpen(viaProxy({ leaseDurationMs: 10000, heartbeatPeriodMs: 3000 }));
                const id = uniqueId("abort-line");
                const held = await client.acquireLock(id);
                const ac = new AbortController();
                const quitter = client.acquireLock(id, { signal: ac.signal });
                const next = client.acquireLock(id);
                await sleep(50);
                ac.abort();
                await assert.rejects(quitter, e => e.code === "AbortError");
                await held.release();
                const lock = await next;
                assert.equal(lock.fencingToken, held.fencingToken + 1);
                await lock.release();
            });

        it("with default retryCount, waiting for a busy lock held by other clients does not fail", async () =>
            {
                const id = uniqueId("busy");
                const busy = new DynamoDBLockClient.FailOpen(viaProxy({ leaseDurationMs: 1000, heartbeatPeriodMs: 250 }));
                let stop = false;
                const churn = (async () =>
                    {
                        for (let i = 0; i < 200 && !stop; i++)
                        {
                            const l = await busy.acquireLock(id);
                            await sleep(20);
                            await l.release();
                        }
                    })();
                await sleep(50);
                // Three clients (as three processes would be) each ask once, with the defaults.
                const waiters = [1, 2, 3].map(() => new DynamoDBLockClient.FailOpen(viaProxy({ leaseDurationMs: 1000, heartbeatPeriodMs: 250 })));
                const results = await Promise.allSettled(waiters.map(async w =>
                    {
                        const l = await w.acquireLock(id);
                        await sleep(20);
                        await l.release();
                        return l.fencingToken;
                    }));
                stop = true;
                await churn;
                assert.deepEqual(results.map(r => r.status), ["fulfilled", "fulfilled", "fulfilled"],
                    JSON.stringify(results.map(r => r.reason && r.reason.code)));
            });

        it("the original library sharing the lock is excluded, and tokens keep rising", async () =>
            {
                const id = uniqueId("mixed-line");
                const ours = new DynamoDBLockClient.FailOpen(viaProxy({ leaseDurationMs: 1000, heartbeatPeriodMs: 250 }));
                const original = new Original.FailOpen({
                    dynamodb: documentClient(env.engine), lockTable: "locks", partitionKey: "id",
                    leaseDurationMs: 1000, heartbeatPeriodMs: 250, retryCount: 100,
                });
                const theirs = [];
                const originalLoop = (async () =>
                    {
                        for (let i = 0; i < 3; i++)
                        {
                            const lock = await new Promise((resolve, reject) => original.acquireLock(id, (e, l) => (e ? reject(e) : resolve(l))));
                            lock.on("error", () => {});
                            const start = performance.now();
                            await sleep(10);
                            theirs.push({ task: "original", token: lock.fencingToken, start, end: performance.now() });
                            await new Promise(resolve => lock.release(() => resolve()));
                            await sleep(30);
                        }
                    })();
                const mine = await pool(ours, id, { tasks: 3, rounds: 5, holdMs: 10 });
                await originalLoop;
                const all = mine.concat(theirs).sort((a, b) => a.start - b.start);
                assert.equal(all.length, 18);
                assertExclusive(all);
                for (let k = 1; k < all.length; k++)
                {
                    assert.ok(all[k].token > all[k - 1].token, `tokens rise in grant order: ${all.map(g => g.token)}`);
                }
            });
    });
}
