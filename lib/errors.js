"use strict";

// The errors the package throws: the native core's error descriptions made into Errors with
// `code` (and `name` for AWS errors), as the original library's callers expect; the codes
// JavaScript decides itself; and ValidationError, shaped as Joi's.

const { withoutCredentials } = require("./transport.js");
const { keptError } = require("./object-store.js");

// Codes of this package's own errors; any other code is an AWS error name, which becomes the
// error's `name` too.
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
    "CorruptLockItem",
    "PermitsMismatch",
]);

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
    // An error of the user's `dynamodb` object is handed back as it came.
    const own = e.jsError === undefined || e.jsError === null ? undefined : keptError(e.jsError);
    if (own !== undefined)
    {
        return own;
    }
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
        err.originalError = toError({ code: e.originalCode, message: e.originalMessage, jsError: e.originalJsError });
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
    if (e.attribute)
    {
        err.attribute = e.attribute;
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

function invalidArgument(message)
{
    const err = new TypeError(message);
    err.code = "InvalidArgument";
    return err;
}

function clientClosed()
{
    const err = new Error("The lock client is closed.");
    err.code = "ClientClosed";
    return err;
}

// An operation on a lock that is no longer held (released, lost or lapsed).
function lockNotHeld(message)
{
    const err = new Error(message);
    err.code = "LockLost";
    return err;
}

function notSupported(message)
{
    const err = new Error(message);
    err.code = "NotSupported";
    return err;
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

module.exports = { ValidationError, toError, internalError, invalidId, invalidArgument, clientClosed, notSupported, abortError, lockNotHeld };
