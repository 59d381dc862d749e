"use strict";

// FailOpen `session: true`: one session item per client, renewed every heartbeat period, keeps
// every lock taken through the client; the locks write nothing while held, and their lease,
// "danger" and "lost" are the session's. A waiter waits out the session's item (a whole lease
// on one version), ends the session, then takes the lock.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { performance } = require("node:perf_hooks");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId, sleep, until } = require("./helpers.js");
const { startProxy } = require("./support/proxy.js");
const { runScript } = require("./support/spawn.js");
const { documentClient } = require("./support/v2.js");
const Original = require("dynamodb-lock-client");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const TABLE = "sessions";
const SESSION_PREFIX = "dynamodb-lock-native/session/";
// A day below 2^31 - 1 ms: room for any plausible clock skew of the original with trustLocalTime.
const SESSION_LOCK_LEASE = "2061083647";

function failOpen(engine, endpoint, extra)
{
    return new DynamoDBLockClient.FailOpen(Object.assign(
        { dynamodb: dynamodbOptions(engine, endpoint), lockTable: TABLE, partitionKey: "id", leaseDurationMs: 1000 }, extra));
}

function sessionClient(engine, endpoint, extra)
{
    return failOpen(engine, endpoint, Object.assign({ session: true, heartbeatPeriodMs: 250 }, extra));
}

const sessionIdOf = item => item.lockSession && item.lockSession.S;
const sessionKey = sid => ({ id: { S: SESSION_PREFIX + sid } });
const guidHex = item => Buffer.from(item.guid.B).toString("hex");

// The session items of the table, by their partition value.
async function sessionItems(engine, table = TABLE, pk = "id")
{
    return (await engine.scan(table)).filter(i => i[pk] && i[pk].S && i[pk].S.startsWith(SESSION_PREFIX));
}

