#!/usr/bin/env node
"use strict";

// Command line of dynamodb-lock-native:
//
//   npx dynamodb-lock-native create-table --table locks --partition-key id [options]
//   npx dynamodb-lock-native list --table locks [--held] [--expired] [--released] [--json]
//   npx dynamodb-lock-native show ID --table locks [--sort-value V] [--json]
//   npx dynamodb-lock-native prune --table locks [--dry-run] [--reset-tokens] [--json]
//   npx dynamodb-lock-native release ID --table locks --force [--now] [--sort-value V] [--json]
//   npx dynamodb-lock-native check-table --table locks [--partition-key id] [--json]
//
// Region, endpoint and credentials come from the flags (--region, --profile, --endpoint) or
// the standard AWS environment (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS_PROFILE,
// AWS_ACCESS_KEY_ID, ...).

const { parseArgs } = require("util");

const USAGE = `Usage: dynamodb-lock-native <command> --table <name> [options]

Commands:
  create-table --partition-key <name>   creates a lock table (on-demand unless told), waits
                                        until it is ACTIVE, and enables TTL when
                                        --ttl-attribute is given; a table that exists with the
                                        same key schema is success
  list                                  every lock, sorted by id: id, kind, state, owner,
                                        fencing token, session, first waiter (Fifo: waiters);
                                        --held, --expired, --released keep those states
  show <id>                             one lock, as one consistent read finds it (a Fifo
                                        resource: its queue too); <id> as list prints it
  release <id> --force                  revokes the lock on the version just read: its holder
                                        hears "lost" at its next heartbeat or session renewal,
                                        and the lock is free a lease after the revocation
                                        (FailOpen and Fifo: a new guid, the lease kept; a
                                        session's lock: named on the session's item, which
                                        tells its holder). A FailClosed holder cannot be told:
                                        its lock needs --now. Says whom it displaced
  release <id> --force --now            frees the lock at once (FailClosed: deletes the item;
                                        others: marked released): a holder still alive may go
                                        on writing until its next heartbeat
  prune                                 deletes the items of ended sessions, each on the
                                        version read; with --reset-tokens, released FailOpen
                                        locks and Fifo heads too (their fencing tokens start
                                        again at 1 for the next holder); --dry-run lists them
  check-table                           key schema, TTL, billing, global-table mode; fails on
                                        a table that cannot keep a lock

Options:
  --table <name>                 the lock table (lockTable)
  --partition-key <name>         the partition key attribute (partitionKey)
  --partition-key-type <S|N|B>   its type (default S)
  --sort-key <name>              a sort key attribute (sortKey; Fifo needs one, of type S)
  --sort-key-type <S|N|B>        its type (default S)
  --sort-value <value>           show, release: the lock's sort value (Fifo: the head)
  --ttl-attribute <name>         enable TTL on this Number attribute (ttlAttribute)
  --billing-mode <mode>          PAY_PER_REQUEST (default) or PROVISIONED
  --read-capacity <n>            PROVISIONED read capacity units (default 1)
  --write-capacity <n>           PROVISIONED write capacity units (default 1)
  --wait-ms <ms>                 longest wait for the table to become ACTIVE (default 300000)
  --force                        release: required, the release is not the holder's own
  --now                          release: free the lock at once instead of revoking it
  --held, --expired, --released  list: only locks in these states (any of them)
  --dry-run                      prune: list what would be deleted, delete nothing
  --reset-tokens                 prune: also delete released FailOpen locks and Fifo heads,
                                 whose next holder's fencing token then starts again at 1
  --json                         list, show, release, prune, check-table: JSON for scripts
  --region <region>              the AWS Region (default: the AWS environment or profile)
  --profile <name>               the AWS profile of the shared config and credentials
                                 files, as the AWS CLI takes it (default: AWS_PROFILE)
  --endpoint <url>               default: the AWS environment, else the region's endpoint
  -h, --help                     this text
  --version                      the package's version

States (list, show; by this host's clock against the writer's, which may differ a little):
  held                           FailClosed: until its item is deleted; FailOpen, Fifo: the
                                 holder's last recorded renewal is within its lease (or the
                                 item records none: "renewal time not recorded")
  expired                        the holder has not renewed for longer than its lease, or
                                 the lock's session expired, ended or its item is gone: a
                                 waiter can take it
  released                       FailOpen, Fifo: free (a Session: ended)
  held through session S         a lock held through session S: live while S renews

Exit status: 0 on success (create-table: the table is ACTIVE; list: the table was read,
also when its reader closed the pipe early; show: the lock exists; release: the lock is
free; prune: the table was read and the deletions tried; check-table: the table can keep a
lock), 1 when it failed (the table could not be made, is missing or differs, no such lock,
the item changed since it was read, a table that cannot keep a lock, a DynamoDB error),
2 on a usage error (a flag missing or malformed).`;

