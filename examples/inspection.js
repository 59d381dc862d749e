"use strict";

// The table helper, lock data, getLock and TTL, as in docs/tables.md, docs/data-and-inspection.md
// and docs/ttl.md.

const DynamoDBLockClient = require("dynamodb-lock-native");

async function main()
{
    // Options for the native core; region, endpoint and credentials from the AWS environment.
    const dynamodb = {};
    await DynamoDBLockClient.createTable({ dynamodb, lockTable: "my-job-locks", partitionKey: "job" });

    const client = new DynamoDBLockClient.FailOpen(
        {
            dynamodb,
            lockTable: "my-job-locks",
            partitionKey: "job",
            heartbeatPeriodMs: 3e3,
            leaseDurationMs: 1e4,
            ttlAttribute: "expires",   // enable TTL on it: createTable({ ..., ttlAttribute })
        }
    );
    const lock = await client.acquireLock("nightly-report", { data: JSON.stringify({ step: "extract" }) });
    console.log("data:", lock.data);
    await lock.update({ data: JSON.stringify({ step: "load" }) });

    const info = await client.getLock("nightly-report");
    console.log(`held by ${info.owner} (this client: ${info.heldByThisClient}), token ${info.fencingToken}, data ${info.data}`);
    await lock.release();
    console.log("released:", (await client.getLock("nightly-report")).released);
}

main().catch(error =>
    {
        console.error(error);
        process.exitCode = 1;
    });