for (const name of selectedEngines())
{
    describe(`sessions (${name})`, { timeout: 240000 }, () =>
    {
        let engine;
        let proxy;
        before(async () =>
        {
            engine = await startEngine(name);
            await engine.createTable(TABLE, { partitionKey: "id" });
            await engine.createTable("ranged", { partitionKey: "pk", sortKey: "sk" });
            await engine.createTable("numbered", { partitionKey: "n", partitionType: "N" });
            proxy = await startProxy({ target: engine.endpoint });
            // A JVM's first requests are slow (slower than the short leases below): warm up.
            const warm = failOpen(engine, proxy.endpoint, { leaseDurationMs: 60000 });
            for (let round = 0; round < 3; round++)
            {
                const locks = await Promise.all(Array.from({ length: 50 }, (_, i) => warm.acquireLock(`warm-${round}-${i}`)));
                await Promise.all(locks.map(l => l.release()));
            }
            await warm.close();
        });
        after(async () =>
        {
            if (proxy)
            {
                await proxy.close();
            }
            if (engine)
            {
                await engine.stop();
            }
        });

        it("acquire and release: the lock names the session with the longest lease, the session item has the client's lease, tokens rise, a release is taken at once", async () =>
        {
            const a = sessionClient(engine, engine.endpoint, { owner: "A" });
            const b = failOpen(engine, engine.endpoint, { owner: "B", retryCount: 0 });
            try
            {
                const id = uniqueId("shape");
                const first = await a.acquireLock(id);
                assert.equal(first.fencingToken, 1);
                assert.ok(first.leaseRemainingMs > 0 && first.leaseRemainingMs <= 1000, `leaseRemainingMs ${first.leaseRemainingMs}`);
                const item = await engine.getItem(TABLE, { id: { S: id } });
                assert.equal(item.leaseDurationMs.N, SESSION_LOCK_LEASE);
                assert.equal(item.owner.S, "A");
                assert.equal(item.fencingToken.N, "1");
                const sid = sessionIdOf(item);
                assert.match(sid || "", /^[0-9a-f]{32}$/, `lockSession: ${JSON.stringify(item.lockSession)}`);
                const session = await engine.getItem(TABLE, sessionKey(sid));
                assert.ok(session, "the session's item is in the lock table");
                assert.equal(session.leaseDurationMs.N, "1000", "the session item has the client's lease");
                assert.equal(session.owner.S, "A");
                assert.equal(session.lockSession, undefined, "the session item is not itself held through a session");
                assert.equal(Buffer.from(session.guid.B).length, 64);

                // A second lock joins the same session; nothing new is written for the session.
                const id2 = uniqueId("shape2");
                const second = await a.acquireLock(id2);
                assert.equal(sessionIdOf(await engine.getItem(TABLE, { id: { S: id2 } })), sid);
                assert.equal((await sessionItems(engine)).filter(s => s.id.S === SESSION_PREFIX + sid).length, 1);

                await first.release();
                const released = await engine.getItem(TABLE, { id: { S: id } });
                assert.equal(released.leaseDurationMs.N, "1", "release: leaseDurationMs 1");
                assert.equal(first.leaseRemainingMs, 0, "a released lock has no lease left");
                assert.ok(second.leaseRemainingMs > 0, "the other lock of the session is unaffected");

                const t0 = Date.now();
                const theirs = await b.acquireLock(id);
                assert.ok(Date.now() - t0 < 500, `a released session lock is taken at once (${Date.now() - t0} ms)`);
                assert.equal(theirs.fencingToken, 2);
                const taken = await engine.getItem(TABLE, { id: { S: id } });
                assert.equal(taken.lockSession, undefined, "a client without a session writes no lockSession");
                assert.equal(taken.leaseDurationMs.N, "1000");
                await theirs.release();
                const again = await a.acquireLock(id);
                assert.equal(again.fencingToken, 3);
                assert.equal(sessionIdOf(await engine.getItem(TABLE, { id: { S: id } })), sid, "the same session, still live");
                await Promise.all([again.release(), second.release()]);
            }
            finally
            {
                await Promise.all([a.close(), b.close()]);
            }
        });

        it("on a table with a sort key the session item has the sort value \"session\"", async () =>
        {
            const a = new DynamoDBLockClient.FailOpen({
                dynamodb: dynamodbOptions(engine), lockTable: "ranged", partitionKey: "pk", sortKey: "sk",
                leaseDurationMs: 1000, heartbeatPeriodMs: 250, session: true,
            });
            try
            {
                const pk = uniqueId("ranged");
                const lock = await a.acquireLock({ pk, sk: "x" });
                const item = await engine.getItem("ranged", { pk: { S: pk }, sk: { S: "x" } });
                assert.equal(item.leaseDurationMs.N, SESSION_LOCK_LEASE);
                const session = await engine.getItem("ranged", { pk: { S: SESSION_PREFIX + sessionIdOf(item) }, sk: { S: "session" } });
                assert.ok(session, "session item under sort value \"session\"");
                assert.equal(session.leaseDurationMs.N, "1000");
                await lock.release();
            }
            finally
            {
                await a.close();
            }
        });

        it("50 locks held through one session for 3 s (heartbeat 250 ms) cost about one write per heartbeat period, and none on the locks", async () =>
        {
            proxy.clearFaults();
            // A lease of 3 s: a renewal slowed by a busy machine is no "danger" (the count is per period).
            const a = sessionClient(engine, proxy.endpoint, { leaseDurationMs: 3000, heartbeatPeriodMs: 250 });
            try
            {
                const prefix = uniqueId("count");
                const ids = Array.from({ length: 50 }, (_, i) => `${prefix}-${i}`);
                const locks = await Promise.all(ids.map(id => a.acquireLock(id)));
                const events = [];
                locks.forEach(l => { l.on("error", e => events.push(["error", e.code])); l.on("lost", e => events.push(["lost", e.code])); l.on("danger", () => events.push(["danger"])); });
                const sid = sessionIdOf(await engine.getItem(TABLE, { id: { S: ids[0] } }));
                const before = await Promise.all(ids.map(id => engine.getItem(TABLE, { id: { S: id } })));
                const sessionBefore = await engine.getItem(TABLE, sessionKey(sid));
                proxy.resetCounts();
                const t0 = Date.now();
                await sleep(3000);
                const writes = (proxy.counts.UpdateItem || 0) + (proxy.counts.PutItem || 0) + (proxy.counts.DeleteItem || 0);
                const elapsed = Date.now() - t0;
                const periods = elapsed / 250;
                // Per-lock heartbeats would cost 50 writes per period (600 here); one session
                // renewal per period is about 12. Bounds: below 2 per period, at least a third of one.
                assert.ok(writes <= 2 * periods + 2, `${writes} writes in ${elapsed} ms (${JSON.stringify(proxy.counts)})`);
                assert.ok(writes >= periods / 3, `the session was renewed: ${writes} writes in ${elapsed} ms`);
                assert.equal(proxy.counts.GetItem || 0, 0, JSON.stringify(proxy.counts));
                const after = await Promise.all(ids.map(id => engine.getItem(TABLE, { id: { S: id } })));
                for (let i = 0; i < locks.length; i++)
                {
                    assert.equal(guidHex(after[i]), guidHex(before[i]), `lock ${i}'s item was not written while held`);
                    assert.deepEqual(after[i].lockWrittenUnixMs, before[i].lockWrittenUnixMs);
                }
                const sessionAfter = await engine.getItem(TABLE, sessionKey(sid));
                assert.notEqual(guidHex(sessionAfter), guidHex(sessionBefore), "the renewals rotated the session's guid");
                assert.deepEqual(events, []);
                assert.ok(locks.every(l => l.leaseRemainingMs > 0), "every lease has time left");
                await Promise.all(locks.map(l => l.release()));
            }
            finally
            {
                await a.close();
            }
        });

        it("a holder of 5 session locks killed with SIGKILL: waiters (with and without a session) take each after a session lease, ending the session, tokens higher", async () =>
        {
            const ids = Array.from({ length: 5 }, () => uniqueId("killed"));
            const holder = runScript("session-holder.js", {
                ids,
                config: { dynamodb: dynamodbOptions(engine), lockTable: TABLE, partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 250, session: true, owner: "child" },
            });
            const plain = failOpen(engine, engine.endpoint, { leaseDurationMs: 1000, owner: "plain", retryCount: 2 });
            const withSession = sessionClient(engine, engine.endpoint, { owner: "sessioned", retryCount: 2 });
            try
            {
                const held = await holder.next(l => l.acquired || l.failed, 30000);
                assert.ok(held.acquired, JSON.stringify(holder.lines));
                const sid = sessionIdOf(await engine.getItem(TABLE, { id: { S: ids[0] } }));
                // Let the session renew a few times, then kill.
                await sleep(700);
                holder.kill();
                await holder.exited;
                const t0 = Date.now();
                const granted = await Promise.all(ids.map((id, i) =>
                    (i % 2 === 0 ? plain : withSession).acquireLock(id).then(lock => ({ lock, ms: Date.now() - t0 }))));
                for (let i = 0; i < ids.length; i++)
                {
                    const { lock, ms } = granted[i];
                    assert.ok(ms >= 950, `lock ${i} taken after ${ms} ms: the session's lease was waited out`);
                    assert.ok(ms < 1000 + 2500, `lock ${i} taken after ${ms} ms: within a lease and a margin`);
                    assert.ok(lock.fencingToken > held.tokens[i], `token ${lock.fencingToken} > ${held.tokens[i]}`);
                }
                const session = await engine.getItem(TABLE, sessionKey(sid));
                assert.equal(session.leaseDurationMs.N, "1", "the dead session was ended (leaseDurationMs 1)");
                const items = await Promise.all(ids.map(id => engine.getItem(TABLE, { id: { S: id } })));
                assert.equal(items[0].owner.S, "plain");
                assert.equal(items[0].lockSession, undefined);
                assert.equal(items[0].leaseDurationMs.N, "1000");
                assert.equal(items[1].owner.S, "sessioned");
                const newSid = sessionIdOf(items[1]);
                assert.ok(newSid && newSid !== sid, "taken through the waiter's own session");
                assert.equal(items[1].leaseDurationMs.N, SESSION_LOCK_LEASE);
                await Promise.all(granted.map(g => g.lock.release()));
            }
            finally
            {
                holder.kill();
                await Promise.all([plain.close(), withSession.close()]);
            }
        });

        it("close() without releaseLocks abandons the session: its locks count the session's lease down, are lost once at its end, and are taken after one lease, not at once", async () =>
        {
            const a = sessionClient(engine, engine.endpoint);
            const b = failOpen(engine, engine.endpoint, { retryCount: 2 });
            try
            {
                const ids = [uniqueId("abandon"), uniqueId("abandon")];
                const locks = await Promise.all(ids.map(id => a.acquireLock(id)));
                const lost = locks.map(() => []);
                locks.forEach((l, i) => l.on("lost", error => lost[i].push({ error, at: Date.now() })));
                await a.close();
                const left = locks.map(l => l.leaseRemainingMs);
                assert.ok(left.every(ms => ms > 0 && ms <= 1000), `an abandoned lock holds until the session's lease ends: ${left}`);
                assert.ok(locks.every(l => !l.lost && !l.signal.aborted));
                const t0 = Date.now();
                const taken = await Promise.all(ids.map(id => b.acquireLock(id)));
                const ms = Date.now() - t0;
                assert.ok(ms >= 950 && ms < 3500, `taken after ${ms} ms`);
                assert.deepEqual(taken.map(l => l.fencingToken), [2, 2]);
                await sleep(300);
                assert.deepEqual(lost.map(events => events.map(e => e.error.code)), [["LeaseExpired"], ["LeaseExpired"]]);
                assert.ok(lost.every(events => events[0].at <= t0 + ms), "lost before the rival's grant");
                assert.ok(locks.every(l => l.lost && l.signal.aborted && l.leaseRemainingMs === 0));
                // A release of a lock lost this way is quiet, as any FailOpen lock's whose lease
                // lapsed, and leaves the rival's hold (or its release) as it is.
                await locks[0].release();
                const held = await engine.getItem(TABLE, { id: { S: ids[0] } });
                assert.equal(held.fencingToken.N, "2");
                assert.notEqual(held.leaseDurationMs.N, "1", "the rival still holds it");
                await Promise.all(taken.map(l => l.release()));
                await locks[1].release();
            }
            finally
            {
                await Promise.all([a.close(), b.close()]);
            }
        });

        it("a waiter whose session item vanished while it waited takes the lock through a new session, as its retries allow", async () =>
        {
            const id = uniqueId("vanished");
            const owner = uniqueId("vanishing-waiter");
            const holder = failOpen(engine, engine.endpoint, { heartbeatPeriodMs: 250 });
            const waiter = sessionClient(engine, engine.endpoint, { owner, retryCount: 20 });
            try
            {
                const held = await holder.acquireLock(id);
                const pending = waiter.acquireLock(id).then(lock => ({ lock }), error => ({ error }));
                let session;
                await until(async () => (session = (await sessionItems(engine)).find(i => i.owner && i.owner.S === owner)) !== undefined, 5000, "the waiter's session");
                await engine.deleteItem(TABLE, { id: session.id });
                // Its renewal finds the item gone: the session is lost.
                await sleep(800);
                await held.release();
                const { lock, error } = await pending;
                assert.equal(error, undefined, `the acquisition failed: ${error && error.code}`);
                // A take through the ended session (given back at once) may have come first.
                assert.ok(lock.fencingToken >= 2, `token ${lock.fencingToken}`);
                const item = await engine.getItem(TABLE, { id: { S: id } });
                assert.ok(sessionIdOf(item) && SESSION_PREFIX + sessionIdOf(item) !== session.id.S, "held through a new session");
                await lock.release();
            }
            finally
            {
                await Promise.all([holder.close(), waiter.close()]);
            }
        });

        it("a partition: every lock of the session emits \"danger\" then \"lost\", before a rival connected directly is granted (3 trials)", async () =>
        {
            for (let trial = 0; trial < 3; trial++)
            {
                proxy.clearFaults();
                const holder = sessionClient(engine, proxy.endpoint, { leaseDurationMs: 1000, heartbeatPeriodMs: 250 });
                const rival = failOpen(engine, engine.endpoint, { leaseDurationMs: 60000, retryCount: 2 });
                try
                {
                    const ids = Array.from({ length: 4 }, () => uniqueId("partition"));
                    const locks = [];
                    for (const id of ids)
                    {
                        locks.push(await holder.acquireLock(id));
                    }
                    const events = locks.map(() => []);
                    const lost = locks.map((lock, i) =>
                    {
                        lock.on("error", () => {});
                        lock.on("danger", () => events[i].push(["danger", performance.now()]));
                        return new Promise(resolve => lock.on("lost", e => { events[i].push(["lost", performance.now()]); resolve(e); }));
                    });
                    await sleep(100 + trial * 53);
                    proxy.setFaults({ hangRate: 1 });
                    const grants = ids.map(id => rival.acquireLock(id).then(l => ({ lock: l, at: performance.now() })));
                    const reasons = await Promise.all(lost);
                    const granted = await Promise.all(grants);
                    for (let i = 0; i < locks.length; i++)
                    {
                        assert.equal(reasons[i].code, "LeaseExpired", `trial ${trial} lock ${i}`);
                        const at = kind => (events[i].find(e => e[0] === kind) || [])[1];
                        assert.ok(at("danger") !== undefined && at("danger") < at("lost"), `trial ${trial} lock ${i}: "danger" before "lost": ${JSON.stringify(events[i])}`);
                        assert.equal(events[i].filter(e => e[0] === "lost").length, 1, "one \"lost\"");
                        // As in timely-loss.test.js: the two reach JavaScript through two channels.
                        assert.ok(at("lost") <= granted[i].at + 2, `trial ${trial} lock ${i}: "lost" (${at("lost")}) no later than the grant (${granted[i].at})`);
                        assert.equal(locks[i].leaseRemainingMs, 0);
                        assert.ok(granted[i].lock.fencingToken > locks[i].fencingToken);
                    }
                    proxy.clearFaults();
                    await Promise.all(granted.map(g => g.lock.release()));
                }
                finally
                {
                    proxy.clearFaults();
                    await Promise.all([holder.close(), rival.close()]);
                }
            }
        });

        it("a session holder paused longer than the lease reads 0 lease left on resume, and every lock is lost", async () =>
        {
            proxy.clearFaults();
            const ids = [uniqueId("paused"), uniqueId("paused"), uniqueId("paused")];
            const holder = runScript("session-holder.js", {
                ids,
                config: { dynamodb: dynamodbOptions(engine, proxy.endpoint), lockTable: TABLE, partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 250, session: true },
            });
            const waiter = failOpen(engine, engine.endpoint, { leaseDurationMs: 60000, retryCount: 2 });
            try
            {
                const held = await holder.next(l => l.acquired || l.failed, 30000);
                assert.ok(held.acquired, JSON.stringify(holder.lines));
                // Stop it just after a renewal was sent (the session's UpdateItem).
                let stoppedAt;
                await new Promise(resolve =>
                {
                    proxy.onRequest = op =>
                    {
                        if (op === "UpdateItem" && !stoppedAt)
                        {
                            proxy.onRequest = undefined;
                            setTimeout(() => { holder.child.kill("SIGSTOP"); stoppedAt = Date.now(); resolve(); }, 30);
                        }
                    };
                });
                const theirs = await waiter.acquireLock(ids[0]);
                const grantedAfter = Date.now() - stoppedAt;
                assert.ok(grantedAfter >= 900 && grantedAfter < 2800, `the waiter was granted ${grantedAfter} ms into the pause`);
                await sleep(3000 - (Date.now() - stoppedAt));
                holder.child.kill("SIGCONT");
                const resumed = await holder.next(l => l.resumed, 10000);
                const sigcont = await holder.next(l => l.sigcont, 10000);
                await until(() => holder.lines.filter(l => l.lost !== undefined).length === ids.length, 5000, "every lock lost");
                assert.deepEqual(resumed.leaseRemainingMs, [0, 0, 0], JSON.stringify(holder.lines));
                assert.deepEqual(sigcont.leaseRemainingMs, [0, 0, 0], JSON.stringify(holder.lines));
                const losts = holder.lines.filter(l => l.lost !== undefined);
                assert.deepEqual(losts.map(l => l.lost).sort(), [0, 1, 2]);
                assert.ok(losts.every(l => l.code === "LeaseExpired"), JSON.stringify(losts));
                // The lock taken during the pause is still the waiter's.
                const item = await engine.getItem(TABLE, { id: { S: ids[0] } });
                assert.equal(item.fencingToken.N, String(theirs.fencingToken));
                assert.equal(item.leaseDurationMs.N, "60000");
                await theirs.release();
            }
            finally
            {
                proxy.onRequest = undefined;
                holder.child.kill("SIGCONT");
                holder.kill();
                await waiter.close();
            }
        });

        it("the original library cannot take a live session's lock, and takes it at once after our release", async () =>
        {
            const a = sessionClient(engine, engine.endpoint, { owner: "native" });
            let child;
            try
            {
                const id = uniqueId("original");
                const lock = await a.acquireLock(id);
                // The original reads leaseDurationMs 2147483647 and sleeps that long before its
                // conditional put: in a child process, since its timer would hold this one.
                child = runScript("original-child.js", {
                    kind: "FailOpen", id, then: "hold",
                    config: { dynamodb: { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials }, lockTable: TABLE, partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 0, retryCount: 1, owner: "original" },
                }, { timeoutMs: 20000 });
                await sleep(3500);
                assert.deepEqual(child.lines, [], "the original got nothing in 3.5 s (3 session leases)");
                child.kill();
                const item = await engine.getItem(TABLE, { id: { S: id } });
                assert.equal(item.owner.S, "native");
                assert.equal(item.fencingToken.N, String(lock.fencingToken));
                assert.ok(lock.leaseRemainingMs > 0);
                await lock.release();
                const original = new Original.FailOpen({ dynamodb: documentClient(engine), lockTable: TABLE, partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 0, retryCount: 1, owner: "original" });
                const t0 = Date.now();
                const theirs = await new Promise((resolve, reject) => original.acquireLock(id, (e, l) => (e ? reject(e) : resolve(l))));
                assert.ok(Date.now() - t0 < 500, `the original took it after ${Date.now() - t0} ms`);
                assert.equal(theirs.fencingToken, lock.fencingToken + 1);
                const its = await engine.getItem(TABLE, { id: { S: id } });
                assert.equal(its.owner.S, "original");
                await new Promise(resolve => theirs.release(resolve));
            }
            finally
            {
                if (child)
                {
                    child.kill();
                }
                await a.close();
            }
        });

        // The original with trustLocalTime counts the lease from lockAcquiredTimeUnixMs, which a
        // session lock always carries: it waits ~23.9 days from the acquisition, not 1 ms. A
        // clock behind ours lengthens that wait: past 2^31 - 1 ms its timer would fire at once.
        for (const clockOffsetMs of [0, -1000])
        it(`the original with trustLocalTime cannot take a live session's lock (its clock ${clockOffsetMs} ms off)`, async () =>
        {
            const a = sessionClient(engine, engine.endpoint, { owner: "native" });
            let child;
            try
            {
                const id = uniqueId("original-trusting");
                const lock = await a.acquireLock(id);
                let lost = null;
                lock.on("lost", e => (lost = e));
                const before = await engine.getItem(TABLE, { id: { S: id } });
                assert.ok(before.lockAcquiredTimeUnixMs, "a session lock carries its acquisition time");
                // In a child: the original sleeps ~24.8 days on a timer of that process.
                child = runScript("original-child.js", {
                    kind: "FailOpen", id, then: "hold", clockOffsetMs,
                    config: { dynamodb: { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials }, lockTable: TABLE, partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 0, retryCount: 0, trustLocalTime: true, owner: "original" },
                }, { timeoutMs: 20000 });
                const outcome = await child.next(l => l.acquired || l.error, 3000).catch(() => ({ none: true }));
                assert.deepEqual(outcome, { none: true }, "the original got nothing while the session lives");
                const after = await engine.getItem(TABLE, { id: { S: id } });
                assert.equal(after.owner.S, "native");
                assert.equal(after.fencingToken.N, before.fencingToken.N);
                assert.equal(lost, null);
                assert.ok(lock.leaseRemainingMs > 0);
                await lock.release();
            }
            finally
            {
                if (child)
                {
                    child.kill();
                }
                await a.close();
            }
        });

        it("close({ releaseLocks: true }) releases a hundred session locks and the session item", async () =>
        {
            const a = sessionClient(engine, engine.endpoint, { leaseDurationMs: 2000, heartbeatPeriodMs: 500 });
            const prefix = uniqueId("hundred");
            const ids = Array.from({ length: 100 }, (_, i) => `${prefix}-${i}`);
            const locks = await Promise.all(ids.map(id => a.acquireLock(id)));
            const sid = sessionIdOf(await engine.getItem(TABLE, { id: { S: ids[0] } }));
            const lost = [];
            locks.forEach(l => l.on("lost", e => lost.push(e.code)));
            await a.close({ releaseLocks: true });
            const items = await Promise.all(ids.map(id => engine.getItem(TABLE, { id: { S: id } })));
            const notReleased = items.filter(i => i.leaseDurationMs.N !== "1").map(i => i.id.S);
            assert.deepEqual(notReleased, [], "every lock item released");
            assert.ok(items.every(i => sessionIdOf(i) === sid));
            const session = await engine.getItem(TABLE, sessionKey(sid));
            assert.equal(session.leaseDurationMs.N, "1", "the session item released too");
            assert.ok(locks.every(l => l.leaseRemainingMs === 0));
            assert.deepEqual(lost, [], "a release is no loss");
            // Nothing is left to wait out.
            const b = failOpen(engine, engine.endpoint, { retryCount: 0 });
            const t0 = Date.now();
            const taken = await Promise.all(ids.slice(0, 10).map(id => b.acquireLock(id)));
            assert.ok(Date.now() - t0 < 1000, `taken at once (${Date.now() - t0} ms)`);
            await Promise.all(taken.map(l => l.release()));
            await b.close();
        });

        it("a table whose partition key is a number refuses a session with an error naming sessions and string keys", async () =>
        {
            const a = new DynamoDBLockClient.FailOpen({
                dynamodb: dynamodbOptions(engine), lockTable: "numbered", partitionKey: "n",
                leaseDurationMs: 1000, heartbeatPeriodMs: 250, session: true, retryCount: 0,
            });
            try
            {
                const error = await a.acquireLock(42).then(() => null, e => e);
                assert.ok(error, "the first acquisition rejects");
                assert.equal(error.code, "ValidationException", `${error.code}: ${error.message}`);
                assert.match(error.message, /^session: true needs the lock table "numbered"'s partition key "n" to be of type S/);
                assert.doesNotMatch(error.message, /lock ids/, "said once, as the session's");
                const item = await engine.getItem("numbered", { n: { N: "42" } });
                assert.equal(item, undefined, "no lock was written");
                // Without a session the same table works.
                const plain = new DynamoDBLockClient.FailOpen({ dynamodb: dynamodbOptions(engine), lockTable: "numbered", partitionKey: "n", leaseDurationMs: 1000 });
                const lock = await plain.acquireLock(42);
                await lock.release();
                await plain.close();
            }
            finally
            {
                await a.close();
            }
        });

        it("another refusal of the session's item is reported as DynamoDB said it, not as the key's type", async () =>
        {
            // DynamoDB takes table names of 3 characters or more.
            const a = new DynamoDBLockClient.FailOpen({
                dynamodb: dynamodbOptions(engine), lockTable: "ab", partitionKey: "id",
                leaseDurationMs: 1000, heartbeatPeriodMs: 250, session: true, retryCount: 0,
                allowEventuallyConsistentGlobalTable: true,
            });
            try
            {
                const error = await a.acquireLock("x").then(() => null, e => e);
                assert.ok(error, "the first acquisition rejects");
                assert.equal(error.code, "ValidationException", `${error.code}: ${error.message}`);
                assert.match(error.message, /table ?(\/index )?name/i);
                assert.doesNotMatch(error.message, /type S|string keys/);
            }
            finally
            {
                await a.close();
            }
        });
    });
}

describe("session validation", () =>
{
    const base = {
        dynamodb: { endpoint: "http://127.0.0.1:9", region: "us-east-1", credentials: { accessKeyId: "dummy", secretAccessKey: "dummy" } },
        lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000,
    };
    const refuses = (extra, pattern) => assert.throws(() => new DynamoDBLockClient.FailOpen(Object.assign({}, base, extra)),
        e => e.name === "ValidationError" && e.details.some(d => d.path.join(".") === "session" && pattern.test(d.message)),
        JSON.stringify(extra));
    const user = { get() {}, put() {}, delete() {} };

    it("needs a heartbeat period above 0 and below the lease", () =>
    {
        refuses({ session: true }, /heartbeatPeriodMs/);
        refuses({ session: true, heartbeatPeriodMs: 0 }, /heartbeatPeriodMs/);
        refuses({ session: true, heartbeatPeriodMs: 1000 }, /below leaseDurationMs/);
        refuses({ session: true, heartbeatPeriodMs: 1500 }, /below leaseDurationMs/);
    });

    it("refuses a user dynamodb object and transport \"object\"", () =>
    {
        refuses({ session: true, heartbeatPeriodMs: 300, dynamodb: user }, /native core's I\/O/);
        refuses({ session: true, heartbeatPeriodMs: 300, dynamodb: user, transport: "object" }, /native core's I\/O/);
    });

    it("accepts a heartbeat period below the lease, and session: false as before", () =>
    {
        new DynamoDBLockClient.FailOpen(Object.assign({}, base, { session: true, heartbeatPeriodMs: 999 })).close();
        new DynamoDBLockClient.FailOpen(Object.assign({}, base, { session: false })).close();
        new DynamoDBLockClient.FailOpen(Object.assign({}, base, { session: false, dynamodb: user })).close();
    });
});
