"use strict";

// Histories across processes, checked offline (__test__/support/history.js): three worker
// processes (support/history-worker.js) take two lock ids in turn through the fault proxy under
// each of its profiles (throttling, latency, requests dropped before or after they apply), and
// with a worker killed (SIGKILL) while it holds a lock. Every critical section's process, lock
// id, token, wall-clock interval (from the grant reaching the caller to the release call),
// heartbeat events and release outcome is recorded; the checker then finds no overlapping holds,
// no token out of grant order and no reported release left invisible.
//
//   node --test __test__/history.test.js                (both engines)
//   DDB_ENGINES=dynalite node --test __test__/history.test.js

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, uniqueId, sleep } = require("./helpers.js");
const { startProxy } = require("./support/proxy.js");
const { runScript } = require("./support/spawn.js");
const { checkHistory, summarizeItem } = require("./support/history.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const { mulberry32 } = require("./support/random.js");

describe("history checker", () =>
{
    const s = (process, id, token, start, end, extra) => Object.assign({ process, id, token, start, end, releaseOk: true, after: { heldBySelf: false } }, extra);

    it("accepts a sound history", () =>
    {
        const h = [s("a", "x", 1, 0, 10), s("b", "x", 2, 10, 20), s("c", "y", 1, 5, 30), s("a", "x", 3, 21, 25)];
        assert.deepEqual(checkHistory("FailOpen", h, { finals: { x: { released: true, token: 3 } } }), []);
    });

    it("rejects overlapping holds beyond the clock bound, and allows them within it", () =>
    {
        const h = [s("a", "x", 1, 0, 10), s("b", "x", 2, 7, 20)];
        const v = checkHistory("FailOpen", h);
        assert.equal(v.length, 1);
        assert.match(v[0], /overlapping holds of x \(3 ms\)/);
        assert.deepEqual(checkHistory("FailOpen", [s("a", "x", 1, 0, 10), s("b", "x", 2, 9, 20)]), [], "1 ms is within the bound");
        assert.equal(checkHistory("FailOpen", [s("a", "x", 1, 0, 10), s("b", "x", 2, 9, 20)], { clockBoundMs: 0 }).length, 1);
    });

    it("rejects a hold that outlives a lost lock only up to the loss", () =>
    {
        const h = [s("a", "x", 1, 0, 100, { lostAt: 40 }), s("b", "x", 2, 50, 60)];
        assert.deepEqual(checkHistory("FailOpen", h), [], "the lease ended at lostAt");
        assert.equal(checkHistory("FailOpen", [s("a", "x", 1, 0, 100, { lostAt: 55 }), s("b", "x", 2, 50, 60)]).length, 1);
    });

    it("rejects tokens that do not rise in grant order", () =>
    {
        const v = checkHistory("FailOpen", [s("a", "x", 2, 0, 10), s("b", "x", 1, 11, 20)]);
        assert.equal(v.length, 1);
        assert.match(v[0], /tokens of x do not rise/);
        assert.deepEqual(checkHistory("FailClosed", [s("a", "x", null, 0, 10), s("b", "x", null, 11, 20)]), [], "FailClosed has no tokens");
    });

    it("rejects a successful release that left the lock held", () =>
    {
        const v = checkHistory("FailOpen", [s("a", "x", 1, 0, 10, { after: { heldBySelf: true } })]);
        assert.match(v[0], /reported success, and the item read after it is still its own/);
        const f = checkHistory("FailOpen", [s("a", "x", 4, 0, 10)], { finals: { x: { released: false, token: 4 } } });
        assert.match(f[0], /final read shows it still held/);
        const c = checkHistory("FailClosed", [s("a", "x", null, 0, 10, { guid: "ab" })], { finals: { x: { guid: "ab" } } });
        assert.match(c[0], /final read shows it still held/);
        assert.deepEqual(checkHistory("FailOpen", [s("a", "x", 4, 0, 10, { releaseOk: false, after: { heldBySelf: true } })]), [],
            "a release that reported failure promises nothing");
    });

    it("holds a killed FailClosed holder's lock for ever, a killed FailOpen holder's until it died", () =>
    {
        const killed = s("a", "x", null, 0, 10, { crashed: true, releaseOk: undefined });
        assert.equal(checkHistory("FailClosed", [killed, s("b", "x", null, 5000, 5010)]).length, 1);
        const killedOpen = s("a", "x", 1, 0, 10, { crashed: true, releaseOk: undefined });
        assert.deepEqual(checkHistory("FailOpen", [killedOpen, s("b", "x", 2, 1000, 1010)]), []);
    });
});

const PROFILES = [
    { name: "10% throttling", faults: { throttleRate: 0.1 }, injected: "throttled", seed: 11 },
    { name: "100 ms latency", faults: { latencyMs: 100 }, injected: "delayed", seed: 12 },
    { name: "5% dropped before they apply", faults: { dropBeforeRate: 0.05 }, injected: "droppedBefore", seed: 13 },
    { name: "5% dropped after they apply", faults: { dropAfterRate: 0.05 }, injected: "droppedAfter", seed: 14 },
];

const WORKERS = 3;

for (const engineName of selectedEngines())
{
    describe(`histories on ${engineName}`, { timeout: 300000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("hlocks", { partitionKey: "id" });
                await engine.createTable("hfclocks", { partitionKey: "id" });
            }
        );
        after(async () => engine && engine.stop());

        const TABLE = { FailOpen: "hlocks", FailClosed: "hfclocks" };
        const CONFIG = {
            FailOpen: { lockTable: "hlocks", partitionKey: "id", leaseDurationMs: 1200, heartbeatPeriodMs: 150, requestTimeoutMs: 600, rereadPeriodMs: 50, retryCount: 60 },
            FailClosed: { lockTable: "hfclocks", partitionKey: "id", acquirePeriodMs: 30, retryCount: 400, requestTimeoutMs: 600 },
        };

        // Runs the workers; `kill` (optional): the first worker to be granted its lock number
        // `afterGrants` (from 0) is SIGKILLed while it holds it. Returns the history and what
        // happened.
        async function record(proxy, kind, { iterations, config, kill })
        {
            const ids = [uniqueId(`h-${kind}-a`), uniqueId(`h-${kind}-b`)];
            const procs = [];
            for (let w = 0; w < WORKERS; w++)
            {
                procs.push(runScript("history-worker.js",
                    {
                        name: `p${w + 1}`,
                        kind,
                        config: Object.assign({}, CONFIG[kind], config),
                        lockEndpoint: proxy.endpoint,
                        engine: { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials },
                        ids,
                        lockTable: TABLE[kind],
                        iterations,
                        holdMs: [20, 400],
                        pauseMs: [0, 40],
                        softDeadlineMs: 60000,
                    }, { timeoutMs: 120000 }));
            }
            let killed = null;
            try
            {
                await Promise.all(procs.map(p => p.next(l => l.ready || l.error || l.unparsed, 30000)));
                procs.forEach(p => p.send("go\n"));
                let victim;
                if (kill)
                {
                    // A worker may be refused every time (its waits are bounded): whichever
                    // gets that far first is the victim. A wait ends when its worker is done.
                    const nth = p => l => (l.acquired && p.lines.filter(x => x.acquired).indexOf(l) === kill.afterGrants) || l.done || l.error;
                    const grant = await Promise.any(procs.map(p => p.next(nth(p), 60000).then(l => l.acquired ? l : Promise.reject(new Error(`${JSON.stringify(l)}`)))));
                    victim = procs.find(p => p.lines.includes(grant));
                    await sleep(10);
                    victim.kill();
                    const exit = await victim.exited;
                    killed = { grant, at: Date.now(), signal: exit.signal, process: grant.process };
                }
                await Promise.all(procs.filter(p => p !== victim).map(p => p.next(l => l.done || l.error, 120000)));
                await Promise.all(procs.map(p => p.exited));
            }
            finally
            {
                procs.forEach(p => p.kill());
            }
            const lines = procs.flatMap(p => p.lines);
            const sections = lines.filter(l => l.section).map(l => Object.assign({}, l));
            if (killed)
            {
                // The victim's last grant has no section: it held the lock until it died.
                const g = killed.grant;
                assert.ok(!sections.some(x => x.process === g.process && x.i === g.i), "the victim did not get to release");
                sections.push({ process: g.process, id: g.id, token: g.token, guid: g.guid, start: g.start, end: killed.at, crashed: true });
            }
            const finals = {};
            for (const id of ids)
            {
                finals[id] = summarizeItem(await engine.getItem(TABLE[kind], { id: { S: id } }));
            }
            return {
                ids,
                killed,
                sections,
                finals,
                granted: lines.filter(l => l.acquired),
                failed: lines.filter(l => l.failed),
                errors: lines.filter(l => l.error || l.unparsed),
                dones: lines.filter(l => l.done),
            };
        }

        async function withProxy(profile, fn)
        {
            const proxy = await startProxy({ target: engine.endpoint });
            try
            {
                if (profile)
                {
                    proxy.setFaults(Object.assign({ random: mulberry32(profile.seed) }, profile.faults));
                }
                return await fn(proxy);
            }
            finally
            {
                proxy.clearFaults();
                await proxy.close();
            }
        }

        function summary(run, proxy)
        {
            const hb = run.sections.flatMap(x => x.errors || []);
            return `${run.sections.length} critical sections, ${run.failed.length} failed acquisitions, ` +
                `${hb.length} heartbeat errors, ${run.sections.filter(x => x.lostAt).length} lost; faults ${JSON.stringify(proxy.faultCounts)}`;
        }

        for (const kind of ["FailOpen", "FailClosed"])
        {
            for (const profile of PROFILES)
            {
                it(`${kind} under ${profile.name}: no overlapping holds, rising tokens, every release visible`, async t =>
                    {
                        const iterations = 6;
                        await withProxy(profile, async proxy =>
                            {
                                const run = await record(proxy, kind, { iterations });
                                t.diagnostic(summary(run, proxy));
                                assert.deepEqual(run.errors, [], "no worker crashed");
                                assert.equal(run.dones.length, WORKERS, "every worker finished");
                                assert.deepEqual(run.failed, [], "every acquisition succeeded under these faults");
                                assert.equal(run.sections.length, WORKERS * iterations, "one critical section per iteration");
                                assert.equal(run.granted.length, run.sections.length, "every grant was released");
                                assert.deepEqual(checkHistory(kind, run.sections, { finals: run.finals }), []);
                                assert.ok(run.sections.every(x => x.releaseOk), `every release reported success: ${JSON.stringify(run.sections.filter(x => !x.releaseOk))}`);
                                if (kind === "FailOpen")
                                {
                                    assert.ok(run.ids.every(id => run.finals[id] && run.finals[id].released), "both locks end released");
                                }
                                else
                                {
                                    assert.ok(run.ids.every(id => run.finals[id] === null), "no FailClosed item is left");
                                }
                                assert.ok(proxy.faultCounts[profile.injected] > 0, `faults were injected (${JSON.stringify(proxy.faultCounts)})`);
                            });
                    }
                );
            }
        }

        it("FailOpen with a worker killed mid-hold: its lock is taken over after the lease, with a larger token", async t =>
            {
                await withProxy(PROFILES[0], async proxy =>
                    {
                        const run = await record(proxy, "FailOpen", { iterations: 6, kill: { afterGrants: 2 } });
                        t.diagnostic(`${summary(run, proxy)}; killed ${JSON.stringify(run.killed)}`);
                        assert.equal(run.killed.signal, "SIGKILL");
                        assert.deepEqual(run.errors, []);
                        assert.deepEqual(checkHistory("FailOpen", run.sections, { finals: run.finals }), []);
                        const dead = run.killed.grant;
                        let heirs = run.sections.filter(x => x.id === dead.id && x.start > run.killed.at);
                        if (heirs.length === 0)
                        {
                            // The survivors were done before they came back to the dead holder's
                            // id: a new client takes it here.
                            const client = new DynamoDBLockClient.FailOpen(Object.assign({}, CONFIG.FailOpen,
                                { dynamodb: { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials } }));
                            const lock = await client.acquireLock(dead.id);
                            heirs = [{ start: Date.now(), token: lock.fencingToken }];
                            await lock.release();
                        }
                        assert.ok(heirs.length > 0, "someone took the dead holder's lock");
                        const first = heirs.sort((a, b) => a.start - b.start)[0];
                        assert.ok(first.token > dead.token, `larger token (${first.token} > ${dead.token})`);
                        // The heir waits a lease from when it saw the dead holder's last write, which
                        // lands shortly before its grant reaches the holder.
                        assert.ok(first.start - dead.start >= CONFIG.FailOpen.leaseDurationMs - 100,
                            `taken over no sooner than a lease after the dead holder's grant (${first.start - dead.start} ms)`);
                    });
            }
        );

        it("FailClosed with a worker killed mid-hold: its lock is never granted again", async t =>
            {
                await withProxy(PROFILES[0], async proxy =>
                    {
                        const run = await record(proxy, "FailClosed", { iterations: 6, kill: { afterGrants: 2 }, config: { retryCount: 10 } });
                        t.diagnostic(`${summary(run, proxy)}; killed ${JSON.stringify(run.killed)}`);
                        assert.equal(run.killed.signal, "SIGKILL");
                        assert.deepEqual(run.errors, []);
                        // The checker holds the dead holder's interval open for ever: any later grant would overlap.
                        assert.deepEqual(checkHistory("FailClosed", run.sections, { finals: run.finals }), []);
                        const dead = run.killed.grant;
                        assert.ok(run.failed.some(f => f.id === dead.id && f.code === "FailedToAcquireLock"), "others were refused the dead holder's lock");
                        assert.equal(run.finals[dead.id] && run.finals[dead.id].owner, dead.process, "the item still names the dead holder");
                    });
            }
        );
    });
}
