"use strict";

// The lock table helper: creates a table for locks (on-demand by default), waits until it is
// ACTIVE and enables TTL when asked. An existing table with the same key schema is success; a
// different one is an error that names the difference. The requests go through the native
// core's connection, so `dynamodb` means here what it means for the lock clients.

const KEY_TYPES = ["S", "N", "B"];
const BILLING_MODES = ["PAY_PER_REQUEST", "PROVISIONED"];
const DEFAULT_WAIT_MS = 5 * 60 * 1000;
const POLL_MS = 500;

function codedError(code, message)
{
    const err = new Error(message);
    err.code = code;
    return err;
}

// Every problem with the options at once, as the lock clients' validation does.
function check(options)
{
    if (options === null || typeof options !== "object")
    {
        return ["createTable needs an options object"];
    }
    const problems = [];
    const name = (key, required) =>
    {
        const v = options[key];
        if (v === undefined && !required)
        {
            return;
        }
        if (typeof v !== "string" || v === "")
        {
            problems.push(`"${key}" must be a non-empty string`);
        }
    };
    const oneOf = (key, allowed) =>
    {
        if (options[key] !== undefined && !allowed.includes(options[key]))
        {
            problems.push(`"${key}" must be one of [${allowed.join(", ")}]`);
        }
    };
    const positive = key =>
    {
        const v = options[key];
        if (v !== undefined && !(Number.isSafeInteger(v) && v >= 1))
        {
            problems.push(`"${key}" must be an integer >= 1`);
        }
    };
    name("lockTable", true);
    name("partitionKey", true);
    name("sortKey", false);
    name("ttlAttribute", false);
    oneOf("partitionKeyType", KEY_TYPES);
    oneOf("sortKeyType", KEY_TYPES);
    oneOf("billingMode", BILLING_MODES);
    positive("readCapacityUnits");
    positive("writeCapacityUnits");
    if (options.waitMs !== undefined && !(typeof options.waitMs === "number" && options.waitMs >= 0))
    {
        problems.push("\"waitMs\" must be a number of milliseconds >= 0");
    }
    const keys = [options.partitionKey, options.sortKey].filter(k => k !== undefined);
    if (options.ttlAttribute !== undefined && keys.includes(options.ttlAttribute))
    {
        problems.push("\"ttlAttribute\" must differ from partitionKey and sortKey");
    }
    if (options.sortKey !== undefined && options.sortKey === options.partitionKey)
    {
        problems.push("\"sortKey\" must differ from partitionKey");
    }
    return problems;
}

// The key schema asked for, as [{ name, type }] for the HASH key then the RANGE key.
function wantedKeys(options)
{
    const keys = [{ name: options.partitionKey, type: options.partitionKeyType || "S" }];
    if (options.sortKey !== undefined)
    {
        keys.push({ name: options.sortKey, type: options.sortKeyType || "S" });
    }
    return keys;
}

// The key schema a table has, in the same form.
function tableKeys(table)
{
    const types = new Map((table.AttributeDefinitions || []).map(a => [a.AttributeName, a.AttributeType]));
    const schema = table.KeySchema || [];
    const hash = schema.find(k => k.KeyType === "HASH");
    const range = schema.find(k => k.KeyType === "RANGE");
    return [hash, range].filter(Boolean).map(k => ({ name: k.AttributeName, type: types.get(k.AttributeName) }));
}

const describeKey = k => `"${k.name}" (${k.type})`;

// What differs between the key schema asked for and the table's, in words; "" if nothing.
function difference(tableName, want, have)
{
    const differences = [];
    if (want[0].name !== have[0].name || want[0].type !== have[0].type)
    {
        differences.push(`partition key ${describeKey(have[0])}, not ${describeKey(want[0])}`);
    }
    if (want[1] && !have[1])
    {
        differences.push(`no sort key, not ${describeKey(want[1])}`);
    }
    else if (!want[1] && have[1])
    {
        differences.push(`sort key ${describeKey(have[1])}, where none was asked for`);
    }
    else if (want[1] && (want[1].name !== have[1].name || want[1].type !== have[1].type))
    {
        differences.push(`sort key ${describeKey(have[1])}, not ${describeKey(want[1])}`);
    }
    return differences.length ? `Table "${tableName}" exists with ${differences.join(" and ")}` : "";
}

