"use strict";

// Run from an application that installed the package (and dynalite): starts dynalite on
// 127.0.0.1, creates a lock table, takes a FailOpen lock, checks its heartbeat renews it, and
// releases it. The release workflow runs it after installing the packed tarballs on each
// platform; it prints which binary was loaded.

const path = require("path");

process.env.AWS_EC2_METADATA_DISABLED = "true";

async function main()
{
    const DynamoDBLockClient = require("dynamodb-lock-native");
    const dynalite = require("dynalite")({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
    await new Promise((resolve, reject) => dynalite.listen(0, "127.0.0.1", err => (err ? reject(err) : resolve())));
    const dynamodb = {
        endpoint: `http://127.0.0.1:${dynalite.address().port}`,
        region: "us-east-1",
        credentials: { accessKeyId: "local", secretAccessKey: "local" },
    };
    try
    {
        await DynamoDBLockClient.createTable({ dynamodb, lockTable: "locks", partitionKey: "id" });
        const client = new DynamoDBLockClient.FailOpen({ dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 3000, heartbeatPeriodMs: 500 });
        const lock = await client.acquireLock("release-check");
        await new Promise(resolve => setTimeout(resolve, 1500));
        if (lock.leaseRemainingMs <= 1500)
        {
            throw new Error(`the heartbeat did not renew the lease (${lock.leaseRemainingMs} ms left)`);
        }
        await lock.release();
        await client.close();
        const main = path.dirname(require.resolve("dynamodb-lock-native"));
        const suffix = require(path.join(main, "scripts", "platform.js")).platformSuffix();
        const binary = require.resolve(`dynamodb-lock-native-${suffix}`, { paths: [main] });
        console.log(`took, renewed and released a lock (fencing token ${lock.fencingToken}) on ${suffix}, Node.js ${process.version}, with ${binary}`);
    }
    finally
    {
        await new Promise(resolve => dynalite.close(resolve));
    }
}

main().catch(err =>
{
    console.error(err);
    process.exit(1);
});
