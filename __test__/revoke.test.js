"use strict";

// A forced release revokes: the holder hears "lost" before a rival in another process can be
// granted the lock, for a per-lock FailOpen holder, a holder through a session and a Fifo head;
// a FailClosed lock is refused without `now`; `now` frees at once and says what it risks.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId, sleep, until } = require("./helpers.js");
const { runScript } = require("./support/spawn.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const LEASE = 3000;
const PERIOD = 1000;

const CASES = [
    { name: "a per-lock FailOpen holder", kind: "FailOpen", table: "revoke", extra: {} },
    { name: "a holder through a session", kind: "FailOpen", table: "revoke", extra: { session: true } },
    { name: "a Fifo head's holder", kind: "Fifo", table: "revokefifo", extra: {} },
];

for (const name of selectedEngines())
{
    describe(`forced release revokes (${name})`, { timeout: 240000 }, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(name);
            await engine.createTable("revoke", { partitionKey: "id" });
            await engine.createTable("revokefifo", { partitionKey: "resource", sortKey: "entry" });
        });
        after(async () => engine && engine.stop());

        const config = (table, extra) => Object.assign({
            dynamodb: dynamodbOptions(engine),
            lockTable: table,
            partitionKey: table === "revokefifo" ? "resource" : "id",
            leaseDurationMs: LEASE,
            heartbeatPeriodMs: PERIOD,
        }, table === "revokefifo" ? { sortKey: "entry" } : { retryCount: 100 }, extra);

        for (const c of CASES)
        {
            it(`${c.name} hears "lost" before a rival elsewhere is granted the lock, which is free a lease after the revocation`, async () =>
            {
                const id = uniqueId("revoked");
                const holder = new DynamoDBLockClient[c.kind](config(c.table, Object.assign({ owner: "holder" }, c.extra)));
                const lock = await holder.acquireLock(id);
                let lostAt;
                let lostError;
                lock.on("lost", e =>
                {
                    lostAt = Date.now();
                    lostError = e;
                });
                const rivalConfig = config(c.table, { owner: "rival" });
                rivalConfig.dynamodb = { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials };
                const rival = runScript("child.js", { kind: c.kind, id, then: "hold", stamp: true, config: rivalConfig }, { timeoutMs: 60000 });
                try
                {
                    // The rival waits for the live holder.
                    await sleep(1500);
                    assert.deepEqual(rival.lines.filter(l => l.acquired), [], "the rival waits while the holder lives");
                    const revokedAt = Date.now();
                    const r = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: c.table, id });
                    assert.equal(r.action, "revoked", JSON.stringify(r));
                    assert.equal(r.lock.owner, "holder");
                    assert.equal(r.freeAfterMs, LEASE);
                    if (c.kind === "FailOpen")
                    {
                        const shown = await DynamoDBLockClient.showLock({ dynamodb: dynamodbOptions(engine), lockTable: c.table, id });
                        assert.deepEqual([shown.state, shown.revoked, shown.session], ["held", true, undefined], JSON.stringify(shown));
                    }
                    const granted = await rival.next(l => l.acquired || l.error, 20000);
                    assert.equal(granted.error, undefined, JSON.stringify(granted));
                    assert.ok(lostAt !== undefined, "the holder heard \"lost\" before the rival's grant");
                    assert.ok(lostAt < granted.at, `lost at ${lostAt}, granted at ${granted.at}`);
                    assert.ok(lostAt - revokedAt <= PERIOD + 1500, `heard ${lostAt - revokedAt} ms after the revocation`);
                    assert.equal(lostError.code, "LockLost");
                    assert.equal(lock.lost, true);
                    assert.equal(lock.signal.aborted, true);
                    assert.ok(granted.at - revokedAt >= LEASE - 200, `free ${granted.at - revokedAt} ms after the revocation, not a lease`);
                    assert.ok(granted.fencingToken > lock.fencingToken, "the rival's token is higher");
                }
                finally
                {
                    rival.kill();
                    await holder.close();
                }
            });
        }

        it("a session's revocation tells exactly the lock revoked: the session and its other locks go on", async () =>
        {
            const client = new DynamoDBLockClient.FailOpen(config("revoke", { session: true }));
            const [a, b] = [uniqueId("sess-a"), uniqueId("sess-b")];
            const lockA = await client.acquireLock(a);
            const lockB = await client.acquireLock(b);
            const lost = [];
            lockA.on("lost", () => lost.push("a"));
            lockB.on("lost", () => lost.push("b"));
            try
            {
                const r = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id: a });
                assert.equal(r.action, "revoked");
                await sleep(PERIOD * 2 + 500);
                assert.deepEqual(lost, ["a"]);
                assert.equal(lockB.lost, false);
                assert.ok(lockB.leaseRemainingMs > 0);
                const item = await engine.getItem("revoke", { id: { S: a } });
                assert.equal(item.lockSession, undefined, "the revoked lock no longer names the session");
                assert.equal(item.leaseDurationMs.N, String(LEASE), "it carries the session's lease");
                // A lock taken through the same session afterwards is not revoked by the old mark.
                const c = uniqueId("sess-c");
                const lockC = await client.acquireLock(c);
                await sleep(PERIOD * 2);
                assert.equal(lockC.lost, false);
                await lockC.release();
                await lockB.release();
            }
            finally
            {
                await client.close();
            }
        });

        it("now frees a session's lock at once, and its holder hears \"lost\" at the session's next renewal: the session and its other locks go on", async () =>
        {
            const client = new DynamoDBLockClient.FailOpen(config("revoke", { session: true }));
            const [a, b] = [uniqueId("now-a"), uniqueId("now-b")];
            const lockA = await client.acquireLock(a);
            const lockB = await client.acquireLock(b);
            const lost = [];
            lockA.on("lost", e => lost.push(["a", e.code]));
            lockB.on("lost", e => lost.push(["b", e.code]));
            const rival = new DynamoDBLockClient.FailOpen(config("revoke", {}));
            try
            {
                const r = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id: a, now: true });
                assert.equal(r.action, "released");
                // Free at once to a rival elsewhere...
                const taken = await rival.acquireLock(a, { signal: AbortSignal.timeout(LEASE / 2) });
                // ...and the holder hears within a session renewal.
                await sleep(PERIOD * 2 + 500);
                assert.deepEqual(lost, [["a", "LockLost"]]);
                assert.equal(lockA.lost, true);
                assert.equal(lockA.leaseRemainingMs, 0);
                assert.equal(lockB.lost, false);
                assert.ok(lockB.leaseRemainingMs > 0);
                // Its release leaves the rival's lock alone.
                await lockA.release();
                const item = await engine.getItem("revoke", { id: { S: a } });
                assert.equal(item.fencingToken.N, String(taken.fencingToken), "the rival's hold is untouched");
                await taken.release();
                await lockB.release();
            }
            finally
            {
                await Promise.all([client.close(), rival.close()]);
            }
        });

        it("a session lock whose item was changed behind the protocol: its release rejects and leaves the item as it is", async () =>
        {
            const client = new DynamoDBLockClient.FailOpen(config("revoke", { session: true }));
            const id = uniqueId("edited");
            const lock = await client.acquireLock(id);
            try
            {
                const key = { id: { S: id } };
                const item = await engine.getItem("revoke", key);
                // A hand edit: another guid, as another writer would leave it.
                await engine.putItem("revoke", Object.assign({}, item, { guid: { B: Buffer.alloc(64, 7) }, owner: { S: "someone else" } }));
                await assert.rejects(lock.release(), e => e.code === "FailedToReleaseLock");
                const after = await engine.getItem("revoke", key);
                assert.equal(after.owner.S, "someone else", "the changed item is left alone");
                assert.notEqual(after.leaseDurationMs.N, "1", "not marked released");
            }
            finally
            {
                await client.close();
            }
        });

        it("a FailClosed lock is refused without now; now frees a lock at once and says what it risks", async () =>
        {
            const closed = new DynamoDBLockClient.FailClosed({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", partitionKey: "id", acquirePeriodMs: 100, owner: "cron" });
            const id = uniqueId("closed");
            await closed.acquireLock(id);
            await assert.rejects(
                DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id }),
                e => e.code === "HolderCannotBeTold" && /FailClosed/.test(e.message) && /now/.test(e.message));
            assert.ok(await engine.getItem("revoke", { id: { S: id } }), "the item is left alone");
            const r = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id, now: true });
            assert.equal(r.action, "deleted");
            assert.match(r.warning, /FailClosed holder still alive is never told, and may still be writing/);
            assert.equal(await engine.getItem("revoke", { id: { S: id } }), undefined);

            const open = new DynamoDBLockClient.FailOpen(config("revoke", { owner: "w" }));
            const other = uniqueId("now");
            const held = await open.acquireLock(other);
            const freed = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id: other, now: true });
            assert.equal(freed.action, "released");
            assert.match(freed.warning, /hears "lost" only at its next heartbeat or session renewal/);
            const t0 = Date.now();
            const next = await new DynamoDBLockClient.FailOpen(config("revoke", {})).acquireLock(other);
            assert.ok(Date.now() - t0 < 1000, "free at once");
            assert.equal(next.fencingToken, held.fencingToken + 1);
            await next.release();
            await assert.rejects(
                DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id: other, now: "yes" }),
                e => /now must be a boolean/.test(e.message));
            await Promise.all([open.close(), closed.close()]);
        });

        it("a Fifo queue entry is refused as no lock, and its waiter keeps its turn", async () =>
        {
            const id = uniqueId("queued");
            const head = new DynamoDBLockClient.Fifo(config("revokefifo", { owner: "head" }));
            const held = await head.acquireLock(id);
            const waiter = new DynamoDBLockClient.Fifo(config("revokefifo", { owner: "waiter" }));
            const waiting = waiter.acquireLock(id, { waitMs: 20000 });
            const entryOf = async () => (await engine.scan("revokefifo")).find(i => i.resource.S === id && i.entry.S.startsWith("q#"));
            await until(async () => (await entryOf()) !== undefined, 5000, "the waiter's queue entry");
            const entry = await entryOf();
            await assert.rejects(
                DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revokefifo", id: { resource: id, entry: entry.entry.S }, now: true }),
                e => e.code === "InvalidArgument" && /is a Fifo queue entry, not a lock/.test(e.message));
            assert.deepEqual(await engine.getItem("revokefifo", { resource: { S: id }, entry: entry.entry }), entry, "the entry is left alone");
            await held.release();
            const next = await waiting;
            assert.equal(next.fencingToken, held.fencingToken + 1, "the waiter is granted next, with its ticket");
            await next.release();
            await Promise.all([head.close(), waiter.close()]);
        });

        it("a lock of an ended session is freed with nobody to tell; an absent lock and a semaphore are told apart", async () =>
        {
            // A session lock's item, whose session's item is ended (as a waiter that waited it
            // out leaves it): a revocation frees it at once, with no warning.
            const id = uniqueId("ended");
            const session = "ended-" + id;
            const guid = Buffer.alloc(64, 5).toString("base64");
            await engine.putItem("revoke", {
                id: { S: id }, owner: { S: "gone" }, guid: { B: guid }, fencingToken: { N: "4" },
                leaseDurationMs: { N: "10000" }, lockSession: { S: session },
            });
            await engine.putItem("revoke", {
                id: { S: "dynamodb-lock-native/session/" + session }, owner: { S: "gone" }, guid: { B: guid },
                fencingToken: { N: "1" }, leaseDurationMs: { N: "1" },
            });
            const r = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id });
            assert.deepEqual([r.action, r.warning, r.lock.owner], ["released", undefined, "gone"]);
            const freed = await engine.getItem("revoke", { id: { S: id } });
            assert.equal(freed.leaseDurationMs.N, "1");
            assert.equal(freed.fencingToken.N, "4", "the token is kept");
            const absent = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id: uniqueId("none") });
            assert.deepEqual(absent, { action: "absent", lock: null });

            const semaphore = new DynamoDBLockClient.Semaphore(config("revokefifo", { permits: 2 }));
            const sid = uniqueId("sem");
            const permit = await semaphore.acquireLock(sid);
            try
            {
                await assert.rejects(
                    DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revokefifo", id: sid }),
                    e => e.code === "NotSupported" && /Semaphore/.test(e.message));
                await permit.release();
                const free = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revokefifo", id: sid });
                assert.equal(free.action, "already-free");
            }
            finally
            {
                await semaphore.close();
            }
        });

        it("a holder that keeps renewing is revoked on the version it carries, and hears \"lost\"", async () =>
        {
            // A heartbeat every 50 ms rotates the holder's guid: a write on the version read that
            // meets a newer one is refused, and the core reads again (within its five reads).
            const holder = new DynamoDBLockClient.FailOpen(config("revoke", { owner: "busy", leaseDurationMs: 2000, heartbeatPeriodMs: 50 }));
            const id = uniqueId("busy");
            const lock = await holder.acquireLock(id);
            const lost = new Promise(resolve => lock.once("lost", resolve));
            try
            {
                const r = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id });
                assert.equal(r.action, "revoked");
                assert.equal(r.freeAfterMs, 2000);
                assert.equal(r.lock.owner, "busy");
                await lost;
            }
            finally
            {
                await holder.close();
            }
        });

        it("an item whose fencingToken is no token is refused as corrupt, and left as it is", async () =>
        {
            const id = uniqueId("corrupt");
            const item = {
                id: { S: id }, owner: { S: "someone" }, guid: { B: Buffer.alloc(64, 7).toString("base64") },
                fencingToken: { S: "seven" }, leaseDurationMs: { N: "10000" },
            };
            await engine.putItem("revoke", item);
            for (const now of [false, true])
            {
                await assert.rejects(
                    DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "revoke", id, now }),
                    e => e.code === "CorruptLockItem" && /fencingToken/.test(e.message) && /by hand/.test(e.message));
            }
            const left = await engine.getItem("revoke", { id: { S: id } });
            assert.ok(Buffer.from(left.guid.B).equals(Buffer.alloc(64, 7)), "the guid is as it was");
            assert.deepEqual([left.fencingToken, left.leaseDurationMs, left.lockWrittenUnixMs], [item.fencingToken, item.leaseDurationMs, undefined]);
        });
    });
}
