"use strict";

// The JavaScript face of dynamodb-lock-native: the classes and callbacks of
// dynamodb-lock-client, plus Promises, AbortSignal and `await using`. The protocol, timers
// and I/O live in the native core (binding.js); this file only adapts values and errors.

const { EventEmitter } = require("events");
const os = require("os");
const util = require("util");
const pkg = require("./package.json");
const native = require("./lib/native.js");
const { chooseTransport, sdkOptionsFrom, describeDynamodb, isSdkClient, sdkClientOptions, optionProblems, credentialsProvider } = require("./lib/transport.js");
const objectTransport = require("./lib/object-transport.js");
const table = require("./lib/table.js");
const { Metrics } = require("./lib/metrics.js");
const { Campaign } = require("./lib/campaign.js");
const { performance } = require("perf_hooks");
const { unknownKeys, isEmptyKeyValue } = require("./lib/lock-id.js");

const OWN_CODES = new Set([
    "FailedToAcquireLock",
    "FailedToReleaseLock",
    "InvalidLockId",
    "InvalidArgument",
    "LockLost",
    "LeaseExpired",
    "InternalError",
    "ClientClosed",
    "NotSupported",
]);

function defaultOwner()
{
    let user = "unknown";
    try
    {
        user = os.userInfo().username;
    }
    catch (_)
    {
        // Some containers have no passwd entry for the current uid.
    }
    return `${pkg.name}@${pkg.version}_${user}@${os.hostname()}`;
}

// Computed once: the owner does not change during the life of a process.
const DEFAULT_OWNER = defaultOwner();

class ValidationError extends Error
{
    constructor(details, original)
    {
        super(details.map(d => d.message).join(". "));
        this.name = "ValidationError";
        this.details = details;
        // Joi's copy of the validated value, without the `dynamodb` credentials.
        Object.defineProperty(this, "_original", { value: withoutCredentials(original), enumerable: false, writable: true });
    }
}
ValidationError.prototype.isJoi = true;

// Turns the native core's error description into an Error with `code` (and `name` for AWS
// errors), as the original library's callers expect.
function toError(e)
{
    const err = new Error(e.message);
    err.code = e.code;
    if (e.code === "AbortError")
    {
        err.name = "AbortError";
    }
    else if (!OWN_CODES.has(e.code))
    {
        err.name = e.code;
    }
    if (e.originalCode)
    {
        err.originalError = toError({ code: e.originalCode, message: e.originalMessage });
    }
    if (e.detail)
    {
        // The chain of causes behind a one-sentence message.
        err.cause = new Error(e.detail);
    }
    if (e.holder)
    {
        err.owner = e.holder;
    }
    return err;
}

// A lock id as text for a message: strings quoted, Buffers in hex, objects key by key.
function describeId(id)
{
    const one = v => (Buffer.isBuffer(v) || v instanceof Uint8Array ? `<${Buffer.from(v).toString("hex")}>`
        : typeof v === "bigint" ? String(v) : JSON.stringify(v));
    if (id !== null && typeof id === "object" && !Buffer.isBuffer(id) && !(id instanceof Uint8Array))
    {
        return Array.isArray(id) ? `[${id.map(one).join(", ")}]`
            : `{ ${Object.keys(id).map(k => `${k}: ${one(id[k])}`).join(", ")} }`;
    }
    return one(id);
}

// FailedToAcquireLock and FailedToReleaseLock name the lock (`lockId`, as given to
// acquireLock) and, when known, the `owner` that holds it. `verbose`: in the message too
// (the "object" transport keeps the original's exact message).
function withLockId(err, id, verbose)
{
    if (!err || (err.code !== "FailedToAcquireLock" && err.code !== "FailedToReleaseLock"))
    {
        return err;
    }
    err.lockId = id;
    if (verbose)
    {
        const holder = err.owner === undefined ? "" : `: it is held by owner ${JSON.stringify(err.owner)}`;
        const what = err.code === "FailedToAcquireLock" ? "acquire" : "release";
        err.message = `Failed to ${what} lock ${describeId(id)}${holder}.`;
    }
    return err;
}

function internalError(cause)
{
    const err = new Error(`Internal error in dynamodb-lock-native: ${cause && cause.message}`);
    err.code = "InternalError";
    err.cause = cause;
    return err;
}

function invalidId(message)
{
    const err = new Error(message);
    err.code = "InvalidLockId";
    return err;
}

