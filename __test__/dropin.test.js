"use strict";

// The drop-in surface: every form of the `dynamodb` option, Promises, AbortSignal and
// asynchronous disposal.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const AWS = require("aws-sdk");
const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");
const { DynamoDBDocumentClient, GetCommand, PutCommand, DeleteCommand } = require("@aws-sdk/lib-dynamodb");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, failOpen, failClosed, uniqueId, sleep } = require("./helpers.js");
const { startChild } = require("./support/spawn.js");

for (const engineName of selectedEngines())
{
    describe(`the dynamodb option and modern forms on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
            }
        );
        after(async () => engine && engine.stop());

        const base = { lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000 };
        const v2Options = () => ({ endpoint: engine.endpoint, region: engine.region, credentials: new AWS.Credentials(engine.credentials.accessKeyId, engine.credentials.secretAccessKey) });
        const v3Options = () => ({ endpoint: engine.endpoint, region: engine.region, credentials: Object.assign({}, engine.credentials) });

        // An SDK client whose own request path is counted: with the SDK transport the Rust
        // SDK does all the I/O, so the count stays zero.
        function counted(client)
        {
            let calls = 0;
            const methods = ["send", "get", "put", "delete", "makeRequest"];
            for (const m of methods)
            {
                if (typeof client[m] === "function")
                {
                    const original = client[m].bind(client);
                    client[m] = (...args) =>
                    {
                        calls++;
                        return original(...args);
                    };
                }
            }
            return { client, calls: () => calls };
        }

        const sdkClients =
        {
            "v3 DynamoDBClient": () => new DynamoDBClient(v3Options()),
            "v3 DynamoDBDocumentClient": () => DynamoDBDocumentClient.from(new DynamoDBClient(v3Options())),
            "v2 DocumentClient": () => new AWS.DynamoDB.DocumentClient(v2Options()),
            "v2 DynamoDB": () => new AWS.DynamoDB(v2Options()),
        };
        for (const [name, make] of Object.entries(sdkClients))
        {
            it(`uses a ${name}'s region, endpoint and credentials, with the Rust SDK doing the I/O`, async () =>
                {
                    const { client, calls } = counted(make());
                    const locks = new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: client }, base));
                    const id = uniqueId("sdk");
                    const lock = await locks.acquireLock(id);
                    assert.equal(lock.fencingToken, 1);
                    await lock.release();
                    const item = await engine.getItem("locks", { id: { S: id } });
                    assert.equal(item.leaseDurationMs.N, "1");
                    assert.equal(calls(), 0, "no request went through the JavaScript client");
                }
            );
        }

        it("takes the endpoint from AWS_ENDPOINT_URL_DYNAMODB before AWS_ENDPOINT_URL when the options name none", async () =>
            {
                const id = uniqueId("env");
                // Both endpoints are on loopback: nothing answers on port 9.
                const env = Object.assign({}, process.env, {
                    AWS_EC2_METADATA_DISABLED: "true",
                    AWS_REGION: engine.region,
                    AWS_ACCESS_KEY_ID: engine.credentials.accessKeyId,
                    AWS_SECRET_ACCESS_KEY: engine.credentials.secretAccessKey,
                    AWS_ENDPOINT_URL: "http://127.0.0.1:9",
                    AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
                });
                const child = startChild({ kind: "FailOpen", config: Object.assign({ dynamodb: {} }, base), id, then: "release" }, { timeoutMs: 20000, env });
                await child.exited;
                assert.deepEqual(child.lines, [{ acquired: true, fencingToken: 1 }, { released: true }]);
                const item = await engine.getItem("locks", { id: { S: id } });
                assert.equal(item.fencingToken.N, "1", "the lock item is in the local engine");
            }
        );

        it("asks a v3 client's credential provider again when its credentials expire", async () =>
            {
                const issued = [];
                const client = new DynamoDBClient(
                    {
                        endpoint: engine.endpoint,
                        region: engine.region,
                        credentials: async () =>
                        {
                            issued.push(Date.now());
                            return { accessKeyId: `key${issued.length}`, secretAccessKey: "secret", expiration: new Date(Date.now() + 1500) };
                        },
                    });
                const locks = new DynamoDBLockClient.FailClosed({ dynamodb: client, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 1 });
                const id = uniqueId("creds");
                (await locks.acquireLock(id)).release();
                const first = issued.length;
                assert.ok(first >= 1);
                await sleep(1700);
                const lock = await locks.acquireLock(uniqueId("creds"));
                await lock.release();
                assert.ok(issued.length > first, `credentials fetched again after expiry (${issued.length} > ${first})`);
            }
        );

        it("calls a user object's get/put/delete with the original's request sequence", async () =>
            {
                const doc = new AWS.DynamoDB.DocumentClient(v2Options());
                const log = [];
                const wrapper =
                {
                    get: (params, cb) => (log.push(["get", params]), doc.get(params, cb)),
                    put: (params, cb) => (log.push(["put", params]), doc.put(params, cb)),
                    delete: (params, cb) => (log.push(["delete", params]), doc.delete(params, cb)),
                };
                const id = uniqueId("obj");
                const lock = await new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: wrapper, owner: "me" }, base)).acquireLock(id);
                assert.deepEqual(log.map(l => l[0]), ["get", "put"]);
                assert.deepEqual(log[0][1], { TableName: "locks", Key: { id }, ConsistentRead: true });
                const put = log[1][1];
                assert.equal(put.ConditionExpression, "attribute_not_exists(#partitionKey)");
                assert.ok(Buffer.isBuffer(put.Item.guid) && put.Item.guid.length === 64);
                assert.deepEqual(Object.assign({}, put.Item, { guid: "g" }), { id, fencingToken: 1, leaseDurationMs: 1000, owner: "me", guid: "g" });
                await lock.release();
                assert.deepEqual(log.map(l => l[0]), ["get", "put", "put"]);
                assert.equal(log[2][1].Item.leaseDurationMs, 1);
                assert.equal(log[2][1].ConditionExpression, "attribute_exists(#partitionKey) and guid = :guid");
                const closed = await new DynamoDBLockClient.FailClosed({ dynamodb: wrapper, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 1 }).acquireLock(uniqueId("obj"));
                await closed.release();
                assert.deepEqual(log.slice(3).map(l => l[0]), ["put", "delete"]);
            }
        );

        it("recognises a failed condition by name when the error has no code (SDK v3)", async () =>
            {
                const doc = DynamoDBDocumentClient.from(new DynamoDBClient(v3Options()));
                const viaV3 =
                {
                    get: (params, cb) => doc.send(new GetCommand(params)).then(d => cb(undefined, d), cb),
                    put: (params, cb) => doc.send(new PutCommand(params)).then(d => cb(undefined, d), cb),
                    delete: (params, cb) => doc.send(new DeleteCommand(params)).then(d => cb(undefined, d), cb),
                };
                const make = () => new DynamoDBLockClient.FailClosed({ dynamodb: viaV3, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 10, retryCount: 1 });
                const id = uniqueId("v3obj");
                const held = await make().acquireLock(id);
                await assert.rejects(make().acquireLock(id), e => e.code === "FailedToAcquireLock" && e.originalError.name === "ConditionalCheckFailedException");
                await held.release();
            }
        );

        it("lets an explicit transport option send a DocumentClient's own requests", async () =>
            {
                const { client, calls } = counted(new AWS.DynamoDB.DocumentClient(v2Options()));
                const locks = new DynamoDBLockClient.FailOpen(Object.assign({ dynamodb: client, transport: "object" }, base));
                const lock = await locks.acquireLock(uniqueId("explicit"));
                await lock.release();
                assert.equal(calls(), 3, "get, put, put");
            }
        );

        it("returns Promises without callbacks and releases on Symbol.asyncDispose", async () =>
            {
                const id = uniqueId("dispose");
                const pending = failOpen(engine).acquireLock(id);
                assert.ok(pending instanceof Promise);
                const lock = await pending;
                assert.ok(lock instanceof require("events").EventEmitter);
                await lock[Symbol.asyncDispose]();
                assert.equal((await engine.getItem("locks", { id: { S: id } })).leaseDurationMs.N, "1");
            }
        );

        it("cancels a pending acquisition with an AbortSignal, leaving no lock behind", async () =>
            {
                const id = uniqueId("abort");
                const held = await failClosed(engine, { owner: "holder" }).acquireLock(id);
                const controller = new AbortController();
                const waiting = failClosed(engine, { retryCount: 1000, acquirePeriodMs: 50 }).acquireLock(id, { signal: controller.signal });
                await sleep(200);
                const started = Date.now();
                controller.abort();
                await assert.rejects(waiting, e => e.name === "AbortError" && e.code === "AbortError");
                assert.ok(Date.now() - started < 1000, "aborted promptly");
                const item = await engine.getItem("locks", { id: { S: id } });
                assert.equal(item.owner.S, "holder");
                await held.release();
                assert.equal(await engine.getItem("locks", { id: { S: id } }), undefined, "the aborted waiter left nothing");
                await assert.rejects(failClosed(engine).acquireLock(uniqueId("abort"), { signal: AbortSignal.abort() }), e => e.code === "AbortError");
            }
        );

        it("calls back with an AbortSignal and a callback together", async () =>
            {
                const controller = new AbortController();
                const result = await new Promise(resolve => failOpen(engine).acquireLock(uniqueId("cb"), { signal: controller.signal }, (e, l) => resolve({ e, l })));
                assert.equal(result.e, undefined);
                controller.abort();
                await result.l.release();
            }
        );
    });
}
