"use strict";

// Fault injection: the library talks to a real local engine through __test__/support/proxy.js,
// which throttles, drops (before or after the engine applied a request), delays or hangs
// requests. Mutual exclusion, fencing tokens, releases and heartbeats must hold up.
//
//   node --test __test__/faults.test.js                 (both engines)
//   DDB_ENGINES=dynalite node --test __test__/faults.test.js

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { DynamoDBLockClient, acquireCb, releaseCb, uniqueId, sleep, until } = require("./helpers.js");
const { startProxy } = require("./support/proxy.js");
const { runScript, runTogether } = require("./support/spawn.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

// A seeded PRNG, so that the proxy's random faults are reproducible.
const { mulberry32 } = require("./support/random.js");

function withTimeout(promise, ms, what)
{
    let timer;
    return Promise.race([
        promise,
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms))),
    ]).finally(() => clearTimeout(timer));
}

// Starts contention workers (fault-worker.js), lets them go at once, and returns what they did.
async function contention(engine, proxy, { kind, config, lockTable, workers, iterations, backgroundLocks, pauseMs, softDeadlineMs, hardTimeoutMs })
{
    const id = uniqueId(`faults-${kind}`);
    const counterId = uniqueId("counter");
    const procs = [];
    for (let w = 0; w < workers; w++)
    {
        procs.push(runScript("fault-worker.js",
            {
                name: `w${w + 1}`,
                kind,
                config,
                lockEndpoint: proxy.endpoint,
                engine: { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials },
                id,
                lockTable,
                counterTable: "counters",
                counterId,
                iterations,
                criticalSleepMs: 30,
                pauseMs,
                softDeadlineMs,
                backgroundLocks,
            }, { timeoutMs: hardTimeoutMs }));
    }
    try
    {
        const { ms, exits, lines } = await runTogether(procs, hardTimeoutMs);
        return {
            id,
            counterId,
            ms,
            exits,
            crashes: lines.filter(l => l.error || l.unparsed),
            acquireErrors: lines.filter(l => l.acquireError),
            dones: lines.filter(l => l.done),
            records: lines.filter(l => l.i !== undefined && l.acquiredAt !== undefined),
        };
    }
    finally
    {
        procs.forEach(p => p.kill());
    }
}