// A key value as the native core takes it: one of string, number (as decimal text), binary.
function keyInput(value, what)
{
    if (isEmptyKeyValue(value))
    {
        // DynamoDB refuses empty key values.
        throw invalidId(`Lock ID ${what} must not be empty`);
    }
    if (typeof value === "string")
    {
        // DynamoDB stores UTF-8: a lone surrogate would turn into U+FFFD and make distinct
        // ids the same lock.
        if (typeof value.isWellFormed === "function" && !value.isWellFormed())
        {
            throw invalidId(`Lock ID ${what} must be well-formed Unicode`);
        }
        return { s: value };
    }
    if (typeof value === "number")
    {
        if (!Number.isFinite(value))
        {
            throw invalidId(`Lock ID ${what} must be a finite number`);
        }
        return { n: String(value) };
    }
    if (typeof value === "bigint")
    {
        return { n: value.toString() };
    }
    if (Buffer.isBuffer(value))
    {
        return { b: value };
    }
    if (value instanceof Uint8Array)
    {
        return { b: Buffer.from(value.buffer, value.byteOffset, value.byteLength) };
    }
    throw invalidId(`Lock ID ${what} must be a string, number or Buffer`);
}

// Splits an id as the original does: an object carries `[partitionKey]` and `[sortKey]`,
// anything else is the partition value. Falsy sort values such as 0 are values; empty strings
// and keys the table does not have are refused.
function splitId(config, id)
{
    if (id === null || id === undefined)
    {
        throw invalidId("Lock ID is required");
    }
    let partitionID, sortID;
    if (typeof id === "object" && !Buffer.isBuffer(id) && !(id instanceof Uint8Array))
    {
        partitionID = id[config.partitionKey];
        sortID = config.sortKey === undefined ? undefined : id[config.sortKey];
    }
    else
    {
        partitionID = id;
    }
    if (partitionID === undefined || partitionID === null)
    {
        throw invalidId("Lock ID is missing required partitionKey value");
    }
    if (config.sortKey && (sortID === undefined || sortID === null))
    {
        throw invalidId("Lock ID is missing required sortKey value");
    }
    const extra = unknownKeys(config, id);
    if (extra)
    {
        throw invalidId(extra);
    }
    return { partitionID, sortID };
}

// acquireLock(id[, options][, callback]) and release([callback]): without a callback, a
// Promise. Callbacks run on a fresh tick, so one that throws is an ordinary uncaught
// exception and never lands in a promise chain. `noError` is what a callback receives as its
// error on success: undefined, or null where the original passes null.
function settle(promise, callback, noError)
{
    if (typeof callback !== "function")
    {
        return promise;
    }
    promise.then(
        value => process.nextTick(callback, noError, value),
        error => process.nextTick(callback, error)
    );
    return undefined;
}

// Heartbeating locks and awaited answers keep the process alive, as the original's timers
// and requests do: one timer handle, referenced while anything holds it.
let holds = 0;
const keepAlive = setInterval(() => {}, 1 << 30);
keepAlive.unref();
function holdProcess(delta)
{
    holds += delta;
    if (holds > 0)
    {
        keepAlive.ref();
    }
    else
    {
        holds = 0;
        keepAlive.unref();
    }
}

// Lock events arrive from the native core by lock id. One that arrives before its lock
// object exists (the acquisition's answer and the event travel separately) waits here.
const liveLocks = new Map();
const earlyEvents = new Map();
function onNativeEvent(ev)
{
    const lock = liveLocks.get(ev.lockId);
    if (lock)
    {
        return lock._onNativeEvent(ev);
    }
    if (earlyEvents.size < 10000)
    {
        const list = earlyEvents.get(ev.lockId) || [];
        list.push(ev);
        earlyEvents.set(ev.lockId, list);
    }
}

// Answers to acquisitions and releases arrive from the native core by request number, all
// through one channel per client.
const awaiting = new Map();
let nextRequest = 1;
function onNativeAnswer(outcome)
{
    const resolve = awaiting.get(outcome.request);
    if (resolve)
    {
        awaiting.delete(outcome.request);
        holdProcess(-1);
        resolve(outcome);
    }
}

// Starts a native request under a fresh number; resolves with its answer.
function ask(start)
{
    return new Promise(resolve =>
    {
        const request = nextRequest;
        nextRequest = nextRequest >= 0xffffffff ? 1 : nextRequest + 1;
        start(request);
        holdProcess(+1);
        awaiting.set(request, resolve);
    });
}

