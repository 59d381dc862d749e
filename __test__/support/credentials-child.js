"use strict";

// Acquires and releases one lock with credentials from the environment it was started with
// (a temporary HOME and AWS config files), and prints the outcome as one JSON line. Reads a
// JSON job from argv[2]:
//   { client: "options" | "v3", endpoint, region?, lockTable, id, thenWrite? }
// `thenWrite: { file, text }`: after a failure, writes the file and tries once more with the
// same client (printing both outcomes). `requestTimeoutMs`: the client's. `close`: after the
// outcome, closes the client and prints `{ closedInMs }`.
// "options": `dynamodb` is a plain options object ({ endpoint, region? }); "v3": an AWS SDK v3
// DynamoDBClient with the same settings.

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");

function dynamodb()
{
    const options = { endpoint: job.endpoint };
    if (job.region)
    {
        options.region = job.region;
    }
    if (job.client === "v3")
    {
        const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
        return new DynamoDBClient(options);
    }
    return options;
}

(async () =>
{
    const client = new DynamoDBLockClient.FailClosed({
        dynamodb: dynamodb(), lockTable: job.lockTable, partitionKey: "id", acquirePeriodMs: 10, retryCount: 0,
        ...(job.requestTimeoutMs ? { requestTimeoutMs: job.requestTimeoutMs } : {}),
    });
    for (let attempt = 0; attempt < 2; attempt++)
    {
        try
        {
            const lock = await client.acquireLock(job.id);
            await lock.release();
            return say({ ok: true });
        }
        catch (e)
        {
            say({ ok: false, name: e.name, code: e.code, message: e.message, cause: e.cause && String(e.cause.message || e.cause) });
            if (job.close)
            {
                const startedAt = performance.now();
                await client.close();
                say({ closedInMs: performance.now() - startedAt });
            }
        }
        if (!job.thenWrite)
        {
            return;
        }
        require("fs").writeFileSync(job.thenWrite.file, job.thenWrite.text);
    }
})();
