"use strict";

// A worker thread that asks for each of `ids` and waits (another holder has them), reporting
// each acquisition it was granted. Started by outlives.test.js, then terminated while waiting.

const { parentPort, workerData } = require("node:worker_threads");
const DynamoDBLockClient = require("../..");

const client = new DynamoDBLockClient.FailOpen(workerData.config);
for (const id of workerData.ids)
{
    client.acquireLock(id).then(
        lock => parentPort.postMessage({ granted: id, fencingToken: lock.fencingToken }),
        error => parentPort.postMessage({ failed: id, code: error.code }));
}
// Let the acquisitions reach DynamoDB and start waiting before saying so.
setTimeout(() => parentPort.postMessage({ waiting: workerData.ids.length }), 300);