const OPTIONS = {
    table: { type: "string" },
    "partition-key": { type: "string" },
    "partition-key-type": { type: "string" },
    "sort-key": { type: "string" },
    "sort-key-type": { type: "string" },
    "ttl-attribute": { type: "string" },
    "billing-mode": { type: "string" },
    "read-capacity": { type: "string" },
    "write-capacity": { type: "string" },
    "wait-ms": { type: "string" },
    "sort-value": { type: "string" },
    force: { type: "boolean" },
    now: { type: "boolean" },
    held: { type: "boolean" },
    expired: { type: "boolean" },
    released: { type: "boolean" },
    "dry-run": { type: "boolean" },
    "reset-tokens": { type: "boolean" },
    json: { type: "boolean" },
    region: { type: "string" },
    profile: { type: "string" },
    endpoint: { type: "string" },
    help: { type: "boolean", short: "h" },
    version: { type: "boolean" },
};

function fail(message)
{
    process.stderr.write(`dynamodb-lock-native: ${message}\n`);
    process.exitCode = 2;
}

// The flag behind each createTable option, so that a problem is told in the terms of the
// command line.
const FLAGS = {
    lockTable: "--table",
    partitionKey: "--partition-key",
    partitionKeyType: "--partition-key-type",
    sortKey: "--sort-key",
    sortKeyType: "--sort-key-type",
    ttlAttribute: "--ttl-attribute",
    billingMode: "--billing-mode",
    readCapacityUnits: "--read-capacity",
    writeCapacityUnits: "--write-capacity",
    waitMs: "--wait-ms",
    "dynamodb.region": "--region",
    "dynamodb.endpoint": "--endpoint",
};

class UsageError extends Error {}

