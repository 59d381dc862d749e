"use strict";

// The command line: its usage errors (exit status 2, as its help says, and the flag named as
// it is typed, not the option of the JavaScript API behind it; no engine is reached, the
// endpoint is a closed local port), then, on each engine, what an operator reads: each lock's
// state told truthfully (held, expired, released, held through a live or dead session), the
// waiters by owner, filters, a Fifo queue, ids as printed, prune, exit statuses, a closed pipe,
// --version and --profile.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawn, spawnSync } = require("child_process");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, uniqueId, sleep, until } = require("./helpers.js");

const BIN = path.join(__dirname, "..", "bin", "dynamodb-lock-native.js");

function cli(...args)
{
    const env = Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true", AWS_REGION: "us-east-1",
        AWS_ENDPOINT_URL_DYNAMODB: "http://127.0.0.1:9", AWS_ACCESS_KEY_ID: "dummy", AWS_SECRET_ACCESS_KEY: "dummy" });
    return spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", env, timeout: 30000 });
}

it("--help exits 0 and states the exit statuses", () =>
    {
        const r = cli("--help");
        assert.equal(r.status, 0);
        assert.match(r.stdout, /Exit status: 0 on success \(create-table: the table is ACTIVE;/);
        assert.match(r.stdout, /2 on a usage error/);
    }
);

it("--version prints the package's version and exits 0", () =>
    {
        const r = cli("--version");
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout, `${require("../package.json").version}\n`);
    }
);

const cases = [
    [["create-table", "--table", "t"], /--partition-key must be a non-empty string/],
    [["create-table", "--partition-key", "id"], /--table must be a non-empty string/],
    [["create-table", "--table", "t", "--partition-key", "id", "--partition-key-type", "X"], /--partition-key-type must be one of \[S, N, B\]/],
    [["create-table", "--table", "t", "--partition-key", "id", "--billing-mode", "FREE"], /--billing-mode must be one of/],
    [["create-table", "--table", "t", "--partition-key", "id", "--read-capacity", "many"], /--read-capacity must be a whole number, not "many"/],
    [["create-table", "--table", "t", "--partition-key", "id", "--ttl-attribute", "id"], /--ttl-attribute must differ from --partition-key and --sort-key/],
    [["create-table", "--table", "t", "--partition-key", "id", "--endpoint", "localhost:8000"], /--endpoint must be an http or https URL, not "localhost:8000"/],
    [["create-table", "--table", "t", "--partition-key", "id", "--colour", "red"], /Unknown option '--colour'/],
    [["drop-table"], /expected a command: create-table, list, show, release, prune, check-table/],
    [["list", "--table", "t", "--profile", ""], /--profile must name a profile/],
    [["list", "--table", "t", "--region", "us east"], /--region must be an AWS Region name/],
    [["list"], /--table is required/],
    [["show", "--table", "t"], /show takes the lock id/],
    [["release", "x", "--table", "t"], /release needs --force/],
];
for (const [args, message] of cases)
{
    it(`${args.join(" ")}: exits 2 and names the flag`, () =>
        {
            const r = cli(...args);
            assert.equal(r.status, 2, r.stderr);
            assert.match(r.stderr, message);
            assert.doesNotMatch(r.stderr, /"(lockTable|partitionKey|partitionKeyType|billingMode|readCapacityUnits|ttlAttribute|sortKey)"/);
            assert.match(r.stderr, /Usage: dynamodb-lock-native <command>/);
            assert.equal(r.stdout, "");
        }
    );
}

// The command line as a child process that does not block this one (whose lock clients keep
// heartbeating meanwhile). `env` replaces the credentials of the environment when given.
function run(endpoint, args, { env, closeStdout = false } = {})
{
    const base = { AWS_EC2_METADATA_DISABLED: "true", AWS_REGION: "us-east-1", AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "b" };
    const childEnv = Object.assign({}, process.env, env || base);
    return new Promise(resolve =>
    {
        const child = spawn(process.execPath, [BIN, ...args, "--endpoint", endpoint], { env: childEnv });
        let stdout = "", stderr = "";
        if (closeStdout)
        {
            // A reader that has gone (`list | head -1`): the pipe is closed before the first write.
            child.stdout.destroy();
        }
        else
        {
            child.stdout.on("data", d => (stdout += d));
        }
        child.stderr.on("data", d => (stderr += d));
        const timer = setTimeout(() => child.kill("SIGKILL"), 30000);
        child.on("exit", status =>
        {
            clearTimeout(timer);
            resolve({ status, stdout, stderr });
        });
    });
}

