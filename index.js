"use strict";

// The JavaScript face of dynamodb-lock-native: the classes and callbacks of
// dynamodb-lock-client, plus Promises, AbortSignal and `await using`. The protocol, timers
// and I/O live in the native core (binding.js); the files under lib/ adapt values and errors:
//
// - clients.js: FailClosed, FailOpen and Fifo, and their acquireLock; semaphore.js: Semaphore
//   and ReadWriteLock, on Fifo's queue;
// - client.js: what the clients share (setup, close, metrics, getLock, campaign);
// - lock.js: the Lock a caller holds;
// - bridge.js: calls into the native core (loaded by native.js) and its answers and events;
// - lock-id.js: lock ids and keys; options.js: configuration, defaults and option checks;
//   config.js: the configuration's rules and the original's messages;
// - errors.js: error codes and ValidationError; settle.js: callbacks or Promises;
// - admin.js and table.js: createTable; inspect.js: listLocks, showLock, forceRelease, checkTable, pruneLocks; campaign.js: leader election; metrics.js: metrics();
// - transport.js: the `dynamodb` option; object-store.js: calls of a user `dynamodb` object
//   for the native core.

const { FailClosed, FailOpen, Fifo } = require("./lib/clients.js");
const { Semaphore, ReadWriteLock } = require("./lib/semaphore.js");
const { Lock } = require("./lib/lock.js");
const { ValidationError } = require("./lib/errors.js");
const { createTable } = require("./lib/admin.js");
const { Campaign } = require("./lib/campaign.js");
const { listLocks, showLock, forceRelease, checkTable, pruneLocks } = require("./lib/inspect.js");

module.exports =
{
    FailClosed,
    FailOpen,
    Fifo,
    Semaphore,
    ReadWriteLock,
    Lock,
    ValidationError,
    createTable,
    Campaign,
    listLocks,
    showLock,
    forceRelease,
    checkTable,
    pruneLocks,
};

// `import DynamoDBLockClient from "dynamodb-lock-native"` compiled by TypeScript without
// `esModuleInterop` reads `.default`.
Object.defineProperty(module.exports, "default", { value: module.exports });
