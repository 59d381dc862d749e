"use strict";

// DynamoDBLockClient.createTable and `dynamodb-lock-native create-table`: create on-demand,
// wait until ACTIVE, enable TTL when asked (DynamoDB Local; dynalite has no TTL), accept an
// existing table with the same key schema and refuse another one, naming the difference.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const path = require("path");
const { spawn } = require("child_process");
const { DescribeTableCommand, DescribeTimeToLiveCommand } = require("@aws-sdk/client-dynamodb");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId } = require("./helpers.js");

const BIN = path.join(__dirname, "..", "bin", "dynamodb-lock-native.js");

// Runs the command line with a loopback endpoint and dummy credentials from the environment;
// bounded in time.
function runCli(args, engine)
{
    return new Promise((resolve, reject) =>
        {
            const env = Object.assign({}, process.env, {
                AWS_EC2_METADATA_DISABLED: "true",
                AWS_ACCESS_KEY_ID: engine.credentials.accessKeyId,
                AWS_SECRET_ACCESS_KEY: engine.credentials.secretAccessKey,
                AWS_REGION: engine.region,
                AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
            });
            const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
            let stdout = "", stderr = "";
            child.stdout.on("data", d => (stdout += d));
            child.stderr.on("data", d => (stderr += d));
            const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`CLI timed out: ${stderr}`)); }, 60000);
            child.on("exit", code => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
        });
}

const name = prefix => uniqueId(prefix).replace(/[^a-zA-Z0-9_.-]/g, "_");

