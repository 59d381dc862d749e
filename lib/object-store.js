"use strict";

// The user's own `dynamodb` object (a mock, a wrapper, a DocumentClient chosen with
// `transport: "object"`), called for the native core (src/store/object.rs), which builds each
// request's parameters as the original library sends them and decides everything else. Here:
// call `dynamodb[method](params, callback)`, settle once whichever of the callback or a
// returned promise answers first, and answer with what the core reads: the item's attributes,
// or the error's `code` and whether it is a failed condition. The error object itself is kept
// here under a number, so that callers get back the very object the user's method gave.

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

// A number attribute as the protocol reads it: what Number() makes of it, when finite.
function number(v)
{
    const n = Number(v);
    return v !== undefined && Number.isFinite(n) ? n : undefined;
}

// What the protocol reads of an item: its owner, guid (binary, in hex) and numbers.
function itemOf(item)
{
    if (!item)
    {
        return undefined;
    }
    const g = item.guid;
    return {
        owner: typeof item.owner === "string" ? item.owner : undefined,
        guidHex: g instanceof Uint8Array ? Buffer.from(g.buffer, g.byteOffset, g.byteLength).toString("hex") : undefined,
        fencingToken: number(item.fencingToken),
        leaseDurationMs: number(item.leaseDurationMs),
        lockAcquiredTimeUnixMs: number(item.lockAcquiredTimeUnixMs),
    };
}

// The function the core calls with a method name and its parameters.
function objectCaller(db)
{
    return (method, params) => new Promise(resolve =>
    {
        let done = false;
        const settle = (error, data) =>
        {
            if (done)
            {
                return;
            }
            done = true;
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
