"use strict";

// A migration: the ORIGINAL library (dynamodb-lock-client 0.7.3 over an aws-sdk v2
// DocumentClient) and OURS share one lock table. They must exclude each other, keep the fencing
// token rising across both, take over each other's dead locks only after the lease, and see
// each other's releases.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { failOpen, failClosed, acquireCb, releaseCb, uniqueId, sleep, dynamodbOptions } = require("./helpers.js");
const { runScript, runTogether, startChild } = require("./support/spawn.js");
const { startProxy } = require("./support/proxy.js");
const { documentClient } = require("./support/v2.js");
const Original = require("dynamodb-lock-client");


// The original library, in this process, over an aws-sdk v2 DocumentClient.
function originalFailOpen(engine, extra)
{
    return new Original.FailOpen(Object.assign(
        { dynamodb: documentClient(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000 },
        extra
    ));
}

function acquireOriginal(client, id)
{
    return new Promise(resolve => client.acquireLock(id, (error, lock) =>
        {
            if (lock)
            {
                lock.on("error", () => {}); // the original crashes the process without one
            }
            resolve({ error, lock });
        }));
}

// The original passes the DocumentClient's `null` on success.
const releaseOriginal = lock => new Promise(resolve => lock.release(error => resolve(error || undefined)));

const guidHex = item => Buffer.from(item.guid.B).toString("hex");

// Starts the workers, lets them go at once, and returns what they did.
async function contention(engine, { kind, config, workers, iterations, pauseMs, softDeadlineMs, hardTimeoutMs })
{
    const id = uniqueId(`mixed-${kind}`);
    const counterId = uniqueId("counter");
    const procs = workers.map(w => runScript("mixed-worker.js",
        {
            name: w.name,
            lib: w.lib,
            transport: w.transport,
            kind,
            config: Object.assign({ owner: w.name }, config),
            engine: { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials },
            id,
            counterTable: "counters",
            counterId,
            iterations,
            criticalSleepMs: 20,
            pauseMs,
            softDeadlineMs,
        }, { timeoutMs: hardTimeoutMs }));
    try
    {
        const { ms, exits, lines } = await runTogether(procs, hardTimeoutMs);
        return {
            id,
            counterId,
            ms,
            exits,
            errors: lines.filter(l => l.error || l.unparsed),
            dones: lines.filter(l => l.done),
            records: lines.filter(l => l.i !== undefined && !l.error),
        };
    }
    finally
    {
        procs.forEach(p => p.kill());
    }
}

function checkExclusion(run, counterItem, workers, iterations)
{
    assert.deepEqual(run.errors, [], "no worker failed");
    assert.deepEqual(run.exits.map(e => e.code), workers.map(() => 0), "every worker exits cleanly");
    assert.equal(run.dones.length, workers.length, "every worker finishes");
    for (const d of run.dones)
    {
        assert.equal(d.stoppedEarly, false, `${d.worker} completed its ${iterations} iterations in time (${JSON.stringify(run.dones)})`);
    }
    const total = run.records.length;
    assert.equal(total, workers.length * iterations, "every iteration acquired the lock once");
    assert.ok(counterItem, "the counter exists");
    assert.equal(Number(counterItem.count.N), total, "no update of the shared counter was lost");
    assert.deepEqual(run.records.flatMap(r => r.heartbeatErrors), [], "no heartbeat failed");
    assert.deepEqual(run.records.filter(r => r.releaseError), [], "every release succeeded");
    const ordered = run.records.slice().sort((a, b) => a.read - b.read);
    assert.deepEqual(ordered.map(r => r.read), ordered.map((_, k) => k), "each critical section saw the previous one's write");
    for (let k = 1; k < ordered.length; k++)
    {
        const prev = ordered[k - 1];
        const cur = ordered[k];
        assert.ok(cur.start >= prev.end,
            `critical sections overlap: ${prev.worker} [${prev.start}, ${prev.end}] and ${cur.worker} [${cur.start}, ${cur.end}]`);
    }
    for (const w of workers)
    {
        assert.ok(run.records.some(r => r.worker === w.name), `${w.name} acquired the lock`);
    }
    // How often the lock went from one library to the other.
    let crossings = 0;
    for (let k = 1; k < ordered.length; k++)
    {
        if (ordered[k].worker.split("-")[0] !== ordered[k - 1].worker.split("-")[0])
        {
            crossings++;
        }
    }
    const sequence = ordered.map(r => r.worker.replace(/^original-/, "o").replace(/^native-/, "n")).join(" ");
    return { ordered, crossings, sequence };
}

const FLEET = [
    { name: "original-1", lib: "original" },
    { name: "original-2", lib: "original" },
    { name: "native-1", lib: "native", transport: "options" },
    { name: "native-2", lib: "native", transport: "documentClient" },
];

for (const engineName of selectedEngines())
{
    describe(`mixed fleet (original 0.7.3 + ours) on ${engineName}`, { timeout: 180000 }, () =>
    {
        let engine;
        let proxy;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("fclocks", { partitionKey: "id" });
                await engine.createTable("counters", { partitionKey: "id" });
                proxy = await startProxy({ target: engine.endpoint });
            }
        );
        after(async () =>
            {
                if (proxy)
                {
                    await proxy.close();
                }
                if (engine)
                {
                    await engine.stop();
                }
            }
        );

        it("FailOpen: both libraries exclude each other, no update is lost, fencing tokens rise", async t =>
            {
                const iterations = 10;
                const run = await contention(engine,
                    {
                        kind: "FailOpen",
                        config: { lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 250, retryCount: 50 },
                        workers: FLEET,
                        iterations,
                        // The original's waiters look again only after a whole lease, and ours take a
                        // released lock at once: a 1 s lease and a pause between iterations let the
                        // lock change hands between the libraries about ten times per run (a 2 s
                        // lease: a few times, and twice as slow).
                        pauseMs: [100, 300],
                        softDeadlineMs: 40000,
                        hardTimeoutMs: 70000,
                    });
                const counter = await engine.getItem("counters", { id: { S: run.counterId } });
                const { ordered, crossings, sequence } = checkExclusion(run, counter, FLEET, iterations);
                const tokens = ordered.map(r => r.token);
                assert.ok(tokens.every(Number.isInteger), `every lock has an integer fencing token: ${tokens}`);
                assert.equal(new Set(tokens).size, tokens.length, `fencing tokens are distinct: ${tokens}`);
                for (let k = 1; k < tokens.length; k++)
                {
                    assert.ok(tokens[k] > tokens[k - 1], `fencing tokens rise in acquisition order: ${tokens}`);
                }
                // Every take raises the token by one, a take refused as a late grant (its answer
                // came after its whole lease, on a slow engine) included.
                const lateGrants = run.dones.reduce((n, d) => n + (d.lateGrants || 0), 0);
                assert.equal(tokens[tokens.length - 1], tokens.length + lateGrants,
                    `each take raised the token by exactly one from 1 (${lateGrants} late grant(s) given back): ${tokens}`);
                assert.ok(tokens[0] >= 1 && tokens[0] <= 1 + lateGrants, `the first acquisition of a new lock has token 1 (or after late grants): ${tokens}`);
                const item = await engine.getItem("locks", { id: { S: run.id } });
                assert.equal(item.leaseDurationMs.N, "1", "the last holder released the lock");
                assert.equal(Number(item.fencingToken.N), tokens[tokens.length - 1]);
                t.diagnostic(`${ordered.length} acquisitions in ${run.ms} ms, ${crossings} hand-overs between the libraries, ${lateGrants} late grant(s); ` +
                    FLEET.map(w => `${w.name}: ${run.dones.find(d => d.worker === w.name).ms} ms`).join(", ") + `; order: ${sequence}`);
            }
        );

        it("FailClosed: both libraries exclude each other and no update is lost", async t =>
            {
                const iterations = 10;
                const run = await contention(engine,
                    {
                        kind: "FailClosed",
                        config: { lockTable: "fclocks", partitionKey: "id", acquirePeriodMs: 50, retryCount: 400 },
                        workers: FLEET,
                        iterations,
                        pauseMs: [0, 60],
                        softDeadlineMs: 30000,
                        hardTimeoutMs: 60000,
                    });
                const counter = await engine.getItem("counters", { id: { S: run.counterId } });
                const { ordered, crossings, sequence } = checkExclusion(run, counter, FLEET, iterations);
                assert.ok(ordered.every(r => r.token === null), "FailClosed locks carry no fencing token");
                assert.equal(await engine.getItem("fclocks", { id: { S: run.id } }), undefined, "the last release deleted the item");
                t.diagnostic(`${ordered.length} acquisitions in ${run.ms} ms, ${crossings} hand-overs between the libraries; order: ${sequence}`);
            }
        );

        const holderConfig = (owner) => (
            { dynamodb: dynamodbOptions(engine), lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 200, owner });

        // Reads the item twice a heartbeat apart and returns it if the guid rotated.
        async function heartbeating(id, who)
        {
            const first = await engine.getItem("locks", { id: { S: id } });
            await sleep(450);
            const second = await engine.getItem("locks", { id: { S: id } });
            assert.notEqual(guidHex(second), guidHex(first), `${who} heartbeats rotate the guid`);
            assert.equal(second.owner.S, first.owner.S);
            return second;
        }

        it("ours waits out the original's live lock, and takes it over after the lease once its holder is SIGKILLed", async () =>
            {
                const id = uniqueId("orig-dead");
                // Give the lock some history first so the token is not trivially 1.
                const warm = await acquireOriginal(originalFailOpen(engine), id);
                assert.equal(warm.error, undefined);
                await releaseOriginal(warm.lock);
                const holder = runScript("original-child.js",
                    { kind: "FailOpen", config: holderConfig("original-holder"), id, then: "hold" }, { timeoutMs: 30000 });
                try
                {
                    const { fencingToken } = await holder.next(l => l.acquired || l.error);
                    assert.equal(fencingToken, 2, "the original took the released lock with token + 1");
                    const held = await heartbeating(id, "the original's");
                    assert.equal(held.leaseDurationMs.N, "1000");
                    assert.equal(Number(held.fencingToken.N), 2);

                    // A live holder of the other library is respected past its lease.
                    const startedBusy = Date.now();
                    const busy = await acquireCb(failOpen(engine, { leaseDurationMs: 1000, retryCount: 0 }), id);
                    assert.equal(busy.error && busy.error.code, "FailedToAcquireLock",
                        `ours must not take a lock the original keeps alive (got token ${busy.lock && busy.lock.fencingToken})`);
                    assert.ok(Date.now() - startedBusy >= 900, "ours waited a lease before giving up");

                    holder.kill();
                    await holder.exited;
                    assert.deepEqual(holder.lines.filter(l => l.heartbeatError), [], "the original's heartbeats never failed");
                    const started = Date.now();
                    const taken = await acquireCb(failOpen(engine, { leaseDurationMs: 1000, owner: "native-taker" }), id);
                    const took = Date.now() - started;
                    assert.equal(taken.error, undefined);
                    assert.ok(took >= 900, `the dead holder's lease was waited out (${took} ms)`);
                    assert.ok(took < 5000, `and not much longer (${took} ms)`);
                    assert.equal(taken.lock.fencingToken, fencingToken + 1, "ours continues the original's fencing tokens");
                    const item = await engine.getItem("locks", { id: { S: id } });
                    assert.equal(item.owner.S, "native-taker");
                    assert.equal(Number(item.fencingToken.N), fencingToken + 1);
                    assert.equal(await releaseCb(taken.lock), null);
                }
                finally
                {
                    holder.kill();
                }
            }
        );

        it("the original waits out our live lock, and takes it over after the lease once our holder is SIGKILLed", async () =>
            {
                const id = uniqueId("native-dead");
                const warm = await failOpen(engine).acquireLock(id);
                await warm.release();
                const holder = startChild({ kind: "FailOpen", config: holderConfig("native-holder"), id, then: "hold" }, { timeoutMs: 30000 });
                try
                {
                    const { fencingToken } = await holder.next(l => l.acquired || l.error);
                    assert.equal(fencingToken, 2);
                    const held = await heartbeating(id, "our");
                    assert.equal(held.leaseDurationMs.N, "1000");

                    const startedBusy = Date.now();
                    const busy = await acquireOriginal(originalFailOpen(engine, { retryCount: 0 }), id);
                    assert.equal(busy.error && busy.error.code, "FailedToAcquireLock",
                        `the original must not take a lock ours keeps alive (got token ${busy.lock && busy.lock.fencingToken})`);
                    assert.ok(Date.now() - startedBusy >= 900, "the original waited a lease before giving up");

                    holder.kill();
                    await holder.exited;
                    assert.deepEqual(holder.lines.filter(l => l.heartbeatError || l.lost), [], "our heartbeats never failed");
                    const started = Date.now();
                    const taken = await acquireOriginal(originalFailOpen(engine, { owner: "original-taker" }), id);
                    const took = Date.now() - started;
                    assert.equal(taken.error, undefined);
                    assert.ok(took >= 900, `the dead holder's lease was waited out (${took} ms)`);
                    assert.ok(took < 5000, `and not much longer (${took} ms)`);
                    assert.equal(taken.lock.fencingToken, fencingToken + 1, "the original continues our fencing tokens");
                    const item = await engine.getItem("locks", { id: { S: id } });
                    assert.equal(item.owner.S, "original-taker");
                    assert.equal(Number(item.fencingToken.N), fencingToken + 1);
                    assert.equal(await releaseOriginal(taken.lock), undefined);
                }
                finally
                {
                    holder.kill();
                }
            }
        );

        for (const trustLocalTime of [false, true])
        {
            it(`each library sees the other's release at once and leaves the same item (trustLocalTime: ${trustLocalTime})`, async () =>
                {
                    const id = uniqueId(`handoff-${trustLocalTime}`);
                    const key = { id: { S: id } };
                    const expectedKeys = ["fencingToken", "guid", "id", "leaseDurationMs", "owner"]
                        .concat(trustLocalTime ? ["lockAcquiredTimeUnixMs"] : []).sort();
                    const checkItem = async (owner, token, leaseDurationMs, who) =>
                    {
                        const item = await engine.getItem("locks", key);
                        assert.ok(item, `${who}: the item exists`);
                        // Ours also records when it wrote (lockWrittenUnixMs), and writes its clock
                        // (lockAcquiredTimeUnixMs) whatever trustLocalTime says; the original's put
                        // drops the first, and writes the second only with trustLocalTime.
                        const expected = owner === "native"
                            ? [...new Set(expectedKeys.concat(["lockWrittenUnixMs", "lockAcquiredTimeUnixMs"]))].sort()
                            : expectedKeys;
                        assert.deepEqual(Object.keys(item).sort(), expected, `${who}: attributes ${JSON.stringify(item)}`);
                        assert.equal(item.owner.S, owner, `${who}: owner`);
                        assert.equal(Buffer.from(item.guid.B).length, 64, `${who}: guid is 64 bytes`);
                        assert.equal(item.fencingToken.N, String(token), `${who}: fencingToken`);
                        assert.equal(item.leaseDurationMs.N, String(leaseDurationMs), `${who}: leaseDurationMs`);
                        if (trustLocalTime || owner === "native")
                        {
                            assert.ok(Math.abs(Number(item.lockAcquiredTimeUnixMs.N) - Date.now()) < 5000, `${who}: lockAcquiredTimeUnixMs`);
                        }
                        return item;
                    };
                    const common = { leaseDurationMs: 2000, heartbeatPeriodMs: 400, trustLocalTime };
                    // Ours talks through the counting proxy.
                    const ours = failOpen(engine, Object.assign({ dynamodb: dynamodbOptions(engine, proxy.endpoint), owner: "native" }, common));
                    const original = originalFailOpen(engine, Object.assign({ owner: "original" }, common));

                    const first = await acquireCb(ours, id);
                    assert.equal(first.error, undefined);
                    assert.equal(first.lock.fencingToken, 1);
                    await checkItem("native", 1, 2000, "held by ours");
                    assert.equal(await releaseCb(first.lock), null);
                    const oursReleased = await checkItem("native", 1, 1, "released by ours");

                    let started = Date.now();
                    const second = await acquireOriginal(original, id);
                    let took = Date.now() - started;
                    assert.equal(second.error, undefined);
                    assert.ok(took < 1000, `the original saw our release and did not wait the 2000 ms lease (${took} ms)`);
                    assert.equal(second.lock.fencingToken, 2, "the original continues our fencing token");
                    await checkItem("original", 2, 2000, "held by the original");
                    assert.equal(await releaseOriginal(second.lock), undefined);
                    const originalReleased = await checkItem("original", 2, 1, "released by the original");
                    // Ours adds lockWrittenUnixMs and always lockAcquiredTimeUnixMs (the original only with trustLocalTime).
                    assert.deepEqual(Object.keys(oursReleased).filter(k => k !== "lockWrittenUnixMs" && (trustLocalTime || k !== "lockAcquiredTimeUnixMs")).sort(),
                        Object.keys(originalReleased).sort(),
                        "ours leaves a released item with the original's attributes");

                    proxy.resetCounts();
                    started = Date.now();
                    const { error, lock } = await new Promise(resolve => ours.acquireLock(id, (e, l) => resolve({ error: e, lock: l })));
                    took = Date.now() - started;
                    const counts = Object.assign({}, proxy.counts);
                    assert.equal(error, undefined);
                    assert.deepEqual(counts, { UpdateItem: 1 }, "ours took the original's released lock with one request");
                    assert.ok(took < 1000, `at once (${took} ms)`);
                    assert.equal(lock.fencingToken, 3, "ours continues the original's fencing token");
                    await checkItem("native", 3, 2000, "held by ours again");
                    assert.equal(await releaseCb(lock), null);
                    await checkItem("native", 3, 1, "released by ours again");

                    const fourth = await acquireOriginal(original, id);
                    assert.equal(fourth.error, undefined);
                    assert.equal(fourth.lock.fencingToken, 4);
                    assert.equal(await releaseOriginal(fourth.lock), undefined);
                    await checkItem("original", 4, 1, "released by the original again");
                }
            );
        }

        it("an original waiting on our live lock takes it when its wait ends, since our release keeps guid and token", async () =>
            {
                const id = uniqueId("orig-waits");
                const held = await failOpen(engine, { leaseDurationMs: 1000, owner: "native" }).acquireLock(id);
                const before = await engine.getItem("locks", { id: { S: id } });
                // retryCount 0: one read, a lease of waiting, one conditional put on the guid and token it read.
                const started = Date.now();
                const waiting = acquireOriginal(originalFailOpen(engine, { retryCount: 0, owner: "original" }), id);
                await sleep(300);
                await held.release();
                const released = await engine.getItem("locks", { id: { S: id } });
                assert.equal(released.leaseDurationMs.N, "1");
                assert.equal(guidHex(released), guidHex(before), "our release keeps the guid, as the original's does");
                assert.equal(released.fencingToken.N, before.fencingToken.N, "and the fencing token");
                const { error, lock } = await waiting;
                const took = Date.now() - started;
                assert.equal(error, undefined, "the original's takeover condition still matched after our release");
                assert.ok(took >= 900, `the original waited the lease it read (${took} ms)`);
                assert.equal(lock.fencingToken, held.fencingToken + 1);
                assert.equal(await releaseOriginal(lock), undefined);
            }
        );

        it("ours waiting on the original's live lock takes it as soon as the original releases", async () =>
            {
                const id = uniqueId("native-waits");
                const held = await acquireOriginal(originalFailOpen(engine, { leaseDurationMs: 3000, owner: "original" }), id);
                assert.equal(held.error, undefined);
                const started = Date.now();
                const waiting = acquireCb(failOpen(engine, { leaseDurationMs: 3000, retryCount: 0, owner: "native" }), id);
                await sleep(300);
                await releaseOriginal(held.lock);
                const { error, lock } = await waiting;
                const took = Date.now() - started;
                assert.equal(error, undefined);
                assert.ok(took < 2000, `ours acted on the release instead of sleeping the 3000 ms lease (${took} ms)`);
                assert.equal(lock.fencingToken, held.lock.fencingToken + 1);
                assert.equal(await releaseCb(lock), null);
            }
        );

        it("ours without trustLocalTime writes its own lockAcquiredTimeUnixMs over the one the original left", async () =>
            {
                const id = uniqueId("stale-time");
                const key = { id: { S: id } };
                const trusting = await acquireOriginal(originalFailOpen(engine, { trustLocalTime: true, owner: "original" }), id);
                assert.equal(trusting.error, undefined);
                await releaseOriginal(trusting.lock);
                const left = await engine.getItem("locks", key);
                assert.ok(left.lockAcquiredTimeUnixMs, "the original wrote its local time");
                await sleep(20);
                const lock = await failOpen(engine, { owner: "native" }).acquireLock(id);
                assert.equal(lock.fencingToken, 2);
                const held = await engine.getItem("locks", key);
                assert.deepEqual(Object.keys(held).sort(), ["fencingToken", "guid", "id", "leaseDurationMs", "lockAcquiredTimeUnixMs", "lockWrittenUnixMs", "owner"]);
                assert.ok(Number(held.lockAcquiredTimeUnixMs.N) > Number(left.lockAcquiredTimeUnixMs.N), "ours wrote its own time");
                await lock.release();
                const released = await engine.getItem("locks", key);
                assert.deepEqual(Object.keys(released).sort(), ["fencingToken", "guid", "id", "leaseDurationMs", "lockAcquiredTimeUnixMs", "lockWrittenUnixMs", "owner"]);
                assert.equal(released.leaseDurationMs.N, "1");
            }
        );

        // An item without lockAcquiredTimeUnixMs makes the original with trustLocalTime compute
        // a wait of NaN, which its timer turns into 1 ms: it would take a live lock at once.
        it("the original with trustLocalTime waits a lease for a lock ours holds without trustLocalTime", async () =>
            {
                const id = uniqueId("trusting-waits");
                const ours = await failOpen(engine, { owner: "native", leaseDurationMs: 1500, heartbeatPeriodMs: 300 }).acquireLock(id);
                let lost = false;
                ours.on("lost", () => (lost = true));
                const t0 = Date.now();
                const theirs = await acquireOriginal(originalFailOpen(engine, { trustLocalTime: true, owner: "original", leaseDurationMs: 1500, retryCount: 0 }), id);
                const waited = Date.now() - t0;
                assert.equal(theirs.lock, undefined, "the original did not take a live lock");
                assert.equal(theirs.error && theirs.error.code, "FailedToAcquireLock");
                assert.ok(waited >= 1000, `the original waited ${waited} ms, not a lease`);
                const item = await engine.getItem("locks", { id: { S: id } });
                assert.equal(item.owner.S, "native");
                assert.equal(item.fencingToken.N, String(ours.fencingToken));
                assert.equal(lost, false);
                await ours.release();
            }
        );

        it("FailOpen with TTL and data: the original takes over our items and ours takes its items back, tokens rising", async () =>
            {
                const id = uniqueId("mixed-ttl-open");
                const key = { id: { S: id } };
                const ours = failOpen(engine, { owner: "native", heartbeatPeriodMs: 250, ttlAttribute: "expires" });
                const held = await ours.acquireLock(id, { data: Buffer.from([1, 2, 3]) });
                const ourItem = await engine.getItem("locks", key);
                assert.deepEqual(Object.keys(ourItem).sort(), ["expires", "fencingToken", "guid", "id", "leaseDurationMs", "lockAcquiredTimeUnixMs", "lockData", "lockWrittenUnixMs", "owner"]);
                // The original reads our item (TTL attribute, binary data and all) and waits it out.
                const busy = await acquireOriginal(originalFailOpen(engine, { retryCount: 0, owner: "original" }), id);
                assert.equal(busy.error && busy.error.code, "FailedToAcquireLock", "our heartbeats keep the lock ours");
                // Our heartbeats rotate the guid the original waits on: its first put fails, and
                // its retry reads the released item.
                const waiting = acquireOriginal(originalFailOpen(engine, { retryCount: 1, owner: "original" }), id);
                await sleep(300);
                await held.release();
                const { error, lock } = await waiting;
                assert.equal(error, undefined);
                assert.equal(lock.fencingToken, held.fencingToken + 1, "the original continues our tokens, from the floor TTL uses");
                const originals = await engine.getItem("locks", key);
                assert.deepEqual(Object.keys(originals).sort(), ["fencingToken", "guid", "id", "leaseDurationMs", "owner"],
                    "the original's full put leaves its own item, without our attributes");
                assert.equal((await ours.getLock(id)).owner, "original");
                assert.equal(await releaseOriginal(lock), undefined);
                const beforeAgain = Math.floor(Date.now() / 1000);
                const again = await ours.acquireLock(id, { data: "back" });
                assert.equal(again.fencingToken, lock.fencingToken + 1);
                const back = await engine.getItem("locks", key);
                assert.equal(back.lockData.S, "back");
                // Whole seconds: the write's second (or a later one), plus the lease rounded up, plus ttlSeconds.
                assert.ok(Number(back.expires.N) >= beforeAgain + 1 + 3600, `TTL written again by our next write: ${back.expires.N}`);
                await again.release();
            }
        );

        it("FailClosed with TTL and data: each library keeps the other out and takes the lock after its release", async () =>
            {
                const id = uniqueId("mixed-ttl-closed");
                const key = { id: { S: id } };
                const original = retryCount => new Original.FailClosed({
                    dynamodb: documentClient(engine), lockTable: "fclocks", partitionKey: "id", acquirePeriodMs: 100, retryCount, owner: "original",
                });
                const ours = retryCount => failClosed(engine, {
                    lockTable: "fclocks", acquirePeriodMs: 100, retryCount, owner: "native", ttlAttribute: "expires", ttlSeconds: 3600,
                });
                const held = await ours(0).acquireLock(id, { data: "ours" });
                assert.deepEqual(Object.keys(await engine.getItem("fclocks", key)).sort(), ["expires", "guid", "id", "lockData", "lockWrittenUnixMs", "owner"]);
                const refused = await acquireOriginal(original(0), id);
                assert.equal(refused.error && refused.error.code, "FailedToAcquireLock");
                await held.release();
                const theirs = await acquireOriginal(original(0), id);
                assert.equal(theirs.error, undefined);
                assert.deepEqual(Object.keys(await engine.getItem("fclocks", key)).sort(), ["guid", "id", "owner"]);
                await assert.rejects(ours(0).acquireLock(id), { code: "FailedToAcquireLock" });
                assert.equal(await releaseOriginal(theirs.lock), undefined);
                const back = await ours(0).acquireLock(id);
                assert.ok((await engine.getItem("fclocks", key)).expires);
                await back.release();
                assert.equal(await engine.getItem("fclocks", key), undefined);
            }
        );
    });
}
