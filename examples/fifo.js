"use strict";

// Fifo: three workers queue for one resource and are served in the order they asked; then
// two resources are taken together with one ticket, in opposite orders, without deadlock.

const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
const { Fifo } = require("dynamodb-lock-native");

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function main()
{
    const fifo = new Fifo(
        {
            dynamodb: new DynamoDBClient({ region: process.env.AWS_REGION || "us-east-1" }),
            lockTable: "my-fifo-table",
            partitionKey: "resource",
            sortKey: "entry",
            leaseDurationMs: 1e4,
        }
    );
    await Promise.all(["first", "second", "third"].map(async (name, i) =>
        {
            await sleep(i * 50);
            const lock = await fifo.acquireLock("job-42", { waitMs: 30e3 });
            console.log(`${name} holds job-42 with fencing token ${lock.fencingToken}`);
            await sleep(100);
            await lock.release();
        }));
    await Promise.all([["acct-1", "acct-2"], ["acct-2", "acct-1"]].map(async ids =>
        {
            const lock = await fifo.acquireLock(ids);
            console.log(`holds ${ids.join(" and ")} with one ticket: ${lock.fencingToken}`);
            await sleep(100);
            await lock.release();
        }));
}

main().catch(error =>
    {
        console.error(error.code, error.message);
        process.exitCode = 1;
    });
