#!/usr/bin/env node
"use strict";

// Command line of dynamodb-lock-native:
//
//   npx dynamodb-lock-native create-table --table locks --partition-key id [options]
//   npx dynamodb-lock-native list --table locks [--json]
//   npx dynamodb-lock-native show ID --table locks [--sort-value V] [--json]
//   npx dynamodb-lock-native release ID --table locks --force [--sort-value V] [--json]
//   npx dynamodb-lock-native check-table --table locks [--partition-key id] [--json]
//
// Region, endpoint and credentials come from the flags or the standard AWS environment
// (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS_PROFILE, AWS_ACCESS_KEY_ID, ...).

const { parseArgs } = require("util");

const USAGE = `Usage: dynamodb-lock-native <command> --table <name> [options]

Commands:
  create-table --partition-key <name>   creates a lock table (on-demand unless told), waits
                                        until it is ACTIVE, and enables TTL when
                                        --ttl-attribute is given; a table that exists with the
                                        same key schema is success
  list                                  every lock in the table: id, kind, owner, fencing
                                        token, held or released, first waiter (Fifo: waiters)
  show <id>                             one lock, as one consistent read finds it
  release <id> --force                  frees a dead holder's lock on the version just read:
                                        FailClosed deletes the item if it still carries that
                                        guid; FailOpen and Fifo mark it released with a new
                                        guid, so a live holder's next heartbeat fails and it
                                        hears "lost"; says whom it displaced
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
  --json                         list, show, release, check-table: JSON for scripts
  --region <region>              default: the AWS environment
  --endpoint <url>               default: the AWS environment, else the region's endpoint
  -h, --help                     this text

Exit status: 0 on success (create-table: the table is ACTIVE; show: the lock exists;
release: the lock is free; check-table: the table can keep a lock), 1 when it failed (the
table could not be made or differs, no such lock, the item changed since it was read, a
table that cannot keep a lock, a DynamoDB error), 2 on a usage error (a flag missing or
malformed).`;

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
    json: { type: "boolean" },
    region: { type: "string" },
    endpoint: { type: "string" },
    help: { type: "boolean", short: "h" },
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

// Where the commands reach DynamoDB, from --region and --endpoint.
function dynamodbOf(values)
{
    const dynamodb = {};
    if (values.region !== undefined)
    {
        dynamodb.region = values.region;
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

function print(values, json, text)
{
    process.stdout.write(values.json ? `${JSON.stringify(json, null, 2)}\n` : `${text}\n`);
}

function tableOf(values)
{
    if (!values.table)
    {
        throw new UsageError("--table is required");
    }
    return { dynamodb: dynamodbOf(values), lockTable: values.table };
}

// How long ago `unixMs` was, for people: "2 s", "5 min", "3 h", "4 days" ("0 s" for a time
// ahead of this host's clock, which may be a little off the writer's).
function ago(unixMs, now = Date.now())
{
    const s = Math.max(0, Math.round((now - unixMs) / 1000));
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

// A lock listing as one line for people.
function line(lock)
{
    const id = typeof lock.id === "object" && !Buffer.isBuffer(lock.id) ? JSON.stringify(lock.id) : String(lock.id);
    const parts = [id, lock.kind, lock.held ? "held" : "released"];
    if (lock.owner !== undefined)
    {
        parts.push(`owner ${JSON.stringify(lock.owner)}`);
    }
    if (lock.fencingToken !== undefined)
    {
        parts.push(`fencingToken ${lock.fencingToken}`);
    }
    if (lock.held && lock.leaseDurationMs !== undefined)
    {
        parts.push(`lease ${lock.leaseDurationMs} ms`);
    }
    if (lock.lastWrittenUnixMs !== undefined)
    {
        parts.push(`${lock.held && lock.kind !== "FailClosed" ? "renewed" : "last written"} ${ago(lock.lastWrittenUnixMs)} ago`);
    }
    if (lock.waiter !== undefined)
    {
        parts.push(`first waiter ${lock.waiter}`);
    }
    if (lock.waiters)
    {
        parts.push(`${lock.waiters} waiting`);
    }
    return parts.join("  ");
}

const COMMANDS = {
    "create-table": { args: 0, run: values => createTable(values) },
    list: {
        args: 0,
        async run(values)
        {
            const all = [];
            for await (const lock of require("..").listLocks(tableOf(values)))
            {
                all.push(lock);
                if (!values.json)
                {
                    process.stdout.write(`${line(lock)}\n`);
                }
            }
            if (values.json)
            {
                print(values, all);
            }
        },
    },
    show: {
        args: 1,
        async run(values, [id])
        {
            const lock = await require("..").showLock(Object.assign(tableOf(values), { id, sortValue: values["sort-value"] }));
            print(values, lock, lock ? line(lock) : `no lock ${JSON.stringify(id)} in table "${values.table}"`);
            if (!lock)
            {
                process.exitCode = 1;
            }
        },
    },
    release: {
        args: 1,
        async run(values, [id])
        {
            if (!values.force)
            {
                throw new UsageError("release needs --force: it frees a lock its holder did not release (use it only for a holder known to be dead)");
            }
            const r = await require("..").forceRelease(Object.assign(tableOf(values), { id, sortValue: values["sort-value"] }));
            const whom = r.lock ? ` (was held by ${r.lock.owner === undefined ? "an unnamed owner" : JSON.stringify(r.lock.owner)}${r.lock.fencingToken === undefined ? "" : `, fencingToken ${r.lock.fencingToken}`})` : "";
            const said = {
                deleted: `deleted the lock item of ${JSON.stringify(id)}${whom}`,
                released: `released ${JSON.stringify(id)}${whom}; a holder still alive hears "lost" at its next heartbeat`,
                "already-free": `${JSON.stringify(id)} was already released: nothing done`,
                absent: `no lock ${JSON.stringify(id)} in table "${values.table}": nothing done`,
            }[r.action];
            print(values, r, said);
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

main(process.argv.slice(2));
