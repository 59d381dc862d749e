"use strict";

// The child side of the benchmark's IPC: requests to the parent (which owns the counting
// proxy) and the final report. A child whose parent goes away exits at once.

const { performance } = require("perf_hooks");

let seq = 0;
const pending = new Map();

process.on("message", msg =>
    {
        if (msg && msg.type === "rpc-reply" && pending.has(msg.id))
        {
            const { resolve, reject } = pending.get(msg.id);
            pending.delete(msg.id);
            return msg.error ? reject(new Error(msg.error)) : resolve(msg.result);
        }
    }
);
process.on("disconnect", () => process.exit(2));

/** Calls `method` in the parent (reset, counts, startRecord, stopRecord). */
function rpc(method, args)
{
    return new Promise((resolve, reject) =>
        {
            const id = ++seq;
            pending.set(id, { resolve, reject });
            process.send({ type: "rpc", id, method, args });
        }
    );
}

/** Sends the result and exits (locks still held are simply abandoned). */
function finish(result)
{
    process.send({ type: "result", result }, () => process.exit(0));
    // Should the send never complete, do not linger.
    setTimeout(() => process.exit(3), 5000).unref();
}

function fail(error)
{
    const result = { error: String((error && error.stack) || error) };
    try
    {
        process.send({ type: "result", result }, () => process.exit(1));
    }
    catch (_)
    {
        process.exit(1);
    }
    setTimeout(() => process.exit(1), 5000).unref();
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
const wallMs = () => performance.timeOrigin + performance.now();

function gc()
{
    if (typeof global.gc === "function")
    {
        global.gc();
        global.gc();
    }
}

module.exports = { rpc, finish, fail, sleep, wallMs, gc };
