"use strict";

// createTable: the lock table helper (lib/table.js) over a native client made for it, one
// DynamoDB request at a time. `dynamodb` means what it means for the lock clients: options, or
// an AWS SDK client.

const bridge = require("./bridge.js");
const table = require("./table.js");
const { chooseTransport, isSdkClient, sdkClientOptions, sdkOptionsFrom } = require("./transport.js");
const { invalidArgument } = require("./errors.js");
const { DEFAULT_OWNER } = require("./options.js");

// How the native client's errors name its lock table, which is "-" for this one.
const PLACEHOLDER_NOTE = '(the lock table "-")';

// A native client for administration, on the lock table `table` (`{ lockTable, partitionKey,
// sortKey }`; none: requests that name their table themselves). `what` names the caller in
// errors.
async function nativeAdmin(dynamodb, what, table)
{
    if (chooseTransport(dynamodb) === "object")
    {
        throw invalidArgument(`${what} needs options for the native core or an AWS SDK client as \`dynamodb\`, not an object of get/put/delete`);
    }
    const options = Object.assign({ kind: "FailClosed", lockTable: "-", partitionKey: "-", owner: DEFAULT_OWNER }, table);
    if (isSdkClient(dynamodb))
    {
        const { options: fromClient, credentials } = await sdkClientOptions(dynamodb);
        return bridge.nativeClient(Object.assign(options, fromClient), credentials);
    }
    return bridge.nativeClient(Object.assign(options, sdkOptionsFrom(dynamodb)), undefined);
}

// An operator's requests on the lock table `table` (as for `nativeAdmin`), each through the
// core: `forceRelease(request)`, the core's forced release (`force::Force`) from the item as
// read, resolving with `{ action, freeAfterMs?, endedSession? }` or `{ refused, reads }`; and
// `prune(request)`, the core's `Prune` operation, checked against the core's conditions on
// both engines by the agreement test.
async function adminNative(dynamodb, what, table)
{
    const client = await nativeAdmin(dynamodb, what, table);
    return {
        forceRelease: async request =>
            JSON.parse((await bridge.request(r => client.startForceRelease(r, request))).body),
        prune: request => bridge.request(r => client.startPrune(r, request)),
    };
}

async function adminCaller(dynamodb, what = "createTable")
{
    const client = await nativeAdmin(dynamodb, what);
    return async (operation, body) =>
    {
        try
        {
            const outcome = await bridge.request(request => client.startAdmin(request, operation, JSON.stringify(body)));
            return outcome.body ? JSON.parse(outcome.body) : {};
        }
        catch (err)
        {
            // The native client names its lock table in a ResourceNotFoundException; this one
            // has none of its own ("-"): name the table the request was for.
            if (body && typeof body.TableName === "string" && err && typeof err.message === "string")
            {
                err.message = err.message.replace(PLACEHOLDER_NOTE, `(the lock table ${JSON.stringify(body.TableName)})`);
            }
            throw err;
        }
    };
}

/**
 * Creates a lock table (on-demand unless told), waits until it is ACTIVE and enables TTL on
 * `ttlAttribute` when given. A table that exists with the same key schema is success.
 */
async function createTable(options)
{
    const call = await adminCaller(options && typeof options === "object" ? options.dynamodb : undefined);
    return table.createTable(options, call);
}

module.exports = { createTable, adminCaller, adminNative };
