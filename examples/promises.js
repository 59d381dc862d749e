"use strict";

// Promises and disposal. On Node 24+ (or TypeScript 5.2+) the block below can be written
//     await using lock = await client.acquireLock("nightly-report");
// which releases the lock when the block ends, however it ends.

const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
const { FailOpen } = require("dynamodb-lock-native");

async function main()
{
    const client = new FailOpen(
        {
            dynamodb: new DynamoDBClient({ region: process.env.AWS_REGION || "us-east-1" }),
            lockTable: "my-lock-table-name",
            partitionKey: "mylocks",
            heartbeatPeriodMs: 3e3,
            leaseDurationMs: 1e4,
        }
    );
    const lock = await client.acquireLock("nightly-report", { signal: AbortSignal.timeout(30e3) });
    try
    {
        lock.on("lost", error => console.error("lock lost:", error.code));
        console.log(`working under fencing token ${lock.fencingToken}`);
        await doWork(lock.fencingToken, lock.signal);
    }
    finally
    {
        await lock[Symbol.asyncDispose]();
        console.log("released");
    }
}

async function doWork(fencingToken, signal)
{
    // Pass the token to every system the work writes to; stop when `signal` aborts.
    signal.throwIfAborted();
}

main().catch(error =>
    {
        console.error(error);
        process.exitCode = 1;
    });
