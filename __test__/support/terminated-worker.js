"use strict";

// A worker thread that starts one acquisition of a free lock and says so at once; the test
// terminates it while the acquisition's write is on the wire. Started by outlives.test.js.

const { parentPort, workerData } = require("node:worker_threads");
const DynamoDBLockClient = require("../..");

const client = new DynamoDBLockClient[workerData.kind](workerData.config);
client.acquireLock(workerData.id).then(
    lock => parentPort.postMessage({ granted: workerData.id, fencingToken: lock.fencingToken }),
    error => parentPort.postMessage({ failed: workerData.id, code: error.code }));
parentPort.postMessage({ started: workerData.id });
