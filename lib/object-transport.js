"use strict";

// The user-object transport: when `dynamodb` is an object with get/put/delete (a mock, a
// wrapper, a DocumentClient chosen with `transport: "object"`), call it with exactly the
// requests the original library sends, in the same order, so tests and wrappers written
// for the original keep working. On top of that sequence: failed conditions are recognised by
// `code` or `name`, callbacks run once and asynchronously, a missing lock time never shortens
// a wait, heartbeats retry transient failures while the lease lasts, and a release waits for
// an in-flight heartbeat and then uses its guid.

const crypto = require("crypto");
const { unknownKeys, isEmptyKeyValue } = require("./lock-id.js");

const CONDITION_FAILED = "ConditionalCheckFailedException";

function conditionFailed(error)
{
    return Boolean(error) && (error.code === CONDITION_FAILED || error.name === CONDITION_FAILED);
}

function codedError(code, message, originalError)
{
    const err = new Error(message);
    err.code = code;
    if (originalError !== undefined)
    {
        err.originalError = originalError;
    }
    return err;
}

function abortError(signal)
{
    const err = codedError("AbortError", "The lock acquisition was aborted.");
    err.name = "AbortError";
    if (signal && signal.reason !== undefined)
    {
        err.cause = signal.reason;
    }
    return err;
}

function notExists(sortKey)
{
    return sortKey
        ? "(attribute_not_exists(#partitionKey) and attribute_not_exists(#sortKey))"
        : "attribute_not_exists(#partitionKey)";
}

function exists(sortKey)
{
    return sortKey
        ? "(attribute_exists(#partitionKey) and attribute_exists(#sortKey))"
        : "attribute_exists(#partitionKey)";
}

function names(config)
{
    const n = { "#partitionKey": config.partitionKey };
    if (config.sortKey)
    {
        n["#sortKey"] = config.sortKey;
    }
    return n;
}

// Calls `db[method](params, callback)`; settles once, whichever of the callback or a returned
// promise answers first.
// Requests through the user's object, counted as the native core counts its own (`metrics()`).
const OPERATION_INDEX = { get: 0, put: 1, delete: 3 };
const THROTTLES = new Set(["ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
    "TransactionConflictException", "LimitExceededException"]);

