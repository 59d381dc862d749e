"use strict";

// Leader election, metrics with diagnostics channels, and closing a client: the examples of
// docs/leader-election.md, docs/metrics.md and docs/closing.md.

const diagnostics = require("node:diagnostics_channel");
const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
const { FailOpen } = require("dynamodb-lock-native");

const dynamodb = new DynamoDBClient({ region: process.env.AWS_REGION || "us-east-1" });

async function runScheduler(term, signal)
{
    // Stand-in for the leader's work: it stops early if leadership ends.
    await new Promise(resolve =>
        {
            const timer = setTimeout(resolve, 200);
            signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
        });
    console.log(`scheduler ran under term ${term}`);
}

async function election()
{
    const client = new FailOpen({ dynamodb, lockTable: "my-lock-table-name", partitionKey: "mylocks",
        heartbeatPeriodMs: 1e3, leaseDurationMs: 3e3 });
    const campaign = client.campaign("scheduler", { signal: AbortSignal.timeout(60e3) });
    campaign.on("deposed", ({ term, reason }) => console.log(`term ${term} ended: ${reason}`));
    for await (const { term, signal } of campaign)
    {
        console.log(`leading with term ${term}`);
        await runScheduler(term, signal);
        break;
    }
}

async function metrics()
{
    const onAcquired = m => console.log(`acquired ${m.id} (token ${m.fencingToken}) after ${m.waitMs.toFixed(1)} ms`);
    diagnostics.subscribe("dynamodb-lock-native:acquired", onAcquired);
    const client = new FailOpen({ dynamodb, lockTable: "my-lock-table-name", partitionKey: "mylocks",
        heartbeatPeriodMs: 3e3, leaseDurationMs: 1e4 });
    const lock = await client.acquireLock("metrics-demo");
    await lock.release();
    const { acquisitions, requests } = client.metrics();
    console.log(`acquisitions: ${acquisitions.succeeded}, UpdateItem requests: ${requests.UpdateItem.ok}`);
    diagnostics.unsubscribe("dynamodb-lock-native:acquired", onAcquired);
}

async function closing()
{
    const client = new FailOpen({ dynamodb, lockTable: "my-lock-table-name", partitionKey: "mylocks",
        heartbeatPeriodMs: 3e3, leaseDurationMs: 1e4 });
    await client.acquireLock("shutdown-demo");
    for (const outcome of await client.close({ releaseLocks: true }))
    {
        console.log(`lock ${outcome.id}: ${outcome.released ? "released" : `not released (${outcome.error.code})`}`);
    }
    // Nothing else holds the event loop: the process exits by itself.
}

election().then(metrics).then(closing).catch(error =>
    {
        console.error(error);
        process.exitCode = 1;
    });
