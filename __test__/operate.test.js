"use strict";

// The operator's commands, as child processes and as API: list, show, release --force and
// check-table, on both engines; check-table against a loopback stand-in that answers
// DescribeTable as a global table does.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const path = require("node:path");
const { spawn } = require("node:child_process");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId, sleep } = require("./helpers.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const BIN = path.join(__dirname, "..", "bin", "dynamodb-lock-native.js");

function cli(endpoint, ...args)
{
    const env = Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true", AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "b" });
    return new Promise(resolve =>
    {
        const child = spawn(process.execPath, [BIN, ...args, "--endpoint", endpoint], { env });
        let stdout = "", stderr = "";
        child.stdout.on("data", d => (stdout += d));
        child.stderr.on("data", d => (stderr += d));
        const timer = setTimeout(() => child.kill("SIGKILL"), 30000);
        child.on("exit", status =>
        {
            clearTimeout(timer);
            resolve({ status, stdout, stderr });
        });
    });
}

for (const name of selectedEngines())
{
    describe(`operating a lock table (${name})`, { timeout: 180000 }, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(name);
            await engine.createTable("ops", { partitionKey: "id" });
            await engine.createTable("opsfifo", { partitionKey: "resource", sortKey: "entry" });
        });
        after(async () => engine && engine.stop());

        const config = extra => Object.assign({ dynamodb: dynamodbOptions(engine), lockTable: "ops", partitionKey: "id" }, extra);

        it("list and show say who holds what; release --force --now frees a FailOpen lock at once and a live holder hears \"lost\"", async () =>
        {
            const open = new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 60000, heartbeatPeriodMs: 300, owner: "worker-1" }));
            const closed = new DynamoDBLockClient.FailClosed(config({ acquirePeriodMs: 50, owner: "cron" }));
            const [a, b, c] = [uniqueId("ops-open"), uniqueId("ops-closed"), uniqueId("ops-free")];
            const lockA = await open.acquireLock(a);
            await closed.acquireLock(b);
            await (await open.acquireLock(c)).release();

            const listed = await cli(engine.endpoint, "list", "--table", "ops", "--json");
            assert.equal(listed.status, 0, listed.stderr);
            const byId = Object.fromEntries(JSON.parse(listed.stdout).map(l => [l.id, l]));
            assert.deepEqual([byId[a].kind, byId[a].owner, byId[a].fencingToken, byId[a].held, byId[a].leaseDurationMs], ["FailOpen", "worker-1", 1, true, 60000]);
            assert.deepEqual([byId[b].kind, byId[b].owner, byId[b].held], ["FailClosed", "cron", true]);
            assert.deepEqual([byId[c].kind, byId[c].held], ["FailOpen", false]);
            const text = await cli(engine.endpoint, "list", "--table", "ops");
            assert.match(text.stdout, new RegExp(`${a}  FailOpen  held \\(renewed \\d+ s ago, lease 60 s\\)  owner "worker-1"  fencingToken 1`));

            const shown = await cli(engine.endpoint, "show", a, "--table", "ops", "--json");
            assert.equal(shown.status, 0, shown.stderr);
            assert.equal(JSON.parse(shown.stdout).guid.length, 128);
            const missing = await cli(engine.endpoint, "show", uniqueId("nobody"), "--table", "ops");
            assert.equal(missing.status, 1);
            assert.match(missing.stdout, /no lock/);

            // The holder is alive here: freeing it at once (--now) makes it hear "lost" at its
            // next heartbeat, and the command says what that risks.
            const lost = new Promise(resolve => lockA.once("lost", resolve));
            const released = await cli(engine.endpoint, "release", a, "--table", "ops", "--force", "--now");
            assert.equal(released.status, 0, released.stderr);
            assert.match(released.stdout, /released .* \(was held by "worker-1", fencingToken 1\)\. Warning: .*may still be writing/);
            assert.ok((await lost).code, "the loss carries its code");
            assert.equal(lockA.lost, true);
            // The next acquisition takes it at once, with a higher token.
            const t0 = Date.now();
            const next = await new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 60000 })).acquireLock(a);
            assert.ok(Date.now() - t0 < 2000, `taken after ${Date.now() - t0} ms`);
            assert.equal(next.fencingToken, 2);
            await next.release();

            // A FailClosed holder cannot be told: only --now frees its lock.
            const refused = await cli(engine.endpoint, "release", b, "--table", "ops", "--force");
            assert.equal(refused.status, 1, refused.stdout);
            assert.match(refused.stderr, /HolderCannotBeTold|writes nothing while it holds/);
            const deleted = await cli(engine.endpoint, "release", b, "--table", "ops", "--force", "--now", "--json");
            assert.equal(deleted.status, 0, deleted.stderr);
            assert.equal(JSON.parse(deleted.stdout).action, "deleted");
            assert.equal(await engine.getItem("ops", { id: { S: b } }), undefined);
            const again = await cli(engine.endpoint, "release", c, "--table", "ops", "--force", "--json");
            assert.equal(JSON.parse(again.stdout).action, "already-free");
            await Promise.all([open.close(), closed.close()]);
        });

        it("every write records when it was made (lockWrittenUnixMs): getLock, list and show report it", async () =>
        {
            const written = async id => Number((await engine.getItem("ops", { id: { S: id } })).lockWrittenUnixMs.N);
            const open = new DynamoDBLockClient.FailOpen(config({ leaseDurationMs: 60000, heartbeatPeriodMs: 300, owner: "stamped" }));
            const id = uniqueId("ops-written");
            const t0 = Date.now();
            const lock = await open.acquireLock(id);
            const acquired = await written(id);
            assert.ok(acquired >= t0 - 1000 && acquired <= Date.now() + 1000, `${acquired} near ${t0}`);
            await sleep(800);
            const renewed = await written(id);
            assert.ok(renewed > acquired, `a heartbeat moves it forward: ${acquired} -> ${renewed}`);
            const info = await open.getLock(id);
            assert.ok(info.lastWrittenUnixMs >= renewed, JSON.stringify(info));

            const shown = await cli(engine.endpoint, "show", id, "--table", "ops", "--json");
            assert.equal(shown.status, 0, shown.stderr);
            assert.ok(JSON.parse(shown.stdout).lastWrittenUnixMs >= renewed, shown.stdout);
            const text = await cli(engine.endpoint, "list", "--table", "ops");
            assert.match(text.stdout, new RegExp(`${id}  FailOpen  held \\(renewed \\d+ s ago, lease 60 s\\)  owner "stamped"  fencingToken 1`));

            await sleep(20);
            await lock.release();
            const released = await written(id);
            assert.ok(released > renewed, `the release moves it forward: ${renewed} -> ${released}`);
            const after = await cli(engine.endpoint, "show", id, "--table", "ops");
            assert.match(after.stdout, new RegExp(`${id}  FailOpen  released \\d+ s ago  owner "stamped"  fencingToken 1`));

            // FailClosed's PutItem carries it too; an item without it reads as unknown.
            const closed = new DynamoDBLockClient.FailClosed(config({ acquirePeriodMs: 50 }));
            const other = uniqueId("ops-written");
            await closed.acquireLock(other);
            assert.ok(await written(other) >= t0 - 1000);
            await closed.close({ releaseLocks: true });
            const bare = uniqueId("ops-bare");
            await engine.putItem("ops", { id: { S: bare }, owner: { S: "original" }, guid: { B: Buffer.alloc(64) } });
            const listed = await DynamoDBLockClient.showLock({ dynamodb: dynamodbOptions(engine), lockTable: "ops", id: bare });
            assert.equal(listed.lastWrittenUnixMs, undefined);
            await open.close();
        });

        it("the API lists Fifo heads with their waiters, and check-table reports a lock table", async () =>
        {
            const fifo = new DynamoDBLockClient.Fifo({ dynamodb: dynamodbOptions(engine), lockTable: "opsfifo", partitionKey: "resource", sortKey: "entry", leaseDurationMs: 10000 });
            const r = uniqueId("ops-res");
            const held = await fifo.acquireLock(r);
            const waiting = fifo.acquireLock(r, { waitMs: 20000 });
            await sleep(500);
            const all = [];
            for await (const lock of DynamoDBLockClient.listLocks({ dynamodb: dynamodbOptions(engine), lockTable: "opsfifo" }))
            {
                all.push(lock);
            }
            const head = all.find(l => l.id === r);
            assert.ok(head, JSON.stringify(all));
            assert.equal(head.kind, "Fifo");
            assert.equal(head.held, true);
            assert.equal(head.waiters, 1);
            // The head and the queue entry carry the time of their last write.
            assert.ok(head.lastWrittenUnixMs > Date.now() - 60000, JSON.stringify(head));
            const entries = (await engine.scan("opsfifo")).filter(i => i.resource.S === r && i.entry.S !== "lock");
            assert.equal(entries.length, 1);
            assert.ok(Number(entries[0].lockWrittenUnixMs.N) > Date.now() - 60000, JSON.stringify(entries[0]));
            await held.release();
            await (await waiting).release();
            await fifo.close();

            const checked = await cli(engine.endpoint, "check-table", "--table", "ops", "--partition-key", "id", "--json");
            assert.equal(checked.status, 0, checked.stderr);
            const report = JSON.parse(checked.stdout);
            assert.deepEqual([report.ok, report.partitionKey, report.global, report.problems], [true, { name: "id", type: "S" }, undefined, []]);
            const wrong = await cli(engine.endpoint, "check-table", "--table", "ops", "--partition-key", "pk");
            assert.equal(wrong.status, 1);
            assert.match(wrong.stdout, /Problem: the partition key is "id", not "pk"/);
        });
    });
}

