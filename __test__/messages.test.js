"use strict";

// Errors that name what is wrong, and what to do, on each engine: a lock table whose key is
// named or typed otherwise than the client's options and lock ids is named with the key
// attribute and the type expected (FailClosed and FailOpen, as Fifo); a refused connection and
// a timeout name the endpoint (without the credentials of its URL); a failure to connect or to
// load credentials warns of nothing about the table check; acquisition options are checked as
// strictly as a client's (unknown keys, a danger margin of the whole lease); update() after
// one's own release() says so; credentials that no source had name the sources tried and what
// to set, without a dump of the SDK's error structure; createTable says when the table was
// made and TTL was not, and why.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const net = require("net");
const os = require("os");
const path = require("path");
const { spawn } = require("child_process");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, uniqueId } = require("./helpers.js");
const { startProxy } = require("./support/proxy.js");

const UNKNOWN_MODE = "DYNAMODB_LOCK_NATIVE_TABLE_MODE_UNKNOWN";

// The process warnings emitted while `fn` runs, and a moment after (a warning is emitted on
// the next tick).
async function warningsDuring(fn)
{
    const warnings = [];
    const onWarning = w => warnings.push(w);
    process.on("warning", onWarning);
    try
    {
        await fn();
        await new Promise(resolve => setTimeout(resolve, 50));
    }
    finally
    {
        process.off("warning", onWarning);
    }
    return warnings;
}

// A server on 127.0.0.1 that accepts connections and never answers.
function silentServer()
{
    return new Promise((resolve, reject) =>
    {
        const sockets = new Set();
        const server = net.createServer(socket =>
        {
            sockets.add(socket);
            socket.on("error", () => {});
            socket.on("close", () => sockets.delete(socket));
        });
        server.on("error", reject);
        server.listen(0, "127.0.0.1", () => resolve({
            port: server.address().port,
            close: () => new Promise(done =>
            {
                sockets.forEach(s => s.destroy());
                server.close(() => done());
            }),
        }));
    });
}

// Variables that would let credentials or a region come from this process's environment.
const AWS_VARIABLES = [
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB",
    "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
];