let nextCancelId = 1;

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
            holdProcess(+1);
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
            holdProcess(-1);
        }
    }

    _onNativeEvent(ev)
    {
        if (ev.event === "error")
        {
            if (this._track)
            {
                this._track.heartbeatFailed(this, () => toError(ev.error));
            }
            // The original emits "error" for each failed heartbeat. An EventEmitter with no
            // "error" listener would throw it and end the process; a lock library must not.
            if (this.listenerCount("error") > 0)
            {
                this.emit("error", toError(ev.error));
            }
        }
        else if (ev.event === "danger")
        {
            this.emit("danger", { remainingMs: ev.remainingMs });
        }
        else if (ev.event === "lost")
        {
            this._markLost(toError(ev.error));
        }
    }

    _markLost(err)
    {
        if (this._track)
        {
            this._track.lost(this, err);
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

    release(callback)
    {
        this._stopHeartbeats();
        this._released = true;
        const released = this._release();
        // The original passes on what the AWS SDK v2 gives its callback: `null` on success.
        return settle(this._track ? this._track.released(this, released) : released, callback, null);
    }

    // Stops heartbeats and forgets the lock without releasing it (`close()` without
    // `releaseLocks`): its lease lapses.
    _abandon()
    {
        this._stopHeartbeats();
        this._forget();
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

// A lock whose lease lapsed stays known to the native core until it is released, so that its
// release can still free the item; one that JavaScript lets go of unreleased is forgotten then.
const unreferenced = new FinalizationRegistry(lockId => native.forgetLock(lockId));

// A lock held by the native core. Per-lock state is two fields; the behaviour is shared on the
// prototype, so that thousands of held locks cost little memory.
class NativeLock extends Lock
{
    constructor(client, lockId, fencingToken, heartbeats, data, userId)
    {
        super(undefined, fencingToken, heartbeats);
        this._client = client;
        this._id = lockId;
        unreferenced.register(this, lockId);
        /** The data stored with the lock (a string or a Buffer), or undefined. */
        this.data = data;
        this._userId = userId;
    }

    async _update(options)
    {
        if (options === null || typeof options !== "object" || !("data" in options))
        {
            throw invalidArgument("lock.update needs an options object with `data`");
        }
        const problem = checkData(options.data);
        if (problem)
        {
            throw problem;
        }
        let err;
        try
        {
            err = (await ask(request => this._client.startUpdate(request, this._id, dataInput(options.data)))).error;
        }
        catch (e)
        {
            throw internalError(e);
        }
        if (err)
        {
            throw toError(err);
        }
        this.data = copyData(options.data);
    }

    async _release()
    {
        let err;
        try
        {
            err = (await ask(request => this._client.startRelease(request, this._id))).error;
        }
        catch (e)
        {
            throw internalError(e);
        }
        if (err)
        {
            if (err.code === "FailedToReleaseLock")
            {
                liveLocks.delete(this._id);
            }
            throw withLockId(toError(err), this._userId, true);
        }
        liveLocks.delete(this._id);
    }

    _forget()
    {
        liveLocks.delete(this._id);
    }

    _leaseRemainingMs()
    {
        return native.leaseRemainingMs(this._id);
    }
}

function LockClient(self, kind, config)
{
    const problems = native.validateConfig(kind, describeConfig(config)).map(p => detail(p, config));
    if (config !== null && typeof config === "object")
    {
        // The `dynamodb` options' own problems, where Joi would list them: after `owner`.
        const at = problems.filter(p => p.path[0] === "owner").length;
        problems.splice(at, 0, ...optionProblems(config.dynamodb, config.transport));
    }
    if (problems.length > 0)
    {
        throw new ValidationError(problems, config);
    }
    warnOfUnsafeHeartbeat(kind, config);
    self._config = withoutCredentials(config);
    self._kind = kind;
    self._retryCount = config.retryCount === undefined ? 1 : config.retryCount;
    self._owner = config.owner || DEFAULT_OWNER;
    self._metrics = new Metrics(kind);
    self._closing = undefined;
    self._campaigns = new Set();
    self._transport = chooseTransport(config.dynamodb, config.transport);
    if (self._transport === "object")
    {
        self._object = objectTransport.create(kind, config, self._owner, self._retryCount);
        self._closeAbort = new AbortController();
        return;
    }
    const options =
    {
        kind,
        lockTable: config.lockTable,
        partitionKey: config.partitionKey,
        sortKey: config.sortKey,
        owner: self._owner,
        retryCount: self._retryCount,
        acquirePeriodMs: config.acquirePeriodMs,
        leaseDurationMs: config.leaseDurationMs,
        heartbeatPeriodMs: config.heartbeatPeriodMs,
        trustLocalTime: config.trustLocalTime,
        rereadPeriodMs: config.rereadPeriodMs,
        requestTimeoutMs: config.requestTimeoutMs,
        dangerMarginMs: config.dangerMarginMs,
        maxHeartbeatsPerSecond: config.maxHeartbeatsPerSecond,
        ttlAttribute: config.ttlAttribute,
        ttlSeconds: config.ttlSeconds,
    };
    if (isSdkClient(config.dynamodb))
    {
        // Reading an SDK client's region and endpoint is asynchronous: the first
        // acquisition waits for it.
        self._nativeReady = sdkClientOptions(config.dynamodb).then(({ options: fromClient, credentials }) =>
            (self._native = new native.NativeClient(Object.assign(options, fromClient), credentials, onNativeEvent, onNativeAnswer)));
        self._nativeReady.catch(() => {});
        return;
    }
    let fromOptions;
    try
    {
        fromOptions = sdkOptionsFrom(config.dynamodb);
    }
    catch (err)
    {
        if (err.code === "InvalidCaBundle")
        {
            throw new ValidationError([{
                message: err.message,
                path: ["dynamodb", "caBundle"],
                type: "any.invalid",
                context: { label: "dynamodb.caBundle", key: "caBundle", value: config.dynamodb.caBundle },
            }], config);
        }
        if (err.code !== "InvalidEndpoint")
        {
            throw err;
        }
        throw new ValidationError([{
            message: "\"dynamodb.endpoint\" must be a string or a URL",
            path: ["dynamodb", "endpoint"],
            type: "any.invalid",
            context: { label: "dynamodb.endpoint", key: "endpoint", value: config.dynamodb.endpoint },
        }], config);
    }
    self._native = new native.NativeClient(Object.assign(options, fromOptions), credentialsProvider(config.dynamodb), onNativeEvent, onNativeAnswer);
}

// The configuration a client keeps: a `dynamodb` options object loses its `credentials`, which
// the native core has taken (static keys) or reaches through a closure (a provider), so that no
// walk over the client finds the secret.
function withoutCredentials(config)
{
    const db = config !== null && typeof config === "object" ? config.dynamodb : undefined;
    if (db === null || typeof db !== "object" || !("credentials" in db) || isSdkClient(db) || typeof db.get === "function")
    {
        return config;
    }
    const rest = Object.assign({}, db);
    delete rest.credentials;
    return Object.assign({}, config, { dynamodb: rest });
}

const UNSAFE_HEARTBEAT = "DYNAMODB_LOCK_NATIVE_UNSAFE_HEARTBEAT";

// A FailOpen heartbeat period as long as the lease or longer is accepted, as the original
// accepts it, but each lease then runs out before the heartbeat that would renew it.
function warnOfUnsafeHeartbeat(kind, config)
{
    const { heartbeatPeriodMs: period, leaseDurationMs: lease } = config;
    if (kind !== "FailOpen" || !(period > 0) || period < lease)
    {
        return;
    }
    process.emitWarning(
        `FailOpen heartbeatPeriodMs (${period}) is not shorter than leaseDurationMs (${lease}): each lease runs out`
            + " before the heartbeat that would renew it, so another process may acquire a lock its holder still"
            + " uses, and the holder's lock emits \"lost\" when its lease runs out. Choose a heartbeat period well"
            + " under the lease (a third of it or less).",
        { type: "DynamoDBLockNativeWarning", code: UNSAFE_HEARTBEAT });
}

// What validation needs to see of the configuration: the `dynamodb` value reduced to its
// get/put/delete methods (which may live on a prototype).
function describeConfig(config)
{
    if (config === null || typeof config !== "object" || !("dynamodb" in config))
    {
        return config;
    }
    return Object.assign({}, config, { dynamodb: describeDynamodb(config.dynamodb, config.transport) });
}

function detail(p, config)
{
    const key = p.path[p.path.length - 1];
    const context = p.path.length > 0 ? { label: p.path.join("."), key } : { label: "value" };
    if (p.limit !== null && p.limit !== undefined)
    {
        context.limit = p.limit;
    }
    let value = config;
    for (const k of p.path)
    {
        value = value === undefined || value === null ? undefined : value[k];
    }
    if (value !== undefined)
    {
        context.value = value;
    }
    return { message: p.message, path: p.path, type: p.type, context };
}

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
        return settle(Promise.reject(invalidArgument("lock data needs the native core's I/O: a dynamodb object's get/put/delete do not write it")), callback);
    }
    const startedAt = performance.now();
    if (self._closing)
    {
        return settle(self._metrics.acquisition(id, startedAt, Promise.reject(clientClosed())), callback);
    }
    const promise = self._transport === "object" ? objectAcquire(self, id, signal) : nativeAcquire(self, id, signal, data);
    return settle(self._metrics.acquisition(id, startedAt, closable(self, signal, promise)), callback);
}

function invalidArgument(message)
{
    const err = new TypeError(message);
    err.code = "InvalidArgument";
    return err;
}

// Lock data: a string, a Buffer or a Uint8Array (or undefined: none).
function checkData(data)
{
    if (data === undefined || typeof data === "string" || Buffer.isBuffer(data) || data instanceof Uint8Array)
    {
        return undefined;
    }
    return invalidArgument("lock data must be a string or a Buffer");
}

// Lock data as the native core takes it.
function dataInput(data)
{
    if (data === undefined)
    {
        return undefined;
    }
    if (typeof data === "string")
    {
        return { s: data };
    }
    return { b: Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength) };
}