function newStats()
{
    return {
        requestOperations: ["GetItem", "PutItem", "UpdateItem", "DeleteItem"],
        requestOutcomes: ["ok", "conditionFailed", "throttled", "error"],
        requests: [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
        throttles: 0,
        heartbeatsSent: 0,
        heartbeatsRetried: 0,
        heartbeatsFailed: 0,
    };
}

function countRequest(stats, method, error)
{
    const code = error && (error.code || error.name);
    const outcome = !error ? 0 : conditionFailed(error) ? 1 : THROTTLES.has(code) ? 2 : 3;
    stats.requests[OPERATION_INDEX[method]][outcome]++;
    if (outcome === 2)
    {
        stats.throttles++;
    }
}

function call(db, method, stats, params)
{
    return new Promise((resolve, reject) =>
        {
            let done = false;
            const settle = (error, data) =>
            {
                if (done)
                {
                    return;
                }
                done = true;
                if (stats)
                {
                    countRequest(stats, method, error);
                }
                if (error)
                {
                    reject(error);
                }
                else
                {
                    resolve(data === undefined ? {} : data);
                }
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
        }
    );
}

function sleep(ms, signal)
{
    return new Promise((resolve, reject) =>
        {
            if (signal && signal.aborted)
            {
                return reject(abortError(signal));
            }
            const onAbort = () =>
            {
                clearTimeout(timer);
                reject(abortError(signal));
            };
            const timer = setTimeout(() =>
                {
                    if (signal)
                    {
                        signal.removeEventListener("abort", onAbort);
                    }
                    resolve();
                }, ms);
            if (signal)
            {
                signal.addEventListener("abort", onAbort, { once: true });
            }
        }
    );
}

class ObjectTransport
{
    constructor(kind, config, owner, retryCount)
    {
        this.kind = kind;
        this.config = config;
        this.db = config.dynamodb;
        this.stats = newStats();
        this.owner = owner;
        this.retryCount = retryCount;
    }

    splitId(id)
    {
        let partitionID, sortID;
        if (id !== null && typeof id === "object" && !Buffer.isBuffer(id))
        {
            partitionID = id[this.config.partitionKey];
            sortID = this.config.sortKey === undefined ? undefined : id[this.config.sortKey];
        }
        else
        {
            partitionID = id;
        }
        if (partitionID === undefined || partitionID === null)
        {
            throw codedError("InvalidLockId", "Lock ID is missing required partitionKey value");
        }
        if (this.config.sortKey && sortID === undefined)
        {
            throw codedError("InvalidLockId", "Lock ID is missing required sortKey value");
        }
        const extra = unknownKeys(this.config, id);
        if (extra)
        {
            throw codedError("InvalidLockId", extra);
        }
        if (isEmptyKeyValue(partitionID) || isEmptyKeyValue(sortID))
        {
            throw codedError("InvalidLockId", `Lock ID ${isEmptyKeyValue(partitionID) ? "partition" : "sort"} value must not be empty`);
        }
        return { partitionID, sortID };
    }

    key(partitionID, sortID)
    {
        const key = { [this.config.partitionKey]: partitionID };
        if (this.config.sortKey)
        {
            key[this.config.sortKey] = sortID;
        }
        return key;
    }

    async acquire(id, signal)
    {
        const { partitionID, sortID } = this.splitId(id);
        if (signal && signal.aborted)
        {
            throw abortError(signal);
        }
        const held = this.kind === "FailClosed"
            ? await this.acquireClosed(partitionID, sortID, signal)
            : await this.acquireOpen(partitionID, sortID, signal);
        if (signal && signal.aborted)
        {
            await held.release().catch(() => {});
            throw abortError(signal);
        }
        return held;
    }

    // Sends an acquisition put. Resolves true when it was written, false when the lock was held
    // and a retry is left; rejects with FailedToAcquireLock when none is, and passes any other
    // error on as it came.
    async tryPut(params, retriesLeft)
    {
        try
        {
            await call(this.db, "put", this.stats, params);
            return true;
        }
        catch (error)
        {
            if (!conditionFailed(error))
            {
                throw error;
            }
            if (retriesLeft <= 0)
            {
                throw codedError("FailedToAcquireLock", "Failed to acquire lock.", error);
            }
            return false;
        }
    }

    async acquireClosed(partitionID, sortID, signal)
    {
        const guid = crypto.randomBytes(64);
        let retries = this.retryCount;
        for (;;)
        {
            const params =
            {
                TableName: this.config.lockTable,
                Item: Object.assign(this.key(partitionID, sortID), { owner: this.owner, guid }),
                ConditionExpression: notExists(this.config.sortKey),
                ExpressionAttributeNames: names(this.config),
            };
            if (await this.tryPut(params, retries))
            {
                return new HeldObjectLock(this, partitionID, sortID, guid, undefined);
            }
            retries--;
            await sleep(this.config.acquirePeriodMs, signal);
        }
    }

    // The original's sequence: a consistent get; a put if absent; otherwise wait the holder's
    // lease and put on the condition that the item still carries the guid and token seen.
    async acquireOpen(partitionID, sortID, signal)
    {
        const c = this.config;
        const guid = crypto.randomBytes(64);
        let retries = this.retryCount;
        for (;;)
        {
            const data = await call(this.db, "get", this.stats,
                { TableName: c.lockTable, Key: this.key(partitionID, sortID), ConsistentRead: true });
            const existing = data.Item;
            let fencingToken = 1;
            const item =
            {
                [c.partitionKey]: partitionID,
                fencingToken,
                leaseDurationMs: c.leaseDurationMs,
                owner: this.owner,
                guid,
            };
            const params = { TableName: c.lockTable, Item: item, ExpressionAttributeNames: names(c) };
            if (existing)
            {
                await sleep(this.waitMs(existing), signal);
                fencingToken = existing.fencingToken + 1;
                item.fencingToken = fencingToken;
                params.ConditionExpression = `${notExists(c.sortKey)} or (guid = :guid and fencingToken = :fencingToken)`;
                params.ExpressionAttributeValues = { ":fencingToken": existing.fencingToken, ":guid": existing.guid };
            }
            else
            {
                params.ConditionExpression = notExists(c.sortKey);
            }
            if (c.trustLocalTime)
            {
                item.lockAcquiredTimeUnixMs = Date.now();
            }
            if (c.sortKey)
            {
                item[c.sortKey] = sortID;
            }
            // Field order as the original sends it, for mocks that compare serialised requests.
            const sentAt = performance.now();
            if (await this.tryPut(reorder(params), retries))
            {
                return new HeldObjectLock(this, partitionID, sortID, guid, fencingToken, sentAt);
            }
            retries--;
        }
    }

    // The holder's lease, on this process's clock. With trustLocalTime the holder's
    // lockAcquiredTimeUnixMs may shorten the wait, never lengthen it, and a missing or
    // unreadable value does not shorten it.
    waitMs(existing)
    {
        const lease = Number(existing.leaseDurationMs);
        const leaseMs = Number.isFinite(lease) && lease >= 0 ? lease : this.config.leaseDurationMs;
        if (!this.config.trustLocalTime)
        {
            return leaseMs;
        }
        const acquired = Number(existing.lockAcquiredTimeUnixMs);
        if (!Number.isFinite(acquired))
        {
            return leaseMs;
        }
        return Math.min(leaseMs, Math.max(0, leaseMs - (Date.now() - acquired)));
    }
}

function reorder(params)
{
    const out = { TableName: params.TableName, Item: params.Item, ConditionExpression: params.ConditionExpression, ExpressionAttributeNames: params.ExpressionAttributeNames };
    if (params.ExpressionAttributeValues)
    {
        out.ExpressionAttributeValues = params.ExpressionAttributeValues;
    }
    return out;
}

// A lock held through the user-object transport. Heartbeats are a timer per lock, as in the
// original; operations on the lock run one at a time.
class HeldObjectLock
{
    constructor(transport, partitionID, sortID, guid, fencingToken, sentAt)
    {
        this.t = transport;
        this.partitionID = partitionID;
        this.sortID = sortID;
        this.guid = guid;
        this.fencingToken = fencingToken;
        this.lock = undefined;
        this.released = false;
        this.lost = false;
        this.abandoned = false;
        this.retrying = false;
        this.timer = undefined;
        this.busy = Promise.resolve();
        // On the monotonic clock, counted from when the write that took the lock was sent;
        // undefined for a FailClosed lock, which has no lease.
        this.leaseUntil = transport.kind === "FailOpen" ? sentAt + transport.config.leaseDurationMs : undefined;
        if (transport.kind === "FailOpen" && transport.config.heartbeatPeriodMs)
        {
            this.schedule(transport.config.heartbeatPeriodMs);
        }
    }

    attach(lock)
    {
        this.lock = lock;
    }

    // Milliseconds left on the lease now: 0 once lost, lapsed or released; Infinity without
    // a lease (FailClosed).
    leaseRemainingMs()
    {
        if (this.released || this.lost || this.abandoned)
        {
            return 0;
        }
        return this.leaseUntil === undefined ? Infinity : Math.max(0, this.leaseUntil - performance.now());
    }

    // Stops heartbeats without releasing: the lease lapses (a closed client's lock).
    abandon()
    {
        this.abandoned = true;
        if (this.timer)
        {
            clearTimeout(this.timer);
            this.timer = undefined;
        }
    }

    emit(event, value)
    {
        if (event === "error" && this.lock && this.lock._track)
        {
            this.lock._track.heartbeatFailed(this.lock, () => value);
        }
        if (!this.lock || (event === "error" && this.lock.listenerCount("error") === 0))
        {
            return;
        }
        if (event === "lost")
        {
            return this.lock._markLost(value);
        }
        this.lock.emit(event, value);
    }

    schedule(ms)
    {
        this.timer = setTimeout(() =>
            {
                this.timer = undefined;
                this.busy = this.busy.then(() => this.heartbeat());
            }, ms);
    }

    itemFor(guid, leaseDurationMs)
    {
        const c = this.t.config;
        const item =
        {
            [c.partitionKey]: this.partitionID,
            fencingToken: this.fencingToken,
            leaseDurationMs,
            owner: this.t.owner,
            guid,
        };
        if (c.trustLocalTime)
        {
            item.lockAcquiredTimeUnixMs = Date.now();
        }
        if (c.sortKey)
        {
            item[c.sortKey] = this.sortID;
        }
        return item;
    }

    guarded(item)
    {
        const c = this.t.config;
        return {
            TableName: c.lockTable,
            Item: item,
            ConditionExpression: `${exists(c.sortKey)} and guid = :guid`,
            ExpressionAttributeNames: names(c),
            ExpressionAttributeValues: { ":guid": this.guid },
        };
    }

    async heartbeat()
    {
        if (this.released || this.lost || this.abandoned)
        {
            return;
        }
        const c = this.t.config;
        const newGuid = crypto.randomBytes(64);
        const sentAt = performance.now();
        const stats = this.t.stats;
        stats.heartbeatsSent++;
        if (this.retrying)
        {
            stats.heartbeatsRetried++;
        }
        try
        {
            await call(this.t.db, "put", stats, this.guarded(this.itemFor(newGuid, c.leaseDurationMs)));
            if (performance.now() >= this.leaseUntil)
            {
                // Answered only once the lease had run out: a waiter may hold the lock by now.
                this.guid = newGuid;
                this.lost = true;
                return this.emit("lost", codedError("LeaseExpired", "No heartbeat succeeded before the lease ran out: the lock may be taken by another owner."));
            }
            this.retrying = false;
            this.guid = newGuid;
            this.leaseUntil = sentAt + c.leaseDurationMs;
            if (!this.released && !this.abandoned)
            {
                this.schedule(c.heartbeatPeriodMs);
            }
        }
        catch (error)
        {
            stats.heartbeatsFailed++;
            this.retrying = true;
            this.emit("error", error);
            if (conditionFailed(error))
            {
                this.lost = true;
                return this.emit("lost", codedError("LockLost", "The lock item no longer carries this holder's guid: another owner has it or it was deleted."));
            }
            const left = this.leaseUntil - performance.now();
            if (left <= 0)
            {
                this.lost = true;
                return this.emit("lost", codedError("LeaseExpired", "No heartbeat succeeded before the lease ran out: the lock may be taken by another owner."));
            }
            if (!this.released && !this.abandoned)
            {
                this.schedule(Math.min(left, Math.max(10, c.heartbeatPeriodMs / 4)));
            }
        }
    }

    release()
    {
        this.released = true;
        if (this.timer)
        {
            clearTimeout(this.timer);
            this.timer = undefined;
        }
        const run = this.busy.then(() => (this.t.kind === "FailOpen" ? this.releaseOpen() : this.releaseClosed()));
        this.busy = run.catch(() => {});
        return run;
    }

    async releaseClosed()
    {
        const c = this.t.config;
        const params =
        {
            TableName: c.lockTable,
            Key: this.t.key(this.partitionID, this.sortID),
            ConditionExpression: `${exists(c.sortKey)} and guid = :guid`,
            ExpressionAttributeNames: names(c),
            ExpressionAttributeValues: { ":guid": this.guid },
        };
        try
        {
            await call(this.t.db, "delete", this.t.stats, params);
        }
        catch (error)
        {
            if (conditionFailed(error))
            {
                throw codedError("FailedToReleaseLock", "Failed to release lock.", error);
            }
            throw error;
        }
    }

    async releaseOpen()
    {
        try
        {
            await call(this.t.db, "put", this.t.stats, this.guarded(this.itemFor(this.guid, 1)));
        }
        catch (error)
        {
            // Another owner may have the lock already: quiet, as in the original.
            if (!conditionFailed(error))
            {
                throw error;
            }
        }
    }
}

module.exports =
{
    create(kind, config, owner, retryCount)
    {
        return new ObjectTransport(kind, config, owner, retryCount);
    },
};