for (const engineName of selectedEngines())
{
    const ttlSupported = engineName === "dynamodb-local";

    describe(`createTable on ${engineName}`, { timeout: 180000 }, () =>
    {
        let engine;
        before(async () => { engine = await startEngine(engineName); });
        after(async () => engine && engine.stop());

        const describeTable = table => engine.client.send(new DescribeTableCommand({ TableName: table })).then(r => r.Table);

        it("creates an on-demand table that is ACTIVE when the promise resolves, and locks work in it", async () =>
            {
                const lockTable = name("made");
                const result = await DynamoDBLockClient.createTable({ dynamodb: dynamodbOptions(engine), lockTable, partitionKey: "id" });
                assert.deepEqual(result, { tableName: lockTable, created: true, ttlAttribute: undefined });
                const table = await describeTable(lockTable);
                assert.equal(table.TableStatus, "ACTIVE");
                assert.deepEqual(table.KeySchema, [{ AttributeName: "id", KeyType: "HASH" }]);
                assert.deepEqual(table.AttributeDefinitions, [{ AttributeName: "id", AttributeType: "S" }]);
                assert.equal(table.BillingModeSummary.BillingMode, "PAY_PER_REQUEST");
                const client = new DynamoDBLockClient.FailOpen({ dynamodb: dynamodbOptions(engine), lockTable, partitionKey: "id", leaseDurationMs: 1000 });
                const lock = await client.acquireLock("a");
                assert.equal(lock.fencingToken, 1);
                await lock.release();
            }
        );

        it("accepts an existing table with the same key schema, and names what differs in another", async () =>
            {
                const lockTable = name("ranged");
                const options = { dynamodb: dynamodbOptions(engine), lockTable, partitionKey: "pk", sortKey: "sk", sortKeyType: "N" };
                assert.equal((await DynamoDBLockClient.createTable(options)).created, true);
                assert.equal((await DynamoDBLockClient.createTable(options)).created, false);
                await assert.rejects(DynamoDBLockClient.createTable(Object.assign({}, options, { sortKeyType: "S" })),
                    { code: "TableMismatch", message: `Table "${lockTable}" exists with sort key "sk" (N), not "sk" (S)` });
                await assert.rejects(DynamoDBLockClient.createTable(Object.assign({}, options, { partitionKey: "id" })),
                    { code: "TableMismatch", message: `Table "${lockTable}" exists with partition key "pk" (S), not "id" (S)` });
                await assert.rejects(DynamoDBLockClient.createTable(Object.assign({}, options, { sortKey: undefined })),
                    { code: "TableMismatch", message: `Table "${lockTable}" exists with sort key "sk" (N), where none was asked for` });
            }
        );

        it("creates a provisioned table when asked, with an AWS SDK v3 client as dynamodb", async () =>
            {
                const lockTable = name("provisioned");
                await DynamoDBLockClient.createTable({
                    dynamodb: engine.client, lockTable, partitionKey: "id", partitionKeyType: "N",
                    billingMode: "PROVISIONED", readCapacityUnits: 3, writeCapacityUnits: 2,
                });
                const table = await describeTable(lockTable);
                assert.equal(table.ProvisionedThroughput.ReadCapacityUnits, 3);
                assert.equal(table.ProvisionedThroughput.WriteCapacityUnits, 2);
                assert.deepEqual(table.AttributeDefinitions, [{ AttributeName: "id", AttributeType: "N" }]);
            }
        );

        it("refuses bad options at once, listing every problem", async () =>
            {
                await assert.rejects(DynamoDBLockClient.createTable({ dynamodb: dynamodbOptions(engine), partitionKey: "id", ttlAttribute: "id", billingMode: "FREE" }),
                    {
                        code: "InvalidArgument",
                        message: "createTable: \"lockTable\" must be a non-empty string. \"billingMode\" must be one of [PAY_PER_REQUEST, PROVISIONED]. \"ttlAttribute\" must differ from partitionKey and sortKey",
                    });
                await assert.rejects(DynamoDBLockClient.createTable({ dynamodb: { get() {}, put() {}, delete() {} }, lockTable: "t", partitionKey: "id" }),
                    { code: "InvalidArgument" });
            }
        );

        if (ttlSupported)
        {
            it("enables TTL on the attribute asked for, again is fine, and another attribute is a mismatch", async () =>
                {
                    const lockTable = name("ttl");
                    const options = { dynamodb: dynamodbOptions(engine), lockTable, partitionKey: "id", ttlAttribute: "expires" };
                    assert.deepEqual(await DynamoDBLockClient.createTable(options), { tableName: lockTable, created: true, ttlAttribute: "expires" });
                    const ttl = (await engine.client.send(new DescribeTimeToLiveCommand({ TableName: lockTable }))).TimeToLiveDescription;
                    assert.equal(ttl.AttributeName, "expires");
                    assert.ok(["ENABLED", "ENABLING"].includes(ttl.TimeToLiveStatus), ttl.TimeToLiveStatus);
                    assert.equal((await DynamoDBLockClient.createTable(options)).created, false);
                    await assert.rejects(DynamoDBLockClient.createTable(Object.assign({}, options, { ttlAttribute: "other" })),
                        { code: "TableMismatch", message: `Table "${lockTable}" has TTL on attribute "expires", not "other"` });
                }
            );
        }
        else
        {
            it("reports the engine's own error when it cannot enable TTL", async () =>
                {
                    const lockTable = name("nottl");
                    await assert.rejects(DynamoDBLockClient.createTable({ dynamodb: dynamodbOptions(engine), lockTable, partitionKey: "id", ttlAttribute: "expires" }),
                        err => typeof err.code === "string" && err.code !== "InternalError" && err.name === err.code);
                    assert.equal((await describeTable(lockTable)).TableStatus, "ACTIVE", "the table itself was made");
                }
            );
        }

        it("npx dynamodb-lock-native create-table: creates, then finds it there; a mismatch exits 1", async () =>
            {
                const lockTable = name("cli");
                const args = ["create-table", "--table", lockTable, "--partition-key", "pk", "--sort-key", "sk"];
                const ttlArgs = ttlSupported ? ["--ttl-attribute", "ttl"] : [];
                const first = await runCli([...args, ...ttlArgs], engine);
                assert.equal(first.code, 0, first.stderr);
                assert.equal(first.stdout, `Table "${lockTable}" created and is ACTIVE${ttlSupported ? ", TTL on \"ttl\"" : ""}.\n`);
                const table = await describeTable(lockTable);
                assert.deepEqual(table.KeySchema, [{ AttributeName: "pk", KeyType: "HASH" }, { AttributeName: "sk", KeyType: "RANGE" }]);
                if (ttlSupported)
                {
                    const ttl = (await engine.client.send(new DescribeTimeToLiveCommand({ TableName: lockTable }))).TimeToLiveDescription;
                    assert.equal(ttl.AttributeName, "ttl");
                }
                const again = await runCli(args, engine);
                assert.equal(again.code, 0, again.stderr);
                assert.match(again.stdout, /already exists/);
                const wrong = await runCli(["create-table", "--table", lockTable, "--partition-key", "id"], engine);
                assert.equal(wrong.code, 1);
                assert.match(wrong.stderr, /TableMismatch: Table ".*" exists with partition key "pk" \(S\), not "id" \(S\) and sort key "sk" \(S\), where none was asked for/);
                const usage = await runCli(["drop-table"], engine);
                assert.equal(usage.code, 2);
                assert.match(usage.stderr, /expected a command: create-table, list, show, release, prune, check-table/);
                const help = await runCli(["--help"], engine);
                assert.equal(help.code, 0);
                assert.match(help.stdout, /--ttl-attribute/);
            }
        );
    });
}
