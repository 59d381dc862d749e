"use strict";

// The user's own `dynamodb` object (a mock, a wrapper, a DocumentClient chosen with
// `transport: "object"`), called for the native core (src/store/object.rs), which builds each
// request's parameters as the original library sends them and decides everything else. Here:
// call `dynamodb[method](params, callback)`, settle once whichever of the callback or a
// returned promise answers first, and answer with what the core reads: the item's attributes,
// or the error's `code` and whether it is a failed condition. The error object itself is kept
// here under a number, so that callers get back the very object the user's method gave.

const { performance } = require("node:perf_hooks");
const debugLog = require("./debug.js");

const CONDITION_FAILED = "ConditionalCheckFailedException";

// The errors handed to the core, by number; the oldest go first past MOST_KEPT (an error the
// core did not report, e.g. of a heartbeat retried at once, is never asked for).
const MOST_KEPT = 256;
const kept = new Map();
let nextId = 1;

function keep(error)
{
    const id = nextId;
    nextId = nextId >= 0xffffffff ? 1 : nextId + 1;
    kept.set(id, error);
    if (kept.size > MOST_KEPT)
    {
        kept.delete(kept.keys().next().value);
    }
    return id;
}

// The error the user's method gave under `id`, or undefined.
function keptError(id)
{
    return kept.get(id);
}

function describe(error)
{
    const code = error.code || error.name;
    return {
        id: keep(error),
        code: typeof code === "string" ? code : "Error",
        message: String(error.message !== undefined ? error.message : error),
        conditionFailed: error.code === CONDITION_FAILED || error.name === CONDITION_FAILED,
    };
}

// The lock's attributes, as the core reads them (src/store/object.rs).
const LOCK_ATTRIBUTES = ["owner", "guid", "fencingToken", "leaseDurationMs", "lockAcquiredTimeUnixMs"];

// One attribute as the core's rule reads it: its DynamoDB type where it has one (numbers in
// their decimal text, binary in hex), otherwise its JavaScript type; the core decides what is
// refused.
function attributeOf(name, v)
{
    if (typeof v === "string")
    {
        return { name, kind: "S", value: v };
    }
    if (typeof v === "number" || typeof v === "bigint")
    {
        return { name, kind: "N", value: String(v) };
    }
    if (v instanceof Uint8Array)
    {
        return { name, kind: "B", value: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("hex") };
    }
    return { name, kind: v === null ? "null" : typeof v, value: "" };
}

// What the protocol reads of an item: the lock's attributes it carries.
function itemOf(item)
{
    if (!item)
    {
        return undefined;
    }
    const attributes = [];
    for (const name of LOCK_ATTRIBUTES)
    {
        if (item[name] !== undefined)
        {
            attributes.push(attributeOf(name, item[name]));
        }
    }
    return { attributes };
}

// The function the core calls with a method name and its parameters.
function objectCaller(db)
{
    return (method, params) => new Promise(resolve =>
    {
        let done = false;
        const startedAt = debugLog.enabled ? performance.now() : 0;
        const settle = (error, data) =>
        {
            if (done)
            {
                return;
            }
            done = true;
            debugLog.debug(() => `dynamodb.${method} on "${params && params.TableName}": ${error ? `failed: ${debugLog.shownError(error)}` : "done"}`
                + ` in ${debugLog.ms(performance.now() - startedAt)}`);
            if (error)
            {
                return resolve({ error: describe(error) });
            }
            resolve(method === "get" ? { item: itemOf(data && data.Item) } : {});
        };
        let ret;
        try
        {
            ret = db[method](params, settle);
        }
        catch (error)
        {
            return settle(error || new Error(`dynamodb.${method} threw`));
        }
        if (ret && typeof ret.then === "function")
        {
            ret.then(data => settle(undefined, data), error => settle(error || new Error(`dynamodb.${method} failed`)));
        }
    });
}

module.exports = { objectCaller, keptError };
