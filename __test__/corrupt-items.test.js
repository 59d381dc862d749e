"use strict";

// Lock items that neither library writes, put in the table by hand: a fencing token that is not
// an integer from 0 to 2^53 - 1 is refused by name (`CorruptLockItem`), never rounded, repeated
// or replaced; a `guid` of another type is compared by value and taken over after the lease, as
// the original library does; a lease that is not whole milliseconds is refused.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { failOpen, acquireCb, releaseCb, uniqueId } = require("./helpers.js");
const { documentClient } = require("./support/v2.js");
const Original = require("dynamodb-lock-client");

const TABLE = "locks";
const GUID = { B: Buffer.alloc(64, 7) };

// A FailOpen item as another writer left it.
function item(id, attributes)
{
    return Object.assign({ id: { S: id }, owner: { S: "tool" }, guid: GUID }, attributes);
}

function acquireOriginal(client, id)
{
    return new Promise(resolve => client.acquireLock(id, (error, lock) =>
        {
            if (lock)
            {
                lock.on("error", () => {});
            }
            resolve({ error, lock });
        }));
}

const releaseOriginal = lock => new Promise(resolve => lock.release(() => resolve()));

function assertRefused(error, id, attribute, found)
{
    assert.ok(error, "the acquisition fails");
    assert.equal(error.code, "CorruptLockItem", error.message);
    assert.equal(error.attribute, attribute);
    assert.match(error.message, new RegExp(`id "${id}" in the table "${TABLE}"`));
    assert.ok(error.message.includes(`its ${attribute} holds ${found}`), error.message);
}