// The value `lock.data` shows: the string, or a copy of the bytes (later changes by the caller
// do not change what the lock says it stored).
function copyData(data)
{
    return data === undefined || typeof data === "string" ? data : Buffer.from(data);
}

// The acquisition options: an object whose `signal`, if any, is an AbortSignal, and whose
// `data`, if any, is a string or a Buffer.
function checkAcquireOptions(options)
{
    if (options === undefined || options === null)
    {
        return undefined;
    }
    if (typeof options !== "object")
    {
        return invalidArgument("acquireLock options must be an object");
    }
    const dataProblem = checkData(options.data);
    if (dataProblem)
    {
        return dataProblem;
    }
    const signal = options.signal;
    if (signal === undefined)
    {
        return undefined;
    }
    const isSignal = typeof AbortSignal === "function" && signal instanceof AbortSignal;
    const looksLikeSignal = signal !== null && typeof signal === "object"
        && typeof signal.aborted === "boolean"
        && typeof signal.addEventListener === "function"
        && typeof signal.removeEventListener === "function";
    return isSignal || looksLikeSignal ? undefined : invalidArgument("options.signal must be an AbortSignal");
}

function abortError(signal)
{
    const err = toError({ code: "AbortError", message: "The lock acquisition was aborted." });
    if (signal && signal.reason !== undefined)
    {
        err.cause = signal.reason;
    }
    return err;
}

