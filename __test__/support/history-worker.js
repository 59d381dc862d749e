"use strict";

// A worker of the history suite (__test__/history.test.js): acquires the lock ids of the job in
// turn through the fault proxy, holds each for a while, releases it, and reports every step as
// it happens, so that a history survives the worker being killed mid-hold.
//
// Job (JSON in argv[2]):
//   { name, kind: "FailOpen"|"FailClosed", config: {lock options without dynamodb},
//     lockEndpoint (the proxy), engine: {endpoint, region, credentials} (direct, for reads),
//     ids: [lock ids], lockTable, iterations, holdMs: [min, max], pauseMs: [min, max], softDeadlineMs }
//
// Prints {"ready":true}, waits for a line on stdin, then per iteration:
//   {"acquired":true, i, id, token, guid, start}               as soon as the lock is granted
//   {"section":true, i, id, token, guid, start, end, lostAt, errors, dangers,
//    releaseOk, releaseError, releasedAt, after: {heldBySelf, item}}   once it is released
//   {"failed":true, i, id, code, at}                            an acquisition that failed
// and finally {"done":true, acquisitions}.

process.env.AWS_EC2_METADATA_DISABLED = "true";

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
const { DynamoDBClient, GetItemCommand } = require("@aws-sdk/client-dynamodb");
const { summarizeItem } = require("./history.js");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(Object.assign({ process: job.name }, obj)) + "\n");
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

const direct = new DynamoDBClient(
    {
        endpoint: job.engine.endpoint,
        region: job.engine.region,
        credentials: Object.assign({}, job.engine.credentials),
        maxAttempts: 5,
    });
const dynamodb = { endpoint: job.lockEndpoint, region: job.engine.region, credentials: Object.assign({}, job.engine.credentials) };
const client = new Native[job.kind](Object.assign({}, job.config, { dynamodb, owner: job.name }));

async function readItem(id)
{
    const { Item } = await direct.send(new GetItemCommand(
        { TableName: job.lockTable, Key: { id: { S: id } }, ConsistentRead: true }));
    return summarizeItem(Item);
}

async function main()
{
    const deadline = Date.now() + job.softDeadlineMs;
    let acquisitions = 0;
    for (let i = 0; i < job.iterations && Date.now() < deadline; i++)
    {
        const id = job.ids[i % job.ids.length];
        let lock;
        try
        {
            lock = await client.acquireLock(id);
        }
        catch (e)
        {
            say({ failed: true, i, id, code: e.code || e.name, at: Date.now() });
            await sleep(20);
            continue;
        }
        const start = Date.now();
        acquisitions++;
        const token = lock.fencingToken === undefined ? null : lock.fencingToken;
        const w = { errors: [], dangers: [], lostAt: null };
        lock.on("error", e => w.errors.push(e.code || e.name || String(e)));
        lock.on("danger", d => w.dangers.push(d.remainingMs));
        lock.on("lost", () => (w.lostAt = Date.now()));
        // A FailClosed item carries no token: its guid (ours while we hold it) names the tenure.
        let guid = null;
        if (job.kind === "FailClosed")
        {
            const item = await readItem(id);
            guid = item && item.owner === job.name ? item.guid : null;
        }
        say({ acquired: true, i, id, token, guid, start });
        const [hlo, hhi] = job.holdMs;
        await sleep(hlo + Math.floor(Math.random() * (hhi - hlo + 1)));
        const end = Date.now();
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
            const item = await readItem(id);
            const heldBySelf = job.kind === "FailOpen"
                ? !!item && !item.released && item.token === token
                : !!item && guid !== null && item.guid === guid;
            after = { heldBySelf, item };
        }
        catch (e)
        {
            after = { readError: e.message };
        }
        say({ section: true, i, id, token, guid, start, end, lostAt: w.lostAt, errors: w.errors, dangers: w.dangers, releaseOk, releaseError, releasedAt, after });
        const [lo, hi] = job.pauseMs;
        await sleep(lo + Math.floor(Math.random() * (hi - lo + 1)));
    }
    say({ done: true, acquisitions });
}

runOnGo(() => main().finally(() => direct.destroy()), say);
