"use strict";

// Options and their validation: a client's configuration (checked by lib/config.js, with the
// original's Joi-shaped messages), the settings a native client is made with, the defaults
// JavaScript applies (as the native core states them), and the options of an acquisition.

const os = require("os");
const pkg = require("../package.json");
const { defaults } = require("./bridge.js");
const { configProblems } = require("./config.js");
const { describeDynamodb, optionProblems, sdkOptionsFrom } = require("./transport.js");
const { ValidationError, invalidArgument } = require("./errors.js");

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

// Refuses a client's configuration with a ValidationError that lists every problem, and warns
// of a FailOpen heartbeat that cannot keep its lease.
function validate(kind, config)
{
    const names = { reserved: defaults.reservedNames, fifoReserved: defaults.fifoReservedNames };
    const problems = configProblems(kind, describeConfig(config), names).map(p => detail(p, config));
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

// The owner a client writes into its locks.
function ownerOf(config)
{
    return config.owner || DEFAULT_OWNER;
}

// How many times an acquisition tries again after finding the lock held.
function retryCountOf(config)
{
    return config.retryCount === undefined ? defaults.retryCount : config.retryCount;
}

// The settings a native client is made with, before where and how to reach DynamoDB.
function nativeSettings(kind, config, owner, retryCount)
{
    return {
        kind,
        lockTable: config.lockTable,
        partitionKey: config.partitionKey,
        sortKey: config.sortKey,
        owner,
        retryCount,
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
        session: config.session,
    };
}

// Where and how to reach DynamoDB, from `dynamodb` options; an endpoint or CA bundle that
// cannot be used is a ValidationError of the client's configuration.
function endpointOptions(config)
{
    try
    {
        return sdkOptionsFrom(config.dynamodb);
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
}

// The most lock data one item carries: DynamoDB's 400 KB item, less what the lock's own
// attributes take at their largest (a 2,048-byte partition and 1,024-byte sort value, the
// owner, guid, token, lease, marks and their names).
const DATA_MAX_BYTES = 400 * 1024 - 8 * 1024;

// Lock data: a string, a Buffer or a Uint8Array (or undefined: none), within the item's size.
function checkData(data)
{
    if (data === undefined)
    {
        return undefined;
    }
    if (typeof data !== "string" && !Buffer.isBuffer(data) && !(data instanceof Uint8Array))
    {
        return invalidArgument("lock data must be a string or a Buffer");
    }
    const bytes = typeof data === "string" ? Buffer.byteLength(data, "utf8") : data.byteLength;
    if (bytes > DATA_MAX_BYTES)
    {
        return invalidArgument(`lock data is ${bytes} bytes: a DynamoDB item holds at most 400 KB, which leaves at most ${DATA_MAX_BYTES} bytes of data beside the lock's own attributes`);
    }
    return undefined;
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
// An acquisition option of campaign() candidates only: a FailOpen acquisition that waits until
// it takes the lock or is aborted, whatever `retryCount` says, so that its re-reads keep their
// slowed pace for as long as a leader leads. A symbol: no user option can set it.
const UNTIL_ABORTED = Symbol("untilAborted");

// The options of one acquisition, by the method that takes them.
const ACQUIRE_KEYS = Object.freeze({
    acquireLock: ["signal", "data"],
    // A Fifo lock carries no data: `data` is refused by name further on.
    fifoAcquireLock: ["signal", "waitMs", "data"],
    semaphoreAcquireLock: ["signal", "waitMs", "permits"],
    readWriteAcquireLock: ["signal", "waitMs", "mode"],
    campaign: ["signal"],
});

// Every option of a client's configuration, of any kind: given to an acquisition, it is named
// as the client's.
const CLIENT_KEYS = new Set(["owner", "dynamodb", "lockTable", "partitionKey", "sortKey", "acquirePeriodMs", "retryCount",
    "requestTimeoutMs", "rereadPeriodMs", "transport", "ttlAttribute", "ttlSeconds", "allowEventuallyConsistentGlobalTable",
    "heartbeatPeriodMs", "leaseDurationMs", "trustLocalTime", "dangerMarginMs", "maxHeartbeatsPerSecond", "session"]);

// Levenshtein distance, for the option a misspelt key most likely meant.
function distance(a, b)
{
    let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++)
    {
        const row = [i];
        for (let j = 1; j <= b.length; j++)
        {
            row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
        }
        previous = row;
    }
    return previous[b.length];
}

// The allowed key that `key` most likely meant, if one is close.
function meant(key, allowed)
{
    const lower = key.toLowerCase();
    const scored = allowed.map(a => ({ a, d: a.toLowerCase() === lower ? 0 : distance(lower, a.toLowerCase()) }))
        .sort((x, y) => x.d - y.d);
    return scored.length > 0 && scored[0].d <= Math.max(1, Math.floor(scored[0].a.length / 3)) ? scored[0].a : undefined;
}

// The keys of `options` that `method` does not take (those whose value is undefined count as
// absent, as in the client's configuration), as a ValidationError that lists them, each with
// what it most likely meant; undefined when there is none.
function unknownKeys(options, method)
{
    const allowed = ACQUIRE_KEYS[method];
    const shownMethod = method.endsWith("AcquireLock") ? "acquireLock" : method;
    const list = allowed.length === 1 ? allowed[0] : `${allowed.slice(0, -1).join(", ")} and ${allowed[allowed.length - 1]}`;
    const details = Object.keys(options).filter(k => !allowed.includes(k) && options[k] !== undefined).map(key =>
    {
        let why;
        const close = meant(key, allowed);
        if (close)
        {
            why = `did you mean "${close}"?`;
        }
        else if (key === "waitMs")
        {
            why = "waitMs is a Fifo acquisition's; a FailClosed or FailOpen acquisition waits as its client's retryCount says, and its signal can end the wait";
        }
        else if (CLIENT_KEYS.has(key))
        {
            why = "it is an option of the client, given to its constructor, for every acquisition";
        }
        const message = `"${key}" is not an option of ${shownMethod}${why ? ` (${why})` : ""}: its options are ${list}`;
        return { message, path: [key], type: "object.unknown", context: { child: key, label: key, key, value: options[key] } };
    });
    return details.length > 0 ? new ValidationError(details, options) : undefined;
}

// `method`: "acquireLock" (FailClosed, FailOpen), "fifoAcquireLock" or "campaign", whose
// options are checked.
function checkAcquireOptions(options, method = "acquireLock")
{
    if (options === undefined || options === null)
    {
        return undefined;
    }
    if (typeof options !== "object")
    {
        return invalidArgument(`${method === "campaign" ? "campaign" : "acquireLock"} options must be an object`);
    }
    const unknown = unknownKeys(options, method);
    if (unknown)
    {
        return unknown;
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

function checkWaitMs(options)
{
    const waitMs = options === undefined || options === null ? undefined : options.waitMs;
    if (waitMs === undefined || (typeof waitMs === "number" && waitMs >= 0))
    {
        return undefined;
    }
    return invalidArgument("options.waitMs must be a number of milliseconds >= 0, or Infinity");
}

// How long a Fifo acquisition waits for its turn: `waitMs`, or the default.
function waitMsOf(options)
{
    return options.waitMs === undefined ? defaults.fifoWaitMs : options.waitMs;
}

module.exports = {
    DEFAULT_OWNER,
    validate,
    ownerOf,
    retryCountOf,
    nativeSettings,
    endpointOptions,
    checkData,
    dataInput,
    copyData,
    checkAcquireOptions,
    checkWaitMs,
    waitMsOf,
    UNTIL_ABORTED,
};