for (const engineName of selectedEngines())
{
    describe(`corrupt lock items on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        let client;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable(TABLE, { partitionKey: "id" });
                client = failOpen(engine, { leaseDurationMs: 1000, heartbeatPeriodMs: 300 });
            });
        after(async () =>
            {
                if (engine)
                {
                    await engine.stop();
                }
            });

        const released = [
            ["-5", { N: "-5" }, "the number -5"],
            ["1.5", { N: "1.5" }, "the number 1.5"],
            ["2^53", { N: "9007199254740992" }, "the number 9007199254740992"],
            ["2^60", { N: "1152921504606846976" }, "the number 1152921504606846976"],
            ["a string", { S: "7" }, "the string \"7\""],
            ["a boolean", { BOOL: true }, "a value of type BOOL"],
        ];
        for (const [name, token, found] of released)
        {
            it(`refuses a released item whose fencingToken is ${name}, every time, and getLock names it`, async () =>
                {
                    const id = uniqueId("token");
                    await engine.putItem(TABLE, item(id, { fencingToken: token, leaseDurationMs: { N: "1" } }));
                    for (let k = 0; k < 3; k++)
                    {
                        const started = Date.now();
                        const { error, lock } = await acquireCb(client, id);
                        assert.equal(lock, undefined, `no lock is handed out (token ${lock && lock.fencingToken})`);
                        // A fraction is read back after the take raised it (below).
                        assertRefused(error, id, "fencingToken", name === "1.5" ? `the number ${2.5 + k}` : found);
                        // Not retried as contention: one take (and a read where the engine
                        // returns no item with a refusal). The bound allows a cold engine.
                        assert.ok(Date.now() - started < 5000, "refused at once, not retried");
                    }
                    await assert.rejects(client.getLock(id), e => e.code === "CorruptLockItem" && e.attribute === "fencingToken");
                    const left = await engine.getItem(TABLE, { id: { S: id } });
                    assert.equal(left.leaseDurationMs.N, "1", "the item is left released");
                    if (name === "1.5")
                    {
                        // No condition tells a fraction apart: each take landed, was refused
                        // when read back, and was given back.
                        assert.equal(left.fencingToken.N, "4.5");
                    }
                    else
                    {
                        assert.deepEqual(left.fencingToken, token, "the token is left as it was");
                    }
                });
        }

        it("hands out 2^53 - 1 once, then neither hands the lock over nor takes it again", async () =>
            {
                const id = uniqueId("top");
                await engine.putItem(TABLE, item(id, { fencingToken: { N: "9007199254740990" }, leaseDurationMs: { N: "1" } }));
                const first = await acquireCb(client, id);
                assert.ifError(first.error);
                assert.equal(first.lock.fencingToken, Number.MAX_SAFE_INTEGER);
                // A second acquisition in this client waits for a hand-over on release.
                const next = acquireCb(client, id);
                assert.ifError(await releaseCb(first.lock));
                const { error, lock } = await next;
                assert.equal(lock, undefined, `no lock is handed out (token ${lock && lock.fencingToken})`);
                assertRefused(error, id, "fencingToken", "the number 9007199254740991");
                const left = await engine.getItem(TABLE, { id: { S: id } });
                assert.deepEqual([left.fencingToken.N, left.leaseDurationMs.N], ["9007199254740991", "1"], "released at the top");
            });

        it("refuses a released item whose token is 2^53 - 1, from which no token can rise, and takes one at 2^53 - 2", async () =>
            {
                const id = uniqueId("top");
                await engine.putItem(TABLE, item(id, { fencingToken: { N: "9007199254740991" }, leaseDurationMs: { N: "1" } }));
                const { error } = await acquireCb(client, id);
                assertRefused(error, id, "fencingToken", "the number 9007199254740991");
                const below = uniqueId("top");
                await engine.putItem(TABLE, item(below, { fencingToken: { N: "9007199254740990" }, leaseDurationMs: { N: "1" } }));
                const { error: e2, lock } = await acquireCb(client, below);
                assert.ifError(e2);
                assert.equal(lock.fencingToken, Number.MAX_SAFE_INTEGER);
                assert.ifError(await releaseCb(lock));
            });

        it("refuses a held item whose fencingToken is negative at once, without waiting out its lease", async () =>
            {
                const id = uniqueId("held");
                await engine.putItem(TABLE, item(id, { fencingToken: { N: "-5" }, leaseDurationMs: { N: "60000" } }));
                const started = Date.now();
                const { error } = await acquireCb(client, id);
                assertRefused(error, id, "fencingToken", "the number -5");
                assert.ok(Date.now() - started < 10000, "not waited out (the lease is 60 s)");
            });

        it("refuses an item whose leaseDurationMs is a string, and one whose guid is a boolean", async () =>
            {
                const lease = uniqueId("lease");
                await engine.putItem(TABLE, item(lease, { fencingToken: { N: "3" }, leaseDurationMs: { S: "1000" } }));
                assertRefused((await acquireCb(client, lease)).error, lease, "leaseDurationMs", "the string \"1000\"");
                const guid = uniqueId("guid");
                await engine.putItem(TABLE, item(guid, { guid: { BOOL: true }, fencingToken: { N: "3" }, leaseDurationMs: { N: "1000" } }));
                assertRefused((await acquireCb(client, guid)).error, guid, "guid", "a value of type BOOL");
            });

        for (const [name, guid] of [["a string", { S: "abc" }], ["a number", { N: "12" }]])
        {
            it(`takes over an abandoned item whose guid is ${name} after its lease, as the original does`, async () =>
                {
                    const abandoned = id => item(id, { guid, fencingToken: { N: "3" }, leaseDurationMs: { N: "1000" } });
                    const ours = uniqueId("guid");
                    const theirs = uniqueId("guid");
                    await engine.putItem(TABLE, abandoned(ours));
                    await engine.putItem(TABLE, abandoned(theirs));
                    const original = new Original.FailOpen({
                        dynamodb: documentClient(engine), lockTable: TABLE, partitionKey: "id",
                        leaseDurationMs: 1000, heartbeatPeriodMs: 300,
                    });
                    const started = Date.now();
                    const [a, b] = await Promise.all([acquireCb(client, ours), acquireOriginal(original, theirs)]);
                    const waited = Date.now() - started;
                    assert.ifError(b.error);
                    assert.equal(b.lock.fencingToken, 4, "the original takes it over");
                    assert.ifError(a.error);
                    assert.equal(a.lock.fencingToken, 4, "so do we, with the next token");
                    assert.ok(waited >= 1000, `after the lease (${waited} ms)`);
                    const info = await client.getLock(ours);
                    assert.equal(info.fencingToken, 4);
                    assert.ifError(await releaseCb(a.lock));
                    await releaseOriginal(b.lock);
                });
        }

        it("refuses a corrupt token through a user's dynamodb object too", async () =>
            {
                const id = uniqueId("object");
                await engine.putItem(TABLE, item(id, { fencingToken: { N: "-5" }, leaseDurationMs: { N: "1" } }));
                const viaObject = failOpen(engine, { dynamodb: documentClient(engine), transport: "object" });
                const { error, lock } = await acquireCb(viaObject, id);
                assert.equal(lock, undefined);
                assertRefused(error, id, "fencingToken", "the number -5");
            });
    });
}