function createRequest(options)
{
    const keys = wantedKeys(options);
    const request = {
        TableName: options.lockTable,
        AttributeDefinitions: keys.map(k => ({ AttributeName: k.name, AttributeType: k.type })),
        KeySchema: keys.map((k, i) => ({ AttributeName: k.name, KeyType: i === 0 ? "HASH" : "RANGE" })),
        BillingMode: options.billingMode || "PAY_PER_REQUEST",
    };
    if (request.BillingMode === "PROVISIONED")
    {
        request.ProvisionedThroughput = {
            ReadCapacityUnits: options.readCapacityUnits || 1,
            WriteCapacityUnits: options.writeCapacityUnits || 1,
        };
    }
    return request;
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function describe(call, tableName)
{
    try
    {
        return (await call("DescribeTable", { TableName: tableName })).Table;
    }
    catch (err)
    {
        if (err.code === "ResourceNotFoundException")
        {
            return undefined;
        }
        throw err;
    }
}

// Waits until the table is ACTIVE; a bounded number of reads, `waitMs` at most.
async function untilActive(call, tableName, table, waitMs)
{
    const deadline = Date.now() + waitMs;
    const maxReads = Math.ceil(waitMs / POLL_MS) + 1;
    for (let reads = 0; reads < maxReads; reads++)
    {
        if (table && table.TableStatus === "ACTIVE")
        {
            return table;
        }
        if (Date.now() >= deadline)
        {
            break;
        }
        await sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
        table = await describe(call, tableName);
    }
    throw codedError("TableNotActive", `Table "${tableName}" did not become ACTIVE within ${waitMs} ms (status: ${table ? table.TableStatus : "absent"})`);
}

// Enables TTL on `attribute`, unless it already is; TTL on another attribute is an error (a
// table has one TTL attribute).
async function enableTtl(call, tableName, attribute)
{
    const description = (await call("DescribeTimeToLive", { TableName: tableName })).TimeToLiveDescription || {};
    const status = description.TimeToLiveStatus;
    if (status === "ENABLED" || status === "ENABLING")
    {
        if (description.AttributeName !== attribute)
        {
            throw codedError("TableMismatch", `Table "${tableName}" has TTL on attribute "${description.AttributeName}", not "${attribute}"`);
        }
        return false;
    }
    await call("UpdateTimeToLive", {
        TableName: tableName,
        TimeToLiveSpecification: { AttributeName: attribute, Enabled: true },
    });
    return true;
}

/**
 * Creates the lock table if it is absent and waits until it is ACTIVE; enables TTL on
 * `ttlAttribute` when given. `call(operation, body)` sends one DynamoDB request and resolves
 * with its parsed response. Resolves with `{ tableName, created, ttlAttribute }`.
 */
async function createTable(options, call)
{
    const problems = check(options);
    if (problems.length > 0)
    {
        const err = new TypeError(`createTable: ${problems.join(". ")}`);
        err.code = "InvalidArgument";
        throw err;
    }
    const tableName = options.lockTable;
    const waitMs = options.waitMs === undefined ? DEFAULT_WAIT_MS : options.waitMs;
    let table = await describe(call, tableName);
    let created = false;
    if (!table)
    {
        try
        {
            table = (await call("CreateTable", createRequest(options))).TableDescription;
            created = true;
        }
        catch (err)
        {
            // Created meanwhile by someone else: compare it like any existing table.
            if (err.code !== "ResourceInUseException")
            {
                throw err;
            }
            table = await describe(call, tableName);
        }
    }
    if (!created)
    {
        const mismatch = table && difference(tableName, wantedKeys(options), tableKeys(table));
        if (mismatch)
        {
            throw codedError("TableMismatch", mismatch);
        }
    }
    await untilActive(call, tableName, table, waitMs);
    if (options.ttlAttribute !== undefined)
    {
        try
        {
            await enableTtl(call, tableName, options.ttlAttribute);
        }
        catch (err)
        {
            throw ttlNotEnabled(err, tableName, created, options.ttlAttribute);
        }
    }
    return { tableName, created, ttlAttribute: options.ttlAttribute };
}

// Why TTL could not be enabled, in words, with what to do.
function ttlWhy(err)
{
    const code = err && (err.code || err.name);
    const said = err && err.message && !/without a message/.test(err.message) ? `: ${err.message}` : "";
    if (code === "UnknownOperationException")
    {
        return `the endpoint does not offer DescribeTimeToLive and UpdateTimeToLive (${code}); enable TTL where the table is`
            + " served (DynamoDB itself has it), or leave ttlAttribute out";
    }
    if (code === "AccessDeniedException" || code === "HttpStatus403")
    {
        return `the request was refused (${code}${said}); allow dynamodb:DescribeTimeToLive and dynamodb:UpdateTimeToLive on`
            + " the table and call createTable again, which then only enables TTL";
    }
    return `${code || "Error"}${said}; call createTable again, which then only enables TTL, or enable it with`
        + " `aws dynamodb update-time-to-live`";
}

// The error of a table made (or found) ACTIVE whose TTL could not be enabled: it says both,
// keeps the cause's code and name, and carries the cause, the table's name, whether it was
// created now, and the attribute.
function ttlNotEnabled(err, tableName, created, attribute)
{
    if (err && err.code === "TableMismatch")
    {
        return err;
    }
    const table = created ? `Table "${tableName}" was created and is ACTIVE` : `Table "${tableName}" exists and is ACTIVE`;
    const out = new Error(`${table}, but TTL was not enabled on "${attribute}": ${ttlWhy(err)}.`);
    const code = (err && (err.code || err.name)) || "Error";
    out.code = code;
    out.name = code;
    out.cause = err;
    out.tableName = tableName;
    out.created = created;
    out.ttlAttribute = attribute;
    return out;
}

module.exports = { createTable, difference, tableKeys, wantedKeys, codedError };