// Runs __test__/support/credentials-child.js in an environment without credentials (a fresh
// HOME with empty AWS files); its outcome line and its stderr.
function childWithoutCredentials(job)
{
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "no-credentials-"));
    fs.mkdirSync(path.join(home, ".aws"));
    fs.writeFileSync(path.join(home, ".aws", "config"), "");
    fs.writeFileSync(path.join(home, ".aws", "credentials"), "");
    const env = Object.assign({}, process.env);
    AWS_VARIABLES.forEach(k => delete env[k]);
    Object.assign(env, { HOME: home, USERPROFILE: home, AWS_EC2_METADATA_DISABLED: "true", AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE: "1" });
    return new Promise((resolve, reject) =>
    {
        const child = spawn(process.execPath, [path.join(__dirname, "support", "credentials-child.js"), JSON.stringify(job)],
            { env, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        let err = "";
        child.stdout.on("data", d => (out += d));
        child.stderr.on("data", d => (err += d));
        const killer = setTimeout(() => child.kill("SIGKILL"), 60000);
        child.on("exit", code =>
        {
            clearTimeout(killer);
            fs.rmSync(home, { recursive: true, force: true });
            try
            {
                resolve({ outcome: JSON.parse(out.trim().split("\n").pop()), stderr: err, home });
            }
            catch (_)
            {
                reject(new Error(`the child printed no outcome (exit ${code}): ${out} ${err}`));
            }
        });
    });
}

// A Rust debug dump of an error's structure, as `{:?}` prints it.
const DEBUG_DUMP = /CredentialsNotLoaded\(|ProviderError\(|ProviderChainError|\{ source: |Some\(|GenericFailure/;

// A port on 127.0.0.1 that refuses connections: one that was just free.
function refusingPort()
{
    return new Promise((resolve, reject) =>
    {
        const server = net.createServer();
        server.on("error", reject);
        server.listen(0, "127.0.0.1", () =>
        {
            const { port } = server.address();
            server.close(() => resolve(port));
        });
    });
}

for (const engineName of selectedEngines())
{
    describe(`messages that name what is wrong (${engineName})`, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(engineName);
            await engine.createTable("by_pk", { partitionKey: "pk" });
            await engine.createTable("by_number", { partitionKey: "id", partitionType: "N" });
            await engine.createTable("with_sort", { partitionKey: "id", sortKey: "shard" });
        });
        after(async () => engine && engine.stop());

        const dynamodb = () => ({ endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials });
        const make = (kind, extra) => new DynamoDBLockClient[kind](Object.assign({ dynamodb: dynamodb(), partitionKey: "id",
            requestTimeoutMs: 2000 }, kind === "FailOpen" ? { leaseDurationMs: 1000 } : { acquirePeriodMs: 10 }, extra));
        const failure = promise => promise.then(l => { throw new Error(`acquired ${l && l.fencingToken}`); }, e => e);

        for (const kind of ["FailClosed", "FailOpen"])
        {
            it(`${kind}: a partition key named otherwise names the table, the key and the type`, async () =>
            {
                const error = await failure(make(kind, { lockTable: "by_pk" }).acquireLock(uniqueId("schema")));
                assert.equal(error.code, "ValidationException");
                assert.match(error.message, /^The lock table "by_pk" does not fit this client's lock ids: /);
                assert.match(error.message, /its partition key must be "id" of type S \(a string\), as the lock id is/);
                assert.match(error.message, /with no sort key \(set `sortKey` for a table that has one\)/);
                assert.match(error.message, /DynamoDB said: .*(key element does not match the schema|[Kk]ey)/);
            });

            it(`${kind}: a lock id of the wrong type names the type the key must have`, async () =>
            {
                const error = await failure(make(kind, { lockTable: "by_number" }).acquireLock(uniqueId("typed")));
                assert.equal(error.code, "ValidationException");
                assert.match(error.message, /^The lock table "by_number" does not fit this client's lock ids: /);
                assert.match(error.message, /its partition key must be "id" of type S \(a string\), as the lock id is/);
                // And the other way: a number id against a string key.
                const numeric = await failure(make(kind, { lockTable: "by_pk", partitionKey: "pk" }).acquireLock(Date.now()));
                assert.equal(numeric.code, "ValidationException");
                assert.match(numeric.message, /its partition key must be "pk" of type N \(a number\), as the lock id is/);
            });

            it(`${kind}: a table with a sort key the client does not name says to set sortKey`, async () =>
            {
                const error = await failure(make(kind, { lockTable: "with_sort" }).acquireLock(uniqueId("unsorted")));
                assert.equal(error.code, "ValidationException");
                assert.match(error.message, /^The lock table "with_sort" does not fit/);
                assert.match(error.message, /set `sortKey`/);
            });

            it(`${kind}: a sort value of the wrong type names the sort key and its type`, async () =>
            {
                const client = make(kind, { lockTable: "with_sort", sortKey: "shard" });
                const error = await failure(client.acquireLock({ id: uniqueId("sorted"), shard: 7 }));
                assert.equal(error.code, "ValidationException");
                assert.match(error.message, /its partition key must be "id" of type S \(a string\), as the lock id is, and its sort key "shard" of type N \(a number\)/);
            });

            it(`${kind}: a lock table that fits is acquired as before`, async () =>
            {
                const lock = await make(kind, { lockTable: "by_pk", partitionKey: "pk" }).acquireLock(uniqueId("fits"));
                await lock.release();
            });
        }

        it("a refused connection names the endpoint, without the credentials of its URL", async () =>
        {
            const port = await refusingPort();
            for (const endpoint of [`http://127.0.0.1:${port}`, `http://someone:hunter2@127.0.0.1:${port}/`])
            {
                const client = new DynamoDBLockClient.FailClosed({
                    dynamodb: { endpoint, region: engine.region, credentials: engine.credentials },
                    lockTable: "by_pk", partitionKey: "pk", acquirePeriodMs: 10, requestTimeoutMs: 500,
                });
                const error = await failure(client.acquireLock(uniqueId("refused")));
                assert.equal(error.code, "NetworkingError", error.message);
                assert.ok(error.message.includes(`(endpoint http://127.0.0.1:${port})`), error.message);
                assert.ok(!error.message.includes("hunter2") && !error.message.includes("someone"), error.message);
            }
        });

        it("a timeout names the endpoint, without the credentials of its URL, and what to do", async () =>
        {
            const silent = await silentServer();
            try
            {
                const endpoint = `http://someone:hunter2@127.0.0.1:${silent.port}/`;
                const client = new DynamoDBLockClient.FailOpen({
                    dynamodb: { endpoint, region: engine.region, credentials: engine.credentials },
                    lockTable: "by_pk", partitionKey: "pk", leaseDurationMs: 10000, requestTimeoutMs: 200, retryCount: 0,
                });
                const error = await failure(client.acquireLock(uniqueId("silent")));
                assert.equal(error.code, "TimeoutError", error.message);
                assert.ok(error.message.includes(`(endpoint http://127.0.0.1:${silent.port})`), error.message);
                assert.match(error.message, /: check that the endpoint is the right one, reachable and answering$/);
                assert.ok(!error.message.includes("hunter2") && !error.message.includes("someone"), error.message);
                await client.close();
            }
            finally
            {
                await silent.close();
            }
        });

        it("no connection, or no credentials, warns of nothing about the table check: the acquisition's error says it", async () =>
        {
            const port = await refusingPort();
            const tables = [uniqueId("unreachable"), uniqueId("uncredentialed")].map(t => t.replace(/[^a-zA-Z0-9_.-]/g, "_"));
            let refused;
            let unsigned;
            const warnings = await warningsDuring(async () =>
            {
                const unreachable = new DynamoDBLockClient.FailClosed({
                    dynamodb: { endpoint: `http://127.0.0.1:${port}`, region: engine.region, credentials: engine.credentials },
                    lockTable: tables[0], partitionKey: "pk", acquirePeriodMs: 10, requestTimeoutMs: 500,
                });
                refused = await failure(unreachable.acquireLock(uniqueId("nowhere")));
                refused = [refused, await failure(unreachable.acquireLock(uniqueId("nowhere")))];
                const uncredentialed = new DynamoDBLockClient.FailOpen({
                    dynamodb: { endpoint: engine.endpoint, region: engine.region, credentials: async () => { throw new Error("the vault is sealed"); } },
                    lockTable: tables[1], partitionKey: "pk", leaseDurationMs: 1000, requestTimeoutMs: 500,
                });
                unsigned = await failure(uncredentialed.acquireLock(uniqueId("unsigned")));
                await Promise.all([unreachable.close(), uncredentialed.close()]);
            });
            assert.deepEqual(refused.map(e => e.code), ["NetworkingError", "NetworkingError"]);
            assert.equal(unsigned.code, "CredentialsError", unsigned.message);
            assert.deepEqual(warnings.filter(w => w.code === UNKNOWN_MODE).map(w => w.message), []);
            // The provider's own words, and no dump of the SDK's error structure.
            assert.match(unsigned.message, /`dynamodb\.credentials` function.*rejected: the vault is sealed/);
            assert.doesNotMatch(unsigned.message, DEBUG_DUMP);
            assert.ok(unsigned.cause, "the chain of causes is kept");
            assert.doesNotMatch(unsigned.cause.message, DEBUG_DUMP);
        });

        it("credentials that no source had: the sources tried and what to set, with no debug dump and no table warning", async () =>
        {
            const { outcome, stderr, home } = await childWithoutCredentials({ client: "options", endpoint: engine.endpoint,
                region: engine.region, lockTable: "by_pk", id: uniqueId("no-credentials") });
            assert.equal(outcome.code, "CredentialsError", JSON.stringify(outcome));
            const m = outcome.message;
            assert.match(m, /^No AWS credentials could be loaded for DynamoDB\. The sources tried, in order: /);
            assert.match(m, /the environment \(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set\)/);
            assert.ok(m.includes(`the AWS profile ("default" is in neither the config file ${path.join(home, ".aws", "config")} nor the credentials file`
                + ` ${path.join(home, ".aws", "credentials")})`), m);
            assert.match(m, /web identity \(AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN are not set\)/);
            assert.match(m, /the container endpoint \(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and AWS_CONTAINER_CREDENTIALS_FULL_URI are not set\)/);
            assert.match(m, /the EC2 instance role \(turned off by AWS_EC2_METADATA_DISABLED\)/);
            assert.match(m, /Give `dynamodb\.credentials`, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE/);
            assert.doesNotMatch(m, DEBUG_DUMP);
            assert.doesNotMatch(String(outcome.cause), DEBUG_DUMP);
            assert.ok(!stderr.includes(UNKNOWN_MODE), stderr);
        });

        for (const kind of ["FailClosed", "FailOpen", "Fifo"])
        {
            it(`${kind}: acquisition options it does not take are refused, each named, before any request`, async () =>
            {
                const client = kind === "Fifo"
                    ? new DynamoDBLockClient.Fifo({ dynamodb: dynamodb(), lockTable: "with_sort", partitionKey: "id", sortKey: "shard",
                        leaseDurationMs: 3000 })
                    : make(kind, { lockTable: "by_pk", partitionKey: "pk" });
                const id = uniqueId("typo");
                const controller = new AbortController();
                const error = await failure(client.acquireLock(id, { singal: controller.signal, dangerMarginMs: 500, unset: undefined }));
                assert.equal(error.name, "ValidationError", error.stack);
                assert.deepEqual(error.details.map(d => [d.path, d.type]), [[["singal"], "object.unknown"], [["dangerMarginMs"], "object.unknown"]]);
                const options = kind === "Fifo" ? "signal, waitMs and data" : "signal and data";
                assert.equal(error.details[0].message, `"singal" is not an option of acquireLock (did you mean "signal"?): its options are ${options}`);
                assert.match(error.details[1].message, /^"dangerMarginMs" is not an option of acquireLock \(it is an option of the client, given to its constructor/);
                assert.equal(error.message, error.details.map(d => d.message).join(". "));
                if (kind !== "Fifo")
                {
                    const waitMs = await failure(client.acquireLock(id, { waitMs: 100 }));
                    assert.equal(waitMs.name, "ValidationError");
                    assert.match(waitMs.message, /"waitMs" is not an option of acquireLock \(waitMs is a Fifo acquisition's/);
                }
                // Through a callback too; and nothing was written.
                const viaCallback = await new Promise(resolve => client.acquireLock(id, { sigal: controller.signal }, (e, l) => resolve(e || l)));
                assert.equal(viaCallback.name, "ValidationError");
                if (kind !== "Fifo")
                {
                    assert.equal(await client.getLock(id), null);
                }
                const lock = await client.acquireLock(id, { signal: controller.signal, unset: undefined });
                await lock.release();
                await client.close();
            });
        }

        it("campaign options it does not take are refused by name", () =>
        {
            const client = make("FailOpen", { lockTable: "by_pk", partitionKey: "pk", heartbeatPeriodMs: 300 });
            assert.throws(() => client.campaign(uniqueId("leader"), { singal: AbortSignal.abort() }),
                e => e.name === "ValidationError" && e.details[0].message === "\"singal\" is not an option of campaign (did you mean \"signal\"?): its options are signal");
        });

        it("a danger margin of the whole lease or more is refused, naming the lease (FailOpen and Fifo)", () =>
        {
            const base = { dynamodb: dynamodb(), lockTable: "by_pk", partitionKey: "pk" };
            for (const margin of [1000, 5000])
            {
                assert.throws(() => new DynamoDBLockClient.FailOpen(Object.assign({ leaseDurationMs: 1000, dangerMarginMs: margin }, base)), e =>
                {
                    assert.equal(e.name, "ValidationError");
                    assert.deepEqual(e.details.map(d => [d.path, d.type, d.context.limit]), [[["dangerMarginMs"], "number.less", 1000]]);
                    assert.match(e.message, /^"dangerMarginMs" must be less than leaseDurationMs \(1000 ms\): "danger" fires when that much of the lease is left/);
                    return true;
                });
            }
            assert.throws(() => new DynamoDBLockClient.Fifo({ dynamodb: dynamodb(), lockTable: "with_sort", partitionKey: "id", sortKey: "shard",
                leaseDurationMs: 1000, dangerMarginMs: 1000 }), e => e.name === "ValidationError" && e.details[0].path[0] === "dangerMarginMs");
            // Below the lease, or 0, is fine.
            new DynamoDBLockClient.FailOpen(Object.assign({ leaseDurationMs: 1000, dangerMarginMs: 999 }, base));
            new DynamoDBLockClient.FailOpen(Object.assign({ leaseDurationMs: 1000, dangerMarginMs: 0 }, base));
        });

        for (const kind of ["FailClosed", "FailOpen"])
        {
            it(`${kind}: update() after one's own release() says the lock was released by this holder`, async () =>
            {
                const client = make(kind, { lockTable: "by_pk", partitionKey: "pk" });
                const lock = await client.acquireLock(uniqueId("released"));
                await lock.update({ data: "while held" });
                await lock.release();
                const error = await lock.update({ data: "after release" }).then(() => assert.fail("updated"), e => e);
                assert.equal(error.code, "LockLost");
                assert.match(error.message, /^The lock was released by this holder \(its release\(\) was called\): update\(\) writes only to a lock still held\. Acquire the lock again/);
                assert.doesNotMatch(error.message, /another owner/);
                await client.close();
            });
        }

        it("createTable where TTL cannot be enabled says the table was made and TTL was not, and why", async () =>
        {
            const proxy = await startProxy({ target: engine.endpoint });
            try
            {
                const options = lockTable => ({ dynamodb: { endpoint: proxy.endpoint, region: engine.region, credentials: engine.credentials },
                    lockTable, partitionKey: "id", ttlAttribute: "expires" });
                // An endpoint without the TTL operations, as dynalite is (its answer has no message).
                proxy.onRequest = op => (op.endsWith("TimeToLive") ? { respond: { status: 400, type: "UnknownOperationException", message: "" } } : null);
                const first = uniqueId("nottl").replace(/[^a-zA-Z0-9_.-]/g, "_");
                const unknown = await DynamoDBLockClient.createTable(options(first)).then(() => assert.fail("resolved"), e => e);
                assert.equal(unknown.code, "UnknownOperationException");
                assert.equal(unknown.name, "UnknownOperationException");
                assert.equal(unknown.message, `Table "${first}" was created and is ACTIVE, but TTL was not enabled on "expires": the endpoint`
                    + " does not offer DescribeTimeToLive and UpdateTimeToLive (UnknownOperationException); enable TTL where the table is served"
                    + " (DynamoDB itself has it), or leave ttlAttribute out.");
                assert.deepEqual([unknown.tableName, unknown.created, unknown.ttlAttribute], [first, true, "expires"]);
                assert.equal(unknown.cause.code, "UnknownOperationException");
                // A refusal, on a table that exists by now: the permissions to grant.
                proxy.onRequest = op => (op === "UpdateTimeToLive" || op === "DescribeTimeToLive"
                    ? { respond: { status: 400, type: "AccessDeniedException", message: "not authorized to perform: dynamodb:UpdateTimeToLive" } } : null);
                const denied = await DynamoDBLockClient.createTable(options(first)).then(() => assert.fail("resolved"), e => e);
                assert.equal(denied.code, "AccessDeniedException");
                assert.match(denied.message, new RegExp(`^Table "${first}" exists and is ACTIVE, but TTL was not enabled on "expires": the request was refused`
                    + " \\(AccessDeniedException: not authorized to perform: dynamodb:UpdateTimeToLive\\); allow dynamodb:DescribeTimeToLive and"
                    + " dynamodb:UpdateTimeToLive on the table and call createTable again"));
                assert.equal(denied.created, false);
            }
            finally
            {
                await proxy.close();
            }
        });
    });
}
