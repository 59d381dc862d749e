"use strict";

// Process lifetime and crash safety of the addon itself.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { startEngine } = require("./engines.js");
const { dynamodbOptions, uniqueId, failClosed } = require("./helpers.js");
const { startChild } = require("./support/spawn.js");

describe("process lifetime", { timeout: 120000 }, () =>
{
    let engine;
    before(async () =>
        {
            engine = await startEngine("dynalite");
            await engine.createTable("locks", { partitionKey: "id" });
        }
    );
    after(async () => engine && engine.stop());

    it("a script that acquires and releases exits on its own", async () =>
        {
            const c = startChild({ kind: "FailClosed", config: { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", acquirePeriodMs: 10 }, id: uniqueId("exit"), then: "release" }, { timeoutMs: 20000 });
            await c.next(l => l.released);
            const exit = await c.exited;
            assert.equal(exit.signal, null);
            assert.equal(exit.code, 0);
        }
    );

    it("a pending acquisition keeps the process alive until it settles", async () =>
        {
            const id = uniqueId("pending");
            const held = await failClosed(engine).acquireLock(id);
            const c = startChild({ kind: "FailClosed", config: { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", acquirePeriodMs: 400, retryCount: 3 }, id, then: "release" }, { timeoutMs: 20000 });
            const exit = await c.exited;
            assert.equal(exit.signal, null);
            assert.ok(exit.ms >= 1200, `stayed alive through three pauses (${exit.ms} ms)`);
            assert.deepEqual(c.lines.map(l => l.error), ["FailedToAcquireLock"]);
            await held.release();
        }
    );

    it("a Rust panic becomes a JavaScript error, not an abort", () =>
        {
            const binding = require("../binding.js");
            assert.throws(() => binding.panicForTest("deliberate"), /deliberate/);
        }
    );
});
