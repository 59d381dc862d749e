"use strict";

// Shared pieces of the integration suites: a client factory bound to an engine, and small
// waiting utilities. Every wait is bounded.

const DynamoDBLockClient = require("..");

function dynamodbOptions(engine, endpoint)
{
    return { endpoint: endpoint || engine.endpoint, region: engine.region, credentials: engine.credentials };
}

function failClosed(engine, extra)
{
    return new DynamoDBLockClient.FailClosed(Object.assign(
        { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50 },
        extra
    ));
}

function failOpen(engine, extra)
{
    return new DynamoDBLockClient.FailOpen(Object.assign(
        { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000 },
        extra
    ));
}

// Calls `acquireLock` with a callback and checks the callback contract on the way: it is
// called asynchronously and exactly once.
function acquireCb(client, id)
{
    return new Promise((resolve, reject) =>
        {
            let sync = true;
            let calls = 0;
            client.acquireLock(id, (error, lock) =>
                {
                    calls++;
                    if (sync)
                    {
                        return reject(new Error("callback called synchronously"));
                    }
                    if (calls > 1)
                    {
                        return reject(new Error("callback called twice"));
                    }
                    // Leave a moment for a second call to show up.
                    setTimeout(() => (calls === 1 ? resolve({ error, lock }) : reject(new Error("callback called twice"))), 20);
                }
            );
            sync = false;
        }
    );
}

function releaseCb(lock)
{
    return new Promise(resolve => lock.release(error => resolve(error)));
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function until(predicate, timeoutMs, what)
{
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline)
    {
        if (await predicate())
        {
            return;
        }
        await sleep(20);
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

let uniq = 0;
function uniqueId(prefix)
{
    return `${prefix}-${process.pid}-${Date.now()}-${uniq++}`;
}

module.exports = { DynamoDBLockClient, dynamodbOptions, failClosed, failOpen, acquireCb, releaseCb, sleep, until, uniqueId };
