"use strict";

// The lock a caller holds: an EventEmitter with `fencingToken`, `signal`, `lost`,
// `leaseRemainingMs`, `release` and `update`. `Lock` is the shape and what every lock does;
// `NativeLock` (FailClosed, FailOpen, through DynamoDB or the user's `dynamodb` object) and
// `FifoLock` are held by the native core.

const { EventEmitter } = require("events");
const bridge = require("./bridge.js");
const { toError, internalError, invalidArgument, lockNotHeld, notSupported } = require("./errors.js");
const { withLockId } = require("./lock-id.js");
const { checkData, dataInput, copyData } = require("./options.js");
const { settle } = require("./settle.js");
const { debug, ms, shownId } = require("./debug.js");
const { noTransactions } = require("./global-table.js");

// The error of a failed heartbeat: `leaseAtRisk` says whether the lease is at risk (no retry
// mends the failure, or no more than the danger margin is left) or a retry within the lease
// will do; `leaseRemainingMs`, what was left of the lease when it failed.
function heartbeatError(ev)
{
    const error = toError(ev.error);
    error.leaseAtRisk = ev.leaseAtRisk !== false;
    if (typeof ev.remainingMs === "number")
    {
        error.leaseRemainingMs = ev.remainingMs;
    }
    return error;
}

class Lock extends EventEmitter
{
    constructor(release, fencingToken, heartbeats)
    {
        super();
        this.fencingToken = fencingToken;
        if (release)
        {
            this._release = release;
        }
        this._heartbeats = heartbeats;
        this._lost = undefined;
        this._released = false;
        this._abort = undefined;
        // Set by the client that hands the lock out (lib/metrics.js).
        this._track = undefined;
        if (heartbeats)
        {
            bridge.holdProcess(+1);
        }
    }

    /**
     * Aborted when the lock is lost (another owner took it, or the lease lapsed), with the
     * reason as `signal.reason`. Hand it to the work done under the lock.
     */
    get signal()
    {
        // Made on first use: most locks never need one.
        if (!this._abort)
        {
            this._abort = new AbortController();
            if (this._lost)
            {
                this._abort.abort(this._lost);
            }
        }
        return this._abort.signal;
    }

    /** True once the lock is known to be lost. */
    get lost()
    {
        return this._lost !== undefined;
    }

    /**
     * Milliseconds left on the lease at the moment of the call, by this process's monotonic
     * clock, counted from when the last successful write was sent: 0 once the lock is lost,
     * lapsed or released; Infinity for a held FailClosed lock. Computed from the deadline
     * itself, so the first read after the process was paused is already right.
     */
    get leaseRemainingMs()
    {
        return this._lost !== undefined || this._released ? 0 : this._leaseRemainingMs();
    }

    _leaseRemainingMs()
    {
        // Overridden per instance by the client that made the lock.
        return Infinity;
    }

    _stopHeartbeats()
    {
        if (this._heartbeats)
        {
            this._heartbeats = false;
            bridge.holdProcess(-1);
        }
    }

    _onNativeEvent(ev)
    {
        if (ev.event === "error")
        {
            if (this._track)
            {
                this._track.heartbeatFailed(this, () => heartbeatError(ev));
            }
            // The original emits "error" for each failed heartbeat. An EventEmitter with no
            // "error" listener would throw it and end the process; a lock library must not.
            if (this.listenerCount("error") > 0)
            {
                this.emit("error", heartbeatError(ev));
            }
        }
        else if (ev.event === "danger")
        {
            debug(() => `lock ${this._track ? shownId(this._track.id) : "?"} (fencing token ${this.fencingToken}): danger, ${ms(ev.remainingMs)} of lease left`);
            this.emit("danger", { remainingMs: ev.remainingMs });
        }
        else if (ev.event === "lost")
        {
            this._markLost(toError(ev.error), ev.releasable === true);
        }
    }

    // `releasable`: the native core says the item may still carry the lock (its lease ran
    // out), so that `close({ releaseLocks: true })` still releases it.
    _markLost(err, releasable)
    {
        if (this._track)
        {
            this._track.lost(this, err, releasable);
        }
        this._lost = err;
        this._stopHeartbeats();
        this._forget();
        if (this._abort)
        {
            this._abort.abort(err);
        }
        this.emit("lost", err);
    }

    _forget()
    {
        // Overridden per instance by the client that made the lock.
    }

    conditionCheck()
    {
        throw notSupported("lock.conditionCheck() is for FailClosed and FailOpen locks: a Fifo lock may be several items, and a semaphore's holders share one");
    }

    release(callback)
    {
        this._stopHeartbeats();
        this._released = true;
        // The original passes on what the AWS SDK v2 gives its callback: `null` on success.
        return settle(this._track ? this._track.released(this, () => this._release()) : this._release(), callback, null);
    }

    // `close({ releaseLocks: true })`: a release that says whether it freed the item. A lock
    // another holder had taken fails with `FailedToReleaseLock` instead of resolving quietly.
    _closeRelease()
    {
        this._stopHeartbeats();
        this._released = true;
        return this._track ? this._track.released(this, () => this._release(true)) : this._release(true);
    }

    // Stops heartbeats without releasing the lock (`close()` without `releaseLocks`): it
    // still holds until its lease ends, when the native core reports it lost.
    _abandon()
    {
        this._stopHeartbeats();
        if (this._track)
        {
            this._track.done(this);
        }
    }

    /**
     * Writes new data for the lock at once, on the condition that the lock is still ours
     * (its `guid`, as a heartbeat). `{ data: undefined }` removes it.
     */
    update(options, callback)
    {
        return settle(this._update(options), callback);
    }

    _update()
    {
        return Promise.reject(invalidArgument("lock.update needs a FailClosed or FailOpen lock held through the native core"));
    }