describe("check-table on a global table (a loopback stand-in for DescribeTable)", () =>
{
    let server, endpoint, mode;
    before(async () =>
    {
        server = http.createServer((req, res) =>
        {
            let body = "";
            req.on("data", d => (body += d));
            req.on("end", () =>
            {
                const op = String(req.headers["x-amz-target"]).split(".").pop();
                res.setHeader("content-type", "application/x-amz-json-1.0");
                if (op === "DescribeTable")
                {
                    res.end(JSON.stringify({ Table: {
                        TableName: "global", TableStatus: "ACTIVE",
                        KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
                        AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
                        BillingModeSummary: { BillingMode: "PAY_PER_REQUEST" },
                        Replicas: [{ RegionName: "us-east-1" }, { RegionName: "eu-west-1" }],
                        ...(mode ? { MultiRegionConsistency: mode } : {}),
                    } }));
                }
                else
                {
                    res.end(JSON.stringify({ TimeToLiveDescription: { TimeToLiveStatus: "DISABLED" } }));
                }
            });
        });
        await new Promise(resolve => server.listen(0, "127.0.0.1", resolve));
        endpoint = `http://127.0.0.1:${server.address().port}`;
    });
    after(() => new Promise(resolve => server.close(resolve)));

    it("refuses the eventually consistent mode (exit 1) and accepts the strongly consistent one", async () =>
    {
        for (const [given, status] of [[undefined, 1], ["EVENTUAL", 1], ["STRONG", 0]])
        {
            mode = given;
            const r = await cli(endpoint, "check-table", "--table", "global");
            assert.equal(r.status, status, r.stdout + r.stderr);
            assert.match(r.stdout, new RegExp(`Global table in Regions us-east-1, eu-west-1, ${given || "EVENTUAL"} consistency`));
            if (status === 1)
            {
                assert.match(r.stdout, /Problem: the table is global .* eventually consistent mode/);
                assert.doesNotMatch(r.stdout, /Limit:/);
            }
            else
            {
                // Strong consistency keeps a lock, without TTL or transactions.
                assert.match(r.stdout, /Limit: no TTL on a global table with multi-Region strong consistency: clients with ttlAttribute, and Fifo clients .* are refused/);
                assert.match(r.stdout, /Limit: no transactions .* lock.conditionCheck\(\) is refused/);
                assert.match(r.stdout, /It can keep a lock\./);
            }
        }
    });
});
