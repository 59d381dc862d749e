"use strict";

// What waiting costs: a waiter of each kind (FailOpen, FailClosed, a Fifo waiter, a campaign()
// follower) waits four seconds for a lock held elsewhere, at the README's timing (lease 10 s,
// heartbeats every 3 s), through a loopback proxy that counts its requests. Its re-reads slow
// with the time it has waited (rereadPeriodMs, 10 ms, plus half the time waited: reads at about
// 10, 25, 47, 80, 130, 205, 317, 485, 737, 1115, 1682, 2533 and 3809 ms), so it sends about 13
// reads where a fixed 10 ms re-read sent some 400, and it still takes the lock once it is
// released.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, failClosed, failOpen, uniqueId, sleep, until } = require("./helpers.js");
const { startProxy } = require("./support/proxy.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const LEASE_MS = 10000;
const HEARTBEAT_MS = 3000;
const WAIT_MS = 4000;
// The reads of a 4 s wait at the pace above, and room for a slow answer or two.
const MOST_READS = 15;

const count = (proxy, op) => proxy.counts[op] || 0;
const writes = proxy => count(proxy, "PutItem") + count(proxy, "UpdateItem") + count(proxy, "DeleteItem");

for (const engineName of selectedEngines())
{
    describe(`waiting on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        const proxies = [];
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("fifo", { partitionKey: "pk", sortKey: "sk" });
            }
        );
        after(async () =>
            {
                await Promise.all(proxies.map(p => p.close()));
                if (engine)
                {
                    await engine.stop();
                }
            }
        );

        const viaProxy = async () =>
        {
            const proxy = await startProxy({ target: engine.endpoint });
            proxies.push(proxy);
            return { proxy, dynamodb: dynamodbOptions(engine, proxy.endpoint) };
        };
        const open = extra => failOpen(engine, Object.assign({ leaseDurationMs: LEASE_MS, heartbeatPeriodMs: HEARTBEAT_MS }, extra));
        const fifo = extra => new DynamoDBLockClient.Fifo(Object.assign(
            { dynamodb: dynamodbOptions(engine), lockTable: "fifo", partitionKey: "pk", sortKey: "sk", leaseDurationMs: LEASE_MS, heartbeatPeriodMs: HEARTBEAT_MS },
            extra));

        // Starts `wait()` (an acquisition through `proxy`), lets it wait WAIT_MS while the lock is
        // held, checks what it sent, then `release()`s the holder and awaits the acquisition.
        async function waitFor(what, proxy, wait, release, mostWrites, leastReads = 5, client = undefined)
        {
            const waiting = wait();
            await sleep(WAIT_MS);
            const reads = count(proxy, "GetItem");
            if (client)
            {
                // metrics() tells the waiting apart: every read, and the mark or queue upkeep. A
                // request is counted as it is sent and reaches the proxy a moment later: the two
                // are compared once none is between them (a queue entry's renewal may be).
                const counted = () => Object.values(client.metrics().requestsByPurpose).reduce((a, b) => a + b, 0);
                const sent = () => Object.values(proxy.counts).reduce((a, b) => a + b, 0);
                await until(() => counted() === sent(), 2000, `${what}: the requests counted reach the proxy`).catch(() => {});
                const byPurpose = client.metrics().requestsByPurpose;
                assert.equal(byPurpose.acquiring + byPurpose.waiting + byPurpose.heartbeats + byPurpose.releasing, sent(),
                    `${what}: ${JSON.stringify(byPurpose)} against ${JSON.stringify(proxy.counts)}`);
                assert.ok(byPurpose.waiting >= reads, `${what}: ${JSON.stringify(byPurpose)}`);
            }
            assert.ok(reads >= leastReads && reads <= MOST_READS, `${what}: ${reads} reads in ${WAIT_MS} ms of waiting`);
            assert.ok(writes(proxy) <= mostWrites, `${what}: ${writes(proxy)} writes in ${WAIT_MS} ms: ${JSON.stringify(proxy.counts)}`);
            const readBefore = count(proxy, "GetItem");
            await release();
            const won = await waiting;
            // The release is seen by the next read: one more, and the taking write.
            assert.ok(count(proxy, "GetItem") <= readBefore + 2, `${what}: ${JSON.stringify(proxy.counts)}`);
            return won;
        }

        it("a FailOpen waiter reads a few times in seconds, marks its place once, and takes the released lock", async () =>
            {
                const id = uniqueId("w-open");
                const held = await open().acquireLock(id);
                const { proxy, dynamodb } = await viaProxy();
                const waiter = open({ dynamodb, retryCount: 100 });
                // The refused take, the first-in-line mark, and its renewal past a heartbeat
                // period.
                const lock = await waitFor("FailOpen", proxy, () => waiter.acquireLock(id), () => held.release(), 3, 5, waiter);
                assert.equal(lock.fencingToken, 2);
                await lock.release();
            }
        );

        it("a FailClosed waiter reads a few times between attempts", async () =>
            {
                const id = uniqueId("w-closed");
                const held = await failClosed(engine).acquireLock(id);
                const { proxy, dynamodb } = await viaProxy();
                const waiter = failClosed(engine, { dynamodb, acquirePeriodMs: 6000, retryCount: 1 });
                // The refused put and the first-in-line mark. An engine that does not return the
                // item with a refusal (dynalite) leaves the waiter unaware that it is first: it
                // does not read at all, and only tries again after acquirePeriodMs.
                const leastReads = engineName === "dynalite" ? 0 : 5;
                const lock = await waitFor("FailClosed", proxy, () => waiter.acquireLock(id), () => held.release(), 2, leastReads, waiter);
                await lock.release();
            }
        );

        it("a Fifo waiter next in line reads the head a few times in seconds", async () =>
            {
                const id = uniqueId("w-fifo");
                const held = await fifo().acquireLock(id);
                const { proxy, dynamodb } = await viaProxy();
                const waiter = fifo({ dynamodb });
                // The refused take, the ticket and the place in the queue, the queue entry, and at
                // most one renewal of the entry in 4 s: entries renew every half lease (5 s), not
                // at the 3 s heartbeat period.
                const lock = await waitFor("Fifo", proxy, () => waiter.acquireLock(id, { waitMs: 60000 }), () => held.release(), 4, 5, waiter);
                assert.equal(lock.fencingToken, 2);
                await lock.release();
            }
        );

        it("a campaign() follower reads a few times in seconds, and is elected once the leader resigns", async () =>
            {
                const id = uniqueId("w-elect");
                const leader = open().campaign(id);
                await until(() => leader.leader !== undefined, 5000, "the leader's election");
                const { proxy, dynamodb } = await viaProxy();
                const follower = open({ dynamodb }).campaign(id);
                const elected = () => until(() => follower.leader !== undefined, 30000, "the follower's election");
                await waitFor("campaign() follower", proxy, elected, () => leader.resign(), 3);
                assert.equal(follower.leader.term, 2);
                await follower.resign();
            }
        );
    });
}
