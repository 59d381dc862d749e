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
// Its sort value, on a table with a sort key.
const SESSION_SORT_VALUE = "session";
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
 * Ends a lock's hold on purpose, on the version just read, in one of two ways.
 *
 * By default it revokes, and nothing an operator does this way can leave two holders that both
 * believe: the holder is told through what it already writes, and the lock becomes free only
 * once a lease has passed since the revocation (a lock-delay), by which time a holder that is
 * alive has heard it. A FailOpen lock or Fifo head gets a new `guid` and keeps its lease: the
 * holder's next heartbeat fails and it hears `"lost"`, and a waiter waits out the new version
 * for a whole lease on its own clock, as it waits out any holder. A lock held through a session
 * is named on the session's item (`lockRevoked`), so the session's next renewal tells the
 * holder that this lock, and no other, is lost; the lock item gets a new `guid`, drops its
 * session and carries the session's lease, which a waiter waits out. A FailClosed holder writes
 * nothing while it holds, so nobody can tell it: its lock is only freed with `now`.
 *
 * With `now: true` the lock is free at once (FailClosed: the item is deleted; the others are
 * marked released with a new `guid`): a holder still alive goes on as if it held the lock
 * until its next heartbeat or renewal, and may still be writing when the next holder starts.
 *
 * Resolves with `{ action, lock, freeAfterMs?, warning? }`: `action` is `"revoked"`,
 * `"deleted"`, `"released"`, `"already-free"` or `"absent"`; `lock` the item as read (whom it
 * displaced); `freeAfterMs` how long after a revocation a waiter may take the lock. A holder that
 * renews between the read and the write is read again (a few times); an item that changed
 * hands meanwhile is left alone, with `code` `LockChanged`.
 */
