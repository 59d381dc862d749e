"use strict";

// Looking at a lock table as an operator does: every lock in it (`listLocks`), one lock
// (`showLock`), freeing a dead holder's lock on purpose (`forceRelease`), and whether a table
// can keep a lock at all (`checkTable`). Each reads the table's key schema with DescribeTable,
// so that only the table's name is needed, and speaks DynamoDB's JSON through the native
// client's administration channel (lib/admin.js).

const crypto = require("crypto");
const { adminCaller } = require("./admin.js");
const { invalidArgument } = require("./errors.js");
const { codedError } = require("./table.js");

// The sort value of a Fifo head item, and the prefix of its queue entries (docs/fifo.md).
const FIFO_HEAD = "lock";
const FIFO_ENTRY = "q#";
// The partition value of a session's item (`session: true`): this prefix and its id.
const SESSION_PREFIX = "dynamodb-lock-native/session/";
// `leaseDurationMs` of a released FailOpen lock or Fifo head.
const RELEASED = "1";

// The table's description and its key: names and types.
async function tableOf(call, tableName)
{
    if (typeof tableName !== "string" || tableName === "")
    {
        throw invalidArgument("lockTable must be the name of the lock table");
    }
    const table = (await call("DescribeTable", { TableName: tableName })).Table;
    const type = name => (table.AttributeDefinitions || []).find(d => d.AttributeName === name).AttributeType;
    const hash = table.KeySchema.find(k => k.KeyType === "HASH").AttributeName;
    const range = (table.KeySchema.find(k => k.KeyType === "RANGE") || {}).AttributeName;
    return {
        table,
        partition: { name: hash, type: type(hash) },
        sort: range ? { name: range, type: type(range) } : undefined,
    };
}

// A key value as the table's type wants it, from the command line's text or a caller's value.
function keyValue(value, type, what)
{
    if (value === undefined || value === null || value === "")
    {
        throw invalidArgument(`${what} is required`);
    }
    if (type === "N")
    {
        if (!Number.isFinite(Number(value)))
        {
            throw invalidArgument(`${what} must be a number: the table's key is of type N`);
        }
        return { N: String(value) };
    }
    if (type === "B")
    {
        return { B: Buffer.isBuffer(value) ? value.toString("base64") : Buffer.from(String(value), "utf8").toString("base64") };
    }
    return { S: String(value) };
}

function plain(attr)
{
    if (!attr)
    {
        return undefined;
    }
    if ("S" in attr)
    {
        return attr.S;
    }
    if ("N" in attr)
    {
        return Number(attr.N);
    }
    if ("B" in attr)
    {
        return Buffer.from(attr.B, "base64");
    }
    return undefined;
}

// `lockWrittenUnixMs` as a number, or undefined when absent or not a number (unknown: the
// original's writes drop it).
function writtenAt(item)
{
    const n = item.lockWrittenUnixMs && Number(item.lockWrittenUnixMs.N);
    return Number.isFinite(n) ? n : undefined;
}

// What an item says to a person: the lock's id, kind, holder and state.
function describeItem(item, key)
{
    const sort = key.sort ? plain(item[key.sort.name]) : undefined;
    const fifoHead = key.sort && sort === FIFO_HEAD && "ticketNext" in item;
    const partition = plain(item[key.partition.name]);
    const session = typeof partition === "string" && partition.startsWith(SESSION_PREFIX);
    const kind = fifoHead ? "Fifo" : session ? "Session" : "leaseDurationMs" in item ? "FailOpen" : "FailClosed";
    const lease = item.leaseDurationMs && item.leaseDurationMs.N;
    const out = {
        id: key.sort && !fifoHead ? { [key.partition.name]: plain(item[key.partition.name]), [key.sort.name]: sort } : plain(item[key.partition.name]),
        kind,
        owner: item.owner && item.owner.S,
        fencingToken: item.fencingToken && item.fencingToken.N !== undefined ? Number(item.fencingToken.N) : undefined,
        held: kind === "FailClosed" ? true : lease !== RELEASED,
        leaseDurationMs: lease === undefined ? undefined : Number(lease),
        guid: item.guid && item.guid.B !== undefined ? Buffer.from(item.guid.B, "base64").toString("hex") : undefined,
        lockAcquiredTimeUnixMs: item.lockAcquiredTimeUnixMs ? Number(item.lockAcquiredTimeUnixMs.N) : undefined,
        // When this library last wrote the item, by its writer's clock: for people only.
        lastWrittenUnixMs: writtenAt(item),
        waiter: item.lockWaiter && item.lockWaiter.S,
    };
    // The session a lock is held through (`session: true`): its lease is the session's.
    if (item.lockSession && typeof item.lockSession.S === "string")
    {
        out.session = item.lockSession.S;
    }
    return out;
}

