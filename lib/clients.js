"use strict";

// The three kinds of client and their acquireLock: FailClosed, FailOpen and Fifo, all through
// the native core (whose requests may go through the user's `dynamodb` object). What they
// share is in lib/client.js.

const bridge = require("./bridge.js");
const { setUp, acquisition, clientMethods } = require("./client.js");
const { NativeLock, FifoLock } = require("./lock.js");
const { invalidId, invalidArgument, abortError } = require("./errors.js");
const { lockKey, fifoResource, withLockId } = require("./lock-id.js");
const { checkAcquireOptions, checkWaitMs, waitMsOf, dataInput, copyData, UNTIL_ABORTED } = require("./options.js");
const { settle } = require("./settle.js");

// acquireLock(id[, options][, callback]) of FailClosed and FailOpen.
function acquire(self, id, options, callback)
{
    if (typeof options === "function")
    {
        callback = options;
        options = undefined;
    }
    const signal = options === undefined || options === null ? undefined : options.signal;
    const problem = checkAcquireOptions(options);
    if (problem)
    {
        return settle(Promise.reject(problem), callback);
    }
    const data = options === undefined || options === null ? undefined : options.data;
    if (data !== undefined && self._transport === "object")
    {
        return settle(Promise.reject(invalidArgument("lock data needs the native transport: a dynamodb object's get/put/delete do not write it")), callback);
    }
    const untilAborted = options !== undefined && options !== null && options[UNTIL_ABORTED] === true;
    return acquisition(self, id, signal, course => nativeAcquire(self, id, signal, data, untilAborted, course), callback);
}

async function nativeAcquire(self, id, signal, data, untilAborted, course)
{
    const { partition, sort } = lockKey(self._config, id);
    if (signal && signal.aborted)
    {
        throw abortError(signal);
    }
    // Rejects with the SDK client's own error if its configuration cannot be read.
    const client = self._native || await self._nativeReady;
    let outcome;
    try
    {
        outcome = await bridge.askCancellable(client, signal, (request, cancelId) => client.startAcquire(request, partition, sort, cancelId, dataInput(data), untilAborted),
            late => bridge.releaseAbandoned(client, [late.lockId]), course.waiting);
    }
    catch (err)
    {
        // Through the user's object, the original's exact message.
        throw withLockId(err, id, self._transport !== "object");
    }
    const lockId = outcome.lockId;
    const lock = new NativeLock(client, lockId, outcome.fencingToken === null ? undefined : outcome.fencingToken,
        self._kind === "FailOpen" && self._config.heartbeatPeriodMs > 0, copyData(data), id, self._transport === "object");
    bridge.routeEvents(lockId, lock);
    return lock;
}

// acquireLock(ids[, options][, callback]) of Fifo: one resource or a list.
function fifoAcquire(self, ids, options, callback)
{
    if (typeof options === "function")
    {
        callback = options;
        options = undefined;
    }
    const problem = checkAcquireOptions(options, "fifoAcquireLock") || checkWaitMs(options)
        || (options && options.data !== undefined ? invalidArgument("a Fifo lock carries no data") : undefined);
    if (problem)
    {
        return settle(Promise.reject(problem), callback);
    }
    const signal = options && options.signal;
    return acquisition(self, ids, signal, course => nativeFifoAcquire(self, ids, options || {}, course), callback);
}

// A Fifo acquisition of `ids`; with `sem` (`{ limit, permits }`), a semaphore's of one id
// (lib/semaphore.js).
async function nativeFifoAcquire(self, ids, options, course, sem)
{
    const list = Array.isArray(ids) ? ids : [ids];
    if (list.length === 0)
    {
        throw invalidId("Lock ID is required: the list of resources is empty");
    }
    const resources = list.map((id, i) => fifoResource(id, Array.isArray(ids) ? ` [${i}]` : ""));
    const waitMs = waitMsOf(options);
    const signal = options.signal;
    if (signal && signal.aborted)
    {
        throw abortError(signal);
    }
    const client = self._native || await self._nativeReady;
    let outcome;
    try
    {
        outcome = await bridge.askCancellable(client, signal,
            (request, cancelId) => client.startAcquireFifo(request, resources, waitMs, cancelId, sem && sem.limit, sem && sem.permits),
            late => bridge.releaseAbandoned(client, late.lockIds), course.waiting);
    }
    catch (err)
    {
        throw withLockId(err, ids, true);
    }
    const lock = new FifoLock(client, outcome.lockIds, outcome.fencingToken);
    for (const lockId of outcome.lockIds)
    {
        bridge.routeEvents(lockId, lock);
    }
    return lock;
}

function FailClosed(config)
{
    if (!(this instanceof FailClosed))
    {
        return new FailClosed(config);
    }
    setUp(this, "FailClosed", config);
}

FailClosed.prototype.acquireLock = function(id, options, callback)
{
    return acquire(this, id, options, callback);
};
Object.assign(FailClosed.prototype, clientMethods);

function FailOpen(config)
{
    if (!(this instanceof FailOpen))
    {
        return new FailOpen(config);
    }
    setUp(this, "FailOpen", config);
}

FailOpen.prototype.acquireLock = function(id, options, callback)
{
    return acquire(this, id, options, callback);
};
Object.assign(FailOpen.prototype, clientMethods);

// A fair lock: waiters are granted each resource in the order they asked, and the ticket is
// the fencing token. Several resources may be acquired together with one ticket.
function Fifo(config)
{
    if (!(this instanceof Fifo))
    {
        return new Fifo(config);
    }
    setUp(this, "Fifo", config);
}

Fifo.prototype.acquireLock = function(ids, options, callback)
{
    return fifoAcquire(this, ids, options, callback);
};
Object.assign(Fifo.prototype, clientMethods);

module.exports = { FailClosed, FailOpen, Fifo, nativeFifoAcquire };