async function forceRelease(options)
{
    const call = await adminCaller(options && options.dynamodb, "forceRelease");
    if (options.now !== undefined && typeof options.now !== "boolean")
    {
        throw invalidArgument("forceRelease: now must be a boolean");
    }
    const now = options.now === true;
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
        if (lock.kind === "FailClosed" && !now)
        {
            throw codedError("HolderCannotBeTold", `the lock ${JSON.stringify(lock.id)} is a FailClosed lock (held by ${JSON.stringify(lock.owner)}): its holder writes nothing while it holds, so nothing can tell it that its lock is gone. Free it with now: true (the command line's --now) only once you know the holder is dead`);
        }
        first = first || lock;
        try
        {
            const out = now
                ? await forceWrite(call, options.lockTable, Key, r.Item, lock)
                : await revoke(call, options.lockTable, key, Key, r.Item, lock);
            return Object.assign({ lock }, out);
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

// What a release with `now` leaves a live holder to do.
const NOW_WARNING = "freed at once: a holder still alive hears \"lost\" only at its next heartbeat or session renewal, and may still be writing while the next holder works";

// The condition of a forced write: the item still carries the `guid` read.
function guidCondition(item)
{
    return item.guid
        ? { ConditionExpression: "#guid = :read", ExpressionAttributeValues: { ":read": item.guid } }
        : { ConditionExpression: "attribute_not_exists(#guid)", ExpressionAttributeValues: {} };
}

const newGuid = () => ({ B: crypto.randomBytes(64).toString("base64") });

// The write of a forced release with `now`, on the `guid` of `item` as read.
async function forceWrite(call, tableName, Key, item, lock)
{
    const names = { "#guid": "guid" };
    const cond = guidCondition(item);
    if (lock.kind === "FailClosed")
    {
        const values = Object.keys(cond.ExpressionAttributeValues).length ? { ExpressionAttributeValues: cond.ExpressionAttributeValues } : {};
        await call("DeleteItem", Object.assign({ TableName: tableName, Key, ConditionExpression: cond.ConditionExpression, ExpressionAttributeNames: names }, values));
        return { action: "deleted", warning: NOW_WARNING };
    }
    await call("UpdateItem", {
        TableName: tableName,
        Key,
        UpdateExpression: "SET #lease = :released, #guid = :new, #lw = :lw, #t = :lw",
        ConditionExpression: cond.ConditionExpression,
        ExpressionAttributeNames: Object.assign({ "#lease": "leaseDurationMs", "#lw": "lockWrittenUnixMs", "#t": "lockAcquiredTimeUnixMs" }, names),
        ExpressionAttributeValues: Object.assign({ ":released": { N: RELEASED }, ":new": newGuid(), ":lw": { N: String(Date.now()) } },
            cond.ExpressionAttributeValues),
    });
    return { action: "released", warning: NOW_WARNING };
}

// The session item's key of session `id` on a table described by `key`.
function sessionKey(key, id)
{
    const out = { [key.partition.name]: { S: SESSION_PREFIX + id } };
    if (key.sort)
    {
        out[key.sort.name] = { S: SESSION_SORT_VALUE };
    }
    return out;
}

// A revocation (see forceRelease), on the `guid` of `item` as read.
async function revoke(call, tableName, key, Key, item, lock)
{
    const at = { N: String(Date.now()) };
    const names = { "#guid": "guid", "#lease": "leaseDurationMs", "#lw": "lockWrittenUnixMs", "#t": "lockAcquiredTimeUnixMs", "#rv": "lockRevokedUnixMs" };
    const cond = guidCondition(item);
    let lease = item.leaseDurationMs;
    let update = "SET #guid = :new, #lease = :lease, #lw = :at, #t = :at, #rv = :at";
    let condition = `${cond.ConditionExpression} AND #lease <> :released`;
    const values = Object.assign({ ":new": newGuid(), ":at": at, ":released": { N: RELEASED } }, cond.ExpressionAttributeValues);
    if (lock.session !== undefined)
    {
        const r = await call("GetItem", { TableName: tableName, Key: sessionKey(key, lock.session), ConsistentRead: true });
        const session = r.Item;
        if (!session || !session.leaseDurationMs || session.leaseDurationMs.N === RELEASED || !item.guid)
        {
            // An ended or vanished session renews nothing: its locks are free to any waiter
            // already, which ends the session's hold before it takes one.
            return forceWrite(call, tableName, Key, item, lock).then(out => ({ action: out.action }));
        }
        // First the session's item, so that the holder is told before the lock can be
        // taken: its next renewal reads the revocation back.
        await call("UpdateItem", {
            TableName: tableName,
            Key: sessionKey(key, lock.session),
            UpdateExpression: "ADD #revoked :guid",
            ConditionExpression: "attribute_exists(#guid) AND #lease <> :released",
            ExpressionAttributeNames: { "#revoked": "lockRevoked", "#guid": "guid", "#lease": "leaseDurationMs" },
            ExpressionAttributeValues: { ":guid": { BS: [item.guid.B] }, ":released": { N: RELEASED } },
        }).catch(err =>
        {
            if (err.code === "ConditionalCheckFailedException")
            {
                throw codedError("LockChanged", `the session ${lock.session} of the lock ${JSON.stringify(lock.id)} ended while its lock was being revoked: read it again`);
            }
            throw err;
        });
        lease = session.leaseDurationMs;
        update += " REMOVE #session";
        condition += " AND #session = :session";
        names["#session"] = "lockSession";
        values[":session"] = { S: lock.session };
    }
    values[":lease"] = lease;
    await call("UpdateItem", { TableName: tableName, Key, UpdateExpression: update, ConditionExpression: condition, ExpressionAttributeNames: names, ExpressionAttributeValues: values });
    return { action: "revoked", freeAfterMs: Number(lease.N) };
}

/**
 * Whether a table can keep a lock: its key schema, TTL, billing and, for a global table, its
 * Regions and consistency mode. `problems` lists what keeps it from being a lock table; a
 * global table in the eventually consistent mode is one (two Regions could grant one lock).
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
    return {
        table: t.TableName,
        status: t.TableStatus,
        partitionKey: key.partition,
        sortKey: key.sort,
        billingMode: (t.BillingModeSummary && t.BillingModeSummary.BillingMode) || "PROVISIONED",
        ttl,
        global: replicas.length > 0 ? { replicas, consistency } : undefined,
        problems,
        ok: problems.length === 0 && t.TableStatus === "ACTIVE",
    };
}

module.exports = { listLocks, showLock, forceRelease, checkTable };