// Every property a run under mild faults must have.
function checkContention(run, { kind, counterItem, lockItem, backgroundItems, workers, iterations })
{
    assert.deepEqual(run.crashes, [], "no worker crashed");
    assert.deepEqual(run.exits.map(e => e.code), Array(workers).fill(0), "every worker exits cleanly");
    assert.equal(run.dones.length, workers, "every worker finishes");
    for (const d of run.dones)
    {
        assert.equal(d.stoppedEarly, false, `${d.worker} completed its ${iterations} iterations in time (${JSON.stringify(run.dones)}; acquisition errors: ${JSON.stringify(run.acquireErrors)})`);
    }
    const records = run.records;
    const reported = run.dones.reduce((n, d) => n + d.acquisitions, 0);
    assert.equal(records.length, reported, "one record per reported acquisition");
    assert.equal(reported, workers * iterations, "every iteration acquired the lock once");

    // No lease lapsed while its holder believed it held the lock: no "lost", and no critical
    // section that went on after a "lost".
    const lost = records.filter(r => r.lostAt !== null || r.lost);
    const continuedAfterLost = records.filter(r => r.lostAt !== null && r.wrote && r.lostAt <= r.putStart);
    assert.deepEqual(continuedAfterLost, [], "no critical section wrote after its lock was reported lost");
    assert.deepEqual(lost.map(r => ({ worker: r.worker, i: r.i, lostCode: r.lostCode, errors: r.errors })), [],
        "no contended lock was lost under mild faults");
    const bgLost = run.dones.flatMap(d => d.background.filter(b => b.lostAt !== null).map(b => Object.assign({ worker: d.worker }, b)));
    assert.deepEqual(bgLost, [], "no background lock was lost under mild faults");
    const bgReleaseErrors = run.dones.flatMap(d => d.background.filter(b => b.releaseError));
    assert.deepEqual(bgReleaseErrors, [], "every background lock was released");

    // The counter: every acquisition wrote once, and no update was lost.
    assert.deepEqual(records.filter(r => r.counterError || r.aborted), [], "every critical section ran to its end");
    const wrote = records.filter(r => r.wrote).length;
    assert.ok(counterItem, "the counter exists");
    assert.equal(Number(counterItem.count.N), wrote, "final counter == number of completed critical sections");
    assert.equal(wrote, reported, "final counter == number of acquisitions the workers reported");
    const byRead = records.slice().sort((a, b) => a.read - b.read);
    assert.deepEqual(byRead.map(r => r.read), byRead.map((_, k) => k), "each critical section saw the previous one's write");

    // No two holders at once: the windows [acquired, critical section end] never overlap.
    const windows = records.slice().sort((a, b) => a.acquiredAt - b.acquiredAt);
    for (let a = 0; a < windows.length; a++)
    {
        for (let b = a + 1; b < windows.length; b++)
        {
            const x = windows[a];
            const y = windows[b];
            assert.ok(x.end <= y.acquiredAt || y.end <= x.acquiredAt,
                `lock held twice at once: ${x.worker}#${x.i} [${x.acquiredAt}, ${x.end}] and ${y.worker}#${y.i} [${y.acquiredAt}, ${y.end}]`);
        }
    }

    // Fencing tokens strictly increase in acquisition order.
    if (kind === "FailOpen")
    {
        for (let k = 1; k < windows.length; k++)
        {
            assert.ok(windows[k].token > windows[k - 1].token,
                `fencing tokens rise in acquisition order: ${windows.map(r => `${r.worker}:${r.token}`).join(" ")}`);
        }
    }

    // Each release that reported success left the item released (or in another holder's hands)
    // right after it resolved.
    assert.deepEqual(records.filter(r => r.releaseOk && !r.afterRelease.ok).map(r => ({ worker: r.worker, i: r.i, token: r.token, afterRelease: r.afterRelease })), [],
        "a successful release left the item released or owned by someone else");

    // No orphans once everyone is done.
    if (kind === "FailOpen")
    {
        assert.ok(lockItem, "the FailOpen item stays after release");
        assert.equal(lockItem.leaseDurationMs.N, "1", "the lock is released at the end");
        assert.equal(Number(lockItem.fencingToken.N), Math.max(...records.map(r => r.token)), "the item carries the last token");
        for (const item of backgroundItems)
        {
            assert.equal(item && item.leaseDurationMs.N, "1", "every background lock is released at the end");
        }
    }
    else
    {
        assert.equal(lockItem, undefined, "no FailClosed item is left behind");
    }

    // Last: under these faults every release must also REPORT success (a release whose write
    // landed is a success, whatever happened to its answer).
    assert.deepEqual(records.filter(r => !r.releaseOk).map(r => ({ worker: r.worker, i: r.i, releaseError: r.releaseError, original: r.releaseOriginal, afterRelease: r.afterRelease })), [],
        "every release succeeded");
    return windows;
}

