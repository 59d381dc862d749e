"use strict";

// lock.conditionCheck(): a user's own write in one TransactWriteItems with the lock's
// condition commits while the lock is held and is refused once another holder has it. On
// DynamoDB Local: dynalite has no transactions.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { DynamoDBClient, TransactWriteItemsCommand, GetItemCommand } = require("@aws-sdk/client-dynamodb");
const { DynamoDBDocumentClient, TransactWriteCommand } = require("@aws-sdk/lib-dynamodb");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId, sleep } = require("./helpers.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

if (selectedEngines().includes("dynamodb-local"))
{
    describe("lock.conditionCheck() (dynamodb-local)", { timeout: 120000 }, () =>
    {
        let engine;
        let ddb;
        let doc;
        before(async () =>
        {
            engine = await startEngine("dynamodb-local");
            await engine.createTable("locks", { partitionKey: "id" });
            await engine.createTable("ledger", { partitionKey: "account" });
            ddb = new DynamoDBClient(dynamodbOptions(engine));
            doc = DynamoDBDocumentClient.from(ddb);
        });
        after(async () =>
        {
            if (ddb)
            {
                ddb.destroy();
            }
            if (engine)
            {
                await engine.stop();
            }
        });

        // The user's write: a ledger entry under the lock, in one transaction with its condition.
        const write = (lock, account, amount, marshalled) => marshalled
            ? ddb.send(new TransactWriteItemsCommand({ TransactItems: [lock.conditionCheck({ marshalled: true }),
                { Put: { TableName: "ledger", Item: { account: { S: account }, amount: { N: String(amount) } } } }] }))
            : doc.send(new TransactWriteCommand({ TransactItems: [lock.conditionCheck(),
                { Put: { TableName: "ledger", Item: { account, amount } } }] }));
        const amountOf = async account =>
        {
            const r = await ddb.send(new GetItemCommand({ TableName: "ledger", Key: { account: { S: account } }, ConsistentRead: true }));
            return r.Item && Number(r.Item.amount.N);
        };

        for (const marshalled of [false, true])
        {
            it(`FailOpen${marshalled ? ", marshalled" : ""}: commits while held, refused once the lock lapsed and another took it`, async () =>
            {
                const id = uniqueId("cc-open");
                const account = uniqueId("acct");
                const first = new DynamoDBLockClient.FailOpen({ dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 2000 });
                const lock = await first.acquireLock(id);
                const check = lock.conditionCheck(marshalled ? { marshalled: true } : undefined);
                assert.equal(check.ConditionCheck.TableName, "locks");
                assert.deepEqual(check.ConditionCheck.Key, { id: marshalled ? { S: id } : id });
                await write(lock, account, 1, marshalled);
                assert.equal(await amountOf(account), 1);
                // No heartbeats: the lease lapses and a rival takes the lock with the next token.
                const stale = lock.conditionCheck(marshalled ? { marshalled: true } : undefined);
                const rival = new DynamoDBLockClient.FailOpen({ dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 60000, retryCount: 3 });
                const theirs = await rival.acquireLock(id);
                assert.equal(theirs.fencingToken, lock.fencingToken + 1);
                const refused = await (marshalled ? ddb : doc).send(marshalled
                    ? new TransactWriteItemsCommand({ TransactItems: [stale, { Put: { TableName: "ledger", Item: { account: { S: account }, amount: { N: "2" } } } }] })
                    : new TransactWriteCommand({ TransactItems: [stale, { Put: { TableName: "ledger", Item: { account, amount: 2 } } }] }))
                    .then(() => null, e => e);
                assert.ok(refused, "the write under the lost lock was refused");
                assert.equal(refused.name, "TransactionCanceledException");
                assert.equal(await amountOf(account), 1, "the ledger kept the holder's write only");
                assert.throws(() => lock.conditionCheck(), { code: "LockLost" });
                await write(theirs, account, 3, marshalled);
                assert.equal(await amountOf(account), 3);
                await theirs.release();
                assert.throws(() => theirs.conditionCheck(), { code: "LockLost" });
                await Promise.all([first.close(), rival.close()]);
            });
        }

        it("FailClosed: the condition is the holder's guid; refused after the release and another's acquisition", async () =>
        {
            const id = uniqueId("cc-closed");
            const account = uniqueId("acct");
            const client = new DynamoDBLockClient.FailClosed({ dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50 });
            const lock = await client.acquireLock(id);
            const check = lock.conditionCheck({ marshalled: true });
            assert.equal(check.ConditionCheck.ConditionExpression, "#guid = :guid");
            assert.equal(check.ConditionCheck.ExpressionAttributeValues[":guid"].B.length, 64);
            await write(lock, account, 5, true);
            assert.equal(await amountOf(account), 5);
            await lock.release();
            const next = await client.acquireLock(id);
            const refused = await ddb.send(new TransactWriteItemsCommand({ TransactItems: [check,
                { Put: { TableName: "ledger", Item: { account: { S: account }, amount: { N: "6" } } } }] })).then(() => null, e => e);
            assert.equal(refused && refused.name, "TransactionCanceledException");
            assert.equal(await amountOf(account), 5);
            await next.release();
            await sleep(10);
            await client.close();
        });
    });
}
