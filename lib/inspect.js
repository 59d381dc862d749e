"use strict";

// Looking at a lock table as an operator does: every lock in it (`listLocks`), one lock
// (`showLock`), freeing a dead holder's lock on purpose (`forceRelease`), and whether a table
// can keep a lock at all (`checkTable`). Each reads the table's key schema with DescribeTable,
// so that only the table's name is needed, and speaks DynamoDB's JSON through the native
// client's administration channel (lib/admin.js).

const { adminCaller, adminNative } = require("./admin.js");
const { invalidArgument } = require("./errors.js");
const { codedError } = require("./table.js");

// The sort value of a Fifo head item, and the prefix of its queue entries (docs/fifo.md).
const FIFO_HEAD = "lock";
const FIFO_ENTRY = "q#";
// The partition value of a session's item (`session: true`): this prefix and its id.
const SESSION_PREFIX = "dynamodb-lock-native/session/";
// The sort value of a session's item, on a table with a sort key.
const SESSION_SORT = "session";
// `leaseDurationMs` of a released FailOpen lock or Fifo head.
const RELEASED = "1";
// A semaphore's holders: one attribute each, this prefix and the hex of the guid it was
// granted with, holding "<permits> <leaseDurationMs> <guid hex> <written Unix ms> <owner>".
const HOLDER_PREFIX = "holder.";
// The permits a ReadWriteLock's head counts (lib/semaphore.js).
const READ_WRITE_PERMITS = 2 ** 40;