for (const engineName of selectedEngines())
{
    describe(`faults on ${engineName}`, { timeout: 240000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                await engine.createTable("fclocks", { partitionKey: "id" });
                await engine.createTable("counters", { partitionKey: "id" });
            }
        );
        after(async () => engine && engine.stop());

        const dynamodb = endpoint => ({ endpoint, region: engine.region, credentials: Object.assign({}, engine.credentials) });
        const failOpen = (endpoint, extra) => new DynamoDBLockClient.FailOpen(Object.assign(
            { dynamodb: dynamodb(endpoint), lockTable: "locks", partitionKey: "id", leaseDurationMs: 2000, requestTimeoutMs: 1000 }, extra));
        const failClosed = (endpoint, extra) => new DynamoDBLockClient.FailClosed(Object.assign(
            { dynamodb: dynamodb(endpoint), lockTable: "fclocks", partitionKey: "id", acquirePeriodMs: 50, requestTimeoutMs: 1000 }, extra));
        const getItem = (table, id) => engine.getItem(table, { id: { S: id } });

        async function withProxy(fn)
        {
            const proxy = await startProxy({ target: engine.endpoint });
            try
            {
                return await fn(proxy);
            }
            finally
            {
                proxy.onRequest = null;
                proxy.clearFaults();
                await proxy.close();
            }
        }

        // 1. Contention under faults.
        const OPEN_VARIANTS = [
            { name: "10% throttling", faults: { throttleRate: 0.1 }, injected: "throttled", seed: 101, iterations: 15 },
            { name: "5% dropped after apply", faults: { dropAfterRate: 0.05 }, injected: "droppedAfter", seed: 202, iterations: 15 },
            // Slow: every request takes 200 ms more, so fewer iterations.
            { name: "200 ms latency", faults: { latencyMs: 200 }, injected: "delayed", seed: 303, iterations: 5 },
        ];
        const WORKERS = 3;
        for (const variant of OPEN_VARIANTS)
        {
            const ITERATIONS = variant.iterations;
            it(`FailOpen contention under ${variant.name}: exclusion, counter, rising tokens, clean releases, no orphan`, async t =>
                {
                    await withProxy(async proxy =>
                        {
                            proxy.setFaults(Object.assign({ random: mulberry32(variant.seed) }, variant.faults));
                            const run = await contention(engine, proxy,
                                {
                                    kind: "FailOpen",
                                    lockTable: "locks",
                                    config: { lockTable: "locks", partitionKey: "id", leaseDurationMs: 2500, heartbeatPeriodMs: 300, requestTimeoutMs: 1000, rereadPeriodMs: 100, retryCount: 40 },
                                    workers: WORKERS,
                                    iterations: ITERATIONS,
                                    backgroundLocks: 2,
                                    pauseMs: [10, 60],
                                    softDeadlineMs: 45000,
                                    hardTimeoutMs: 70000,
                                });
                            proxy.clearFaults();
                            const counterItem = await engine.getItem("counters", { id: { S: run.counterId } });
                            const lockItem = await getItem("locks", run.id);
                            const backgroundItems = [];
                            for (const d of run.dones)
                            {
                                for (const b of d.background)
                                {
                                    backgroundItems.push(await getItem("locks", b.id));
                                }
                            }
                            const heartbeatErrors = run.records.flatMap(r => r.errors)
                                .concat(run.dones.flatMap(d => d.background.flatMap(b => b.errors)));
                            t.diagnostic(`${run.records.length} acquisitions in ${run.ms} ms; faults ${JSON.stringify(proxy.faultCounts)}; ` +
                                `requests ${JSON.stringify(proxy.counts)}; heartbeat errors ${heartbeatErrors.length} ` +
                                `(${[...new Set(heartbeatErrors)].join(", ")}); acquisition errors ${run.acquireErrors.length}`);
                            checkContention(run, { kind: "FailOpen", counterItem, lockItem, backgroundItems, workers: WORKERS, iterations: ITERATIONS });
                            assert.ok(proxy.faultCounts[variant.injected] > 0, `faults were injected (${JSON.stringify(proxy.faultCounts)})`);
                        });
                }
            );
        }

        it("FailClosed contention under 5% dropped after apply: counter correct, no orphan", async t =>
            {
                const ITERATIONS = 20;
                await withProxy(async proxy =>
                    {
                        proxy.setFaults({ dropAfterRate: 0.05, random: mulberry32(404) });
                        const run = await contention(engine, proxy,
                            {
                                kind: "FailClosed",
                                lockTable: "fclocks",
                                config: { lockTable: "fclocks", partitionKey: "id", acquirePeriodMs: 30, retryCount: 300, requestTimeoutMs: 1000 },
                                workers: WORKERS,
                                iterations: ITERATIONS,
                                backgroundLocks: 0,
                                pauseMs: [10, 60],
                                softDeadlineMs: 45000,
                                hardTimeoutMs: 70000,
                            });
                        proxy.clearFaults();
                        const counterItem = await engine.getItem("counters", { id: { S: run.counterId } });
                        const lockItem = await getItem("fclocks", run.id);
                        t.diagnostic(`${run.records.length} acquisitions in ${run.ms} ms; faults ${JSON.stringify(proxy.faultCounts)}; ` +
                            `requests ${JSON.stringify(proxy.counts)}; acquisition errors ${run.acquireErrors.length}`);
                        checkContention(run, { kind: "FailClosed", counterItem, lockItem, backgroundItems: [], workers: WORKERS, iterations: ITERATIONS });
                        assert.ok(proxy.faultCounts.droppedAfter > 0, `faults were injected (${JSON.stringify(proxy.faultCounts)})`);
                    });
            }
        );

        // 2. release() while a heartbeat is delayed in flight.
        it("release() while a heartbeat is delayed in flight resolves, releases, and no heartbeat follows (10 times)", async t =>
            {
                await withProxy(async proxy =>
                    {
                        const random = mulberry32(505);
                        const client = failOpen(proxy.endpoint, { leaseDurationMs: 2000, heartbeatPeriodMs: 150 });
                        const waits = [];
                        for (let rep = 0; rep < 10; rep++)
                        {
                            const id = uniqueId("inflight");
                            const lock = await client.acquireLock(id);
                            const events = [];
                            lock.on("error", e => events.push(`error:${e.code}`));
                            lock.on("lost", e => events.push(`lost:${e.code}`));
                            // The next UpdateItem is this lock's first heartbeat: hold it 300 ms.
                            const applied = await withTimeout(proxy.nextFault({ delayMs: 300 }, { operation: "UpdateItem" }), 3000, "the first heartbeat");
                            const arrivedAt = Date.now();
                            assert.match(applied.body.UpdateExpression, /:new/, "the delayed request is a heartbeat");
                            const pause = Math.floor(random() * 200);
                            await sleep(pause);
                            const before = proxy.counts.UpdateItem;
                            await withTimeout(lock.release(), 5000, "release()");
                            const resolvedAt = Date.now();
                            const atResolve = proxy.counts.UpdateItem;
                            waits.push(resolvedAt - arrivedAt);
                            assert.ok(resolvedAt - arrivedAt >= 280,
                                `rep ${rep}: the release waited for the heartbeat in flight (${resolvedAt - arrivedAt} ms after it was sent, release called at +${pause} ms)`);
                            assert.equal(atResolve - before, 1, `rep ${rep}: one release request`);
                            const item = await getItem("locks", id);
                            assert.equal(item.leaseDurationMs.N, "1", `rep ${rep}: the item is released (release called ${pause} ms into the heartbeat)`);
                            await sleep(450);
                            assert.equal(proxy.counts.UpdateItem, atResolve, `rep ${rep}: no UpdateItem after the release resolved`);
                            assert.equal((await getItem("locks", id)).leaseDurationMs.N, "1", `rep ${rep}: still released`);
                            assert.deepEqual(events, [], `rep ${rep}: no heartbeat error, not lost`);
                        }
                        t.diagnostic(`release resolved ${waits.join(", ")} ms after the delayed heartbeat was sent`);
                    });
            }
        );

        // 3. Heartbeats survive transient faults.
        it("heartbeats survive 3 s of 50% throttled UpdateItem: errors, never lost, and nobody else gets the lock", async t =>
            {
                await withProxy(async proxy =>
                    {
                        const id = uniqueId("survive");
                        const lock = await failOpen(proxy.endpoint, { leaseDurationMs: 2000, heartbeatPeriodMs: 300 }).acquireLock(id);
                        const errors = [];
                        const dangers = [];
                        const lost = [];
                        lock.on("error", e => errors.push(e.code));
                        lock.on("danger", d => dangers.push(d.remainingMs));
                        lock.on("lost", e => lost.push(e.code));
                        const faultStart = Date.now();
                        proxy.setFaults({ throttleRate: 0.5, operations: ["UpdateItem"], random: mulberry32(606) });
                        // Another client, straight to the engine (not throttled), with retryCount 0.
                        const contender = failOpen(engine.endpoint, { leaseDurationMs: 2000, retryCount: 0 });
                        const started = Date.now();
                        const { error, lock: stolen } = await acquireCb(contender, id);
                        const took = Date.now() - started;
                        if (stolen)
                        {
                            await stolen.release();
                        }
                        assert.equal(stolen, undefined, "the contender did not get the lock");
                        assert.equal(error.code, "FailedToAcquireLock");
                        assert.ok(took >= 1900, `the contender waited out a lease (${took} ms)`);
                        await sleep(Math.max(0, 3000 - (Date.now() - faultStart)));
                        proxy.clearFaults();
                        const throttled = proxy.faultCounts.throttled;
                        // Heartbeats go on after the faults end.
                        const g1 = Buffer.from((await getItem("locks", id)).guid.B).toString("hex");
                        await sleep(700);
                        const g2 = Buffer.from((await getItem("locks", id)).guid.B).toString("hex");
                        t.diagnostic(`${throttled} throttled heartbeats, ${errors.length} error events, dangers ${JSON.stringify(dangers)}`);
                        assert.ok(throttled > 0, "heartbeats were throttled");
                        assert.ok(errors.length > 0, "each failed heartbeat attempt emitted \"error\"");
                        assert.deepEqual([...new Set(errors)], ["ProvisionedThroughputExceededException"]);
                        assert.deepEqual(lost, [], "never lost");
                        assert.equal(lock.lost, false);
                        assert.equal(lock.signal.aborted, false);
                        assert.notEqual(g1, g2, "heartbeats resumed after the faults ended");
                        await lock.release();
                        assert.equal((await getItem("locks", id)).leaseDurationMs.N, "1");
                    });
            }
        );

        // 4. A dropped-after-apply FailClosed acquisition is a lock held.
        it("a signature refused for clock skew is retried with the service's clock from its Date header", async () =>
            {
                await withProxy(async proxy =>
                    {
                        const id = uniqueId("skew");
                        const ahead = 10 * 60 * 1000;
                        const dates = [];
                        proxy.onRequest = (op, body, info) =>
                        {
                            if (op !== "UpdateItem")
                            {
                                return undefined;
                            }
                            dates.push(info.headers["x-amz-date"]);
                            if (dates.length > 1)
                            {
                                return undefined;
                            }
                            return {
                                respond: {
                                    status: 400,
                                    type: "InvalidSignatureException",
                                    message: "Signature expired: the request time is now earlier than the service's time - 5 min.",
                                    headers: { date: new Date(Date.now() + ahead).toUTCString() },
                                },
                            };
                        };
                        const client = failOpen(proxy.endpoint, { owner: "skewed" });
                        const lock = await withTimeout(client.acquireLock(id), 10000, "acquireLock");
                        assert.equal(proxy.faultCounts.responded, 1);
                        assert.equal(dates.length, 2, "one refused request, one retry");
                        const parse = d => Date.UTC(+d.slice(0, 4), +d.slice(4, 6) - 1, +d.slice(6, 8), +d.slice(9, 11), +d.slice(11, 13), +d.slice(13, 15));
                        const moved = parse(dates[1]) - parse(dates[0]);
                        assert.ok(moved > ahead - 5000 && moved < ahead + 5000, `the retry was signed ${moved} ms later`);
                        assert.equal((await getItem("locks", id)).owner.S, "skewed");
                        await lock.release();
                    });
            }
        );

        it("a signature refused while the clocks agree is reported, not retried as a skew", async () =>
            {
                await withProxy(async proxy =>
                    {
                        proxy.onRequest = op => (op === "PutItem"
                            ? { respond: { status: 400, type: "InvalidSignatureException", message: "The request signature we calculated does not match", headers: { date: new Date().toUTCString() } } }
                            : undefined);
                        const client = failClosed(proxy.endpoint, { retryCount: 0 });
                        const error = await client.acquireLock(uniqueId("badsig")).then(() => null, e => e);
                        assert.ok(error, "the acquisition failed");
                        assert.equal(error.code, "InvalidSignatureException");
                        assert.equal(proxy.counts.PutItem, 1, "not retried");
                    });
            }
        );

        it("FailClosed: an acquisition whose PutItem landed but whose answer was dropped is a lock held, not an orphan", async () =>
            {
                await withProxy(async proxy =>
                    {
                        const id = uniqueId("fc-drop");
                        const applied = proxy.nextFault("dropAfter", { operation: "PutItem" });
                        const client = failClosed(proxy.endpoint, { owner: "dropped-answer", retryCount: 0 });
                        const lock = await withTimeout(client.acquireLock(id), 10000, "acquireLock");
                        await applied;
                        assert.equal(proxy.faultCounts.droppedAfter, 1, "the first PutItem's answer was dropped");
                        const item = await getItem("fclocks", id);
                        assert.equal(item.owner.S, "dropped-answer", "the lock is held by us");
                        await lock.release();
                        assert.equal(await getItem("fclocks", id), undefined, "release deleted the item");
                    });
            }
        );

        it("FailClosed: an acquisition whose PutItem landed and could not be read back is undone in the background, and close() waits for it", async () =>
            {
                await withProxy(async proxy =>
                    {
                        const id = uniqueId("fc-undo");
                        let puts = 0;
                        let deletes = 0;
                        proxy.onRequest = async op =>
                        {
                            switch (op)
                            {
                                case "PutItem":
                                    // The first write lands unseen; its retries and the read-backs are lost.
                                    puts++;
                                    return puts === 1 ? "dropAfter" : "dropBefore";
                                case "GetItem":
                                    return "dropBefore";
                                case "DeleteItem":
                                    // The undo's first attempt is lost too; a later one lands.
                                    deletes++;
                                    return deletes === 1 ? "dropBefore" : undefined;
                                default:
                                    return undefined;
                            }
                        };
                        const client = failClosed(proxy.endpoint, { owner: "unread", retryCount: 0 });
                        const error = await withTimeout(client.acquireLock(id), 30000, "acquireLock").then(() => undefined, e => e);
                        assert.ok(error, "the acquisition failed");
                        assert.equal(error.code, "NetworkingError");
                        assert.ok(puts >= 2, `the write was tried again (${puts})`);
                        await withTimeout(client.close(), 30000, "close");
                        assert.ok(deletes >= 2, `the undo's lost attempt was tried again (${deletes})`);
                        assert.equal(await getItem("fclocks", id), undefined, "close() resolved once the landed write was undone");
                    });
            }
        );

        it("a release whose write landed but whose answer was dropped succeeds, even if another client took the lock before the retry", async () =>
            {
                await withProxy(async proxy =>
                    {
                        // FailOpen (no heartbeats, so the only UpdateItem is the release).
                        const openId = uniqueId("fo-rel-drop");
                        const mine = await failOpen(proxy.endpoint, { owner: "first" }).acquireLock(openId);
                        const other = failOpen(engine.endpoint, { owner: "second", retryCount: 0 });
                        let otherLock;
                        let updates = 0;
                        proxy.onRequest = async op =>
                        {
                            if (op !== "UpdateItem")
                            {
                                return undefined;
                            }
                            updates++;
                            if (updates === 1)
                            {
                                return "dropAfter";
                            }
                            if (updates === 2)
                            {
                                otherLock = await other.acquireLock(openId);
                            }
                            return undefined;
                        };
                        let openError;
                        await withTimeout(mine.release(), 10000, "FailOpen release").catch(e => (openError = e));
                        proxy.onRequest = null;
                        assert.equal(openError, undefined, `FailOpen: the release that landed succeeds (got ${openError && openError.code})`);
                        assert.ok(otherLock, "the other client took the released lock");
                        const openItem = await getItem("locks", openId);
                        assert.equal(openItem.owner.S, "second");
                        assert.equal(openItem.leaseDurationMs.N, "2000", "the new holder's lease is untouched");
                        await otherLock.release();

                        // FailClosed.
                        const closedId = uniqueId("fc-rel-drop");
                        const held = await failClosed(proxy.endpoint, { owner: "first" }).acquireLock(closedId);
                        const next = failClosed(engine.endpoint, { owner: "second", retryCount: 0 });
                        let nextLock;
                        let deletes = 0;
                        proxy.onRequest = async op =>
                        {
                            if (op !== "DeleteItem")
                            {
                                return undefined;
                            }
                            deletes++;
                            if (deletes === 1)
                            {
                                return "dropAfter";
                            }
                            if (deletes === 2)
                            {
                                nextLock = await next.acquireLock(closedId);
                            }
                            return undefined;
                        };
                        let closedError;
                        await withTimeout(held.release(), 10000, "FailClosed release").catch(e => (closedError = e));
                        proxy.onRequest = null;
                        assert.ok(nextLock, "the other client took the deleted lock");
                        assert.equal((await getItem("fclocks", closedId)).owner.S, "second", "the new holder's item is untouched");
                        await nextLock.release();
                        assert.equal(deletes >= 2, true);
                        assert.equal(closedError, undefined,
                            `FailClosed: the release whose delete landed succeeds (got ${closedError && closedError.code}: ${closedError && closedError.message})`);
                    });
            }
        );

        // 5. A holder killed with SIGKILL.
        it("FailOpen: a holder killed with SIGKILL is taken over after the lease, with a larger token", async () =>
            {
                await withProxy(async proxy =>
                    {
                        const id = uniqueId("fo-kill");
                        const holder = runScript("fault-holder.js",
                            {
                                kind: "FailOpen",
                                id,
                                config: { dynamodb: dynamodb(proxy.endpoint), lockTable: "locks", partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 200, requestTimeoutMs: 1000, owner: "victim" },
                            }, { timeoutMs: 30000 });
                        try
                        {
                            const { fencingToken } = await holder.next(l => l.acquired || l.error);
                            assert.ok(Number.isInteger(fencingToken), "the holder acquired");
                            await sleep(500);
                            holder.kill();
                            const exit = await holder.exited;
                            assert.equal(exit.signal, "SIGKILL");
                            const seen = await getItem("locks", id);
                            assert.equal(seen.owner.S, "victim");
                            assert.notEqual(seen.leaseDurationMs.N, "1", "the dead holder never released");
                            const started = Date.now();
                            const lock = await failOpen(proxy.endpoint, { leaseDurationMs: 1000, owner: "heir", retryCount: 2 }).acquireLock(id);
                            const took = Date.now() - started;
                            assert.ok(took >= 950, `the dead holder's lease was waited out on the waiter's clock (${took} ms)`);
                            assert.ok(lock.fencingToken > fencingToken, `larger token (${lock.fencingToken} > ${fencingToken})`);
                            const item = await getItem("locks", id);
                            assert.equal(item.owner.S, "heir");
                            assert.equal(Number(item.fencingToken.N), lock.fencingToken);
                            await lock.release();
                        }
                        finally
                        {
                            holder.kill();
                        }
                    });
            }
        );

        it("FailClosed: a holder killed with SIGKILL keeps the lock held", async () =>
            {
                await withProxy(async proxy =>
                    {
                        const id = uniqueId("fc-kill");
                        const holder = runScript("fault-holder.js",
                            {
                                kind: "FailClosed",
                                id,
                                config: { dynamodb: dynamodb(proxy.endpoint), lockTable: "fclocks", partitionKey: "id", acquirePeriodMs: 100, requestTimeoutMs: 1000, owner: "victim" },
                            }, { timeoutMs: 30000 });
                        try
                        {
                            await holder.next(l => l.acquired || l.error);
                            assert.ok(holder.lines[0].acquired, JSON.stringify(holder.lines));
                            holder.kill();
                            const exit = await holder.exited;
                            assert.equal(exit.signal, "SIGKILL");
                            const { error, lock } = await acquireCb(failClosed(proxy.endpoint, { acquirePeriodMs: 100, retryCount: 2 }), id);
                            if (lock)
                            {
                                await lock.release();
                            }
                            assert.equal(lock, undefined, "nobody gets a crashed holder's FailClosed lock");
                            assert.equal(error.code, "FailedToAcquireLock");
                            const item = await getItem("fclocks", id);
                            assert.ok(item, "the item still exists");
                            assert.equal(item.owner.S, "victim");
                        }
                        finally
                        {
                            holder.kill();
                            await engine.deleteItem("fclocks", { id: { S: id } });
                        }
                    });
            }
        );

        // 6. An outage longer than the lease.
        for (const outage of [{ name: "hung", faults: { hangRate: 1 } }, { name: "failing with HTTP 500", faults: { errorRate: 1 } }])
        {
            it(`an outage longer than the lease (UpdateItem ${outage.name}): "danger", then "lost" LeaseExpired, signal aborted`, async t =>
                {
                    await withProxy(async proxy =>
                        {
                            const id = uniqueId("outage");
                            const lease = 1500;
                            const period = 300;
                            const lock = await failOpen(proxy.endpoint, { leaseDurationMs: lease, heartbeatPeriodMs: period, requestTimeoutMs: 400 }).acquireLock(id);
                            const events = [];
                            lock.on("error", e => events.push({ event: "error", code: e.code, at: Date.now() }));
                            lock.on("danger", d => events.push({ event: "danger", remainingMs: d.remainingMs, at: Date.now() }));
                            const lost = new Promise(resolve => lock.on("lost", e =>
                                {
                                    events.push({ event: "lost", code: e.code, at: Date.now() });
                                    resolve(e);
                                }));
                            await sleep(400); // a heartbeat or two succeed first
                            const outageStart = Date.now();
                            proxy.setFaults(Object.assign({ operations: ["UpdateItem"] }, outage.faults));
                            // A waiter that reaches the engine directly takes the lock over as soon as it
                            // may: the holder must have been told before that.
                            const contender = failOpen(engine.endpoint, { leaseDurationMs: lease, owner: "contender", retryCount: 3, rereadPeriodMs: 50 });
                            const taken = contender.acquireLock(id).then(l => ({ lock: l, at: Date.now() }), error => ({ error, at: Date.now() }));
                            const reason = await withTimeout(lost, lease + 3000, "\"lost\"");
                            const lostAt = Date.now();
                            const updatesAtLost = proxy.counts.UpdateItem;
                            const takeover = await withTimeout(taken, lease + 3000, "the contender's acquisition");
                            await sleep(2 * period + 200);
                            t.diagnostic(`lost ${lostAt - outageStart} ms into the outage, taken over at ${takeover.at - outageStart} ms; events ${JSON.stringify(events.map(e => Object.assign({}, e, { at: e.at - outageStart })))}`);
                            assert.ok(takeover.lock, `the contender took the lock over (${takeover.error && takeover.error.code})`);
                            const lostEvent = events.find(e => e.event === "lost");
                            assert.ok(takeover.at >= lostEvent.at,
                                `the holder was told its lease was over (${lostEvent.at - outageStart} ms) before another client got the lock (${takeover.at - outageStart} ms)`);
                            assert.ok(takeover.lock.fencingToken > lock.fencingToken);
                            assert.equal(reason.code, "LeaseExpired");
                            assert.equal(lock.lost, true);
                            assert.equal(lock.signal.aborted, true);
                            assert.equal(lock.signal.reason, reason);
                            const kinds = events.map(e => e.event);
                            const dangerAt = kinds.indexOf("danger");
                            const lostIdx = kinds.indexOf("lost");
                            assert.ok(kinds.indexOf("error") >= 0 && kinds.indexOf("error") < lostIdx, "failed heartbeats emitted \"error\" first");
                            assert.equal(lostIdx, kinds.length - 1, `nothing after "lost": ${kinds.join(" ")}`);
                            assert.equal(kinds.filter(k => k === "lost").length, 1);
                            const lostAfter = lostAt - outageStart;
                            assert.ok(lostAfter <= lease + 300, `the holder knew its lease was over in time (${lostAfter} ms into the outage)`);
                            assert.ok(lostAfter >= lease - period - 200, `not lost long before the lease ran out (${lostAfter} ms)`);
                            assert.equal(proxy.counts.UpdateItem, updatesAtLost, "no heartbeat after \"lost\"");
                            proxy.clearFaults();
                            assert.equal(await releaseCb(lock), null, "releasing a lost FailOpen lock is quiet");
                            const item = await getItem("locks", id);
                            assert.equal(item.owner.S, "contender", "the lost lock's release left the new holder's item alone");
                            assert.notEqual(item.leaseDurationMs.N, "1");
                            await takeover.lock.release();
                            // Last, so that everything above is checked whatever happens here.
                            assert.ok(dangerAt >= 0 && dangerAt < lostIdx, `"danger" before "lost": ${kinds.join(" ")}`);
                            assert.ok(events[dangerAt].remainingMs >= 0 && events[dangerAt].remainingMs <= Math.floor(lease / 3) + 1,
                                `danger with at most the margin left (${events[dangerAt].remainingMs} ms)`);
                        });
                }
            );
        }
    });
}
