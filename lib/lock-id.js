"use strict";

// Checks of a lock id shared by both transports: what DynamoDB would refuse, or what would
// silently lock something other than what the caller named, is refused before any request.

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

module.exports = { unknownKeys, isEmptyKeyValue };
