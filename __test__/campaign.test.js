"use strict";

// Leader election: client.campaign(id, { signal }).

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, dynamodbOptions, failClosed, failOpen, uniqueId, sleep, until } = require("./helpers.js");
const { runScript } = require("./support/spawn.js");
const { startProxy } = require("./support/proxy.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

// Resolves with the next event `name` of `emitter`, or rejects after `ms`.
function next(emitter, name, ms)
{
    return new Promise((resolve, reject) =>
    {
        const timer = setTimeout(() => reject(new Error(`no "${name}" in ${ms} ms`)), ms);
        emitter.once(name, value =>
        {
            clearTimeout(timer);
            resolve(value);
        });
    });
}

const LEASE_MS = 1000;
const HEARTBEAT_MS = 200;
const REREAD_MS = 10;

for (const engineName of selectedEngines())
{
    describe(`campaign on ${engineName}`, { timeout: 180000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("fifo", { partitionKey: "pk", sortKey: "sk" });
            }
        );
        after(async () => engine && engine.stop());

        const candidate = extra => failOpen(engine, Object.assign({ leaseDurationMs: LEASE_MS, heartbeatPeriodMs: HEARTBEAT_MS, rereadPeriodMs: REREAD_MS }, extra));

        it("one leader at a time; resigning hands leadership over with a higher term", async () =>
            {
                const id = uniqueId("elect");
                const first = candidate().campaign(id);
                const elected = await next(first, "elected", 5000);
                assert.equal(elected.term, 1);
                assert.equal(elected.signal.aborted, false);
                assert.deepEqual(first.leader.term, 1);
                const second = candidate().campaign(id);
                const terms = [];
                const iterating = (async () =>
                {
                    for await (const { term, signal } of second)
                    {
                        terms.push(term);
                        assert.equal(signal.aborted, false);
                        break;
                    }
                })();
                await sleep(300);
                assert.equal(second.leader, undefined, "the second candidate waits while the first leads");
                const deposed = next(first, "deposed", 5000);
                await first.resign();
                assert.deepEqual(await deposed, { term: 1, reason: "resigned" });
                assert.equal(elected.signal.aborted, true);
                assert.equal(elected.signal.reason.code, "Deposed");
                assert.equal(first.active, false);
                await iterating;
                assert.deepEqual(terms, [2]);
                // Leaving the loop resigned the second campaign and released the lock.
                await second.done;
                assert.equal(second.active, false);
                assert.equal((await engine.getItem("locks", { id: { S: id } })).leaseDurationMs.N, "1");
            }
        );

        it("a leader killed with SIGKILL is replaced within the lease and a re-read, with strictly rising terms", async t =>
            {
                const id = uniqueId("elect-kill");
                const config = { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: LEASE_MS, heartbeatPeriodMs: HEARTBEAT_MS, rereadPeriodMs: REREAD_MS };
                const terms = [];
                // Two leaders in child processes, each killed while leading; then one here.
                const firstChild = runScript("campaign-child.js", { kind: "FailOpen", config, id }, { timeoutMs: 30000 });
                terms.push((await firstChild.next(l => l.elected !== undefined, 10000)).elected);
                const secondChild = runScript("campaign-child.js", { kind: "FailOpen", config, id }, { timeoutMs: 30000 });
                await secondChild.next(l => l.campaigning, 10000);
                await sleep(300);
                assert.equal(secondChild.lines.find(l => l.elected !== undefined), undefined, "no second leader while the first lives");
                let killedAt = Date.now();
                firstChild.kill();
                const second = await secondChild.next(l => l.elected !== undefined, 10000);
                const firstTakeover = second.at - killedAt;
                terms.push(second.elected);
                const here = candidate().campaign(id);
                await sleep(300);
                assert.equal(here.leader, undefined);
                const electedHere = next(here, "elected", 10000);
                killedAt = Date.now();
                secondChild.kill();
                const { term } = await electedHere;
                const secondTakeover = Date.now() - killedAt;
                terms.push(term);
                await here.resign();
                await Promise.all([firstChild.exited, secondChild.exited]);
                for (let i = 1; i < terms.length; i++)
                {
                    assert.ok(terms[i] > terms[i - 1], `terms rise: ${terms}`);
                }
                // The last heartbeat was sent at most a period before the kill: no takeover
                // before its lease ran out. And none later than the lease, a re-read, and a
                // second of slack for process scheduling on a busy machine.
                t.diagnostic(`terms ${terms.join(", ")}; takeovers ${firstTakeover} ms and ${secondTakeover} ms after the kills`);
                for (const ms of [firstTakeover, secondTakeover])
                {
                    assert.ok(ms >= LEASE_MS - HEARTBEAT_MS, `took over ${ms} ms after the kill`);
                    assert.ok(ms <= LEASE_MS + REREAD_MS + 1000, `took over ${ms} ms after the kill`);
                }
            }
        );

        it("a process whose campaign resigns exits by itself", async () =>
            {
                const config = { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: LEASE_MS, heartbeatPeriodMs: HEARTBEAT_MS };
                const child = runScript("campaign-child.js", { kind: "FailOpen", config, id: uniqueId("elect-exit"), resignAfterMs: 200 }, { timeoutMs: 20000 });
                const exit = await child.exited;
                assert.equal(exit.signal, null, `exited by itself, not killed after 20 s: ${JSON.stringify(child.lines)}`);
                assert.equal(exit.code, 0);
                assert.deepEqual(child.lines.map(l => Object.keys(l)[0]), ["campaigning", "elected", "deposed", "resigned"]);
            }
        );

        it("a leader whose heartbeats fail is deposed before a rival is elected", async t =>
            {
                const proxy = await startProxy({ target: engine.endpoint });
                try
                {
                    const id = uniqueId("elect-danger");
                    const leader = candidate({ dynamodb: dynamodbOptions(engine, proxy.endpoint), requestTimeoutMs: 200 }).campaign(id);
                    const { term, signal } = await next(leader, "elected", 5000);
                    let deposedAt;
                    signal.addEventListener("abort", () => (deposedAt = Date.now()));
                    const rival = candidate().campaign(id);
                    await sleep(300);
                    // From now on every write of the leader is throttled.
                    proxy.setFaults({ throttleRate: 1, operations: ["UpdateItem"] });
                    const deposed = await next(leader, "deposed", 5000);
                    assert.equal(deposed.reason, "danger");
                    assert.equal(signal.reason.reason, "danger");
                    const rivalElected = await next(rival, "elected", 5000);
                    const rivalAt = Date.now();
                    assert.ok(deposedAt !== undefined && deposedAt < rivalAt, "deposed before the rival was elected");
                    t.diagnostic(`deposed ${rivalAt - deposedAt} ms before the rival was elected (margin ${Math.round(LEASE_MS / 3)} ms)`);
                    assert.ok(rivalElected.term > term);
                    proxy.clearFaults();
                    await rival.resign();
                    await leader.resign();
                }
                finally
                {
                    await proxy.close();
                }
            }
        );

        it("an outage is reported as \"error\" and the campaign goes on", async () =>
            {
                const proxy = await startProxy({ target: engine.endpoint });
                try
                {
                    proxy.onRequest = () => ({ respond: { status: 400, type: "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException", message: "no table" } });
                    const c = candidate({ dynamodb: dynamodbOptions(engine, proxy.endpoint) }).campaign(uniqueId("elect-outage"));
                    const error = await next(c, "error", 5000);
                    assert.equal(error.code, "ResourceNotFoundException");
                    proxy.onRequest = null;
                    const { term } = await next(c, "elected", 5000);
                    assert.equal(term, 1);
                    await c.resign();
                }
                finally
                {
                    await proxy.close();
                }
            }
        );

        it("a leader whose lock is taken is deposed, and campaigns on to a higher term", async () =>
            {
                const id = uniqueId("elect-lost");
                const c = candidate().campaign(id);
                const first = await next(c, "elected", 5000);
                const deposed = next(c, "deposed", 5000);
                // Someone else writes the item: the next heartbeat finds it is not ours.
                await engine.putItem("locks", { id: { S: id }, owner: { S: "usurper" }, guid: { B: Buffer.alloc(64, 3) }, fencingToken: { N: "9" }, leaseDurationMs: { N: String(LEASE_MS) } });
                const d = await deposed;
                assert.equal(d.reason, "lost");
                assert.equal(d.error.code, "LockLost");
                assert.equal(first.signal.aborted, true);
                // The usurper never heartbeats: its lease lapses and the campaign wins again.
                const again = await next(c, "elected", 5000);
                assert.equal(again.term, 10);
                await c.resign();
            }
        );

        it("an aborted signal ends the campaign; a closed client ends it too", async () =>
            {
                const id = uniqueId("elect-signal");
                const controller = new AbortController();
                const client = candidate();
                const c = client.campaign(id, { signal: controller.signal });
                await next(c, "elected", 5000);
                const ended = next(c, "end", 5000);
                controller.abort();
                await ended;
                assert.equal((await engine.getItem("locks", { id: { S: id } })).leaseDurationMs.N, "1");
                // Campaigning with an aborted signal ends at once.
                const never = client.campaign(id, { signal: AbortSignal.abort() });
                let electedEver = false;
                never.on("elected", () => (electedEver = true));
                await never.done;
                assert.equal(electedEver, false);
                // close() ends the campaigns of the client.
                const d = candidate();
                const c2 = d.campaign(id);
                await next(c2, "elected", 5000);
                const outcomes = await d.close({ releaseLocks: true });
                await c2.done;
                assert.equal(c2.active, false);
                assert.ok(outcomes.every(o => o.released));
                assert.equal((await engine.getItem("locks", { id: { S: id } })).leaseDurationMs.N, "1");
            }
        );

        for (const session of [false, true])
        {
            it(`a leader's close() deposes it ("resigned") and releases its lock: the next candidate is elected at once${session ? " (session)" : ""}`, async () =>
                {
                    const id = uniqueId("elect-close");
                    const leaderClient = candidate({ session });
                    const first = leaderClient.campaign(id);
                    const elected = await next(first, "elected", 5000);
                    const rival = candidate({ session });
                    const second = rival.campaign(id);
                    await sleep(300);
                    assert.equal(second.leader, undefined);
                    const deposed = next(first, "deposed", 5000);
                    const electedNext = next(second, "elected", 5000);
                    const closedAt = Date.now();
                    const outcomes = await leaderClient.close();
                    assert.deepEqual(await deposed, { term: elected.term, reason: "resigned" });
                    assert.deepEqual(outcomes, [{ id, fencingToken: elected.term, released: true }]);
                    const { term } = await electedNext;
                    const ms = Date.now() - closedAt;
                    assert.ok(term > elected.term);
                    assert.ok(ms < LEASE_MS / 2, `the next candidate was elected ${ms} ms after close(), lease ${LEASE_MS} ms`);
                    await rival.close();
                }
            );
        }

        it("Fifo candidates are elected in the order they campaigned", async () =>
            {
                const id = uniqueId("elect-fifo");
                const make = () => new DynamoDBLockClient.Fifo({ dynamodb: dynamodbOptions(engine), lockTable: "fifo", partitionKey: "pk", sortKey: "sk", leaseDurationMs: LEASE_MS });
                const a = make().campaign(id);
                const ta = (await next(a, "elected", 5000)).term;
                const b = make().campaign(id);
                await sleep(100);
                const c = make().campaign(id);
                await sleep(100);
                const bElected = next(b, "elected", 5000);
                await a.resign();
                const tb = (await bElected).term;
                const cElected = next(c, "elected", 5000);
                await b.resign();
                const tc = (await cElected).term;
                await c.resign();
                assert.ok(ta < tb && tb < tc, `terms ${ta} ${tb} ${tc}`);
            }
        );

        it("FailClosed and user dynamodb objects have no campaign; FailOpen needs heartbeats", () =>
            {
                assert.throws(() => failClosed(engine).campaign("x"), { code: "NotSupported" });
                assert.throws(() => failOpen(engine).campaign("x"), { code: "InvalidArgument" });
                const userObject = { get: () => Promise.resolve({}), put: () => Promise.resolve({}), delete: () => Promise.resolve({}) };
                assert.throws(() => failOpen(engine, { dynamodb: userObject, heartbeatPeriodMs: 100 }).campaign("x"), { code: "NotSupported" });
                assert.throws(() => candidate().campaign("x", { signal: "no" }), { code: "InvalidArgument" });
                assert.throws(() => candidate().campaign(null), { code: "InvalidLockId" });
                assert.throws(() => candidate().campaign({ other: 1 }), { code: "InvalidLockId" });
                const fifo = new DynamoDBLockClient.Fifo({ dynamodb: dynamodbOptions(engine), lockTable: "fifo", partitionKey: "pk", sortKey: "sk", leaseDurationMs: LEASE_MS });
                assert.throws(() => fifo.campaign(["a", "b"]), { code: "InvalidLockId" });
            }
        );
    });
}
