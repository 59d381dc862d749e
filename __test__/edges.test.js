"use strict";

// The edges a new user meets first: the `dynamodb` options are checked at construction, an
// abort rejects at once even with a request on the wire, an endpoint that never answers fails
// within a bounded time, errors say which lock and which table, a heartbeat error that cannot
// mend is reported once, and lock ids DynamoDB would refuse are refused before any request.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const net = require("net");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, uniqueId, sleep, until } = require("./helpers.js");
const { startProxy } = require("./support/proxy.js");

const credentials = { accessKeyId: "local", secretAccessKey: "local" };

// A TCP server on 127.0.0.1 that accepts connections and never answers.
async function blackHole()
{
    const sockets = new Set();
    const server = net.createServer(socket =>
    {
        sockets.add(socket);
        socket.on("error", () => {});
        socket.on("close", () => sockets.delete(socket));
        socket.resume();
    });
    await new Promise((resolve, reject) => server.listen(0, "127.0.0.1", e => (e ? reject(e) : resolve())));
    return {
        endpoint: `http://127.0.0.1:${server.address().port}`,
        connections: () => sockets.size,
        close: () => new Promise(resolve =>
        {
            sockets.forEach(s => s.destroy());
            server.close(() => resolve());
        }),
    };
}

const kinds =
{
    FailClosed: (dynamodb, extra) => new DynamoDBLockClient.FailClosed(Object.assign(
        { dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50 }, extra)),
    FailOpen: (dynamodb, extra) => new DynamoDBLockClient.FailOpen(Object.assign(
        { dynamodb, lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000 }, extra)),
    Fifo: (dynamodb, extra) => new DynamoDBLockClient.Fifo(Object.assign(
        { dynamodb, lockTable: "fifo", partitionKey: "resource", sortKey: "entry", leaseDurationMs: 1000 }, extra)),
};

function validationOf(dynamodb)
{
    try
    {
        kinds.FailClosed(dynamodb);
    }
    catch (e)
    {
        return e;
    }
    return undefined;
}

describe("the dynamodb options are checked at construction", () =>
{
    const cases =
    [
        [{ credentials: "abc" }, [["dynamodb", "credentials"]], /"dynamodb.credentials" must be of type object/],
        [{ credentials: { accessKeyId: 123, secretAccessKey: "s" } }, [["dynamodb", "credentials", "accessKeyId"]], /must be a string/],
        [{ credentials: {} }, [["dynamodb", "credentials", "accessKeyId"], ["dynamodb", "credentials", "secretAccessKey"]], /is required/],
        [{ credentials: { accessKeyId: "a" } }, [["dynamodb", "credentials", "secretAccessKey"]], /"dynamodb.credentials.secretAccessKey" is required/],
        [{ credentials: { accessKeyID: "a", secretAccessKey: "s" } }, [["dynamodb", "credentials", "accessKeyId"], ["dynamodb", "credentials", "accessKeyID"]], /"dynamodb.credentials.accessKeyID" is not allowed/],
        [{ credentials: { accessKeyId: "", secretAccessKey: "s" } }, [["dynamodb", "credentials", "accessKeyId"]], /is not allowed to be empty/],
        [{ region: 5 }, [["dynamodb", "region"]], /"dynamodb.region" must be a string/],
        [{ endpoint: "not a url" }, [["dynamodb", "endpoint"]], /"dynamodb.endpoint" must be a valid http or https URL/],
        [{ endpoint: "localhost:8000" }, [["dynamodb", "endpoint"]], /"dynamodb.endpoint" must be a valid http or https URL/],
        [{ endpoint: 8000 }, [["dynamodb", "endpoint"]], /"dynamodb.endpoint"/],
        [{ region: "us-east-1", endpoints: "http://127.0.0.1:8000" }, [["dynamodb", "endpoints"]], /"dynamodb.endpoints" is not allowed/],
    ];
    for (const [dynamodb, paths, message] of cases)
    {
        it(`refuses ${JSON.stringify(dynamodb)} with a ValidationError`, () =>
            {
                const error = validationOf(dynamodb);
                assert.ok(error, "construction throws");
                assert.equal(error.name, "ValidationError");
                assert.deepEqual(error.details.map(d => d.path), paths);
                assert.match(error.message, message);
            }
        );
    }

    it("lists the options' problems with the others, in schema order", () =>
        {
            let error;
            try
            {
                new DynamoDBLockClient.FailOpen({ owner: 5, dynamodb: { region: 5 }, partitionKey: "id", leaseDurationMs: 1000 });
            }
            catch (e)
            {
                error = e;
            }
            assert.deepEqual(error.details.map(d => d.path.join(".")), ["owner", "dynamodb.region", "lockTable"]);
        }
    );

    it("accepts well-formed options, URL endpoints and a credentials provider function", () =>
        {
            assert.equal(validationOf({ region: "us-east-1", endpoint: "http://127.0.0.1:8000", credentials }), undefined);
            assert.equal(validationOf({ endpoint: new URL("https://dynamodb.us-east-1.amazonaws.com") }), undefined);
            assert.equal(validationOf({ credentials: Object.assign({ sessionToken: "t" }, credentials) }), undefined);
            assert.equal(validationOf({ credentials: async () => credentials }), undefined);
            // As the AWS SDK for JavaScript v3 leaves a credentials object it has used.
            assert.equal(validationOf({ credentials: Object.assign({ $source: { CREDENTIALS_CODE: "e" }, accountId: "1" }, credentials) }), undefined);
        }
    );
});