// The line of `id` in a text listing.
function lineOf(stdout, id)
{
    const printed = typeof id === "object" ? JSON.stringify(id) : id;
    return stdout.split("\n").find(l => l.startsWith(`${printed}  `));
}

for (const name of selectedEngines())
{
    describe(`the command line tells live from dead (${name})`, { timeout: 180000 }, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(name);
            await engine.createTable("cli", { partitionKey: "id" });
            await engine.createTable("clisorted", { partitionKey: "pk", sortKey: "sk" });
        });
        after(async () => engine && engine.stop());

        const config = extra => Object.assign({ dynamodb: dynamodbOptions(engine), lockTable: "cli", partitionKey: "id" }, extra);
        const cli = (...args) => run(engine.endpoint, args);
        const now = () => String(Date.now());

        it("list: held, expired by the holder's silence, released, FailClosed, sorted by id, with --held, --expired and --released", async () =>
        {
            const prefix = uniqueId("state");
            const [live, dead, free, closed] = ["d-live", "c-dead", "b-free", "a-closed"].map(s => `${prefix}-${s}`);
            const holder = new DynamoDBLockClient.FailOpen(config({ owner: "alive", leaseDurationMs: 10000, heartbeatPeriodMs: 1000 }));
            const quitter = new DynamoDBLockClient.FailOpen(config({ owner: "gone", leaseDurationMs: 1000, heartbeatPeriodMs: 300 }));
            const fc = new DynamoDBLockClient.FailClosed(config({ owner: "cron", acquirePeriodMs: 50 }));
            await holder.acquireLock(live);
            await quitter.acquireLock(dead);
            await (await holder.acquireLock(free)).release();
            await fc.acquireLock(closed);
            // The holder stops renewing (its heartbeats end with close()): a lease later it is
            // expired, though its item still says held.
            await quitter.close();
            await sleep(2200);
            // Hand-written: silent for 23 s with a 10 s lease; renewed by a writer that records
            // only lockAcquiredTimeUnixMs (the original with trustLocalTime); one that records
            // no time at all.
            const [silent, original, unknown] = ["e-silent", "f-original", "g-unknown"].map(s => `${prefix}-${s}`);
            const guid = { B: Buffer.alloc(64, 1) };
            await engine.putItem("cli", { id: { S: silent }, owner: { S: "sigkilled" }, guid, fencingToken: { N: "7" }, leaseDurationMs: { N: "10000" }, lockWrittenUnixMs: { N: String(Date.now() - 23000) } });
            await engine.putItem("cli", { id: { S: original }, owner: { S: "original" }, guid, fencingToken: { N: "3" }, leaseDurationMs: { N: "10000" }, lockAcquiredTimeUnixMs: { N: now() } });
            await engine.putItem("cli", { id: { S: unknown }, owner: { S: "original" }, guid, fencingToken: { N: "4" }, leaseDurationMs: { N: "10000" } });

            const r = await cli("list", "--table", "cli");
            assert.equal(r.status, 0, r.stderr);
            assert.match(lineOf(r.stdout, live), /^\S+  FailOpen  held \(renewed [0-3] s ago, lease 10 s\)  owner "alive"  fencingToken 1$/);
            assert.match(lineOf(r.stdout, dead), /^\S+  FailOpen  expired \(holder silent for [2-9] s, lease 1 s\)  owner "gone"  fencingToken 1$/);
            assert.match(lineOf(r.stdout, free), /^\S+  FailOpen  released \d+ s ago  owner "alive"  fencingToken 1$/);
            assert.match(lineOf(r.stdout, closed), /^\S+  FailClosed  held \(last written \d+ s ago\)  owner "cron"$/);
            assert.match(lineOf(r.stdout, silent), /  FailOpen  expired \(holder silent for 2[3-9] s, lease 10 s\)  owner "sigkilled"  fencingToken 7$/);
            assert.match(lineOf(r.stdout, original), /  FailOpen  held \(renewed [0-3] s ago, lease 10 s\)/);
            assert.match(lineOf(r.stdout, unknown), /  FailOpen  held \(renewal time not recorded, lease 10 s\)/);
            // Sorted by id.
            const ours = r.stdout.split("\n").filter(l => l.startsWith(prefix)).map(l => l.split("  ")[0]);
            assert.deepEqual(ours, [closed, free, dead, live, silent, original, unknown].sort());

            const held = await cli("list", "--table", "cli", "--held");
            assert.deepEqual(held.stdout.split("\n").filter(l => l.startsWith(prefix)).map(l => l.split("  ")[0]), [closed, live, original, unknown].sort());
            const expired = await cli("list", "--table", "cli", "--expired", "--json");
            assert.deepEqual(JSON.parse(expired.stdout).filter(l => l.id.startsWith(prefix)).map(l => [l.id, l.state]), [[dead, "expired"], [silent, "expired"]]);
            const gone = JSON.parse(expired.stdout).find(l => l.id === silent);
            assert.ok(gone.silentMs >= 23000 && gone.silentMs < 30000, JSON.stringify(gone));
            const either = await cli("list", "--table", "cli", "--expired", "--released");
            assert.deepEqual(either.stdout.split("\n").filter(l => l.startsWith(prefix)).map(l => l.split("  ")[0]), [dead, free, silent].sort());
            await Promise.all([holder.close(), fc.close()]);
        });

        it("a session's locks: held through session S while it renews, expired once it is silent, ended or deleted; no 2^31 - 1 lease printed", async () =>
        {
            const prefix = uniqueId("sess");
            const client = new DynamoDBLockClient.FailOpen(config({ owner: "shards", leaseDurationMs: 10000, heartbeatPeriodMs: 1000, session: true }));
            const lock = await client.acquireLock(`${prefix}-1`);
            const sessionId = (await client.getLock(`${prefix}-1`)).session;
            assert.match(sessionId, /^[0-9a-f]{32}$/);
            let r = await cli("list", "--table", "cli");
            assert.equal(r.status, 0, r.stderr);
            const line = lineOf(r.stdout, `${prefix}-1`);
            assert.match(line, new RegExp(`  FailOpen  held through session ${sessionId} \\(live, renewed [0-3] s ago\\)  owner "shards"  fencingToken 1$`));
            assert.doesNotMatch(r.stdout, /2147483647/);
            assert.match(lineOf(r.stdout, `dynamodb-lock-native/session/${sessionId}`), /  Session  live \(renewed [0-3] s ago, lease 10 s\)  owner "shards"  fencingToken 1  1 lock$/);

            // A session whose holder went silent: a lease later, its locks are expired.
            const silent = new DynamoDBLockClient.FailOpen(config({ owner: "paused", leaseDurationMs: 1000, heartbeatPeriodMs: 300, session: true }));
            await silent.acquireLock(`${prefix}-2`);
            const silentId = (await silent.getLock(`${prefix}-2`)).session;
            await silent.close();
            await sleep(2200);
            r = await cli("list", "--table", "cli", "--expired");
            assert.match(lineOf(r.stdout, `${prefix}-2`), new RegExp(`  expired \\(session ${silentId} silent for [2-9] s, lease 1 s\\)  owner "paused"`));
            assert.match(lineOf(r.stdout, `dynamodb-lock-native/session/${silentId}`), /  Session  expired \(silent for [2-9] s, lease 1 s\)/);

            // The session ended (its item released): its lock reads expired, and so once the
            // session's item is gone.
            const ended = await DynamoDBLockClient.forceRelease({ dynamodb: dynamodbOptions(engine), lockTable: "cli", id: `dynamodb-lock-native/session/${silentId}`, now: true });
            assert.equal(ended.action, "released");
            r = await cli("show", `${prefix}-2`, "--table", "cli");
            assert.equal(r.status, 0, r.stderr);
            assert.match(r.stdout, new RegExp(`^${prefix}-2  FailOpen  expired \\(session ${silentId} ended\\)  owner "paused"  fencingToken 1\\n$`));
            r = await cli("list", "--table", "cli", "--released");
            assert.match(lineOf(r.stdout, `dynamodb-lock-native/session/${silentId}`), /  Session  ended \d+ s ago/);
            await engine.deleteItem("cli", { id: { S: `dynamodb-lock-native/session/${silentId}` } });
            r = await cli("show", `${prefix}-2`, "--table", "cli", "--json");
            assert.deepEqual([JSON.parse(r.stdout).state, JSON.parse(r.stdout).sessionState], ["expired", "gone"]);
            r = await cli("show", `${prefix}-2`, "--table", "cli");
            assert.match(r.stdout, new RegExp(`expired \\(session ${silentId} ended, its item deleted\\)`));

            // The live one is untouched by all this.
            r = await cli("list", "--table", "cli", "--held");
            assert.match(lineOf(r.stdout, `${prefix}-1`), /held through session/);
            assert.equal(lineOf(r.stdout, `${prefix}-2`), undefined);
            await lock.release();
            await client.close();
        });

        it("the first waiter is named by its owner, and a mark older than the lease is not shown; a waiter's mark leaves the holder's write time alone", async () =>
        {
            const id = uniqueId("waited");
            // A holder without heartbeats writes nothing after its acquisition.
            const holder = new DynamoDBLockClient.FailOpen(config({ owner: "holder", leaseDurationMs: 20000, heartbeatPeriodMs: 0 }));
            await holder.acquireLock(id);
            const written = Number((await engine.getItem("cli", { id: { S: id } })).lockWrittenUnixMs.N);
            const waiter = new DynamoDBLockClient.FailOpen(config({ owner: "patient", leaseDurationMs: 20000, heartbeatPeriodMs: 0 }));
            const attempt = waiter.acquireLock(id, { signal: AbortSignal.timeout(60000) }).catch(e => e);
            await until(async () => (await engine.getItem("cli", { id: { S: id } })).lockWaitingUnixMs !== undefined, 10000, "the waiter's mark");
            const item = await engine.getItem("cli", { id: { S: id } });
            assert.equal(item.lockWaiterOwner.S, "patient");
            assert.equal(Number(item.lockWrittenUnixMs.N), written, "the mark is not the holder's write");
            const r = await cli("list", "--table", "cli");
            assert.match(lineOf(r.stdout, id), /  held \(renewed \d+ s ago, lease 20 s\)  owner "holder"  fencingToken 1  first waiter "patient" \(marked [0-9] s ago\)$/);
            assert.doesNotMatch(lineOf(r.stdout, id), new RegExp(item.lockWaiter.S));
            await holder.close({ releaseLocks: true });
            await (await attempt).release();
            await waiter.close();

            // A mark left ten minutes ago by a waiter that gave up.
            const old = uniqueId("old-mark");
            await engine.putItem("cli", { id: { S: old }, owner: { S: "holder" }, guid: { B: Buffer.alloc(64, 2) }, fencingToken: { N: "1" },
                leaseDurationMs: { N: "10000" }, lockWrittenUnixMs: { N: now() },
                lockWaiter: { S: "360b01c3a1557e1f" }, lockWaiterOwner: { S: "left" }, lockWaitingUnixMs: { N: String(Date.now() - 600000) }, lockWaitingSinceUnixMs: { N: String(Date.now() - 700000) } });
            const listed = await cli("list", "--table", "cli");
            assert.match(lineOf(listed.stdout, old), /  held \(renewed [0-3] s ago, lease 10 s\)  owner "holder"  fencingToken 1$/);
            const json = JSON.parse((await cli("show", old, "--table", "cli", "--json")).stdout);
            assert.deepEqual([json.waiter, json.waiterOwner], [undefined, undefined]);
        });

        it("show of a Fifo resource lists its queue; ids with a sort value are taken as list prints them", async () =>
        {
            const fifoConfig = owner => ({ dynamodb: dynamodbOptions(engine), lockTable: "clisorted", partitionKey: "pk", sortKey: "sk", owner, leaseDurationMs: 10000, heartbeatPeriodMs: 1000 });
            const a = new DynamoDBLockClient.Fifo(fifoConfig("first"));
            const b = new DynamoDBLockClient.Fifo(fifoConfig("second"));
            const resource = uniqueId("queue");
            const held = await a.acquireLock(resource);
            const waiting = b.acquireLock(resource, { waitMs: 60000 });
            await until(async () => (await engine.scan("clisorted")).some(i => i.pk.S === resource && i.sk.S.startsWith("q#")), 10000, "the queue entry");
            let r = await cli("show", resource, "--table", "clisorted");
            assert.equal(r.status, 0, r.stderr);
            const lines = r.stdout.trimEnd().split("\n");
            assert.match(lines[0], new RegExp(`^${resource}  Fifo  held \\(renewed [0-3] s ago, lease 10 s\\)  owner "first"  fencingToken 1  1 waiting$`));
            assert.deepEqual(lines.slice(1, 2), ["queue:"]);
            assert.match(lines[2], /^ {2}position 1  waiting \(renewed [0-3] s ago, lease 10 s\)  owner "second"  ticket 2$/);
            const json = JSON.parse((await cli("show", resource, "--table", "clisorted", "--json")).stdout);
            assert.deepEqual(json.queue.map(e => [e.position, e.owner, e.ticket, e.state]), [[1, "second", 2, "waiting"]]);
            await held.release();
            await (await waiting).release();
            await Promise.all([a.close(), b.close()]);

            // A FailOpen lock on the sorted table: list prints its id as JSON, which show and
            // release take back.
            const open = new DynamoDBLockClient.FailOpen({ dynamodb: dynamodbOptions(engine), lockTable: "clisorted", partitionKey: "pk", sortKey: "sk", owner: "sorted", leaseDurationMs: 10000, heartbeatPeriodMs: 1000 });
            const id = { pk: uniqueId("ranged"), sk: "shard-3" };
            const lock = await open.acquireLock(id);
            r = await cli("list", "--table", "clisorted");
            const printed = lineOf(r.stdout, id).split("  ")[0];
            assert.equal(printed, JSON.stringify(id));
            r = await cli("show", printed, "--table", "clisorted");
            assert.equal(r.status, 0, r.stderr);
            assert.match(r.stdout, /FailOpen  held \(renewed [0-3] s ago, lease 10 s\)  owner "sorted"/);
            r = await cli("show", JSON.stringify({ pk: id.pk, sk: "other" }), "--table", "clisorted");
            assert.equal(r.status, 1);
            assert.match(r.stdout, /^no lock /);
            r = await cli("show", JSON.stringify({ pk: id.pk, nope: 1 }), "--table", "clisorted");
            assert.equal(r.status, 1);
            assert.match(r.stderr, /must name the table's key: "pk" and "sk"/);
            await lock.release();
            await open.close();
        });

        it("exit statuses: a missing lock is 1 for show and release; a missing table is named; a closed pipe is a clean exit", async () =>
        {
            const nobody = uniqueId("nobody");
            let r = await cli("show", nobody, "--table", "cli");
            assert.equal(r.status, 1);
            r = await cli("release", nobody, "--table", "cli", "--force");
            assert.equal(r.status, 1, r.stdout);
            assert.match(r.stdout, new RegExp(`no lock "${nobody}" in table "cli": nothing done`));
            r = await cli("list", "--table", "nope");
            assert.equal(r.status, 1);
            assert.match(r.stderr, /ResourceNotFoundException: .*\(the lock table "nope"\)/);
            assert.doesNotMatch(r.stderr, /"-"/);

            // `list | head -1`: the reader is gone before the first line.
            for (let i = 0; i < 20; i++)
            {
                await engine.putItem("cli", { id: { S: uniqueId("many") }, owner: { S: "x" } });
            }
            r = await run(engine.endpoint, ["list", "--table", "cli"], { closeStdout: true });
            assert.equal(r.status, 0, r.stderr);
            assert.equal(r.stderr, "");
        });

        it("--profile takes the credentials and Region of a profile of the shared files, as the AWS CLI does", async () =>
        {
            const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cli-profile-"));
            try
            {
                fs.writeFileSync(path.join(dir, "config"), "[profile ops]\nregion = us-east-1\n");
                fs.writeFileSync(path.join(dir, "credentials"), "[ops]\naws_access_key_id = opskey\naws_secret_access_key = opssecret\n");
                const env = { AWS_EC2_METADATA_DISABLED: "true", AWS_CONFIG_FILE: path.join(dir, "config"), AWS_SHARED_CREDENTIALS_FILE: path.join(dir, "credentials"),
                    AWS_REGION: "", AWS_DEFAULT_REGION: "", AWS_PROFILE: "", AWS_ACCESS_KEY_ID: "", AWS_SECRET_ACCESS_KEY: "", AWS_SESSION_TOKEN: "" };
                let r = await run(engine.endpoint, ["list", "--table", "cli", "--profile", "ops"], { env });
                assert.equal(r.status, 0, r.stderr);
                r = await run(engine.endpoint, ["list", "--table", "cli", "--profile", "ops", "--region", "us-east-1"], { env });
                assert.equal(r.status, 0, r.stderr);
                r = await run(engine.endpoint, ["list", "--table", "cli", "--profile", "missing"], { env });
                assert.equal(r.status, 1);
                assert.match(r.stderr, /"missing"/);
            }
            finally
            {
                fs.rmSync(dir, { recursive: true, force: true });
            }
        });

        it("prune deletes ended sessions' items; released locks only with --reset-tokens; --dry-run deletes nothing", async () =>
        {
            await engine.createTable("prune", { partitionKey: "id" });
            const cfg = extra => Object.assign({ dynamodb: dynamodbOptions(engine), lockTable: "prune", partitionKey: "id", leaseDurationMs: 10000, heartbeatPeriodMs: 1000 }, extra);
            const live = new DynamoDBLockClient.FailOpen(cfg({ owner: "live", session: true }));
            await live.acquireLock("shard-live");
            const ended = new DynamoDBLockClient.FailOpen(cfg({ owner: "ended", session: true }));
            await (await ended.acquireLock("shard-ended")).release();
            await ended.close({ releaseLocks: true });
            const open = new DynamoDBLockClient.FailOpen(cfg({ owner: "open" }));
            await (await open.acquireLock("job")).release();
            await (await open.acquireLock("job")).release();
            const held = await open.acquireLock("busy");
            const fc = new DynamoDBLockClient.FailClosed({ dynamodb: dynamodbOptions(engine), lockTable: "prune", partitionKey: "id", owner: "cron", acquirePeriodMs: 50 });
            await fc.acquireLock("closed");
            const before = await engine.scan("prune");
            const endedSessions = before.filter(i => i.id.S.startsWith("dynamodb-lock-native/session/") && i.leaseDurationMs.N === "1").map(i => i.id.S);
            assert.equal(endedSessions.length, 1, JSON.stringify(before));

            let r = await cli("prune", "--table", "prune", "--dry-run");
            assert.equal(r.status, 0, r.stderr);
            assert.match(r.stdout, new RegExp(`^would delete  ${endedSessions[0]}  Session  ended \\d+ s ago  owner "ended"`, "m"));
            assert.match(r.stdout, /^Would delete 1 item: 1 ended session, 0 released locks \(--dry-run: nothing deleted\)\.$/m);
            assert.match(r.stdout, /^Kept 2 released locks: deleting one starts its fencing tokens again at 1 for the next holder \(--reset-tokens deletes them\)\.$/m);
            assert.equal((await engine.scan("prune")).length, before.length);

            r = await cli("prune", "--table", "prune");
            assert.equal(r.status, 0, r.stderr);
            assert.match(r.stdout, /^Deleted 1 item: 1 ended session, 0 released locks\.$/m);
            const after = (await engine.scan("prune")).map(i => i.id.S).sort();
            assert.ok(!after.includes(endedSessions[0]));
            assert.ok(["shard-live", "shard-ended", "job", "busy", "closed"].every(id => after.includes(id)), after.join());

            r = await cli("prune", "--table", "prune", "--reset-tokens", "--json");
            assert.equal(r.status, 0, r.stderr);
            const report = JSON.parse(r.stdout);
            assert.deepEqual(report.deleted.map(l => l.id).sort(), ["job", "shard-ended"]);
            assert.deepEqual([report.changed, report.kept, report.dryRun], [[], 0, false]);
            const left = (await engine.scan("prune")).map(i => i.id.S).sort();
            assert.ok(["shard-live", "busy", "closed"].every(id => left.includes(id)), left.join());
            assert.ok(!left.includes("job"));
            // The token counter of a pruned id starts again: what --reset-tokens says.
            const again = await open.acquireLock("job");
            assert.equal(again.fencingToken, 1);
            await again.release();
            await held.release();
            await Promise.all([live.close({ releaseLocks: true }), open.close(), fc.close({ releaseLocks: true })]);
        });
    });
}