// Starts a native acquisition that `signal` may cancel; resolves with its successful
// outcome, or throws its error. An abort rejects at once with an AbortError, even while a
// request is on the wire; the native acquisition is cancelled, and a lock it still returns
// is released in the background by `undo`.
async function askCancellable(client, signal, start, undo)
{
    let cancelId, onAbort;
    let answered;
    const aborted = {};
    let abort;
    if (signal)
    {
        cancelId = nextCancelId++ % 0xffffffff;
        abort = new Promise(resolve =>
        {
            onAbort = () =>
            {
                client.cancelAcquisition(cancelId);
                resolve(aborted);
            };
        });
        signal.addEventListener("abort", onAbort, { once: true });
    }
    let outcome;
    try
    {
        answered = ask(request => start(request, cancelId));
        outcome = await (signal ? Promise.race([answered, abort]) : answered);
    }
    catch (err)
    {
        throw internalError(err);
    }
    finally
    {
        if (signal)
        {
            try
            {
                signal.removeEventListener("abort", onAbort);
            }
            catch (_)
            {
                // A signal-like object that throws here must not orphan an acquired lock.
            }
        }
    }
    if (outcome === aborted)
    {
        // The native core forgets the cancellation when the acquisition ends.
        answered.then(late => !late.error && undo(late), () => {});
        throw abortError(signal);
    }
    if (signal)
    {
        client.forgetAcquisition(cancelId);
    }
    if (outcome.error)
    {
        throw outcome.error.code === "AbortError" ? abortError(signal) : toError(outcome.error);
    }
    return outcome;
}

// Releases, in the background, locks that an aborted acquisition returned all the same.
function releaseAbandoned(client, lockIds)
{
    for (const lockId of lockIds)
    {
        earlyEvents.delete(lockId);
        ask(request => client.startRelease(request, lockId)).catch(() => {});
    }
}

async function nativeAcquire(self, id, signal, data)
{
    const { partitionID, sortID } = splitId(self._config, id);
    const partition = keyInput(partitionID, "partition value");
    const sort = self._config.sortKey ? keyInput(sortID, "sort value") : undefined;
    if (signal && signal.aborted)
    {
        throw abortError(signal);
    }
    // Rejects with the SDK client's own error if its configuration cannot be read.
    const client = self._native || await self._nativeReady;
    let outcome;
    try
    {
        outcome = await askCancellable(client, signal, (request, cancelId) => client.startAcquire(request, partition, sort, cancelId, dataInput(data)),
            late => releaseAbandoned(client, [late.lockId]));
    }
    catch (err)
    {
        throw withLockId(err, id, true);
    }
    const lockId = outcome.lockId;
    const lock = new NativeLock(client, lockId, outcome.fencingToken === null ? undefined : outcome.fencingToken,
        self._kind === "FailOpen" && self._config.heartbeatPeriodMs > 0, copyData(data), id);
    liveLocks.set(lockId, lock);
    const early = earlyEvents.get(lockId);
    if (early)
    {
        earlyEvents.delete(lockId);
        process.nextTick(() => early.forEach(ev => lock._onNativeEvent(ev)));
    }
    return lock;
}

// getLock(id[, callback]): the lock item as one consistent read finds it, or null.
function getLock(self, id, callback)
{
    return settle(nativeGetLock(self, id), callback);
}