describe("an endpoint that accepts connections and never answers", { timeout: 60000 }, () =>
{
    let hole;
    before(async () =>
        {
            hole = await blackHole();
        }
    );
    after(async () => hole && hole.close());

    for (const [kind, make] of Object.entries(kinds))
    {
        it(`${kind}: with requestTimeoutMs 1000, an acquisition fails with TimeoutError within 5 s`, async () =>
            {
                const client = make({ endpoint: hole.endpoint, region: "us-east-1", credentials }, { requestTimeoutMs: 1000 });
                const started = Date.now();
                const error = await client.acquireLock(uniqueId("hole")).then(() => undefined, e => e);
                const took = Date.now() - started;
                assert.ok(error, "the acquisition fails");
                assert.equal(error.code, "TimeoutError");
                assert.ok(took < 5000, `failed after ${took} ms`);
                assert.ok(hole.connections() >= 0);
            }
        );

        it(`${kind}: abort() with a request hung on the wire rejects with AbortError at once`, async () =>
            {
                const client = make({ endpoint: hole.endpoint, region: "us-east-1", credentials }, { requestTimeoutMs: 1000 });
                const controller = new AbortController();
                const pending = client.acquireLock(uniqueId("abort"), { signal: controller.signal });
                await until(() => hole.connections() > 0, 5000, "a request on the wire");
                await sleep(100);
                const abortedAt = Date.now();
                controller.abort();
                const error = await pending.then(() => undefined, e => e);
                const took = Date.now() - abortedAt;
                assert.ok(error, "the acquisition rejects");
                assert.equal(error.name, "AbortError");
                assert.equal(error.code, "AbortError");
                // Well before the hung request's own timeout (1000 ms) could end it.
                assert.ok(took < 500, `rejected ${took} ms after abort()`);
            }
        );
    }

    it("AbortSignal.timeout rejects with AbortError at its time, not after the requests' timeouts", async () =>
        {
            const client = kinds.FailOpen({ endpoint: hole.endpoint, region: "us-east-1", credentials });
            const started = Date.now();
            const error = await client.acquireLock(uniqueId("abort"), { signal: AbortSignal.timeout(300) }).then(() => undefined, e => e);
            const took = Date.now() - started;
            assert.equal(error && error.code, "AbortError");
            assert.ok(took < 2000, `rejected after ${took} ms (the default request timeout is 5000 ms)`);
        }
    );
});

describe("lock ids DynamoDB would refuse, or that name keys the table does not have", () =>
{
    // A closed port: any request would fail with NetworkingError, never InvalidLockId.
    const dynamodb = { endpoint: "http://127.0.0.1:9", region: "us-east-1", credentials };
    const objectDb = { get: () => assert.fail("no request"), put: () => assert.fail("no request"), delete: () => assert.fail("no request") };
    const clients =
    {
        "FailClosed": () => kinds.FailClosed(dynamodb),
        "FailOpen": () => kinds.FailOpen(dynamodb),
        "FailOpen with a sort key": () => kinds.FailOpen(dynamodb, { sortKey: "shard" }),
        "FailClosed on the object transport": () => kinds.FailClosed(objectDb),
        "FailOpen on the object transport, with a sort key": () => kinds.FailOpen(objectDb, { sortKey: "shard" }),
    };
    for (const [name, make] of Object.entries(clients))
    {
        const sorted = /sort key/.test(name);
        const empty = sorted ? { id: "", shard: 1 } : "";
        const extra = sorted ? { id: "a", shard: 1, region: "x" } : { id: "a", shard: 1 };
        it(`${name}: "" is refused with InvalidLockId`, async () =>
            {
                const error = await make().acquireLock(empty).then(() => undefined, e => e);
                assert.equal(error && error.code, "InvalidLockId", error && error.message);
                assert.match(error.message, /must not be empty/);
            }
        );
        it(`${name}: an object id with a key the table does not have is refused`, async () =>
            {
                const error = await make().acquireLock(extra).then(() => undefined, e => e);
                assert.equal(error && error.code, "InvalidLockId", error && error.message);
                assert.match(error.message, sorted ? /"region"/ : /"shard"/);
            }
        );
    }
    it("Fifo: \"\" and an empty Buffer are refused with InvalidLockId", async () =>
        {
            const fifo = kinds.Fifo(dynamodb);
            for (const id of ["", Buffer.alloc(0), ["a", ""]])
            {
                const error = await fifo.acquireLock(id).then(() => undefined, e => e);
                assert.equal(error && error.code, "InvalidLockId");
            }
        }
    );
});

