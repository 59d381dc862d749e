"use strict";

// A contention worker for the fault-injection suite (__test__/faults.test.js). The lock library
// talks to DynamoDB through the fault proxy; the shared counter is read and written DIRECTLY on
// the engine (never through the proxy), deliberately non-atomically:
//
//   acquireLock(id) -> GetItem counter, sleep, PutItem counter + 1 -> release -> read the lock item
//
// a bounded number of times and never past a deadline. Meanwhile `backgroundLocks` other FailOpen
// locks of the same client keep heartbeating through the same proxy until the end.
//
// Job (JSON in argv[2]):
//   { name, kind: "FailOpen"|"FailClosed", config: {lock options without dynamodb},
//     lockEndpoint (the proxy), engine: {endpoint, region, credentials} (direct),
//     id, lockTable, counterTable, counterId, iterations, criticalSleepMs, pauseMs: [min, max],
//     softDeadlineMs (from "go"), backgroundLocks }
//
// Protocol: prints {"ready":true} (background locks held), waits for a line on stdin, then prints
// one line per acquisition
//   {"i", "token", "acquiredAt", "start", "putStart", "end", "read", "wrote", "aborted",
//    "lostAt", "lostCode", "errors": [codes], "dangers": [ms], "releaseOk", "releaseError",
//    "releasedAt", "afterRelease": {...}}
// {"acquireError": code, ...} for an acquisition that failed (the worker tries again), and
// finally {"done":true, "acquisitions", "stoppedEarly", "background": [...]}, then exits.

process.env.AWS_EC2_METADATA_DISABLED = "true";

// The AWS SDK for JavaScript v3 warns on every start that it will soon need Node 22: noise here.
const emitWarning = process.emitWarning;
process.emitWarning = function(warning, ...rest)
{
    const type = typeof rest[0] === "string" ? rest[0] : rest[0] && rest[0].type;
    if (type === "NodeVersionSupportWarning" || (warning && warning.name === "NodeVersionSupportWarning"))
    {
        return;
    }
    return emitWarning.call(process, warning, ...rest);
};

const { runOnGo } = require("./go.js");
const Native = require("../..");
const { DynamoDBClient, GetItemCommand, PutItemCommand } = require("@aws-sdk/client-dynamodb");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(Object.assign({ worker: job.name }, obj)) + "\n");
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

const direct = new DynamoDBClient(
    {
        endpoint: job.engine.endpoint,
        region: job.engine.region,
        credentials: Object.assign({}, job.engine.credentials),
        maxAttempts: 5,
    });

const dynamodb = { endpoint: job.lockEndpoint, region: job.engine.region, credentials: Object.assign({}, job.engine.credentials) };
const owner = job.name;
const client = new Native[job.kind](Object.assign({}, job.config, { dynamodb, owner }));

async function readCounter()
{
    const { Item } = await direct.send(new GetItemCommand(
        { TableName: job.counterTable, Key: { id: { S: job.counterId } }, ConsistentRead: true }));
    return Item ? Number(Item.count.N) : 0;
}

async function writeCounter(value)
{
    await direct.send(new PutItemCommand(
        { TableName: job.counterTable, Item: { id: { S: job.counterId }, count: { N: String(value) } } }));
}

async function readLockItem(id)
{
    const { Item } = await direct.send(new GetItemCommand(
        { TableName: job.lockTable, Key: { id: { S: id } }, ConsistentRead: true }));
    return Item;
}

// Did a release that reported success leave the item released (or in someone else's hands)?
function afterReleaseState(item, token)
{
    if (!item)
    {
        return { ok: true, present: false };
    }
    const state =
    {
        present: true,
        owner: item.owner && item.owner.S,
        lease: item.leaseDurationMs && item.leaseDurationMs.N,
        token: item.fencingToken && item.fencingToken.N,
    };
    if (job.kind === "FailOpen")
    {
        state.ok = state.lease === "1" || state.token !== String(token);
    }
    else
    {
        state.ok = state.owner !== owner;
    }
    return state;
}