// createTable's refusal of its options, retold with flags; undefined for any other error.
function usageProblem(err)
{
    let text;
    if (err && err.code === "InvalidArgument" && /^createTable: /.test(err.message))
    {
        text = err.message.slice("createTable: ".length);
    }
    else if (err && err.name === "ValidationError")
    {
        text = err.message;
    }
    else
    {
        return undefined;
    }
    const flag = name => FLAGS[name] || name;
    return text
        .replace(/"([\w.]+)"/g, (whole, name) => (FLAGS[name] ? FLAGS[name] : whole))
        .replace(/\b(partitionKey|sortKey)\b(?!")/g, flag);
}

function integer(text, flag)
{
    if (text === undefined)
    {
        return undefined;
    }
    const n = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(n))
    {
        throw new UsageError(`${flag} must be a whole number, not "${text}"`);
    }
    return n;
}

// Where the commands reach DynamoDB, from --region, --profile and --endpoint.
function dynamodbOf(values)
{
    const dynamodb = {};
    if (values.region !== undefined)
    {
        if (!/^[a-z0-9-]+$/.test(values.region))
        {
            throw new UsageError(`--region must be an AWS Region name such as us-east-1, not "${values.region}"`);
        }
        dynamodb.region = values.region;
    }
    if (values.profile !== undefined)
    {
        if (values.profile === "")
        {
            throw new UsageError("--profile must name a profile of the AWS config or credentials file");
        }
        // As the AWS CLI does: the named profile's credentials, not those of the environment.
        process.env.AWS_PROFILE = values.profile;
        for (const name of ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"])
        {
            delete process.env[name];
        }
    }
    if (values.endpoint !== undefined)
    {
        if (!/^https?:\/\/[^/]/.test(values.endpoint) || !URL.canParse(values.endpoint))
        {
            throw new UsageError(`--endpoint must be an http or https URL, not "${values.endpoint}"`);
        }
        dynamodb.endpoint = values.endpoint;
    }
    return dynamodb;
}

async function createTable(values)
{
    const dynamodb = dynamodbOf(values);
    const options = {
        dynamodb,
        lockTable: values.table,
        partitionKey: values["partition-key"],
        partitionKeyType: values["partition-key-type"],
        sortKey: values["sort-key"],
        sortKeyType: values["sort-key-type"],
        ttlAttribute: values["ttl-attribute"],
        billingMode: values["billing-mode"],
        readCapacityUnits: integer(values["read-capacity"], "--read-capacity"),
        writeCapacityUnits: integer(values["write-capacity"], "--write-capacity"),
        waitMs: integer(values["wait-ms"], "--wait-ms"),
    };
    for (const key of Object.keys(options))
    {
        if (options[key] === undefined)
        {
            delete options[key];
        }
    }
    const result = await require("..").createTable(options);
    const ttl = result.ttlAttribute ? `, TTL on "${result.ttlAttribute}"` : "";
    process.stdout.write(`Table "${result.tableName}" ${result.created ? "created" : "already exists"} and is ACTIVE${ttl}.\n`);
}

// `empty`: the text is nothing at all (a list with no lock prints no line).
function print(values, json, text, empty = false)
{
    if (values.json)
    {
        process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
    }
    else if (!empty)
    {
        process.stdout.write(`${text}\n`);
    }
}

function tableOf(values)
{
    if (!values.table)
    {
        throw new UsageError("--table is required");
    }
    return { dynamodb: dynamodbOf(values), lockTable: values.table };
}

// A duration for people: "2 s", "5 min", "3 h", "4 days".
function duration(ms)
{
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 120)
    {
        return `${s} s`;
    }
    if (s < 7200)
    {
        return `${Math.round(s / 60)} min`;
    }
    return s < 172800 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86400)} days`;
}

// How long ago `unixMs` was ("0 s" for a time ahead of this host's clock, which may be a
// little off the writer's).
function ago(unixMs, now = Date.now())
{
    return duration(now - unixMs);
}

// A lease for people: "10 s", "2.5 s", "800 ms".
function lease(ms)
{
    return ms < 1000 ? `${ms} ms` : ms < 120000 ? `${Math.round(ms / 100) / 10} s` : duration(ms);
}

// A lock id as `list` prints it and `show`, `release` take it: a partition value as it is,
// an id with a sort value as JSON.
function idText(id)
{
    return typeof id === "object" && !Buffer.isBuffer(id) ? JSON.stringify(id) : String(id);
}

// A lock id in a sentence: a partition value quoted, an id with a sort value as JSON.
function idName(id)
{
    return typeof id === "object" && !Buffer.isBuffer(id) ? JSON.stringify(id) : JSON.stringify(String(id));
}

// The lock id given on the command line: JSON of an object (as `list` prints an id with a
// sort value) is that object, anything else the partition value as typed.
function idOf(text)
{
    if (text.startsWith("{"))
    {
        try
        {
            const id = JSON.parse(text);
            if (id !== null && typeof id === "object" && !Array.isArray(id))
            {
                return id;
            }
        }
        catch
        {
            // A partition value that begins with "{".
        }
    }
    return text;
}

// The state of a lock, judged when it was read (lib/inspect.js `judge`), for people.
function stateText(lock)
{
    if (lock.kind === "FailClosed")
    {
        return lock.lastWrittenUnixMs === undefined ? "held" : `held (last written ${ago(lock.lastWrittenUnixMs)} ago)`;
    }
    if (lock.state === "released")
    {
        const word = lock.kind === "Session" ? "ended" : "released";
        return lock.lastWrittenUnixMs === undefined ? word : `${word} ${ago(lock.lastWrittenUnixMs)} ago`;
    }
    if (lock.holders)
    {
        // A semaphore's head: each holder renews on its own (shown with `show`).
        return lock.state === "expired" ? "expired (every holder silent for longer than its lease)" : "held";
    }
    if (lock.kind === "Session")
    {
        return lock.state === "expired"
            ? `expired (silent for ${duration(lock.silentMs)}, lease ${lease(lock.leaseDurationMs)})`
            : `live (${lock.renewedUnixMs === undefined ? "renewal time not recorded" : `renewed ${ago(lock.renewedUnixMs)} ago`}, lease ${lease(lock.leaseDurationMs)})`;
    }
    if (lock.session !== undefined)
    {
        const s = lock.session;
        switch (lock.sessionState)
        {
            case "live":
                return `held through session ${s} (live, ${lock.sessionRenewedUnixMs === undefined ? "renewal time not recorded" : `renewed ${ago(lock.sessionRenewedUnixMs)} ago`})`;
            case "expired":
                return `expired (session ${s} silent for ${duration(lock.sessionSilentMs)}, lease ${lease(lock.sessionLeaseDurationMs)})`;
            case "ended":
                return `expired (session ${s} ended)`;
            default:
                return `expired (session ${s} ended, its item deleted)`;
        }
    }
    const l = lock.leaseDurationMs === undefined ? "" : `, lease ${lease(lock.leaseDurationMs)}`;
    if (lock.revoked)
    {
        return lock.state === "expired"
            ? `expired (revoked ${ago(lock.revokedUnixMs)} ago${l})`
            : `revoked ${ago(lock.revokedUnixMs)} ago (free a lease after it${l})`;
    }
    if (lock.state === "expired")
    {
        return `expired (holder silent for ${duration(lock.silentMs)}${l})`;
    }
    return `held (${lock.renewedUnixMs === undefined ? "renewal time not recorded" : `renewed ${ago(lock.renewedUnixMs)} ago`}${l})`;
}

// A lock listing as one line for people.
function line(lock)
{
    const parts = [idText(lock.id), lock.kind, stateText(lock)];
    if (lock.owner !== undefined)
    {
        parts.push(`owner ${JSON.stringify(lock.owner)}`);
    }
    if (lock.fencingToken !== undefined)
    {
        parts.push(`fencingToken ${lock.fencingToken}`);
    }
    if (lock.locks !== undefined)
    {
        parts.push(`${lock.locks} ${lock.locks === 1 ? "lock" : "locks"}`);
    }
    if (lock.waiterMarkedUnixMs !== undefined)
    {
        const who = lock.waiterOwner === undefined ? "(owner not recorded)" : JSON.stringify(lock.waiterOwner);
        parts.push(`first waiter ${who} (marked ${ago(lock.waiterMarkedUnixMs)} ago)`);
    }
    if (lock.permits !== undefined)
    {
        parts.push(`${lock.permitsHeld} of ${lock.permits} permits held`);
    }
    if (lock.holders && lock.holders.length > 0)
    {
        parts.push(`${lock.holders.length} ${lock.holders.length === 1 ? "holder" : "holders"}`);
    }
    if (lock.waiters)
    {
        parts.push(`${lock.waiters} waiting`);
    }
    return parts.join("  ");
}

// What a semaphore's hold or waiter asks for: its permits, or a ReadWriteLock's mode.
function permitsText(e)
{
    if (e.mode !== undefined)
    {
        return e.mode;
    }
    if (e.permits === undefined)
    {
        return undefined;
    }
    return e.permits >= 2 ** 40 ? "exclusive" : `${e.permits} ${e.permits === 1 ? "permit" : "permits"}`;
}

// A semaphore's holders, one a line.
function holderLines(holders)
{
    return ["holders:"].concat(holders.map(h =>
    {
        const l = `, lease ${lease(h.leaseDurationMs)}`;
        const state = h.state === "expired" ? `expired (holder silent for ${duration(h.silentMs)}${l})`
            : `held (${h.renewedUnixMs === undefined ? "renewal time not recorded" : `renewed ${ago(h.renewedUnixMs)} ago`}${l})`;
        return [`  ${permitsText(h)}`, state, `owner ${JSON.stringify(h.owner)}`].join("  ");
    }));
}

// A Fifo head's queue, one entry a line.
function queueLines(queue)
{
    if (queue.length === 0)
    {
        return ["queue: empty"];
    }
    return ["queue:"].concat(queue.map(e =>
    {
        const l = e.leaseDurationMs === undefined ? "" : `, lease ${lease(e.leaseDurationMs)}`;
        const state = e.state === "finished" ? "finished"
            : e.state === "expired" ? `expired (waiter silent for ${duration(e.silentMs)}${l})`
                : `waiting (${e.renewedUnixMs === undefined ? "renewal time not recorded" : `renewed ${ago(e.renewedUnixMs)} ago`}${l})`;
        const parts = [`  position ${e.position}`, state];
        if (e.owner !== undefined)
        {
            parts.push(`owner ${JSON.stringify(e.owner)}`);
        }
        if (e.ticket !== undefined)
        {
            parts.push(`ticket ${e.ticket}`);
        }
        if (permitsText(e) !== undefined)
        {
            parts.push(`asks for ${permitsText(e)}`);
        }
        return parts.join("  ");
    }));
}

// What prune did (or would do), for people.
function pruneText(r, dryRun)
{
    const lines = r.deleted.map(l => `${dryRun ? "would delete" : "deleted"}  ${line(l)}`);
    const sessions = r.deleted.filter(l => l.kind === "Session").length;
    const locks = r.deleted.length - sessions;
    const n = (count, one, many) => `${count} ${count === 1 ? one : many}`;
    lines.push(`${dryRun ? "Would delete" : "Deleted"} ${n(r.deleted.length, "item", "items")}: ${n(sessions, "ended session", "ended sessions")}, ${n(locks, "released lock", "released locks")}${dryRun ? " (--dry-run: nothing deleted)" : ""}.`);
    if (r.changed.length > 0)
    {
        lines.push(`Left alone ${n(r.changed.length, "item that", "items that")} changed since ${r.changed.length === 1 ? "it was" : "they were"} read: ${r.changed.map(l => idText(l.id)).join(", ")}.`);
    }
    if (r.kept > 0)
    {
        lines.push(`Kept ${n(r.kept, "released lock", "released locks")}: deleting one starts its fencing tokens again at 1 for the next holder (--reset-tokens deletes them).`);
    }
    return lines.join("\n");
}

const COMMANDS = {
    "create-table": { args: 0, run: values => createTable(values) },
    list: {
        args: 0,
        async run(values)
        {
            const states = ["held", "expired", "released"].filter(state => values[state]);
            const all = [];
            for await (const lock of require("..").listLocks(tableOf(values)))
            {
                if (states.length === 0 || states.includes(lock.state))
                {
                    all.push(lock);
                }
            }
            print(values, all, all.map(line).join("\n"), all.length === 0);
        },
    },
    show: {
        args: 1,
        async run(values, [text])
        {
            const id = idOf(text);
            const lock = await require("..").showLock(Object.assign(tableOf(values), { id, sortValue: values["sort-value"] }));
            const said = lock ? [line(lock)].concat(lock.holders && lock.holders.length ? holderLines(lock.holders) : [], lock.queue ? queueLines(lock.queue) : []).join("\n") : `no lock ${idName(id)} in table "${values.table}"`;
            print(values, lock, said);
            if (!lock)
            {
                process.exitCode = 1;
            }
        },
    },
    release: {
        args: 1,
        async run(values, [text])
        {
            if (!values.force)
            {
                throw new UsageError("release needs --force: it frees a lock its holder did not release (use it only for a holder known to be dead)");
            }
            const id = idOf(text);
            const r = await require("..").forceRelease(Object.assign(tableOf(values), { id, sortValue: values["sort-value"], now: Boolean(values.now) }));
            const name = idName(id);
            const whom = r.lock ? ` (was held by ${r.lock.owner === undefined ? "an unnamed owner" : JSON.stringify(r.lock.owner)}${r.lock.fencingToken === undefined ? "" : `, fencingToken ${r.lock.fencingToken}`})` : "";
            const said = {
                revoked: `revoked ${name}${whom}: a holder still alive hears "lost" at its next heartbeat or session renewal; the lock is free ${r.freeAfterMs} ms after this revocation`,
                deleted: `deleted the lock item of ${name}${whom}. Warning: ${r.warning}`,
                released: `released ${name}${whom}${r.warning ? `. Warning: ${r.warning}` : ""}`,
                "already-free": `${name} was already released: nothing done`,
                absent: `no lock ${name} in table "${values.table}": nothing done`,
            }[r.action] || `${r.action} ${name}${whom}`;
            print(values, r, said);
            if (r.action === "absent")
            {
                process.exitCode = 1;
            }
        },
    },
    prune: {
        args: 0,
        async run(values)
        {
            const dryRun = Boolean(values["dry-run"]);
            const r = await require("..").pruneLocks(Object.assign(tableOf(values), { dryRun, resetTokens: Boolean(values["reset-tokens"]) }));
            print(values, Object.assign({ dryRun }, r), pruneText(r, dryRun));
        },
    },
    "check-table": {
        args: 0,
        async run(values)
        {
            const r = await require("..").checkTable(Object.assign(tableOf(values), { partitionKey: values["partition-key"], sortKey: values["sort-key"] }));
            const key = `${r.partitionKey.name} (${r.partitionKey.type})${r.sortKey ? `, sort key ${r.sortKey.name} (${r.sortKey.type})` : ""}`;
            const text = [
                `Table "${r.table}": ${r.status}, key ${key}, billing ${r.billingMode}, TTL ${r.ttl.status}${r.ttl.attribute ? ` on "${r.ttl.attribute}"` : ""}`,
                r.global ? `Global table in Regions ${r.global.replicas.join(", ")}, ${r.global.consistency} consistency` : "Not a global table",
                ...r.problems.map(p => `Problem: ${p}`),
                ...r.limits.map(l => `Limit: ${l}`),
                r.ok ? "It can keep a lock." : "It cannot keep a lock.",
            ].join("\n");
            print(values, r, text);
            if (!r.ok)
            {
                process.exitCode = 1;
            }
        },
    },
};

async function main(argv)
{
    let parsed;
    try
    {
        parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
    }
    catch (err)
    {
        return fail(`${err.message}\n\n${USAGE}`);
    }
    const { values, positionals } = parsed;
    if (values.help)
    {
        process.stdout.write(`${USAGE}\n`);
        return;
    }
    if (values.version)
    {
        process.stdout.write(`${require("../package.json").version}\n`);
        return;
    }
    const command = COMMANDS[positionals[0]];
    if (!command)
    {
        return fail(`expected a command: ${Object.keys(COMMANDS).join(", ")}\n\n${USAGE}`);
    }
    if (positionals.length !== command.args + 1)
    {
        return fail(`${positionals[0]} takes ${command.args === 0 ? "no argument" : "the lock id"}\n\n${USAGE}`);
    }
    try
    {
        await command.run(values, positionals.slice(1));
    }
    catch (err)
    {
        if (err instanceof UsageError)
        {
            return fail(`${err.message}\n\n${USAGE}`);
        }
        const usage = usageProblem(err);
        if (usage !== undefined)
        {
            return fail(`${usage}\n\n${USAGE}`);
        }
        process.stderr.write(`dynamodb-lock-native: ${err.code ? `${err.code}: ` : ""}${err.message}\n`);
        process.exitCode = 1;
    }
}

// A reader that stops early (`list | head -1`) closes the pipe: what it did not read is not
// wanted, which is no failure.
process.stdout.on("error", err =>
{
    if (err.code === "EPIPE")
    {
        process.exit(process.exitCode || 0);
    }
    process.stderr.write(`dynamodb-lock-native: cannot write the output: ${err.message}\n`);
    process.exit(1);
});

main(process.argv.slice(2));