// A semaphore's holders as its head item carries them, judged at `now`: each one's permits
// (a ReadWriteLock's as `mode`), owner, lease, last write and state.
function holdersOf(item, now, readWrite)
{
    const out = [];
    for (const [name, value] of Object.entries(item))
    {
        if (!name.startsWith(HOLDER_PREFIX) || !value || typeof value.S !== "string")
        {
            continue;
        }
        const [permits, lease, guid, written, ...owner] = value.S.split(" ");
        const holder = {
            key: name.slice(HOLDER_PREFIX.length),
            guid,
            owner: owner.join(" "),
            leaseDurationMs: Number(lease),
            renewedUnixMs: Number.isFinite(Number(written)) ? Number(written) : undefined,
        };
        if (readWrite)
        {
            holder.mode = Number(permits) === READ_WRITE_PERMITS ? "exclusive" : "shared";
        }
        else
        {
            holder.permits = Number(permits);
        }
        if (holder.renewedUnixMs !== undefined)
        {
            holder.silentMs = Math.max(0, now - holder.renewedUnixMs);
        }
        holder.state = holder.silentMs !== undefined && holder.silentMs > holder.leaseDurationMs ? "expired" : "held";
        out.push(holder);
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

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

// A Number attribute as a number; undefined when absent or not a finite number.
function numberOf(attr)
{
    const n = attr && attr.N !== undefined ? Number(attr.N) : NaN;
    return Number.isFinite(n) ? n : undefined;
}

// `lockWrittenUnixMs`: when a holder of this package last wrote the item (waiters' writes
// leave it alone); undefined when unknown (the original's writes drop it).
function writtenAt(item)
{
    return numberOf(item.lockWrittenUnixMs);
}

// What an item says to a person: the lock's id, kind, holder and the first waiter's mark, as
// read, without judging whether its holder is still alive (`judge` does that).
function describeItem(item, key)
{
    const sort = key.sort ? plain(item[key.sort.name]) : undefined;
    const fifoHead = key.sort && sort === FIFO_HEAD && "ticketNext" in item;
    const partition = plain(item[key.partition.name]);
    const session = typeof partition === "string" && partition.startsWith(SESSION_PREFIX);
    const permits = fifoHead ? numberOf(item.permits) : undefined;
    const kind = permits !== undefined ? (permits === READ_WRITE_PERMITS ? "ReadWriteLock" : "Semaphore")
        : fifoHead ? "Fifo" : session ? "Session" : "leaseDurationMs" in item ? "FailOpen" : "FailClosed";
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
        // When a holder of this package last wrote the item, by its writer's clock.
        lastWrittenUnixMs: writtenAt(item),
        waiter: item.lockWaiter && item.lockWaiter.S,
        waiterOwner: item.lockWaiterOwner && item.lockWaiterOwner.S,
        waiterMarkedUnixMs: numberOf(item.lockWaitingUnixMs),
        // When an operator last revoked the lock (`forceRelease`), by the revoker's clock.
        revokedUnixMs: numberOf(item.lockRevokedUnixMs),
    };
    if (permits !== undefined)
    {
        // A semaphore's head: held while any holder is on it; each holder judged on its own.
        const holders = holdersOf(item, Date.now(), kind === "ReadWriteLock");
        out.held = holders.length > 0;
        out.holders = holders;
        if (kind === "Semaphore")
        {
            out.permits = permits;
            out.permitsHeld = numberOf(item.permitsHeld) || 0;
        }
        delete out.owner;
        delete out.guid;
    }
    // The session a lock is held through (`session: true`): its lease is the session's.
    if (item.lockSession && typeof item.lockSession.S === "string")
    {
        out.session = item.lockSession.S;
    }
    if (kind === "Session")
    {
        out.sessionId = partition.slice(SESSION_PREFIX.length);
    }
    return out;
}

// How long a first-in-line mark of a FailClosed waiter is shown: FailClosed has no lease, and
// its waiters renew their mark about every `acquirePeriodMs` (at least every second).
const FAIL_CLOSED_MARK_MS = 60000;

// The holder's last renewal as the item records it (Unix ms, its writer's clock): the later of
// `lockWrittenUnixMs` (every write of a holder of this package) and `lockAcquiredTimeUnixMs`
// (written at each acquisition and heartbeat by a writer that records it, as the original
// library does with `trustLocalTime`). Neither is written by waiters. Undefined when the item
// records neither.
function renewedAt(lock)
{
    const times = [lock.lastWrittenUnixMs, lock.lockAcquiredTimeUnixMs].filter(t => t !== undefined);
    return times.length ? Math.max(...times) : undefined;
}

/**
 * Judges a described lock at `now` (this host's clock) and adds what an operator needs:
 * - `state`: `"held"`, `"expired"` or `"released"` (a Session item: live, expired, ended).
 *   FailClosed has no lease: held until its item is deleted. A FailOpen lock, Fifo head or
 *   session is expired when its holder's last recorded renewal (`renewedUnixMs`) is older
 *   than its lease (`silentMs` > `leaseDurationMs`); with no recorded renewal it reads as
 *   held (`renewedUnixMs` undefined). A lock held through a session is held while its session
 *   is live, and expired once the session has expired, ended or its item is gone
 *   (`sessionState` `"live"`, `"expired"`, `"ended"`, `"gone"`).
 * - the first waiter's mark only while it is fresh (younger than the lease).
 * `session` is the described and judged session item of a lock held through one (null: none).
 */
function judge(lock, now, session)
{
    let lease = lock.leaseDurationMs;
    if (lock.kind === "FailClosed")
    {
        lock.state = "held";
    }
    else if (!lock.held)
    {
        lock.state = "released";
    }
    else if (lock.holders)
    {
        // Held while any holder renews; expired once every holder has been silent for its lease.
        lock.state = lock.holders.some(h => h.state === "held") ? "held" : "expired";
    }
    else if (lock.kind !== "Session" && lock.session !== undefined)
    {
        lock.sessionState = !session ? "gone" : session.state === "released" ? "ended" : session.state === "expired" ? "expired" : "live";
        if (session)
        {
            lock.sessionRenewedUnixMs = session.renewedUnixMs;
            lock.sessionLeaseDurationMs = session.leaseDurationMs;
            lock.sessionSilentMs = session.silentMs;
            lease = session.leaseDurationMs;
        }
        lock.state = lock.sessionState === "live" ? "held" : "expired";
    }
    else
    {
        lock.renewedUnixMs = renewedAt(lock);
        if (lock.renewedUnixMs !== undefined)
        {
            lock.silentMs = Math.max(0, now - lock.renewedUnixMs);
        }
        lock.state = lock.silentMs !== undefined && lease !== undefined && lock.silentMs > lease ? "expired" : "held";
        // The revocation's write was the last one: nobody holds the lock, and waiters take it
        // a lease after it.
        lock.revoked = lock.revokedUnixMs !== undefined && lock.renewedUnixMs !== undefined && lock.revokedUnixMs >= lock.renewedUnixMs;
    }
    // A mark is fresh for a lease at most (a session's lease for its locks; a minute for
    // FailClosed, which has none, and for a lock whose session's item is gone).
    const window = lock.kind === "FailClosed" || (lock.session !== undefined && !session) ? FAIL_CLOSED_MARK_MS : lease;
    const fresh = lock.state !== "released" && lock.waiterMarkedUnixMs !== undefined && window !== undefined && now - lock.waiterMarkedUnixMs <= window;
    if (!fresh)
    {
        delete lock.waiter;
        delete lock.waiterOwner;
        delete lock.waiterMarkedUnixMs;
    }
    for (const name of Object.keys(lock))
    {
        if (lock[name] === undefined)
        {
            delete lock[name];
        }
    }
    return lock;
}

function isFifoEntry(item, key)
{
    return key.sort !== undefined && typeof plain(item[key.sort.name]) === "string" && plain(item[key.sort.name]).startsWith(FIFO_ENTRY);
}

// A Fifo queue entry, judged at `now`: its place, owner, ticket, and whether its waiter is
// still heard of (`waiting`), has stopped renewing it for longer than its lease (`expired`) or
// is done with it (`finished`: granted or gave up, `leaseDurationMs` 1).
function describeEntry(item, key, now)
{
    const lease = numberOf(item.leaseDurationMs);
    const renewed = writtenAt(item);
    const entry = {
        position: Number(plain(item[key.sort.name]).slice(FIFO_ENTRY.length)),
        owner: item.owner && item.owner.S,
        ticket: numberOf(item.fencingToken),
        // A semaphore's waiter: the permits it asks for (a ReadWriteLock's as its mode).
        permits: numberOf(item.permits),
        leaseDurationMs: lease,
        renewedUnixMs: renewed,
    };
    if (renewed !== undefined)
    {
        entry.silentMs = Math.max(0, now - renewed);
    }
    entry.state = lease === Number(RELEASED) ? "finished" : entry.silentMs !== undefined && lease !== undefined && entry.silentMs > lease ? "expired" : "waiting";
    for (const name of Object.keys(entry))
    {
        if (entry[name] === undefined)
        {
            delete entry[name];
        }
    }
    return entry;
}

// The key of a session's item on this table.
function sessionKey(key, id)
{
    const out = { [key.partition.name]: { S: SESSION_PREFIX + id } };
    if (key.sort)
    {
        out[key.sort.name] = { S: SESSION_SORT };
    }
    return out;
}

// Orders listings by id: partition value, then sort value; numbers by value.
function compareIds(a, b)
{
    const parts = id => (id !== null && typeof id === "object" && !Buffer.isBuffer(id) ? Object.values(id) : [id]);
    const [pa, pb] = [parts(a.id), parts(b.id)];
    for (let i = 0; i < Math.max(pa.length, pb.length); i++)
    {
        const [x, y] = [pa[i], pb[i]];
        if (x === y)
        {
            continue;
        }
        if (typeof x === "number" && typeof y === "number")
        {
            return x - y;
        }
        const [sx, sy] = [Buffer.isBuffer(x) ? x.toString("hex") : String(x), Buffer.isBuffer(y) ? y.toString("hex") : String(y)];
        if (sx !== sy)
        {
            return sx < sy ? -1 : 1;
        }
    }
    return 0;
}

// Every item of the table, by consistent Scans.
async function scanAll(call, tableName)
{
    const items = [];
    let start;
    do
    {
        const page = await call("Scan", Object.assign({ TableName: tableName, ConsistentRead: true }, start ? { ExclusiveStartKey: start } : {}));
        items.push(...(page.Items || []));
        start = page.LastEvaluatedKey;
    }
    while (start);
    return items;
}

// The table's items judged at `now`, sorted by id: Fifo queue entries counted in their
// head's `waiters` (live ones) rather than listed, sessions judged first so that their locks
// can be, and each session's unreleased locks counted (`locks`).
function judgeAll(items, key, now)
{
    const waiting = new Map();
    const rest = [];
    for (const item of items)
    {
        if (isFifoEntry(item, key))
        {
            const resource = JSON.stringify(item[key.partition.name]);
            if (describeEntry(item, key, now).state === "waiting")
            {
                waiting.set(resource, (waiting.get(resource) || 0) + 1);
            }
            continue;
        }
        rest.push({ item, lock: describeItem(item, key) });
    }
    const sessions = new Map();
    for (const { lock } of rest.filter(r => r.lock.kind === "Session"))
    {
        judge(lock, now, null);
        lock.locks = 0;
        sessions.set(lock.sessionId, lock);
    }
    const out = [];
    for (const { item, lock } of rest)
    {
        if (lock.kind !== "Session")
        {
            const session = lock.session === undefined ? null : sessions.get(lock.session) || null;
            judge(lock, now, session);
            if (session && lock.held)
            {
                session.locks++;
            }
        }
        if (lock.kind === "Fifo" || lock.holders)
        {
            lock.waiters = waiting.get(JSON.stringify(item[key.partition.name])) || 0;
        }
        out.push(lock);
    }
    return out.sort(compareIds);
}

/**
 * Every lock in a table, sorted by id, each judged when the scan ended (see `judge`): `{ id,
 * kind, state, owner, fencingToken, held, leaseDurationMs, guid, lockAcquiredTimeUnixMs,
 * lastWrittenUnixMs, renewedUnixMs, silentMs, session, sessionState, waiter, waiterOwner,
 * waiterMarkedUnixMs, waiters }`. Fifo queue entries are counted in their resource's
 * `waiters`, not listed; a Session item counts the unreleased locks that name it (`locks`).
 */
async function* listLocks(options)
{
    const call = await adminCaller(options && options.dynamodb, "listLocks");
    const key = await tableOf(call, options.lockTable);
    const items = await scanAll(call, options.lockTable);
    yield* judgeAll(items, key, Date.now());
}

// The key of lock `id`: a partition value, or an object of the table's key names
// (`{ [partitionKey]: v, [sortKey]: v }`, as `listLocks` gives the id of an item with a sort
// value); on a table with a sort key, `sortValue`, else a Fifo resource's head.
function itemKey(key, id, sortValue)
{
    if (id !== null && typeof id === "object" && !Buffer.isBuffer(id))
    {
        const names = [key.partition.name].concat(key.sort ? [key.sort.name] : []);
        const given = Object.keys(id);
        if (given.some(n => !names.includes(n)) || !given.includes(key.partition.name) || sortValue !== undefined && given.includes(names[1]))
        {
            throw invalidArgument(`the lock id ${JSON.stringify(id)} must name the table's key: ${names.map(n => JSON.stringify(n)).join(" and ")}`);
        }
        return itemKey(key, id[key.partition.name], sortValue === undefined ? id[names[1]] : sortValue);
    }
    const out = { [key.partition.name]: keyValue(id, key.partition.type, "the lock id") };
    if (key.sort)
    {
        out[key.sort.name] = keyValue(sortValue === undefined ? FIFO_HEAD : sortValue, key.sort.type, "the sort value");
    }
    return out;
}

/**
 * One lock item as one consistent read finds it, described and judged as `listLocks` does;
 * `null` if there is none. A lock held through a session reads the session's item too; a Fifo
 * head lists its queue (`queue`: `{ position, owner, ticket, state, leaseDurationMs,
 * renewedUnixMs, silentMs }` in queue order, `state` `"waiting"`, `"expired"` or `"finished"`).
 */
async function showLock(options)
{
    const call = await adminCaller(options && options.dynamodb, "showLock");
    const key = await tableOf(call, options.lockTable);
    const Key = itemKey(key, options.id, options.sortValue);
    const r = await call("GetItem", { TableName: options.lockTable, Key, ConsistentRead: true });
    if (!r.Item)
    {
        return null;
    }
    const lock = describeItem(r.Item, key);
    let session = null;
    if (lock.session !== undefined && lock.kind !== "Session")
    {
        const s = await call("GetItem", { TableName: options.lockTable, Key: sessionKey(key, lock.session), ConsistentRead: true });
        session = s.Item ? judge(describeItem(s.Item, key), Date.now(), null) : null;
    }
    let entries;
    if (lock.kind === "Fifo" || lock.holders)
    {
        entries = [];
        let start;
        do
        {
            const page = await call("Query", Object.assign({
                TableName: options.lockTable,
                ConsistentRead: true,
                KeyConditionExpression: "#pk = :pk AND begins_with(#sk, :q)",
                ExpressionAttributeNames: { "#pk": key.partition.name, "#sk": key.sort.name },
                ExpressionAttributeValues: { ":pk": Key[key.partition.name], ":q": { S: FIFO_ENTRY } },
            }, start ? { ExclusiveStartKey: start } : {}));
            entries.push(...(page.Items || []));
            start = page.LastEvaluatedKey;
        }
        while (start);
    }
    const now = Date.now();
    judge(lock, now, session);
    if (entries)
    {
        lock.queue = entries.map(e => describeEntry(e, key, now)).sort((a, b) => a.position - b.position);
        if (lock.kind === "ReadWriteLock")
        {
            for (const e of lock.queue.filter(q => q.permits !== undefined))
            {
                e.mode = e.permits === READ_WRITE_PERMITS ? "exclusive" : "shared";
                delete e.permits;
            }
        }
        lock.waiters = lock.queue.filter(e => e.state === "waiting").length;
    }
    return lock;
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
    // A waiter's place in a Fifo queue is no lock: forcing it would only cost the waiter its turn.
    if (isFifoEntry(Key, key))
    {
        throw invalidArgument(`forceRelease: ${JSON.stringify(plain(Key[key.sort.name]))} is a Fifo queue entry, not a lock:`
            + ` force the lock itself (its head, sort value "${FIFO_HEAD}"); an entry its waiter stopped renewing lapses on its own`);
    }
    const admin = await adminNative(options.dynamodb, "forceRelease",
        { lockTable: options.lockTable, partitionKey: key.partition.name, sortKey: key.sort && key.sort.name });
    const r = await call("GetItem", { TableName: options.lockTable, Key, ConsistentRead: true });
    const lock = r.Item ? describeItem(r.Item, key) : null;
    // The core decides the rest from the item as read (`force::Force`): what it reads again,
    // and in which order it writes.
    const outcome = await admin.forceRelease({ ...nativeKey(key, Key), item: r.Item ? JSON.stringify(r.Item) : undefined, now });
    if (outcome.refused)
    {
        throw forceRefusal(outcome, lock);
    }
    const out = { action: outcome.action, lock };
    if (outcome.freeAfterMs !== undefined)
    {
        out.freeAfterMs = outcome.freeAfterMs;
    }
    // Freed at once: a holder still alive may go on as if it held the lock (not when the
    // session it was held through had ended: nobody holds it then).
    if ((outcome.action === "released" || outcome.action === "deleted") && !outcome.endedSession)
    {
        out.warning = outcome.action === "deleted" ? NOW_WARNING_FAIL_CLOSED : NOW_WARNING;
    }
    return out;
}

// Why the core left the lock `lock` (as first read) alone (`{ refused, reads }`), as an error
// with its `code`.
function forceRefusal({ refused, reads }, lock)
{
    const id = JSON.stringify(lock.id);
    switch (refused)
    {
    case "Changed":
        return codedError("LockChanged", `the lock ${id} changed hands while it was being released: read it again before forcing its release`);
    case "SessionEnded":
        return codedError("LockChanged", `the session ${lock.session} of the lock ${id} ended while its lock was being revoked: read it again`);
    case "TriedOut":
        return codedError("LockChanged", `the lock item of ${id} changed after each of ${reads} reads: read it again before forcing its release`);
    case "CannotBeTold":
        return codedError("HolderCannotBeTold", `the lock ${id} is a FailClosed lock (held by ${JSON.stringify(lock.owner)}): its holder writes nothing while it holds, so nothing can tell it that its lock is gone. Free it with now: true (the command line's --now) only once you know the holder is dead`);
    case "Shared":
        return codedError("NotSupported", `the lock ${id} is a ${lock.kind}'s: its holders share one item, and a waiter reclaims the permits of a holder that has not renewed for its lease, so there is nothing to force`);
    default:
        return codedError("CorruptLockItem", `the lock item of ${id} carries a fencingToken that is no whole number: an operator's write names the version it read and cannot name this one; delete the item by hand`);
    }
}

// What a release with `now` leaves a live holder to do: a FailOpen or Fifo holder (or one
// through a session) is told by its next heartbeat or session renewal; a FailClosed holder
// writes nothing while it holds, so nothing tells it.
const NOW_WARNING = "freed at once: a holder still alive hears \"lost\" only at its next heartbeat or session renewal, and may still be writing while the next holder works";
const NOW_WARNING_FAIL_CLOSED = "freed at once: a FailClosed holder still alive is never told, and may still be writing while the next holder works";

// A DynamoDB attribute value as the native core takes a key value or a `guid`.
function nativeValue(attr)
{
    if (attr.B !== undefined)
    {
        return { b: Buffer.from(attr.B, "base64") };
    }
    return attr.N !== undefined ? { n: attr.N } : { s: attr.S };
}

// The item key `Key` (on the table's key `key`) as the native core takes it.
function nativeKey(key, Key)
{
    return {
        partition: nativeValue(Key[key.partition.name]),
        sort: key.sort ? nativeValue(Key[key.sort.name]) : undefined,
    };
}

// The counter `name` (`fencingToken`, `ticketNext`) of `item` as read, to name in a condition:
// absent, or a whole number. Any other value (the item is corrupt) cannot be named.
function tokenOf(item, name, lock)
{
    const token = item[name];
    if (token === undefined)
    {
        return undefined;
    }
    if (!(typeof token.N === "string" && /^(0|[1-9][0-9]{0,15})$/.test(token.N) && Number(token.N) <= Number.MAX_SAFE_INTEGER))
    {
        throw codedError("CorruptLockItem", `the lock item of ${JSON.stringify(lock.id)} carries ${name} ${JSON.stringify(token)}, which is no whole number: an operator's write names the version it read and cannot name this one; delete the item by hand`);
    }
    return Number(token.N);
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

/**
 * Deletes what a lock table no longer needs, each item on the version just read (a
 * conditional `DeleteItem`: an item that changed since, a lock taken again or a session
 * renewed, is left alone and reported in `changed`):
 * - the items of ended sessions (kind `Session`, `leaseDurationMs` 1): a session's id is never
 *   used again, and a waiter takes a lock whose session's item is gone as it takes one whose
 *   session ended;
 * - with `resetTokens`, also released FailOpen items and released Fifo heads without queue
 *   entries. Their fencing tokens then start again: the next acquisition of such an id is
 *   granted token 1 (or, by a client with `ttlAttribute`, one counted from the time), below
 *   the tokens its earlier holders had. Without it they are kept, and counted in `kept`.
 * Each deletion is the core's `Prune` operation. An item whose `fencingToken` or `ticketNext`
 * is no whole number cannot be named on its version, and is kept too.
 * FailClosed items are never deleted: a FailClosed item is a lock held (`release --force`
 * frees a dead holder's). `dryRun`: nothing is deleted; `deleted` lists what would be.
 * Resolves with `{ deleted, changed, kept }`: the listings deleted (or that would be), those
 * left alone because they changed since the read, and how many released locks were kept.
 */
async function pruneLocks(options)
{
    const call = await adminCaller(options && options.dynamodb, "pruneLocks");
    const key = await tableOf(call, options.lockTable);
    const admin = await adminNative(options.dynamodb, "pruneLocks",
        { lockTable: options.lockTable, partitionKey: key.partition.name, sortKey: key.sort && key.sort.name });
    const items = await scanAll(call, options.lockTable);
    const entries = new Set(items.filter(i => isFifoEntry(i, key)).map(i => JSON.stringify(i[key.partition.name])));
    const deleted = [], changed = [];
    let kept = 0;
    const now = Date.now();
    for (const item of items.filter(i => !isFifoEntry(i, key)))
    {
        const lock = judge(describeItem(item, key), now, null);
        if (lock.state !== "released")
        {
            continue;
        }
        const queued = (lock.kind === "Fifo" || lock.holders !== undefined) && entries.has(JSON.stringify(item[key.partition.name]));
        if (lock.kind !== "Session" && (!options.resetTokens || queued))
        {
            kept++;
            continue;
        }
        const Key = { [key.partition.name]: item[key.partition.name] };
        if (key.sort)
        {
            Key[key.sort.name] = item[key.sort.name];
        }
        if (!options.dryRun)
        {
            // Still released, with the guid, token and Fifo ticket read (a semaphore's head: no
            // permits held, and no holder since, as the token and ticket read say).
            try
            {
                await admin.prune({
                    ...nativeKey(key, Key),
                    guid: item.guid ? nativeValue(item.guid) : undefined,
                    fencingToken: tokenOf(item, "fencingToken", lock),
                    ticketNext: tokenOf(item, "ticketNext", lock),
                    semaphore: lock.holders !== undefined,
                });
            }
            catch (err)
            {
                // A counter that is no whole number cannot be named: such an item is kept.
                if (err.code === "CorruptLockItem")
                {
                    kept++;
                    continue;
                }
                if (err.code !== "ConditionalCheckFailedException")
                {
                    throw err;
                }
                changed.push(lock);
                continue;
            }
        }
        deleted.push(lock);
    }
    return { deleted: deleted.sort(compareIds), changed: changed.sort(compareIds), kept };
}

module.exports = { listLocks, showLock, forceRelease, checkTable, pruneLocks };
