"use strict";

// The original library's usage example, FailOpen and FailClosed with callbacks, on the AWS SDK
// v3's DocumentClient. `npm run readme` runs it against a local DynamoDB; elsewhere the SDK reads
// region, endpoint and credentials from the standard AWS environment.

const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
const { DynamoDBDocumentClient } = require("@aws-sdk/lib-dynamodb");
const DynamoDBLockClient = require("dynamodb-lock-native");

const dynamodb = DynamoDBDocumentClient.from(new DynamoDBClient({ region: process.env.AWS_REGION || "us-east-1" }));

const failOpenClient = new DynamoDBLockClient.FailOpen(
    {
        dynamodb,
        lockTable: "my-lock-table-name",
        partitionKey: "mylocks",
        heartbeatPeriodMs: 3e3,
        leaseDurationMs: 1e4,
    }
);

failOpenClient.acquireLock("my-fail-open-lock", (error, lock) =>
    {
        if (error)
        {
            return console.error("failed to acquire the lock:", error.code, error.message);
        }
        console.log(`acquired open lock with fencing token ${lock.fencingToken}`);
        lock.on("error", error => console.error("failed to heartbeat:", error.code));
        // Do work here, passing lock.fencingToken to every system the work writes to.
        lock.release(error =>
            {
                if (error)
                {
                    return console.error("failed to release the lock:", error.code);
                }
                console.log("released open lock");
            }
        );
    }
);

const failClosedClient = new DynamoDBLockClient.FailClosed(
    {
        dynamodb,
        lockTable: "my-lock-table-name",
        partitionKey: "mylocks",
        acquirePeriodMs: 1e4,
    }
);

failClosedClient.acquireLock("my-fail-closed-lock", (error, lock) =>
    {
        if (error)
        {
            return console.error("failed to acquire the lock:", error.code, error.message);
        }
        console.log("acquired closed lock");
        lock.release(error =>
            {
                if (error)
                {
                    return console.error("failed to release the lock:", error.code);
                }
                console.log("released closed lock");
            }
        );
    }
);
