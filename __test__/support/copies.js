"use strict";

// Several installed copies of the package in one process (nested node_modules of different
// dependents, separately bundled functions run by one local runner): each copy opens its own
// `.node` file, takes a lock and releases it. Prints one JSON line per copy; argv: endpoint,
// table, then each copy's directory.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const [endpoint, table, ...dirs] = process.argv.slice(2);

(async () =>
{
    for (const [i, dir] of dirs.entries())
    {
        let report;
        try
        {
            const DynamoDBLockClient = require(dir);
            const client = new DynamoDBLockClient.FailOpen({
                dynamodb: { endpoint, region: "us-east-1", credentials: { accessKeyId: "local", secretAccessKey: "local" } },
                lockTable: table, partitionKey: "id", leaseDurationMs: 3000, heartbeatPeriodMs: 1000,
            });
            const lock = await client.acquireLock(`copy-${i}`);
            const fencingToken = lock.fencingToken;
            await lock.release();
            await client.close();
            report = { copy: i, fencingToken };
        }
        catch (e)
        {
            report = { copy: i, error: String(e && e.message).split("\n").slice(0, 3).join(" | ") };
        }
        process.stdout.write(JSON.stringify(report) + "\n");
    }
})();