async function nativeGetLock(self, id)
{
    if (self._transport === "object")
    {
        throw invalidArgument("getLock needs the native core's I/O: it is not available with a dynamodb object of get/put/delete");
    }
    let partition, sort;
    if (self._kind === "Fifo")
    {
        partition = fifoResource(id, "");
    }
    else
    {
        const { partitionID, sortID } = splitId(self._config, id);
        partition = keyInput(partitionID, "partition value");
        sort = self._config.sortKey ? keyInput(sortID, "sort value") : undefined;
    }
    const client = self._native || await self._nativeReady;
    let outcome;
    try
    {
        outcome = await ask(request => client.startGetLock(request, partition, sort));
    }
    catch (e)
    {
        throw internalError(e);
    }
    if (outcome.error)
    {
        throw toError(outcome.error);
    }
    const info = outcome.info;
    if (!info)
    {
        return null;
    }
    const value = v => (v === null ? undefined : v);
    return {
        owner: value(info.owner),
        fencingToken: value(info.fencingToken),
        leaseDurationMs: value(info.leaseDurationMs),
        released: info.released,
        data: info.dataS !== undefined && info.dataS !== null ? info.dataS : value(info.dataB),
        heldByThisClient: info.heldByThisClient,
    };
}

// An acquisition through the user's object, which the caller's signal and `close()` cancel.
async function objectAcquire(self, id, signal)
{
    const either = new AbortController();
    const onAbort = () => either.abort(signal.reason);
    const onClose = () => either.abort(clientClosed());
    if (signal)
    {
        if (signal.aborted)
        {
            onAbort();
        }
        else
        {
            signal.addEventListener("abort", onAbort, { once: true });
        }
    }
    self._closeAbort.signal.addEventListener("abort", onClose, { once: true });
    try
    {
        let held;
        try
        {
            held = await self._object.acquire(id, either.signal);
        }
        catch (err)
        {
            throw withLockId(err, id, false);
        }
        return wrapObjectLock(self, held, id);
    }
    finally
    {
        self._closeAbort.signal.removeEventListener("abort", onClose);
        if (signal)
        {
            try
            {
                signal.removeEventListener("abort", onAbort);
            }
            catch (_)
            {
                // As in askCancellable: a signal-like object that throws must not orphan a lock.
            }
        }
    }
}

function clientClosed()
{
    const err = new Error("The lock client is closed.");
    err.code = "ClientClosed";
    return err;
}

// An acquisition that `close()` may cancel: cancelled, it fails with `ClientClosed`; granted
// while the client closes, its lock is released and it fails the same way.
function closable(self, signal, promise)
{
    return promise.then(
        lock =>
        {
            if (!self._closing)
            {
                return lock;
            }
            return lock.release().catch(() => {}).then(() =>
            {
                throw clientClosed();
            });
        },
        error =>
        {
            if (self._closing && error && error.code === "AbortError" && !(signal && signal.aborted))
            {
                throw clientClosed();
            }
            throw error;
        });
}

// Closes a client: cancels pending acquisitions and waits for them to settle, then releases
// (or, without `releaseLocks`, abandons) every lock it holds, each on its own. Resolves with
// one outcome per lock.
async function closeClient(self, releaseLocks)
{
    // A campaign's lock is released by the campaign itself when it stops, or with the others.
    for (const campaign of self._campaigns)
    {
        campaign._stop.abort();
    }
    if (self._closeAbort)
    {
        self._closeAbort.abort();
    }
    let client = self._native;
    if (!client && self._nativeReady)
    {
        client = await self._nativeReady.catch(() => undefined);
    }
    if (client)
    {
        client.close(false);
    }
    await Promise.all([...self._metrics.pending].map(p => p.catch(() => {})));
    const locks = [...self._metrics.live];
    if (!releaseLocks)
    {
        if (client)
        {
            client.close(true);
        }
        return locks.map(lock =>
        {
            lock._abandon();
            return { id: lock._track.id, fencingToken: lock.fencingToken, released: false };
        });
    }
    return Promise.all(locks.map(lock => lock.release().then(
        () => ({ id: lock._track.id, fencingToken: lock.fencingToken, released: true }),
        error => ({ id: lock._track.id, fencingToken: lock.fencingToken, released: false, error }))));
}

