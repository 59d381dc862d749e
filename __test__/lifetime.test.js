"use strict";

// Process lifetime and crash safety of the addon itself.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { startEngine } = require("./engines.js");
const { dynamodbOptions, uniqueId, failClosed, failOpen } = require("./helpers.js");
const { startChild } = require("./support/spawn.js");
const { startProxy } = require("./support/proxy.js");

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

    it("clients in worker threads get their own answers, events and cancellations", async () =>
        {
            const heldId = uniqueId("worker-held");
            const held = await failClosed(engine).acquireLock(heldId);
            // The main thread has clients of its own, with a pending cancellable acquisition.
            const mainWaiter = new AbortController();
            const mainPending = failClosed(engine, { retryCount: 1000 }).acquireLock(heldId, { signal: mainWaiter.signal });
            const code = `
                const { parentPort, workerData } = require("node:worker_threads");
                const Locks = require(workerData.index);
                const dynamodb = workerData.dynamodb;
                (async () => {
                    const open = new Locks.FailOpen({ dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 2000, heartbeatPeriodMs: 200 });
                    const lock = await open.acquireLock(workerData.id);
                    const events = [];
                    lock.on("error", () => events.push("error"));
                    lock.on("lost", () => events.push("lost"));
                    await new Promise(r => setTimeout(r, 700));
                    const lostWhileHeld = lock.lost;
                    await lock.release();
                    const closed = new Locks.FailClosed({ dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50, retryCount: 1000 });
                    const controller = new AbortController();
                    setTimeout(() => controller.abort(), 300);
                    let aborted;
                    try { await closed.acquireLock(workerData.heldId, { signal: controller.signal }); }
                    catch (e) { aborted = e.code; }
                    parentPort.postMessage({ lostWhileHeld, events, aborted });
                })().catch(e => parentPort.postMessage({ failed: String(e && e.stack || e) }));
            `;
            const { Worker } = require("node:worker_threads");
            const worker = new Worker(code, { eval: true, workerData: { index: require.resolve("../index.js"), dynamodb: dynamodbOptions(engine), id: uniqueId("worker"), heldId } });
            const result = await Promise.race([
                new Promise((resolve, reject) => { worker.once("message", resolve); worker.once("error", reject); }),
                new Promise((_, reject) => setTimeout(() => reject(new Error("no answer from the worker in 15 s")), 15000)),
            ]);
            await worker.terminate();
            assert.deepEqual(result, { lostWhileHeld: false, events: [], aborted: "AbortError" });
            // The worker's abort did not cancel the main thread's acquisition.
            await held.release();
            const mine = await mainPending;
            assert.equal(mine.lost, false);
            await mine.release();
        }
    );

    it("the locks of a worker thread that ends stop heartbeating, and their leases lapse", async () =>
        {
            const id = uniqueId("worker-ends");
            const code = `
                const { parentPort, workerData } = require("node:worker_threads");
                const Locks = require(workerData.index);
                const open = new Locks.FailOpen({ dynamodb: workerData.dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 200 });
                open.acquireLock(workerData.id).then(() => parentPort.postMessage("held"), e => parentPort.postMessage(String(e)));
            `;
            const { Worker } = require("node:worker_threads");
            const worker = new Worker(code, { eval: true, workerData: { index: require.resolve("../index.js"), dynamodb: dynamodbOptions(engine), id } });
            assert.equal(await new Promise((resolve, reject) => { worker.once("message", resolve); worker.once("error", reject); }), "held");
            await worker.terminate();
            const started = Date.now();
            const mine = await failOpen(engine, { leaseDurationMs: 1000, heartbeatPeriodMs: 200, retryCount: 20 }).acquireLock(id);
            const waited = Date.now() - started;
            assert.ok(waited >= 900 && waited < 5000, `took the lapsed lock after ${waited} ms`);
            assert.equal(mine.fencingToken, 2);
            await mine.release();
        }
    );

    it("a worker thread that ends while its acquisition's write waits for its answer releases the lock the write took", async () =>
        {
            // The Worker's requests run on its own event loop; when it ends, the acquisition
            // goes on off it, is cancelled with the Worker's clients, and gives back what its
            // write took. A FailClosed lock has no lease: nothing else would ever free it.
            const id = uniqueId("worker-mid-write");
            const proxy = await startProxy({ target: engine.endpoint });
            try
            {
                proxy.replyDelayMs = 1500;
                let applied;
                const landed = new Promise(resolve => { applied = resolve; });
                proxy.onResponse = (op, body) => { if (op !== "GetItem" && JSON.stringify(body).includes(id)) applied(op); };
                const code = `
                    const { parentPort, workerData } = require("node:worker_threads");
                    const Locks = require(workerData.index);
                    const closed = new Locks.FailClosed({ dynamodb: workerData.dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 100, requestTimeoutMs: 10000 });
                    closed.acquireLock(workerData.id).then(() => parentPort.postMessage("held"), e => parentPort.postMessage(String(e)));
                `;
                const { Worker } = require("node:worker_threads");
                const worker = new Worker(code, { eval: true, workerData: { index: require.resolve("../index.js"), dynamodb: dynamodbOptions(engine, proxy.endpoint), id } });
                const messages = [];
                worker.on("message", m => messages.push(m));
                const op = await landed;
                assert.ok((await engine.getItem("locks", { id: { S: id } })) !== undefined, `the ${op} took the lock`);
                await worker.terminate();
                assert.deepEqual(messages, [], "the answer was still held back");
                const started = Date.now();
                const mine = await failClosed(engine, { retryCount: 100, acquirePeriodMs: 100 }).acquireLock(id);
                const waited = Date.now() - started;
                assert.ok(waited < 8000, `took the lock ${waited} ms after the Worker ended`);
                await mine.release();
            }
            finally
            {
                await proxy.close();
            }
        }
    );

    it("a Rust panic would become a JavaScript error, not an abort: every exported function catches unwinding panics, and panics unwind", () =>
        {
            // The addon has no function that panics on purpose (test code stays out of the
            // published binary), so what turns a panic into an error is checked where it is
            // declared: each #[napi] function or method carries catch_unwind, and the release
            // profile unwinds instead of aborting.
            const fs = require("node:fs");
            const path = require("node:path");
            const src = path.join(__dirname, "..", "src");
            let exported = 0;
            const missing = [];
            for (const file of fs.readdirSync(src).filter(f => f.endsWith(".rs")))
            {
                const lines = fs.readFileSync(path.join(src, file), "utf8").split("\n");
                lines.forEach((line, i) =>
                {
                    const attr = line.trim();
                    if (!attr.startsWith("#[napi") || /#\[napi\((object|js_name)/.test(attr) || attr.startsWith("#[napi_derive"))
                    {
                        return;
                    }
                    const next = lines.slice(i + 1).find(l => !l.trim().startsWith("#[") && !l.trim().startsWith("///"));
                    if (next && /\bfn\b/.test(next))
                    {
                        exported++;
                        if (!attr.includes("catch_unwind"))
                        {
                            missing.push(`${file}:${i + 1}: ${next.trim()}`);
                        }
                    }
                });
            }
            assert.ok(exported >= 10, `found ${exported} exported functions`);
            assert.deepEqual(missing, [], "exported functions without catch_unwind");
            const cargo = fs.readFileSync(path.join(__dirname, "..", "Cargo.toml"), "utf8");
            const release = cargo.split("[profile.release]")[1].split("\n[")[0];
            assert.match(release, /^panic = "unwind"$/m);
        }
    );
});
