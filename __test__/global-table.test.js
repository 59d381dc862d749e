"use strict";

// Global tables: a loopback stand-in in front of dynalite answers DescribeTable as DynamoDB
// does for a global table (eventually or strongly consistent, or with AccessDeniedException),
// and can answer one write with ReplicatedWriteConflictException; everything else reaches
// dynalite.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const { startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId } = require("./helpers.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

describe("a global table (a loopback stand-in for DescribeTable in front of dynalite)", { timeout: 120000 }, () =>
{
    let engine, server, endpoint;
    // What the stand-in does: `mode` "EVENTUAL", "STRONG", "NONE" (replicas without
    // MultiRegionConsistency), "DENIED", or undefined (DescribeTable reaches dynalite);
    // `conflicts`: UpdateItems to answer with ReplicatedWriteConflictException.
    const stand = { mode: undefined, conflicts: 0, seen: [], answered: [] };
    const count = op => stand.seen.filter(o => o === op).length;

    function answer(res, status, body)
    {
        res.writeHead(status, { "content-type": "application/x-amz-json-1.0" });
        res.end(JSON.stringify(body));
    }

    function forward(req, res, body)
    {
        const target = new URL(engine.endpoint);
        const out = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, r =>
        {
            res.writeHead(r.statusCode, r.headers);
            r.pipe(res);
        });
        out.on("error", () => res.destroy());
        out.end(body);
    }

    before(async () =>
    {
        engine = await startEngine("dynalite");
        await engine.createTable("global", { partitionKey: "id" });
        await engine.createTable("global-fifo", { partitionKey: "id", sortKey: "entry" });
        server = http.createServer((req, res) =>
        {
            const chunks = [];
            req.on("data", d => chunks.push(d));
            req.on("end", () =>
            {
                const body = Buffer.concat(chunks);
                const op = String(req.headers["x-amz-target"]).split(".").pop();
                stand.seen.push(op);
                res.on("finish", () => stand.answered.push(op));
                if (op === "DescribeTable" && stand.mode === "DENIED")
                {
                    return answer(res, 400, { __type: "com.amazonaws.dynamodb.v20120810#AccessDeniedException", message: "not authorized to perform dynamodb:DescribeTable" });
                }
                if (op === "DescribeTable" && stand.mode)
                {
                    const consistency = stand.mode === "NONE" ? {} : { MultiRegionConsistency: stand.mode };
                    return answer(res, 200, { Table: Object.assign({
                        TableName: "global", TableStatus: "ACTIVE",
                        KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
                        AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
                        Replicas: [{ RegionName: "us-east-1", ReplicaStatus: "ACTIVE" }, { RegionName: "eu-west-1", ReplicaStatus: "ACTIVE" }],
                    }, consistency) });
                }
                if (op === "UpdateItem" && stand.conflicts > 0)
                {
                    stand.conflicts -= 1;
                    return answer(res, 400, { __type: "com.amazonaws.dynamodb.v20120810#ReplicatedWriteConflictException", message: "One or more items in this request are being modified by a request in another Region." });
                }
                forward(req, res, body);
            });
        });
        await new Promise(resolve => server.listen(0, "127.0.0.1", resolve));
        endpoint = `http://127.0.0.1:${server.address().port}`;
    });
    after(async () =>
    {
        if (server)
        {
            server.closeAllConnections();
            await new Promise(resolve => server.close(resolve));
        }
        if (engine)
        {
            await engine.stop();
        }
    });

    const config = extra => Object.assign({ dynamodb: dynamodbOptions(engine, endpoint), lockTable: "global", partitionKey: "id" }, extra);
    const reset = mode => Object.assign(stand, { mode, conflicts: 0, seen: [], answered: [] });

    it("the eventually consistent mode is refused with its code, no lock remains, and later acquisitions refuse at once", async () =>
    {
        for (const mode of ["EVENTUAL", "NONE"])
        {
            reset(mode);
            const open = new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 10000, heartbeatPeriodMs: 3000 }));
            const id = uniqueId("gt-open");
            const err = await open.acquireLock(id).then(() => assert.fail("acquired"), e => e);
            assert.equal(err.code, "EventuallyConsistentGlobalTable", err.stack);
            assert.equal(err.tableName, "global");
            assert.deepEqual(err.regions, ["us-east-1", "eu-west-1"]);
            assert.match(err.message, /"global".*us-east-1, eu-west-1/);
            const item = await engine.getItem("global", { id: { S: id } });
            assert.ok(item === undefined || item.leaseDurationMs.N === "1", `the lock was released: ${JSON.stringify(item)}`);
            const writes = count("UpdateItem");
            const again = await open.acquireLock(uniqueId("gt-open")).then(() => assert.fail("acquired"), e => e);
            assert.equal(again.code, "EventuallyConsistentGlobalTable");
            assert.equal(count("UpdateItem"), writes, "a later acquisition sends nothing");
            assert.equal(count("DescribeTable"), 1, "one DescribeTable per client");
            await open.close();
        }
        const closed = new DynamoDBLockClient.FailClosed(config({ acquirePeriodMs: 50 }));
        const id = uniqueId("gt-closed");
        const err = await closed.acquireLock(id).then(() => assert.fail("acquired"), e => e);
        assert.equal(err.code, "EventuallyConsistentGlobalTable");
        assert.equal(await engine.getItem("global", { id: { S: id } }), undefined, "the FailClosed item was deleted");
        await closed.close();
    });

    it("allowEventuallyConsistentGlobalTable: true takes locks there, with no DescribeTable; a non-boolean is refused", async () =>
    {
        reset("EVENTUAL");
        const open = new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 10000, allowEventuallyConsistentGlobalTable: true }));
        const lock = await open.acquireLock(uniqueId("gt-allowed"));
        assert.equal(lock.fencingToken, 1);
        await lock.release();
        assert.equal(count("DescribeTable"), 0);
        await open.close();
        assert.throws(() => new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 10000, allowEventuallyConsistentGlobalTable: "yes" })),
            e => e.name === "ValidationError" && /allowEventuallyConsistentGlobalTable/.test(e.message));
    });

    it("the strongly consistent mode works, and ReplicatedWriteConflictException is retried", async () =>
    {
        reset("STRONG");
        const open = new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 10000 }));
        stand.conflicts = 1;
        const lock = await open.acquireLock(uniqueId("gt-strong"));
        assert.equal(lock.fencingToken, 1);
        assert.equal(count("UpdateItem"), 2, "the conflicted write was sent again");
        const fifo = new DynamoDBLockClient.FailClosed(config({ acquirePeriodMs: 50 }));
        await (await fifo.acquireLock(uniqueId("gt-strong"))).release();
        await lock.release();
        assert.equal(count("DescribeTable"), 2, "one per client");
        await Promise.all([open.close(), fifo.close()]);
    });

    it("the strongly consistent mode refuses a TTL attribute, Fifo's default one included, naming the table and the limit", async () =>
    {
        reset("STRONG");
        const open = new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 10000, ttlAttribute: "expires" }));
        const id = uniqueId("gt-ttl");
        const err = await open.acquireLock(id).then(() => assert.fail("acquired"), e => e);
        assert.equal(err.code, "StronglyConsistentGlobalTableLimit", err.stack);
        assert.equal(err.tableName, "global");
        assert.equal(err.limit, "TTL");
        assert.deepEqual(err.regions, ["us-east-1", "eu-west-1"]);
        assert.match(err.message, /"global" is a global table with multi-Region strong consistency \(Regions us-east-1, eu-west-1\), which supports no TTL: ttlAttribute "expires"/);
        const item = await engine.getItem("global", { id: { S: id } });
        assert.ok(item === undefined || item.leaseDurationMs.N === "1", `the lock was released: ${JSON.stringify(item)}`);
        const writes = count("UpdateItem");
        await assert.rejects(open.acquireLock(uniqueId("gt-ttl")), { code: "StronglyConsistentGlobalTableLimit" });
        assert.equal(count("UpdateItem"), writes, "a later acquisition sends nothing");
        await open.close();

        const closed = new DynamoDBLockClient.FailClosed(config({ acquirePeriodMs: 50, ttlAttribute: "expires", ttlSeconds: 3600 }));
        await assert.rejects(closed.acquireLock(uniqueId("gt-ttl")), { code: "StronglyConsistentGlobalTableLimit", limit: "TTL" });
        await closed.close();

        for (const [extra, shown] of [[{}, /"ttl", the default/], [{ ttlAttribute: "gone" }, /"gone"\)/]])
        {
            const fifo = new DynamoDBLockClient.Fifo(config(Object.assign({ lockTable: "global-fifo", sortKey: "entry", leaseDurationMs: 10000 }, extra)));
            const refused = await fifo.acquireLock(uniqueId("gt-fifo")).then(() => assert.fail("acquired"), e => e);
            assert.equal(refused.code, "StronglyConsistentGlobalTableLimit", refused.stack);
            assert.equal(refused.tableName, "global-fifo");
            assert.match(refused.message, /"global-fifo" .* which supports no TTL: a Fifo client writes its TTL attribute/);
            assert.match(refused.message, shown);
            await fifo.close();
        }
    });

    it("on the strongly consistent mode a lock's conditionCheck() is refused (no transactions); elsewhere it is given", async () =>
    {
        const settings = { FailOpen: { leaseDurationMs: 10000 }, FailClosed: { acquirePeriodMs: 50 } };
        for (const Kind of ["FailOpen", "FailClosed"])
        {
            reset("STRONG");
            const client = new DynamoDBLockClient[Kind](config(settings[Kind]));
            const lock = await client.acquireLock(uniqueId("gt-check"));
            assert.throws(() => lock.conditionCheck(), e => e.code === "StronglyConsistentGlobalTableLimit" && e.limit === "transactions"
                && e.tableName === "global" && /"global" is a global table with multi-Region strong consistency .* which supports no transactions: lock.conditionCheck\(\)/.test(e.message));
            assert.throws(() => lock.conditionCheck({ marshalled: true }), { code: "StronglyConsistentGlobalTableLimit" });
            await lock.release();
            await client.close();

            reset(undefined);
            const plain = new DynamoDBLockClient[Kind](config(settings[Kind]));
            const held = await plain.acquireLock(uniqueId("gt-check"));
            assert.equal(held.conditionCheck().ConditionCheck.TableName, "global");
            await held.release();
            await plain.close();
        }
    });

    it("a DescribeTable refused (AccessDeniedException) is warned about once, and locking proceeds", async () =>
    {
        reset("DENIED");
        const warnings = [];
        const onWarning = w => warnings.push(w);
        process.on("warning", onWarning);
        try
        {
            const a = new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 10000 }));
            const b = new DynamoDBLockClient.FailClosed(config({ acquirePeriodMs: 50 }));
            for (const client of [a, b, a])
            {
                await (await client.acquireLock(uniqueId("gt-denied"))).release();
            }
            await new Promise(resolve => setImmediate(resolve));
            const ours = warnings.filter(w => w.code === "DYNAMODB_LOCK_NATIVE_TABLE_MODE_UNKNOWN");
            assert.equal(ours.length, 1, warnings.map(w => w.message).join("\n"));
            assert.match(ours[0].message, /AccessDeniedException/);
            assert.equal(count("DescribeTable"), 2, "one per client");
            await Promise.all([a.close(), b.close()]);
        }
        finally
        {
            process.off("warning", onWarning);
        }
    });

    it("a missing table is the acquisition's error alone, with no warning, and is checked again once it exists", async () =>
    {
        reset(undefined);
        const warnings = [];
        const onWarning = w => warnings.push(w);
        process.on("warning", onWarning);
        const table = `missing-${Date.now()}`;
        try
        {
            const client = new DynamoDBLockClient.FailOpen(config({ lockTable: table, leaseDurationMs: 10000 }));
            await assert.rejects(client.acquireLock(uniqueId("gt-missing")), { code: "ResourceNotFoundException" });
            // The table is made only once the first check was answered that it is missing (the
            // check runs beside the acquisition, and may answer after it).
            for (let i = 0; i < 500 && !stand.answered.includes("DescribeTable"); i++)
            {
                await new Promise(resolve => setTimeout(resolve, 10));
            }
            assert.equal(count("DescribeTable"), 1);
            await engine.createTable(table, { partitionKey: "id" });
            // An acquisition that starts before the client has taken that answer shares the
            // check under way; the next one checks again.
            for (let i = 0; i < 3 && count("DescribeTable") < 2; i++)
            {
                await (await client.acquireLock(uniqueId("gt-missing"))).release();
            }
            await client.close();
            await new Promise(resolve => setImmediate(resolve));
            assert.deepEqual(warnings.map(w => w.code).filter(c => c && c.startsWith("DYNAMODB_LOCK_NATIVE")), []);
            assert.equal(count("DescribeTable"), 2, "the table checked again once it exists");
        }
        finally
        {
            process.off("warning", onWarning);
        }
    });

    it("a table DescribeTable describes without replicas (dynalite's answer) costs no warning", async () =>
    {
        reset(undefined);
        const warnings = [];
        const onWarning = w => warnings.push(w);
        process.on("warning", onWarning);
        try
        {
            const open = new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 10000 }));
            await (await open.acquireLock(uniqueId("gt-plain"))).release();
            await open.close();
            assert.equal(count("DescribeTable"), 1);
            assert.deepEqual(warnings.map(w => w.code), []);
        }
        finally
        {
            process.off("warning", onWarning);
        }
    });

    it("over a user's object, describeTable is asked when it exists", async () =>
    {
        const items = new Map();
        const mock = {
            get: (p, cb) => setImmediate(() => cb(null, { Item: items.get(p.Key.id) })),
            put: (p, cb) => setImmediate(() =>
            {
                items.set(p.Item.id, p.Item);
                cb(null, {});
            }),
            delete: (p, cb) => setImmediate(() =>
            {
                items.delete(p.Key.id);
                cb(null, {});
            }),
        };
        const plain = new DynamoDBLockClient.FailClosed({ dynamodb: mock, lockTable: "global", partitionKey: "id", acquirePeriodMs: 50 });
        await (await plain.acquireLock("a")).release();
        await plain.close();
        mock.describeTable = (p, cb) => setImmediate(() => cb(null, { Table: { TableName: p.TableName, Replicas: [{ RegionName: "us-east-1" }, { RegionName: "us-west-2" }] } }));
        const global = new DynamoDBLockClient.FailClosed({ dynamodb: mock, lockTable: "global", partitionKey: "id", acquirePeriodMs: 50 });
        const err = await global.acquireLock("b").then(() => assert.fail("acquired"), e => e);
        assert.equal(err.code, "EventuallyConsistentGlobalTable");
        assert.equal(items.has("b"), false, "the lock was released");
        await global.close();
    });
});