function wrapObjectLock(self, held, id)
{
    const lock = new Lock(() => held.release().catch(err => Promise.reject(withLockId(err, id, false))), held.fencingToken, false);
    lock._abandon = function()
    {
        held.abandon();
        Lock.prototype._abandon.call(this);
    };
    lock._leaseRemainingMs = () => held.leaseRemainingMs();
    held.attach(lock);
    return lock;
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
        lockIds.forEach(id => unreferenced.register(this, id));
    }

    async _release()
    {
        let outcomes;
        try
        {
            outcomes = await Promise.all(this._ids.map(id => ask(request => this._client.startRelease(request, id))));
        }
        catch (e)
        {
            throw internalError(e);
        }
        // A failed release may be retried: only the released ones are forgotten.
        this._ids.forEach((id, i) => !outcomes[i].error && liveLocks.delete(id));
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
            liveLocks.delete(ev.lockId);
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
        return Math.min(...this._ids.map(id => native.leaseRemainingMs(id)));
    }

    _abandon()
    {
        this._ids.forEach(id => liveLocks.delete(id));
        super._abandon();
    }
}

// How long a Fifo acquisition waits for its turn unless told (`waitMs`).
const FIFO_DEFAULT_WAIT_MS = 60000;

// A Fifo lock id: the partition value of one resource.
function fifoResource(id, what)
{
    if (id === null || id === undefined)
    {
        throw invalidId(`Lock ID${what} is required`);
    }
    if (typeof id === "object" && !Buffer.isBuffer(id) && !(id instanceof Uint8Array))
    {
        throw invalidId(`Lock ID${what} must be a string, number or Buffer: a Fifo lock ID is the resource's partition value`);
    }
    return keyInput(id, `${what ? what + " " : ""}value`.trim());
}

function checkWaitMs(options)
{
    const waitMs = options === undefined || options === null ? undefined : options.waitMs;
    if (waitMs === undefined || (typeof waitMs === "number" && waitMs >= 0))
    {
        return undefined;
    }
    return invalidArgument("options.waitMs must be a number of milliseconds >= 0, or Infinity");
}

function fifoAcquire(self, ids, options, callback)
{
    if (typeof options === "function")
    {
        callback = options;
        options = undefined;
    }
    const problem = checkAcquireOptions(options) || checkWaitMs(options)
        || (options && options.data !== undefined ? invalidArgument("a Fifo lock carries no data") : undefined);
    if (problem)
    {
        return settle(Promise.reject(problem), callback);
    }
    const startedAt = performance.now();
    if (self._closing)
    {
        return settle(self._metrics.acquisition(ids, startedAt, Promise.reject(clientClosed())), callback);
    }
    const signal = options && options.signal;
    const promise = closable(self, signal, nativeFifoAcquire(self, ids, options || {}));
    return settle(self._metrics.acquisition(ids, startedAt, promise), callback);
}

async function nativeFifoAcquire(self, ids, options)
{
    const list = Array.isArray(ids) ? ids : [ids];
    if (list.length === 0)
    {
        throw invalidId("Lock ID is required: the list of resources is empty");
    }
    const resources = list.map((id, i) => fifoResource(id, Array.isArray(ids) ? ` [${i}]` : ""));
    const waitMs = options.waitMs === undefined ? FIFO_DEFAULT_WAIT_MS : options.waitMs;
    const signal = options.signal;
    if (signal && signal.aborted)
    {
        throw abortError(signal);
    }
    const client = self._native || await self._nativeReady;
    let outcome;
    try
    {
        outcome = await askCancellable(client, signal, (request, cancelId) => client.startAcquireFifo(request, resources, waitMs, cancelId),
            late => releaseAbandoned(client, late.lockIds));
    }
    catch (err)
    {
        throw withLockId(err, ids, true);
    }
    const lock = new FifoLock(client, outcome.lockIds, outcome.fencingToken);
    for (const lockId of outcome.lockIds)
    {
        liveLocks.set(lockId, lock);
        const early = earlyEvents.get(lockId);
        if (early)
        {
            earlyEvents.delete(lockId);
            process.nextTick(() => early.forEach(ev => lock._onNativeEvent(ev)));
        }
    }
    return lock;
}

function describeClient(client)
{
    const c = client._config || {};
    const out = { lockTable: c.lockTable, partitionKey: c.partitionKey };
    if (c.sortKey !== undefined)
    {
        out.sortKey = c.sortKey;
    }
    out.owner = client._owner;
    out.transport = client._transport;
    out.closed = Boolean(client._closing);
    return out;
}

// close([options][, callback]) and metrics(), on every kind of client.
const clientMethods =
{
    close(options, callback)
    {
        if (typeof options === "function")
        {
            callback = options;
            options = undefined;
        }
        if (options !== undefined && options !== null && typeof options !== "object")
        {
            return settle(Promise.reject(invalidArgument("close options must be an object")), callback);
        }
        if (!this._closing)
        {
            this._closing = closeClient(this, Boolean(options && options.releaseLocks));
        }
        return settle(this._closing, callback);
    },

    metrics()
    {
        const transport = this._object ? this._object.stats : this._native && this._native.stats();
        return this._metrics.snapshot(transport);
    },

    // What JSON.stringify and util.inspect (a logger's view) show of a client: its table and
    // identity, never the `dynamodb` value it was given, whose SDK client may carry keys.
    toJSON()
    {
        return describeClient(this);
    },

    [util.inspect.custom](depth, options, inspect)
    {
        return `${this._kind} ${inspect(describeClient(this), options)}`;
    },

    campaign(id, options)
    {
        return campaign(this, id, options);
    },

    getLock(id, callback)
    {
        return getLock(this, id, callback);
    },
};