for (const engineName of selectedEngines())
{
    describe(`messages and heartbeat errors on ${engineName}`, { timeout: 120000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("sorted", { partitionKey: "id", sortKey: "shard", sortType: "N" });
            }
        );
        after(async () => engine && engine.stop());

        const options = () => ({ endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials });

        it("a credentials provider function given as dynamodb.credentials signs the requests", async () =>
            {
                let calls = 0;
                const client = kinds.FailClosed(Object.assign(options(), { credentials: async () =>
                    {
                        calls++;
                        return engine.credentials;
                    } }));
                const lock = await client.acquireLock(uniqueId("provider"));
                await lock.release();
                assert.ok(calls >= 1, "the provider was asked");
            }
        );

        it("CredentialsError: one readable sentence, the chain of causes in `cause`", async () =>
            {
                const client = kinds.FailClosed(Object.assign(options(), { credentials: async () =>
                    {
                        throw new Error("the vault is sealed");
                    } }), { requestTimeoutMs: 1000 });
                const error = await client.acquireLock(uniqueId("creds")).then(() => undefined, e => e);
                assert.equal(error && error.code, "CredentialsError", error && error.message);
                assert.ok(!error.message.includes("\n"), error.message);
                assert.ok(error.message.length < 300, `${error.message.length} characters`);
                assert.match(error.message, /^No AWS credentials could be loaded for DynamoDB/);
                assert.ok(error.cause instanceof Error, "the chain is in `cause`");
                assert.match(error.cause.message, /the vault is sealed/);
            }
        );

        for (const [kind, operation] of [["FailClosed", "PutItem"], ["FailOpen", "UpdateItem"]])
        {
            it(`${kind}: an abort while the write is on the wire rejects at once; the write that lands is undone in the background`, async () =>
                {
                    const proxy = await startProxy({ target: engine.endpoint });
                    try
                    {
                        const id = uniqueId("landed");
                        proxy.nextFault({ delayMs: 700 }, { operation });
                        const controller = new AbortController();
                        const slow = kinds[kind](Object.assign(options(), { endpoint: proxy.endpoint }));
                        const pending = slow.acquireLock(id, { signal: controller.signal });
                        await until(() => proxy.counts[operation] >= 1, 5000, "the write on the wire");
                        const abortedAt = Date.now();
                        controller.abort();
                        const error = await pending.then(() => undefined, e => e);
                        assert.equal(error && error.code, "AbortError");
                        assert.ok(Date.now() - abortedAt < 500, "rejected before the write's answer came");
                        // The write lands about 700 ms after it was sent; then it is undone.
                        const undone = async () =>
                        {
                            const item = await engine.getItem("locks", { id: { S: id } });
                            return kind === "FailClosed" ? item === undefined && proxy.counts.DeleteItem >= 1
                                : item !== undefined && item.leaseDurationMs.N === "1";
                        };
                        await until(undone, 5000, "the landed write to be undone");
                        const next = await kinds[kind](options()).acquireLock(id);
                        await next.release();
                    }
                    finally
                    {
                        proxy.clearFaults();
                        await proxy.close();
                    }
                }
            );
        }

        it("ResourceNotFoundException names the table", async () =>
            {
                const client = kinds.FailOpen(options(), { lockTable: "no-such-table" });
                const error = await client.acquireLock(uniqueId("rnf")).then(() => undefined, e => e);
                assert.equal(error && error.code, "ResourceNotFoundException");
                assert.match(error.message, /"no-such-table"/);
            }
        );

        for (const kind of ["FailClosed", "FailOpen"])
        {
            it(`${kind}: FailedToAcquireLock carries the lock id and the holder's owner`, async () =>
                {
                    const id = { id: uniqueId("held"), shard: 3 };
                    const extra = Object.assign({ lockTable: "sorted", sortKey: "shard", retryCount: 0 },
                        kind === "FailOpen" ? { leaseDurationMs: 300 } : {});
                    const holder = await kinds[kind](options(), Object.assign({ owner: "the-holder" },
                        kind === "FailOpen" ? { heartbeatPeriodMs: 100 } : {}, extra)).acquireLock(id);
                    try
                    {
                        const error = await kinds[kind](options(), Object.assign({ owner: "the-waiter" }, extra)).acquireLock(id).then(() => undefined, e => e);
                        assert.equal(error && error.code, "FailedToAcquireLock", error && error.message);
                        assert.deepEqual(error.lockId, id);
                        assert.equal(error.owner, "the-holder");
                        assert.match(error.message, /^Failed to acquire lock /);
                        assert.ok(error.message.includes(id.id), error.message);
                        assert.match(error.message, /owner "the-holder"/);
                    }
                    finally
                    {
                        await holder.release();
                    }
                }
            );
        }

        it("FailClosed: FailedToReleaseLock carries the lock id", async () =>
            {
                const id = uniqueId("gone");
                const lock = await kinds.FailClosed(options()).acquireLock(id);
                await engine.deleteItem("locks", { id: { S: id } });
                const error = await lock.release().then(() => undefined, e => e);
                assert.equal(error && error.code, "FailedToReleaseLock");
                assert.equal(error.lockId, id);
                assert.ok(error.message.includes(id), error.message);
            }
        );

        it("a heartbeat answered ExpiredTokenException is retried with credentials asked for again, and the lock is kept", async () =>
            {
                const proxy = await startProxy({ target: engine.endpoint });
                try
                {
                    let asked = 0;
                    const dynamodb = { endpoint: proxy.endpoint, region: engine.region, credentials: async () =>
                        {
                            asked++;
                            return engine.credentials;
                        } };
                    const lock = await kinds.FailOpen(dynamodb, { leaseDurationMs: 3000, heartbeatPeriodMs: 200 }).acquireLock(uniqueId("expired"));
                    const errors = [];
                    lock.on("error", e => errors.push(e.code));
                    let lost;
                    lock.on("lost", e => (lost = e));
                    const askedBefore = asked;
                    proxy.nextFault({ respond: { status: 400, type: "ExpiredTokenException", message: "The security token included in the request is expired" } }, { operation: "UpdateItem" });
                    await until(async () => proxy.faultCounts.responded === 1, 3000, "the refused heartbeat");
                    const renewed = proxy.counts.UpdateItem;
                    await until(async () => proxy.counts.UpdateItem >= renewed + 2, 3000, "heartbeats after it");
                    assert.deepEqual(errors, ["ExpiredTokenException"]);
                    assert.ok(asked > askedBefore, "the credentials were asked for again");
                    assert.equal(lost, undefined, "the lock is still held");
                    await lock.release();
                }
                finally
                {
                    await proxy.close();
                }
            }
        );

        it("a heartbeat that finds the table gone is reported once, then \"lost\" at once, not at the lease's end", async () =>
            {
                const table = `doomed-${Date.now()}`;
                await engine.createTable(table, { partitionKey: "id" });
                const lease = 1500;
                const lock = await kinds.FailOpen(options(), { lockTable: table, leaseDurationMs: lease, heartbeatPeriodMs: 200 }).acquireLock(uniqueId("doomed"));
                const errors = [];
                lock.on("error", e => errors.push({ code: e.code, message: e.message, at: Date.now() }));
                const lost = new Promise(resolve => lock.on("lost", resolve));
                const deletedAt = Date.now();
                await engine.deleteTable(table);
                const reason = await Promise.race([lost, sleep(lease + 5000).then(() => undefined)]);
                assert.ok(reason, "\"lost\" came");
                assert.equal(reason.code, "LockLost");
                assert.ok(Date.now() - deletedAt < lease, `lost ${Date.now() - deletedAt} ms after the table went, within the lease`);
                const missing = errors.filter(e => e.code === "ResourceNotFoundException");
                assert.equal(missing.length, 1, JSON.stringify(errors));
                assert.match(missing[0].message, new RegExp(`"${table}"`));
            }
        );
    });
}
