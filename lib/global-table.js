"use strict";

// Refusing a global table in the eventually consistent mode (docs/tables.md, "Global tables").
// There a conditional write is checked against its own Region's copy and the last writer wins,
// so two Regions can grant one lock at once. A client learns the table's mode with one
// DescribeTable, sent beside its first acquisition so that it adds no latency: if the table is
// such a one, that acquisition's lock is released and the error returned, and every later
// acquisition refuses at once. A DescribeTable refused for permissions (AccessDeniedException)
// is warned about once per table with the permission to grant, and locking proceeds; one that
// got no answer or could not be signed (networking, timeouts, credentials, configuration,
// throttling, 5xx) warns of nothing, since the acquisitions report that cause themselves, and is
// sent again with the next acquisition, a few times at most; any other failure is warned about
// with its own cause. `allowEventuallyConsistentGlobalTable:
// true` turns the check off. Over a user's own object, the check calls its `describeTable`
// when it has one, and is skipped silently when it has none.
//
// A global table with multi-Region strong consistency (MRSC) keeps a lock, but has neither TTL
// nor transactions: a client that writes a TTL attribute (`ttlAttribute`, and every Fifo client,
// whose queue entries carry one, by default "ttl") is refused there the same way, and a lock
// taken there refuses `conditionCheck()`.

const bridge = require("./bridge.js");
const { debug, shownError } = require("./debug.js");

const REFUSED = "EventuallyConsistentGlobalTable";
const STRONG_LIMIT = "StronglyConsistentGlobalTableLimit";
const UNKNOWN_MODE = "DYNAMODB_LOCK_NATIVE_TABLE_MODE_UNKNOWN";

// Tables whose failed DescribeTable was already warned about, in this process.
const warned = new Set();

// Codes of a DescribeTable refused for want of a permission.
const PERMISSION_CODES = new Set(["AccessDeniedException", "AccessDenied", "UnauthorizedOperation", "NotAuthorized", "HttpStatus403"]);

// Codes of a DescribeTable that got no answer or could not be sent as it should: the lock
// requests meet the same cause and report it themselves.
const UNANSWERED_CODES = new Set([
    "NetworkingError", "TimeoutError", "CredentialsError", "ConfigError", "InvalidResponse", "CRC32CheckFailed",
    "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException", "InvalidClientTokenId",
    "MissingAuthenticationTokenException", "IncompleteSignatureException", "RequestExpired",
    "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded", "HttpStatus429",
    "InternalServerError", "ServiceUnavailable", "ServiceUnavailableException",
]);

// How many DescribeTables a client sends that go unanswered while its locks are granted (one
// beside each acquisition) before it stops checking and warns.
const MOST_UNANSWERED = 3;

function codeOf(error)
{
    return (error && (error.code || error.name)) || "Error";
}

function unanswered(code)
{
    return UNANSWERED_CODES.has(code) || /^HttpStatus5\d\d$/.test(code);
}

// The Regions of a global table in multi-Region strong consistency, or undefined.
function strongRegions(table)
{
    const replicas = ((table && table.Replicas) || []).map(r => r.RegionName);
    return replicas.length > 0 && table.MultiRegionConsistency === "STRONG" ? replicas : undefined;
}

// The error for what a strongly consistent global table cannot do: `limit` "TTL" or
// "transactions", `what` the sentence on what was asked of it.
function strongLimit(tableName, regions, limit, what)
{
    const err = new Error(`Lock table "${tableName}" is a global table with multi-Region strong consistency (Regions ${regions.join(", ")}), `
        + `which supports no ${limit}: ${what}`);
    err.code = STRONG_LIMIT;
    err.tableName = tableName;
    err.regions = regions;
    err.limit = limit;
    return err;
}

// The TTL attribute a client of `kind` writes with `config`, or undefined.
function ttlWritten(kind, config)
{
    if (config.ttlAttribute !== undefined)
    {
        return config.ttlAttribute;
    }
    return kind === "Fifo" ? "ttl" : undefined;
}