function notSupported(message)
{
    const err = new Error(message);
    err.code = "NotSupported";
    return err;
}

// campaign(id[, { signal }]): leader election on FailOpen and Fifo clients (lib/campaign.js).
function campaign(self, id, options)
{
    if (self._kind === "FailClosed")
    {
        throw notSupported("FailClosed has no campaign: a crashed leader would keep its lock, and leadership, forever. Use FailOpen or Fifo.");
    }
    if (self._transport === "object")
    {
        throw notSupported("campaign needs the native transport, whose heartbeats warn of a lease in danger in time; a user dynamodb object's do not");
    }
    if (self._kind === "FailOpen" && !(self._config.heartbeatPeriodMs > 0))
    {
        throw invalidArgument("campaign needs a FailOpen client with heartbeatPeriodMs: a leader keeps its lease with heartbeats");
    }
    const problem = checkAcquireOptions(options);
    if (problem)
    {
        throw problem;
    }
    // A bad id is refused now, not by every acquisition of the campaign.
    if (self._kind === "Fifo")
    {
        fifoResource(id, "");
    }
    else
    {
        const { partitionID, sortID } = splitId(self._config, id);
        keyInput(partitionID, "partition value");
        if (self._config.sortKey)
        {
            keyInput(sortID, "sort value");
        }
    }
    const signal = options === undefined || options === null ? undefined : options.signal;
    // Fifo candidates wait in line for as long as the campaign lasts.
    const acquireOptions = self._kind === "Fifo" ? stop => ({ signal: stop, waitMs: Infinity }) : stop => ({ signal: stop });
    const c = new Campaign(stop => self.acquireLock(id, acquireOptions(stop)), signal, ended => self._campaigns.delete(ended));
    if (self._closing)
    {
        c._stop.abort();
    }
    self._campaigns.add(c);
    return c;
}

function FailClosed(config)
{
    if (!(this instanceof FailClosed))
    {
        return new FailClosed(config);
    }
    LockClient(this, "FailClosed", config);
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
    LockClient(this, "FailOpen", config);
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
    LockClient(this, "Fifo", config);
}

Fifo.prototype.acquireLock = function(ids, options, callback)
{
    return fifoAcquire(this, ids, options, callback);
};
Object.assign(Fifo.prototype, clientMethods);

// One DynamoDB request at a time for table administration, through a native client made for
// it: `dynamodb` means what it means for the lock clients (options, or an AWS SDK client).
async function adminCaller(dynamodb)
{
    if (chooseTransport(dynamodb) === "object")
    {
        throw invalidArgument("createTable needs options for the native core or an AWS SDK client as `dynamodb`, not an object of get/put/delete");
    }
    const options = { kind: "FailClosed", lockTable: "-", partitionKey: "-", owner: DEFAULT_OWNER };
    let client;
    if (isSdkClient(dynamodb))
    {
        const { options: fromClient, credentials } = await sdkClientOptions(dynamodb);
        client = new native.NativeClient(Object.assign(options, fromClient), credentials, onNativeEvent, onNativeAnswer);
    }
    else
    {
        client = new native.NativeClient(Object.assign(options, sdkOptionsFrom(dynamodb)), undefined, onNativeEvent, onNativeAnswer);
    }
    return async (operation, body) =>
    {
        let outcome;
        try
        {
            outcome = await ask(request => client.startAdmin(request, operation, JSON.stringify(body)));
        }
        catch (e)
        {
            throw internalError(e);
        }
        if (outcome.error)
        {
            throw toError(outcome.error);
        }
        return outcome.body ? JSON.parse(outcome.body) : {};
    };
}

/**
 * Creates a lock table (on-demand unless told), waits until it is ACTIVE and enables TTL on
 * `ttlAttribute` when given. A table that exists with the same key schema is success.
 */
async function createTable(options)
{
    const call = await adminCaller(options && typeof options === "object" ? options.dynamodb : undefined);
    return table.createTable(options, call);
}

module.exports =
{
    FailClosed,
    FailOpen,
    Fifo,
    Lock,
    ValidationError,
    createTable,
    Campaign,
};

// `import DynamoDBLockClient from "dynamodb-lock-native"` compiled by TypeScript without
// `esModuleInterop` reads `.default`.
Object.defineProperty(module.exports, "default", { value: module.exports });
