"use strict";

// A worker of the semaphore suite (__test__/semaphore.test.js): several Semaphore or
// ReadWriteLock clients of one process acquiring one id through the fault proxy, each in a
// loop, reporting every step as it happens so that a history survives the process being killed
// mid-hold; or one client that acquires once and holds until it is killed.
//
// Job (JSON in argv[2]):
//   { name, kind: "Semaphore"|"ReadWriteLock", config: {lock options without dynamodb and owner},
//     lockEndpoint (the proxy, or the engine), engine: {endpoint, region, credentials} (direct,
//     for reads), lockTable, partitionKey, sortKey, id, waitMs,
//     loop: { clients, seed, iterations, runMs, choices: [permits or modes], holdMs: [min, max],
//             pauseMs: [min, max], longHold: { client, i, ms } }      (the loop, after "go")
//   | hold: { permits?, mode? }                                       (acquire at once, hold) }
//
// The loop prints {"ready":true}, waits for a line on stdin, then per acquisition of a client:
//   {"acquired":true, client, owner, i, token, permits, mode, asked, start, long}
//   {"releasing":true, client, owner, i, end}                         right before release()
//   {"section":true, ...the same, end, lostAt, errors, dangers, releaseOk, releaseError,
//    releasedAt, after: {heldBySelf}}                                  once released
//   {"failed":true, client, i, code, message, asked, at}              an acquisition that failed
// and finally {"done":true, acquisitions}. Each client's owner is `${name}c${client}`.
// The hold prints {"acquired":true, token, permits, mode, start} or {"failed":true, code,
// message}, and {"lost":code} if the lock is lost.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const emitWarning = process.emitWarning;
process.emitWarning = function(warning, ...rest)
{
    const type = typeof rest[0] === "string" ? rest[0] : rest[0] && rest[0].type;
    if (type === "NodeVersionSupportWarning" || (warning && warning.name === "NodeVersionSupportWarning")
        || String(warning && warning.message || warning).startsWith("NodeVersionSupportWarning"))
    {
        return;
    }
    return emitWarning.call(process, warning, ...rest);
};

const { runOnGo } = require("./go.js");
const Native = require("../..");
const { DynamoDBClient, GetItemCommand } = require("@aws-sdk/client-dynamodb");
const { holdersOfItem } = require("./permits-history.js");
const { mulberry32 } = require("./random.js");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(Object.assign({ process: job.name }, obj)) + "\n");
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const dynamodb = { endpoint: job.lockEndpoint, region: job.engine.region, credentials: Object.assign({}, job.engine.credentials) };

function newClient(owner)
{
    return new Native[job.kind](Object.assign({}, job.config,
        { dynamodb, owner, lockTable: job.lockTable, partitionKey: job.partitionKey, sortKey: job.sortKey }));
}

function acquireOptions(choice)
{
    const options = { waitMs: job.waitMs === undefined ? 60000 : job.waitMs };
    if (job.kind === "ReadWriteLock")
    {
        options.mode = choice;
    }
    else
    {
        options.permits = choice;
    }
    return options;
}

async function hold()
{
    const client = newClient(job.name);
    const choice = job.kind === "ReadWriteLock" ? job.hold.mode : job.hold.permits;
    let lock;
    try
    {
        lock = await client.acquireLock(job.id, acquireOptions(choice));
    }
    catch (e)
    {
        say({ failed: true, code: e.code || e.name, message: e.message, at: Date.now() });
        await client.close();
        return;
    }
    lock.on("lost", e => say({ lost: e && e.code, at: Date.now() }));
    lock.on("error", () => {});
    say({ acquired: true, token: lock.fencingToken, permits: lock.permits, mode: lock.mode, start: Date.now() });
}

async function loop()
{
    const direct = new DynamoDBClient(
        {
            endpoint: job.engine.endpoint,
            region: job.engine.region,
            credentials: Object.assign({}, job.engine.credentials),
            maxAttempts: 5,
        });
    const key = { [job.partitionKey]: { S: job.id }, [job.sortKey]: { S: "lock" } };
    const holdersNow = async () =>
    {
        const { Item } = await direct.send(new GetItemCommand({ TableName: job.lockTable, Key: key, ConsistentRead: true }));
        return holdersOfItem(Item);
    };
    const spec = job.loop;
    const deadline = Date.now() + spec.runMs;
    let acquisitions = 0;
    const runClient = async c =>
    {
        const owner = `${job.name}c${c}`;
        const client = newClient(owner);
        const random = mulberry32(spec.seed * 1000 + c);
        const between = ([lo, hi]) => lo + Math.floor(random() * (hi - lo + 1));
        for (let i = 0; i < spec.iterations && Date.now() < deadline; i++)
        {
            const choice = spec.choices[Math.floor(random() * spec.choices.length)];
            const long = !!spec.longHold && spec.longHold.client === c && spec.longHold.i === i;
            const holdMs = long ? spec.longHold.ms : between(spec.holdMs);
            const pauseMs = between(spec.pauseMs);
            const asked = Date.now();
            let lock;
            try
            {
                lock = await client.acquireLock(job.id, acquireOptions(choice));
            }
            catch (e)
            {
                say({ failed: true, client: c, i, code: e.code || e.name, message: e.message, asked, at: Date.now() });
                await sleep(pauseMs);
                continue;
            }
            const start = Date.now();
            acquisitions++;
            const w = { errors: [], dangers: [], lostAt: null };
            lock.on("error", e => w.errors.push(e.code || e.name || String(e)));
            lock.on("danger", d => w.dangers.push(d && d.remainingMs));
            lock.on("lost", () => (w.lostAt = Date.now()));
            const grant = { client: c, owner, i, token: lock.fencingToken, permits: lock.permits, mode: lock.mode, asked, start, long };
            say(Object.assign({ acquired: true }, grant));
            await sleep(holdMs);
            const end = Date.now();
            // Said before releasing: a process killed during release() held the permits until `end`
            // at the latest, since its release may have landed.
            say({ releasing: true, client: c, owner, i, end });
            let releaseOk = false;
            let releaseError = null;
            try
            {
                await lock.release();
                releaseOk = true;
            }
            catch (e)
            {
                releaseError = e.code || e.message;
            }
            const releasedAt = Date.now();
            let after;
            try
            {
                after = { heldBySelf: (await holdersNow()).some(h => h.owner === owner) };
            }
            catch (e)
            {
                after = { readError: e.message };
            }
            say(Object.assign({ section: true }, grant,
                { end, lostAt: w.lostAt, errors: w.errors, dangers: w.dangers, releaseOk, releaseError, releasedAt, after }));
            await sleep(pauseMs);
        }
        await client.close();
    };
    const clients = [];
    for (let c = 0; c < spec.clients; c++)
    {
        clients.push(runClient(c));
    }
    await Promise.all(clients);
    direct.destroy();
    say({ done: true, acquisitions });
}

if (job.hold)
{
    hold().catch(e => say({ error: "Crash", message: e && e.stack }));
}
else
{
    runOnGo(loop, say);
}
