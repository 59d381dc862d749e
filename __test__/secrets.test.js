"use strict";

// Secrets stay out of logs: what a structured logger does with an object in its context
// (JSON.stringify, util.inspect to some depth) never prints a secret access key or a session
// token, for a client of each kind and each form of the `dynamodb` option, its locks, its
// errors and its metrics.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const util = require("util");
const AWS = require("aws-sdk");
const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, uniqueId } = require("./helpers.js");

const SECRET = "wJalrXUtnFEMI-secret-access-key-7f3a9c";
const TOKEN = "FwoGZXIvYXdzE-session-token-4b1d8e";
const credentials = () => ({ accessKeyId: "AKIDLOCALTEST", secretAccessKey: SECRET, sessionToken: TOKEN });

// Every view a logger might take of `value`.
function views(value)
{
    let json;
    try
    {
        json = JSON.stringify(value);
    }
    catch (e)
    {
        json = `JSON.stringify threw: ${e.message}`;
    }
    return {
        json,
        "inspect depth 4": util.inspect(value, { depth: 4 }),
        "inspect depth 8": util.inspect(value, { depth: 8 }),
        "inspect showHidden": util.inspect(value, { depth: 4, showHidden: true }),
        "String()": String(value),
    };
}

function assertClean(what, value)
{
    for (const [view, text] of Object.entries(views(value)))
    {
        assert.ok(!text.includes(SECRET), `${what}, ${view}: prints the secret access key\n${text.slice(0, 2000)}`);
        assert.ok(!text.includes(TOKEN), `${what}, ${view}: prints the session token\n${text.slice(0, 2000)}`);
    }
}

it("a malformed configuration's ValidationError names the credential keys, never their values", () =>
    {
        const dynamodb = { region: "us-east-1", endpoint: "http://127.0.0.1:9", credentials: { accessKeyID: "AKIDLOCALTEST", secretAccessKey: SECRET, sessionToken: TOKEN, SecretAccessKey: SECRET } };
        let error;
        try
        {
            new DynamoDBLockClient.FailClosed({ dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50 });
        }
        catch (e)
        {
            error = e;
        }
        assert.equal(error && error.name, "ValidationError");
        assert.match(error.message, /"dynamodb\.credentials\.SecretAccessKey" is not allowed/);
        assertClean("ValidationError", error);
    }
);

for (const engineName of selectedEngines())
{
    describe(`secrets on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("fifo", { partitionKey: "id", sortKey: "sk" });
            }
        );
        after(async () => engine && engine.stop());

        const options = () => ({ endpoint: engine.endpoint, region: engine.region, credentials: credentials() });
        const forms =
        {
            "an options object": options,
            "an options object with a credentials provider": () => Object.assign(options(), { credentials: async () => credentials() }),
            "a v3 DynamoDBClient": () => new DynamoDBClient(options()),
            "a v2 DocumentClient": () => new AWS.DynamoDB.DocumentClient(Object.assign(options(), { credentials: new AWS.Credentials(credentials()) })),
        };
        const kinds =
        {
            FailClosed: dynamodb => new DynamoDBLockClient.FailClosed({ dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50, retryCount: 0 }),
            FailOpen: dynamodb => new DynamoDBLockClient.FailOpen({ dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 300, retryCount: 0 }),
            Fifo: dynamodb => new DynamoDBLockClient.Fifo({ dynamodb, lockTable: "fifo", partitionKey: "id", sortKey: "sk", leaseDurationMs: 5000 }),
        };
        for (const [form, dynamodb] of Object.entries(forms))
        {
            for (const [kind, make] of Object.entries(kinds))
            {
                if (kind === "Fifo" && form === "a v2 DocumentClient")
                {
                    continue; // Fifo needs the native core's I/O: an SDK v2 object is refused (tested in fifo.test.js).
                }
                it(`${kind} with ${form}: client, lock, error and metrics`, async () =>
                    {
                        const client = make(dynamodb());
                        assertClean("a new client", client);
                        const id = uniqueId(`secret-${kind}`);
                        const lock = await client.acquireLock(id);
                        assert.ok(lock, "acquired");
                        assertClean("the client holding a lock", client);
                        assertClean("a lock", lock);
                        // A second acquisition of the held lock fails (FailClosed and FailOpen with
                        // retryCount 0; Fifo with a wait that runs out).
                        const error = await client.acquireLock(id, kind === "Fifo" ? { waitMs: 100 } : undefined).then(
                            other => { other.release(); return undefined; }, e => e);
                        assert.ok(error instanceof Error, "the second acquisition fails");
                        assertClean("an acquisition error", error);
                        assertClean("metrics()", client.metrics());
                        await lock.release();
                        assertClean("a released lock", lock);
                        await client.close();
                        assertClean("a closed client", client);
                        assertClean("metrics() after close", client.metrics());
                    }
                );
            }
        }
    });
}
