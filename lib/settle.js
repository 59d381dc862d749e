"use strict";

// acquireLock(id[, options][, callback]), release([callback]) and the other methods that take
// an optional callback: without a callback, a Promise. Callbacks run on a fresh tick, so one
// that throws is an ordinary uncaught exception and never lands in a promise chain. `noError`
// is what a callback receives as its error on success: undefined, or null where the original
// passes null.
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

module.exports = { settle };