// The refusal of `table` (DescribeTable's `Table`) to a client of `kind` with `config`, or
// undefined when its locks are safe and work there.
function refusalOf(table, tableName, kind, config)
{
    const replicas = ((table && table.Replicas) || []).map(r => r.RegionName);
    const consistency = table && table.MultiRegionConsistency;
    const strong = strongRegions(table);
    if (strong)
    {
        const ttl = ttlWritten(kind, config || {});
        if (ttl === undefined)
        {
            return undefined;
        }
        return strongLimit(tableName, strong, "TTL", kind === "Fifo"
            ? `a Fifo client writes its TTL attribute ("${ttl}"${config && config.ttlAttribute !== undefined ? "" : ", the default"}) on queue entries, and nothing would remove those of crashed waiters. `
                + "Use FailOpen or FailClosed without ttlAttribute there, or a table in one Region for Fifo."
            : `ttlAttribute "${ttl}" would never remove an item. Leave ttlAttribute out for this table.`);
    }
    if (replicas.length === 0 || (consistency !== undefined && consistency !== "EVENTUAL"))
    {
        return undefined;
    }
    const err = new Error(`Lock table "${tableName}" is a global table in the eventually consistent mode (Regions ${replicas.join(", ")}): `
        + "a conditional write is checked against its own Region's copy and the last writer wins, so two Regions could grant one lock at once. "
        + "Use a table in one Region or a global table with strong consistency, or set allowEventuallyConsistentGlobalTable: true to lock on it anyway.");
    err.code = REFUSED;
    err.tableName = tableName;
    err.regions = replicas;
    return err;
}

// What `lock.conditionCheck()` throws for a lock on a strongly consistent global table.
function noTransactions(strong)
{
    return strongLimit(strong.tableName, strong.regions, "transactions",
        "lock.conditionCheck() builds an entry of TransactWriteItems, which such a table refuses. Fence the write with the lock's fencingToken instead.");
}

// Warns once per table that its mode could not be checked: what the failure was, and what to
// do about it (the permission to grant only when the request was refused for want of it).
function warnOnce(tableName, error, tries)
{
    if (warned.has(tableName))
    {
        return;
    }
    warned.add(tableName);
    const code = codeOf(error);
    const said = error && error.message ? `${code}: ${error.message}` : code;
    const failed = tries > 1 ? `failed ${tries} times (${said})` : `failed (${said})`;
    const whatToDo = PERMISSION_CODES.has(code)
        ? "Allow dynamodb:DescribeTable on the table, or set allowEventuallyConsistentGlobalTable: true to skip the check."
        : code === "UnknownOperationException"
            ? "The endpoint does not offer DescribeTable; set allowEventuallyConsistentGlobalTable: true to skip the check."
            : "Set allowEventuallyConsistentGlobalTable: true to skip the check.";
    process.emitWarning(
        `DescribeTable on lock table "${tableName}" ${failed}: whether it is a global table in the eventually consistent mode,`
            + ` on which locks are unsafe, could not be checked, and locking proceeds. ${whatToDo}`,
        { type: "DynamoDBLockNativeWarning", code: UNKNOWN_MODE });
}

// DescribeTable's `Table` through the user's object (`describeTable(params, callback)`, or a
// returned promise); undefined when the object has no such method.
function describeThroughObject(db, tableName)
{
    if (!db || typeof db.describeTable !== "function")
    {
        return Promise.resolve(undefined);
    }
    return new Promise((resolve, reject) =>
    {
        const done = (err, out) => (err ? reject(err) : resolve(out && out.Table ? out.Table : null));
        const returned = db.describeTable({ TableName: tableName }, done);
        const promise = returned && typeof returned.promise === "function" ? returned.promise() : returned;
        if (promise && typeof promise.then === "function")
        {
            promise.then(out => done(null, out), done);
        }
    });
}

