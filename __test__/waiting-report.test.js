"use strict";

// Why an acquisition waits: the `waiting` diagnostics message names the holder it found, and
// a progress message follows about once a lease while it keeps waiting.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const diagnostics = require("node:diagnostics_channel");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId, sleep } = require("./helpers.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

for (const name of selectedEngines())
{
    describe(`waiting reports (${name})`, { timeout: 60000 }, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(name);
            await engine.createTable("waits", { partitionKey: "id" });
            await engine.createTable("fifo-waits", { partitionKey: "pk", sortKey: "sk" });
        });
        after(async () => engine && engine.stop());

        it("names the holder (owner, token, lease), then reports progress about once a lease", async () =>
        {
            const config = owner => ({ dynamodb: dynamodbOptions(engine), lockTable: "waits", partitionKey: "id", leaseDurationMs: 1200, heartbeatPeriodMs: 400, retryCount: 20, owner });
            const id = uniqueId("why");
            const holder = new DynamoDBLockClient.FailOpen(config("the-holder"));
            const waiter = new DynamoDBLockClient.FailOpen(config("the-waiter"));
            const lock = await holder.acquireLock(id);
            const messages = [];
            const onMessage = m => m.id === id && messages.push(Object.assign({ at: Date.now() }, m));
            diagnostics.subscribe("dynamodb-lock-native:waiting", onMessage);
            try
            {
                const t0 = Date.now();
                const pending = waiter.acquireLock(id);
                await sleep(3500);
                await lock.release();
                const next = await pending;
                assert.equal(next.fencingToken, lock.fencingToken + 1);
                await next.release();
                const [first, ...rest] = messages;
                assert.ok(first, "a waiting message");
                assert.equal(first.progress, false);
                assert.deepEqual([first.holder.owner, first.holder.fencingToken, first.holder.leaseDurationMs], ["the-holder", lock.fencingToken, 1200]);
                assert.ok(first.at - t0 < 1000, `first told ${first.at - t0} ms after the call`);
                const progress = rest.filter(m => m.progress);
                assert.ok(progress.length >= 1 && progress.length <= 4, `about one progress message a lease over 3.5 s: ${JSON.stringify(messages)}`);
                for (const m of progress)
                {
                    assert.equal(m.holder.owner, "the-holder");
                    assert.ok(m.holder.unchangedMs >= 0 && m.holder.unchangedMs <= 1200, `a heartbeat changes the item every 400 ms: ${m.holder.unchangedMs}`);
                    assert.ok(m.waitMs > first.waitMs);
                }
                assert.equal(rest.filter(m => !m.progress).length, 0, "one first message");
            }
            finally
            {
                diagnostics.unsubscribe("dynamodb-lock-native:waiting", onMessage);
                await Promise.all([holder.close(), waiter.close()]);
            }
        });

        it("Fifo: names the head's holder, then reports progress about once a lease", async () =>
        {
            const config = owner => ({ dynamodb: dynamodbOptions(engine), lockTable: "fifo-waits", partitionKey: "pk", sortKey: "sk", leaseDurationMs: 1200, heartbeatPeriodMs: 400, owner });
            const id = uniqueId("fifo-why");
            const holder = new DynamoDBLockClient.Fifo(config("the-holder"));
            const waiter = new DynamoDBLockClient.Fifo(config("the-waiter"));
            const lock = await holder.acquireLock(id);
            const messages = [];
            const onMessage = m => m.id === id && messages.push(Object.assign({ at: Date.now() }, m));
            diagnostics.subscribe("dynamodb-lock-native:waiting", onMessage);
            try
            {
                const pending = waiter.acquireLock(id, { waitMs: 20000 });
                await sleep(3500);
                await lock.release();
                const next = await pending;
                assert.ok(next.fencingToken > lock.fencingToken);
                await next.release();
                const [first, ...rest] = messages;
                assert.ok(first, "a waiting message");
                assert.equal(first.progress, false);
                assert.ok(first.holder, `the first message names the holder: ${JSON.stringify(first)}`);
                assert.deepEqual([first.holder.owner, first.holder.fencingToken, first.holder.leaseDurationMs], ["the-holder", lock.fencingToken, 1200]);
                const progress = rest.filter(m => m.progress);
                assert.ok(progress.length >= 1 && progress.length <= 4, `about one progress message a lease over 3.5 s: ${JSON.stringify(messages)}`);
                for (const m of progress)
                {
                    assert.equal(m.holder.owner, "the-holder");
                }
            }
            finally
            {
                diagnostics.unsubscribe("dynamodb-lock-native:waiting", onMessage);
                await Promise.all([holder.close(), waiter.close()]);
            }
        });
    });
}
