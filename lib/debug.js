"use strict";

// The debug log: on when NODE_DEBUG names `dynamodb-lock-native` (Node's util.debuglog
// convention: a comma-separated list, `*` as a wildcard). JavaScript logs what the API does
// (acquisitions from start to grant or failure, waits, releases, heartbeat failures, danger,
// losses, the table check, close) with timings; the native core, turned on from here, logs each
// DynamoDB request with its key, outcome and duration, and each pause the protocol decides on.
// Lines go to stderr as `DYNAMODB-LOCK-NATIVE <pid>: <message>`. Lock data, guids and
// credentials are never logged. Off, a line costs one check of a boolean.

const util = require("util");

const log = util.debuglog("dynamodb-lock-native");

// Whether the log is on: read once, as util.debuglog reads NODE_DEBUG once.
const enabled = log.enabled;

// Logs the line `line()` makes, if the log is on.
function debug(line)
{
    if (enabled)
    {
        log("%s", line());
    }
}

// Milliseconds as the log shows them.
function ms(value)
{
    return `${value.toFixed(1)} ms`;
}

// A lock id as the log shows it (a Fifo list, an object id with its sort value).
function shownId(id)
{
    try
    {
        return typeof id === "string" ? JSON.stringify(id) : util.inspect(id, { breakLength: Infinity, depth: 2 });
    }
    catch (_)
    {
        return String(id);
    }
}

// An error as the log shows it: its code and message.
function shownError(error)
{
    if (!error)
    {
        return String(error);
    }
    return `${error.code || error.name || "Error"}: ${error.message}`;
}

module.exports = { debug, enabled, ms, shownId, shownError };
