"use strict";

const util = require("util");
// Semaphore and ReadWriteLock: permits of a resource granted in ticket order on Fifo's queue
// (docs/semaphore.md). Each is a Fifo client whose acquisitions ask the native core for
// `permits` of the `limit` the resource counts: a ReadWriteLock is a semaphore of
// READ_WRITE_PERMITS permits, of which a shared hold takes one and an exclusive hold all.

const { setUp, acquisition, clientMethods } = require("./client.js");
const { nativeFifoAcquire } = require("./clients.js");
const { ValidationError, invalidArgument, notSupported } = require("./errors.js");
const { checkAcquireOptions, checkWaitMs } = require("./options.js");
const { settle } = require("./settle.js");

// The most permits a Semaphore may count.
const MAX_PERMITS = 2 ** 31 - 1;
// The permits of a ReadWriteLock's resource: more than any number of shared holders one item
// can name, and more than a Semaphore may count, so that neither kind takes the other's head.
const READ_WRITE_PERMITS = 2 ** 40;

function problem(message, key, value)
{
    return { message, path: [key], type: "any.invalid", context: { label: key, key, value } };
}

// `permits` of a Semaphore's configuration.
function permitsOf(config)
{
    const n = config !== null && typeof config === "object" ? config.permits : undefined;
    if (!Number.isInteger(n) || n < 1 || n > MAX_PERMITS)
    {
        throw new ValidationError([problem(`"permits" must be an integer from 1 to ${MAX_PERMITS}: how many permits each id counts`, "permits", n)], config);
    }
    return n;
}

// The configuration without `permits`, as the Fifo client underneath takes it.
function withoutPermits(config)
{
    if (config === null || typeof config !== "object" || !("permits" in config))
    {
        return config;
    }
    const rest = Object.assign({}, config);
    delete rest.permits;
    return rest;
}

// One acquisition of `permits` of `self`'s `limit` on resource `id`.
function acquirePermits(self, id, options, callback, method, permitsFor)
{
    if (typeof options === "function")
    {
        callback = options;
        options = undefined;
    }
    const checked = checkAcquireOptions(options, method) || checkWaitMs(options);
    if (checked)
    {
        return settle(Promise.reject(checked), callback);
    }
    if (Array.isArray(id))
    {
        return settle(Promise.reject(invalidArgument(`a ${self._lockKind} acquires one id at a time`)), callback);
    }
    let permits;
    try
    {
        permits = permitsFor(options || {});
    }
    catch (e)
    {
        return settle(Promise.reject(e), callback);
    }
    const signal = options && options.signal;
    return acquisition(self, id, signal, course => nativeAcquire(self, id, options || {}, permits, course), callback);
}

async function nativeAcquire(self, id, options, permits, course)
{
    const lock = await nativeFifoAcquire(self, id, options, course, { limit: self._limit, permits });
    lock.permits = permits;
    if (self._lockKind === "ReadWriteLock")
    {
        lock.mode = permits === 1 ? "shared" : "exclusive";
    }
    return lock;
}

// What a Semaphore or ReadWriteLock does not offer of a Fifo client, and how it shows itself.
const notForPermits =
{
    campaign()
    {
        throw notSupported(`${this._lockKind} has no campaign: leader election needs one leader; use Fifo or FailOpen`);
    },

    toJSON()
    {
        const out = clientMethods.toJSON.call(this);
        if (this._lockKind === "Semaphore")
        {
            out.permits = this._limit;
        }
        return out;
    },

    [util.inspect.custom](depth, options, inspect)
    {
        return `${this._lockKind} ${inspect(this.toJSON(), options)}`;
    },
};

// Sets up `self` as a Fifo client that acquires permits: named `kind` in its metrics, debug
// log and diagnostics channels.
function setUpPermits(self, kind, config, limit)
{
    setUp(self, "Fifo", config);
    self._limit = limit;
    self._lockKind = kind;
    self._metrics.kind = kind;
}

// A counting semaphore: at most `permits` held at once per id, granted in ticket order.
function Semaphore(config)
{
    if (!(this instanceof Semaphore))
    {
        return new Semaphore(config);
    }
    setUpPermits(this, "Semaphore", withoutPermits(config), permitsOf(config));
}

Semaphore.prototype.acquireLock = function(id, options, callback)
{
    return acquirePermits(this, id, options, callback, "semaphoreAcquireLock", o =>
    {
        const k = o.permits === undefined ? 1 : o.permits;
        if (!Number.isInteger(k) || k < 1 || k > this._limit)
        {
            throw invalidArgument(`options.permits must be an integer from 1 to ${this._limit}, the semaphore's permits`);
        }
        return k;
    });
};
Object.assign(Semaphore.prototype, clientMethods, notForPermits);

// Shared and exclusive holds: any number of shared holders or one exclusive holder per id, in
// ticket order (a waiting exclusive request holds back later shared ones).
function ReadWriteLock(config)
{
    if (!(this instanceof ReadWriteLock))
    {
        return new ReadWriteLock(config);
    }
    if (config !== null && typeof config === "object" && config.permits !== undefined)
    {
        throw new ValidationError([problem("\"permits\" is not an option of ReadWriteLock: a shared hold takes one, an exclusive hold all", "permits", config.permits)], config);
    }
    setUpPermits(this, "ReadWriteLock", config, READ_WRITE_PERMITS);
}

ReadWriteLock.prototype.acquireLock = function(id, options, callback)
{
    return acquirePermits(this, id, options, callback, "readWriteAcquireLock", o =>
    {
        const mode = o.mode === undefined ? "exclusive" : o.mode;
        if (mode === "shared")
        {
            return 1;
        }
        if (mode === "exclusive")
        {
            return READ_WRITE_PERMITS;
        }
        throw invalidArgument(`options.mode must be "shared" or "exclusive", not ${JSON.stringify(mode)}`);
    });
};
Object.assign(ReadWriteLock.prototype, clientMethods, notForPermits);

module.exports = { Semaphore, ReadWriteLock, MAX_PERMITS, READ_WRITE_PERMITS };