    [Symbol.asyncDispose]()
    {
        return this.release();
    }
}

// A lock held by the native core. Per-lock state is two fields; the behaviour is shared on the
// prototype, so that thousands of held locks cost little memory.
class NativeLock extends Lock
{
    constructor(client, lockId, fencingToken, heartbeats, data, userId, viaObject)
    {
        super(undefined, fencingToken, heartbeats);
        this._client = client;
        this._id = lockId;
        bridge.forgetWhenCollected(this, lockId);
        /** The data stored with the lock (a string or a Buffer), or undefined. */
        this.data = data;
        this._userId = userId;
        if (viaObject)
        {
            // Held through the user's `dynamodb` object: no data, and the original's messages.
            this._viaObject = true;
        }
    }

    async _update(options)
    {
        if (this._viaObject)
        {
            throw invalidArgument("lock.update needs the native transport: a dynamodb object's get/put/delete do not write lock data");
        }
        if (options === null || typeof options !== "object" || !("data" in options))
        {
            throw invalidArgument("lock.update needs an options object with `data`");
        }
        if (this._released)
        {
            throw lockNotHeld("The lock was released by this holder (its release() was called): update() writes only to a lock"
                + " still held. Acquire the lock again to write its data.");
        }
        const problem = checkData(options.data);
        if (problem)
        {
            throw problem;
        }
        await bridge.request(request => this._client.startUpdate(request, this._id, dataInput(options.data)));
        this.data = copyData(options.data);
    }

    async _release(strict)
    {
        let err;
        try
        {
            err = (await bridge.ask(request => this._client.startRelease(request, this._id, strict))).error;
        }
        catch (e)
        {
            throw internalError(e);
        }
        if (err)
        {
            if (err.code === "FailedToReleaseLock")
            {
                bridge.stopEvents(this._id);
            }
            throw withLockId(toError(err), this._userId, !this._viaObject);
        }
        bridge.stopEvents(this._id);
    }

    _forget()
    {
        bridge.stopEvents(this._id);
    }

    _leaseRemainingMs()
    {
        return bridge.leaseRemainingMs(this._id);
    }

    /**
     * The `ConditionCheck` entry of a `TransactWriteItems` that holds exactly while this
     * acquisition holds the lock item: FailOpen, the item carries this lock's fencing token and
     * is not released; FailClosed, it carries this lock's `guid`. In the DocumentClient's shape,
     * or in the low-level client's (attribute values marshalled) with `{ marshalled: true }`.
     */
    conditionCheck(options)
    {
        const marshalled = Boolean(options && options.marshalled);
        if (this._strongGlobal !== undefined)
        {
            throw noTransactions(this._strongGlobal);
        }
        if (this._lost !== undefined)
        {
            throw lockNotHeld(`the lock is lost (${this._lost.code}): no condition can hold for it`);
        }
        const target = this._released ? null : bridge.lockConditionTarget(this._id);
        if (!target)
        {
            throw lockNotHeld("the lock is released, lost or lapsed: no condition can hold for it");
        }
        const value = v => (v.s !== undefined && v.s !== null ? (marshalled ? { S: v.s } : v.s)
            : v.n !== undefined && v.n !== null ? (marshalled ? { N: v.n } : Number(v.n))
                : (marshalled ? { B: v.b } : v.b));
        const Key = { [target.partitionKey]: value(target.partition) };
        if (target.sortKey && target.sort)
        {
            Key[target.sortKey] = value(target.sort);
        }
        const check = { TableName: target.tableName, Key };
        if (target.guid)
        {
            check.ConditionExpression = "#guid = :guid";
            check.ExpressionAttributeNames = { "#guid": "guid" };
            check.ExpressionAttributeValues = { ":guid": marshalled ? { B: target.guid } : target.guid };
        }
        else
        {
            check.ConditionExpression = "#fencingToken = :fencingToken AND #leaseDurationMs <> :released";
            check.ExpressionAttributeNames = { "#fencingToken": "fencingToken", "#leaseDurationMs": "leaseDurationMs" };
            check.ExpressionAttributeValues = marshalled
                ? { ":fencingToken": { N: String(this.fencingToken) }, ":released": { N: "1" } }
                : { ":fencingToken": this.fencingToken, ":released": 1 };
        }
        return { ConditionCheck: check };
    }
}

// A Fifo lock: one native lock per resource (each a head item, heartbeated), all with the
// same fencing token. Released together; lost when any of them is.
class FifoLock extends Lock
{
    constructor(client, lockIds, fencingToken)
    {
        super(undefined, fencingToken, true);
        this._client = client;
        this._ids = lockIds;
        lockIds.forEach(id => bridge.forgetWhenCollected(this, id));
    }

    async _release(strict)
    {
        let outcomes;
        try
        {
            outcomes = await Promise.all(this._ids.map(id => bridge.ask(request => this._client.startRelease(request, id, strict))));
        }
        catch (e)
        {
            throw internalError(e);
        }
        // A failed release may be retried: only the released ones are forgotten.
        this._ids.forEach((id, i) => !outcomes[i].error && bridge.stopEvents(id));
        const failed = outcomes.find(o => o.error);
        if (failed)
        {
            throw toError(failed.error);
        }
    }

    _onNativeEvent(ev)
    {
        if (ev.event === "lost")
        {
            bridge.stopEvents(ev.lockId);
            if (this._lost !== undefined)
            {
                return;
            }
        }
        super._onNativeEvent(ev);
    }

    _forget()
    {
        // The other resources' locks stay known until release, which releases them too.
    }

    _leaseRemainingMs()
    {
        return Math.min(...this._ids.map(id => bridge.leaseRemainingMs(id)));
    }

}

module.exports = { Lock, NativeLock, FifoLock };