function isFifoEntry(item, key)
{
    return key.sort !== undefined && typeof plain(item[key.sort.name]) === "string" && plain(item[key.sort.name]).startsWith(FIFO_ENTRY);
}

/**
 * Every lock in a table, one Scan page at a time: `{ id, kind, owner, fencingToken, held,
 * leaseDurationMs, guid, lockAcquiredTimeUnixMs, lastWrittenUnixMs, waiter, waiters }`. Fifo queue entries are
 * counted in their resource's `waiters`, not listed.
 */
async function* listLocks(options)
{
    const call = await adminCaller(options && options.dynamodb, "listLocks");
    const key = await tableOf(call, options.lockTable);
    let start;
    do
    {
        const page = await call("Scan", Object.assign({ TableName: options.lockTable, ConsistentRead: true }, start ? { ExclusiveStartKey: start } : {}));
        const items = page.Items || [];
        const queued = new Map();
        for (const item of items.filter(i => isFifoEntry(i, key)))
        {
            const resource = JSON.stringify(item[key.partition.name]);
            queued.set(resource, (queued.get(resource) || 0) + 1);
        }
        for (const item of items.filter(i => !isFifoEntry(i, key)))
        {
            const lock = describeItem(item, key);
            if (lock.kind === "Fifo")
            {
                lock.waiters = queued.get(JSON.stringify(item[key.partition.name])) || 0;
            }
            yield lock;
        }
        start = page.LastEvaluatedKey;
    }
    while (start);
}

// The key of lock `id` (a partition value, or `{ partition, sort }` on a table with a sort key;
// a Fifo resource's head when `sort` is omitted there).
function itemKey(key, id, sortValue)
{
    const out = { [key.partition.name]: keyValue(id, key.partition.type, "the lock id") };
    if (key.sort)
    {
        out[key.sort.name] = keyValue(sortValue === undefined ? FIFO_HEAD : sortValue, key.sort.type, "the sort value");
    }
    return out;
}

/** One lock item as one consistent read finds it, described; `null` if there is none. */
async function showLock(options)
{
    const call = await adminCaller(options && options.dynamodb, "showLock");
    const key = await tableOf(call, options.lockTable);
    const r = await call("GetItem", { TableName: options.lockTable, Key: itemKey(key, options.id, options.sortValue), ConsistentRead: true });
    return r.Item ? describeItem(r.Item, key) : null;
}

/**
 * Frees a lock whose holder is known to be dead, on the version just read: FailClosed, deletes
 * the item if it still carries the `guid` read; FailOpen and Fifo heads, marks it released and
 * gives it a new `guid`, so that a holder still alive fails its next heartbeat and hears
 * `"lost"`. Resolves with `{ action, lock }`: `action` is `"deleted"`, `"released"`,
 * `"already-free"` or `"absent"`, `lock` the item as read (whom it displaced). A holder that
 * renews between the read and the write is read again (a few times); an item that changed hands
 * meanwhile is left alone, with `code` `LockChanged`.
 */
async function forceRelease(options)
{
    const call = await adminCaller(options && options.dynamodb, "forceRelease");
    const key = await tableOf(call, options.lockTable);
    const Key = itemKey(key, options.id, options.sortValue);
    let first;
    // A live FailOpen holder rotates its guid every heartbeat: a write that meets a new guid
    // of the same holder (same token) reads again, a few times; another holder is left alone.
    for (let attempt = 0; attempt < FORCE_TRIES; attempt++)
    {
        const r = await call("GetItem", { TableName: options.lockTable, Key, ConsistentRead: true });
        if (!r.Item)
        {
            return { action: "absent", lock: first || null };
        }
        const lock = describeItem(r.Item, key);
        if (!lock.held)
        {
            return { action: "already-free", lock };
        }
        if (first && (lock.fencingToken !== first.fencingToken || lock.owner !== first.owner))
        {
            throw codedError("LockChanged", `the lock ${JSON.stringify(lock.id)} changed hands while it was being released: read it again before forcing its release`);
        }
        first = first || lock;
        try
        {
            return { action: await forceWrite(call, options.lockTable, Key, r.Item, lock), lock };
        }
        catch (err)
        {
            if (err.code !== "ConditionalCheckFailedException")
            {
                throw err;
            }
        }
    }
    throw codedError("LockChanged", `the lock item of ${JSON.stringify(first.id)} changed after each of ${FORCE_TRIES} reads: read it again before forcing its release`);
}