async function describeTable(self)
{
    const tableName = self._config.lockTable;
    if (self._transport === "object")
    {
        return describeThroughObject(self._config.dynamodb, tableName);
    }
    const client = self._native || await self._nativeReady;
    // The client's own check: it keeps no process alive after the acquisitions that asked
    // for it are over (its credentials may be slow to come, or never).
    const outcome = await bridge.request(request => client.startAdmin(request, "DescribeTable", JSON.stringify({ TableName: tableName })), true);
    return (outcome.body ? JSON.parse(outcome.body) : {}).Table || null;
}

// The client's one check of its table: resolves with the refusal, or undefined.
function tableCheck(self)
{
    if (!self._tableCheck)
    {
        const tableName = self._config.lockTable;
        self._tableCheck = describeTable(self).then(
            table =>
            {
                const strong = table === undefined ? undefined : strongRegions(table);
                self._strongGlobal = strong && { tableName, regions: strong };
                self._tableRefusal = table === undefined ? undefined : refusalOf(table, tableName, self._kind, self._config);
                // Settled for good: later acquisitions skip the check's wait.
                self._tableSafe = !self._tableRefusal;
                debug(() => `table check of "${tableName}": ${table === undefined ? "skipped (the dynamodb object has no describeTable)"
                    : self._tableRefusal ? `refused: ${self._tableRefusal.code}` : "locks are safe on it"}`);
                return self._tableRefusal;
            },
            error =>
            {
                const code = codeOf(error);
                debug(() => `table check of "${tableName}": DescribeTable failed: ${shownError(error)}`);
                // A missing table is the acquisition's own error to report, not a warning;
                // the next acquisition checks again, on the table once it exists.
                if (code === "ResourceNotFoundException")
                {
                    self._tableCheck = undefined;
                    return undefined;
                }
                // No answer, or a request that could not be signed: the acquisitions meet the
                // same cause and report it; the next one checks again. Only once locks have
                // been granted meanwhile (the lock requests get through, DescribeTable does
                // not) does it count, and a few such failures are warned about.
                if (unanswered(code))
                {
                    if (self._metrics.succeeded > 0)
                    {
                        self._tableUnanswered = (self._tableUnanswered || 0) + 1;
                    }
                    if (!(self._tableUnanswered >= MOST_UNANSWERED))
                    {
                        self._tableCheck = undefined;
                        return undefined;
                    }
                }
                warnOnce(tableName, error, self._tableUnanswered || 1);
                return undefined;
            });
    }
    return self._tableCheck;
}

// The check's answer, waited for at most `ms` (then undefined: locking proceeds, and a later
// answer still refuses later acquisitions).
function within(check, ms)
{
    let timer;
    // Referenced: the acquisition that waits keeps the process alive, as its check does not.
    const late = new Promise(resolve =>
    {
        timer = setTimeout(resolve, ms);
    });
    return Promise.race([check, late]).finally(() => clearTimeout(timer));
}

// The acquisition `start` begins, checked against the table's mode. `waitMs`: the longest
// wait for the check's answer once the lock is granted.
function checked(self, start, waitMs)
{
    if (self._config.allowEventuallyConsistentGlobalTable === true)
    {
        return start();
    }
    if (self._tableRefusal)
    {
        return Promise.reject(self._tableRefusal);
    }
    if (self._tableSafe)
    {
        return self._strongGlobal ? start().then(lock => marked(self, lock)) : start();
    }
    const check = tableCheck(self);
    return start().then(
        lock => within(check, waitMs).then(refusal =>
        {
            if (!refusal)
            {
                // A lock on a strongly consistent global table refuses conditionCheck(), also
                // when the check answers after the lock was handed out.
                check.then(() => marked(self, lock), () => {});
                return marked(self, lock);
            }
            return lock.release().catch(() => {}).then(() =>
            {
                throw refusal;
            });
        }),
        error =>
        {
            throw self._tableRefusal || error;
        });
}

function marked(self, lock)
{
    if (self._strongGlobal && lock && lock._strongGlobal === undefined)
    {
        lock._strongGlobal = self._strongGlobal;
    }
    return lock;
}

module.exports = { checked, refusalOf, noTransactions, strongRegions };