function watch(lock)
{
    const w = { errors: [], dangers: [], lostAt: null, lostCode: null };
    lock.on("error", e => w.errors.push(e.code || e.name || String(e)));
    lock.on("danger", d => w.dangers.push(d.remainingMs));
    lock.on("lost", e =>
        {
            w.lostAt = Date.now();
            w.lostCode = e.code;
        });
    return w;
}

const background = [];

async function holdBackground()
{
    for (let k = 0; k < (job.backgroundLocks || 0); k++)
    {
        const id = `${job.id}-bg-${job.name}-${k}`;
        const lock = await client.acquireLock(id);
        background.push({ id, lock, w: watch(lock) });
    }
}

async function releaseBackground()
{
    const out = [];
    for (const b of background)
    {
        let releaseError = null;
        try
        {
            await b.lock.release();
        }
        catch (e)
        {
            releaseError = e.code || e.message;
        }
        out.push({ id: b.id, errors: b.w.errors, dangers: b.w.dangers, lostAt: b.w.lostAt, lostCode: b.w.lostCode, releaseError });
    }
    return out;
}

async function main()
{
    const startedAt = Date.now();
    const deadline = startedAt + job.softDeadlineMs;
    let acquisitions = 0;
    let acquireFailures = 0;
    let stoppedEarly = false;
    for (let i = 0; i < job.iterations; i++)
    {
        let lock;
        while (!lock)
        {
            if (Date.now() >= deadline || acquireFailures > 50)
            {
                stoppedEarly = true;
                break;
            }
            try
            {
                lock = await client.acquireLock(job.id);
            }
            catch (e)
            {
                acquireFailures++;
                say({ acquireError: e.code || e.name, message: e.message, i, after: Date.now() - startedAt });
                await sleep(20);
            }
        }
        if (!lock)
        {
            break;
        }
        const acquiredAt = Date.now();
        acquisitions++;
        const w = watch(lock);
        const rec = { i, token: lock.fencingToken === undefined ? null : lock.fencingToken, acquiredAt };
        // The critical section: it must stop as soon as the lock is known to be lost.
        rec.start = Date.now();
        rec.wrote = false;
        rec.aborted = false;
        try
        {
            if (lock.signal.aborted)
            {
                rec.aborted = true;
            }
            else
            {
                rec.read = await readCounter();
                await sleep(job.criticalSleepMs);
                if (lock.signal.aborted)
                {
                    rec.aborted = true;
                }
                else
                {
                    rec.putStart = Date.now();
                    await writeCounter(rec.read + 1);
                    rec.wrote = true;
                }
            }
        }
        catch (e)
        {
            rec.counterError = e.name + ": " + e.message;
        }
        rec.end = Date.now();
        try
        {
            await lock.release();
            rec.releaseOk = true;
            rec.releaseError = null;
        }
        catch (e)
        {
            rec.releaseOk = false;
            rec.releaseError = e.code || e.message;
            rec.releaseOriginal = e.originalError ? e.originalError.code : undefined;
        }
        rec.releasedAt = Date.now();
        try
        {
            rec.afterRelease = afterReleaseState(await readLockItem(job.id), rec.token);
        }
        catch (e)
        {
            rec.afterRelease = { ok: false, readError: e.message };
        }
        Object.assign(rec, { errors: w.errors, dangers: w.dangers, lostAt: w.lostAt, lostCode: w.lostCode, lost: lock.lost });
        say(rec);
        const [lo, hi] = job.pauseMs;
        await sleep(lo + Math.floor(Math.random() * (hi - lo + 1)));
    }
    const bg = await releaseBackground();
    say({ done: true, acquisitions, acquireFailures, stoppedEarly, background: bg, ms: Date.now() - startedAt });
}

holdBackground().then(
    () => runOnGo(() => main().finally(() => direct.destroy()), say),
    e =>
    {
        say({ error: "BackgroundAcquire", code: e.code, message: e.message });
        process.exit(1);
    });
