"use strict";

// Lock ids and keys: the checks shared by both transports (what DynamoDB would refuse, or what
// would silently lock something other than what the caller named, is refused before any
// request), the key values the native core takes, and the id as messages name it.

const { invalidId } = require("./errors.js");

// The message for an object id with keys the table does not have, or undefined.
function unknownKeys(config, id)
{
    if (id === null || typeof id !== "object" || Buffer.isBuffer(id) || id instanceof Uint8Array)
    {
        return undefined;
    }
    const keys = [config.partitionKey, config.sortKey].filter(k => k !== undefined);
    const extra = Object.keys(id).filter(k => !keys.includes(k) && id[k] !== undefined);
    if (extra.length === 0)
    {
        return undefined;
    }
    const list = names => names.map(k => JSON.stringify(k)).join(", ");
    return `Lock ID has ${extra.length === 1 ? "a key" : "keys"} the table does not have: ${list(extra)}`
        + ` (the table's keys: ${list(keys)})`;
}

// DynamoDB refuses empty strings and empty binaries as key values.
function isEmptyKeyValue(value)
{
    return value === "" || ((Buffer.isBuffer(value) || value instanceof Uint8Array) && value.length === 0);
}

// DynamoDB's limits on key values, in bytes (UTF-8 for strings).
const PARTITION_VALUE_MAX_BYTES = 2048;
const SORT_VALUE_MAX_BYTES = 1024;

// A key value as the native core takes it: one of string, number (as decimal text), binary.
// `maxBytes`: DynamoDB's limit for this part of the key, checked before any request.
function keyInput(value, what, maxBytes)
{
    if (isEmptyKeyValue(value))
    {
        // DynamoDB refuses empty key values.
        throw invalidId(`Lock ID ${what} must not be empty`);
    }
    const bytes = typeof value === "string" ? Buffer.byteLength(value, "utf8")
        : (Buffer.isBuffer(value) || value instanceof Uint8Array) ? value.byteLength : 0;
    if (bytes > maxBytes)
    {
        throw invalidId(`Lock ID ${what} is ${bytes} bytes: DynamoDB allows at most ${maxBytes} bytes for a ${maxBytes === SORT_VALUE_MAX_BYTES ? "sort" : "partition"} key value`);
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

// The key of a FailClosed or FailOpen lock id as the native core takes it: the partition
// value, and the sort value where the table has a sort key.
function lockKey(config, id)
{
    const { partitionID, sortID } = splitId(config, id);
    const partition = keyInput(partitionID, "partition value", PARTITION_VALUE_MAX_BYTES);
    const sort = config.sortKey ? keyInput(sortID, "sort value", SORT_VALUE_MAX_BYTES) : undefined;
    return { partition, sort };
}

// A Fifo lock id: the partition value of one resource. `what` names it in messages: "" for a
// single id, " [i]" for one of a list.
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
    return keyInput(id, `${what ? what + " " : ""}value`.trim(), PARTITION_VALUE_MAX_BYTES);
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

module.exports = { unknownKeys, isEmptyKeyValue, splitId, lockKey, fifoResource, withLockId };
