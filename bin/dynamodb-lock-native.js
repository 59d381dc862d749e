#!/usr/bin/env node
"use strict";

// Command line of dynamodb-lock-native. One command for now:
//
//   npx dynamodb-lock-native create-table --table locks --partition-key id [options]
//
// Region, endpoint and credentials come from the flags or the standard AWS environment
// (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS_PROFILE, AWS_ACCESS_KEY_ID, ...).

const { parseArgs } = require("util");

const USAGE = `Usage: dynamodb-lock-native create-table --table <name> --partition-key <name> [options]

Creates a lock table (on-demand unless told), waits until it is ACTIVE, and enables TTL when
--ttl-attribute is given. A table that exists with the same key schema is success.

Options:
  --table <name>                 the lock table (lockTable)
  --partition-key <name>         the partition key attribute (partitionKey)
  --partition-key-type <S|N|B>   its type (default S)
  --sort-key <name>              a sort key attribute (sortKey; Fifo needs one, of type S)
  --sort-key-type <S|N|B>        its type (default S)
  --ttl-attribute <name>         enable TTL on this Number attribute (ttlAttribute)
  --billing-mode <mode>          PAY_PER_REQUEST (default) or PROVISIONED
  --read-capacity <n>            PROVISIONED read capacity units (default 1)
  --write-capacity <n>           PROVISIONED write capacity units (default 1)
  --wait-ms <ms>                 longest wait for the table to become ACTIVE (default 300000)
  --region <region>              default: the AWS environment
  --endpoint <url>               default: the AWS environment, else the region's endpoint
  -h, --help                     this text

Exit status: 0 when the table is ACTIVE, 1 when it could not be made or differs, 2 on a
usage error (a flag missing or malformed).`;

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

async function createTable(values)
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
    if (positionals.length !== 1 || positionals[0] !== "create-table")
    {
        return fail(`expected the command create-table\n\n${USAGE}`);
    }
    try
    {
        await createTable(values);
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