// Tries of a forced release against a holder that keeps renewing.
const FORCE_TRIES = 5;

// The write of a forced release, on the `guid` of `item` as read.
async function forceWrite(call, tableName, Key, item, lock)
{
    const names = { "#guid": "guid" };
    const guidCondition = item.guid
        ? { ConditionExpression: "#guid = :read", ExpressionAttributeValues: { ":read": item.guid } }
        : { ConditionExpression: "attribute_not_exists(#guid)", ExpressionAttributeValues: {} };
    if (lock.kind === "FailClosed")
    {
        const values = Object.keys(guidCondition.ExpressionAttributeValues).length ? { ExpressionAttributeValues: guidCondition.ExpressionAttributeValues } : {};
        await call("DeleteItem", Object.assign({ TableName: tableName, Key, ConditionExpression: guidCondition.ConditionExpression, ExpressionAttributeNames: names }, values));
        return "deleted";
    }
    await call("UpdateItem", {
        TableName: tableName,
        Key,
        UpdateExpression: "SET #lease = :released, #guid = :new, #lw = :lw",
        ConditionExpression: guidCondition.ConditionExpression,
        ExpressionAttributeNames: Object.assign({ "#lease": "leaseDurationMs", "#lw": "lockWrittenUnixMs" }, names),
        ExpressionAttributeValues: Object.assign({ ":released": { N: RELEASED }, ":new": { B: crypto.randomBytes(64).toString("base64") }, ":lw": { N: String(Date.now()) } },
            guidCondition.ExpressionAttributeValues),
    });
    return "released";
}

/**
 * Whether a table can keep a lock: its key schema, TTL, billing and, for a global table, its
 * Regions and consistency mode. `problems` lists what keeps it from being a lock table; a
 * global table in the eventually consistent mode is one (two Regions could grant one lock).
 * `limits` lists what a lock table can do but this one cannot: a global table with
 * multi-Region strong consistency has no TTL and no transactions.
 */
async function checkTable(options)
{
    const call = await adminCaller(options && options.dynamodb, "checkTable");
    const key = await tableOf(call, options.lockTable);
    const t = key.table;
    const problems = [];
    if (options.partitionKey && options.partitionKey !== key.partition.name)
    {
        problems.push(`the partition key is "${key.partition.name}", not "${options.partitionKey}"`);
    }
    if (options.sortKey && (!key.sort || options.sortKey !== key.sort.name))
    {
        problems.push(key.sort ? `the sort key is "${key.sort.name}", not "${options.sortKey}"` : `the table has no sort key "${options.sortKey}"`);
    }
    if (!options.sortKey && options.partitionKey && key.sort)
    {
        problems.push(`the table has a sort key "${key.sort.name}": set sortKey`);
    }
    let ttl;
    try
    {
        const d = (await call("DescribeTimeToLive", { TableName: options.lockTable })).TimeToLiveDescription || {};
        ttl = { status: d.TimeToLiveStatus, attribute: d.AttributeName };
    }
    catch (err)
    {
        ttl = { status: "UNKNOWN", error: err.code || err.message };
    }
    const replicas = (t.Replicas || []).map(r => r.RegionName);
    const consistency = replicas.length > 0 ? (t.MultiRegionConsistency || "EVENTUAL") : undefined;
    if (consistency === "EVENTUAL")
    {
        problems.push(`the table is global (Regions ${replicas.join(", ")}) in the eventually consistent mode: a conditional write is checked against its own Region's copy and the last writer wins, so two Regions can grant one lock at once`);
    }
    const limits = [];
    if (consistency === "STRONG")
    {
        limits.push("no TTL on a global table with multi-Region strong consistency: clients with ttlAttribute, and Fifo clients (whose queue entries carry \"ttl\"), are refused on it");
        limits.push("no transactions on a global table with multi-Region strong consistency: lock.conditionCheck() is refused on it");
    }
    return {
        table: t.TableName,
        status: t.TableStatus,
        partitionKey: key.partition,
        sortKey: key.sort,
        billingMode: (t.BillingModeSummary && t.BillingModeSummary.BillingMode) || "PROVISIONED",
        ttl,
        global: replicas.length > 0 ? { replicas, consistency } : undefined,
        problems,
        limits,
        ok: problems.length === 0 && t.TableStatus === "ACTIVE",
    };
}

module.exports = { listLocks, showLock, forceRelease, checkTable };
