"use strict";

// One small adapter over both libraries, so that every scenario drives them the same way:
// the original's callback API (which ours also offers, as a drop-in), wrapped in Promises
// identically for both.
//
//   const lib = openLibrary("ours" | "original", { endpoint, region, credentials });
//   const client = lib.create("FailOpen" | "FailClosed", { lockTable, partitionKey, ... });
//   const lock = await client.acquire(id);   await client.release(lock);
//
// Ours also has "Fifo" (lib.has("Fifo") tells whether this build does), whose acquireLock(id)
// returns a Promise of a lock whose release() returns a Promise; create("Fifo", ...) wraps it
// behind the same acquire/release.
//
// Options only our library knows (rereadPeriodMs, maxHeartbeatsPerSecond, requestTimeoutMs)
// are dropped for the original, whose Joi schema would reject them.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const http = require("http");
const path = require("path");

const OURS_ONLY = ["rereadPeriodMs", "maxHeartbeatsPerSecond", "requestTimeoutMs", "dangerMarginMs"];

// Sockets per client towards the proxy, for the original's aws-sdk v2 (keep-alive). Without a
// bound, 10,000 concurrent heartbeats would open 10,000 sockets.
const ORIGINAL_MAX_SOCKETS = 256;

function openLibrary(name, { endpoint, region, credentials })
{
    if (!/^http:\/\/127\.0\.0\.1:\d+\/?$/.test(endpoint))
    {
        throw new Error(`refusing a non-loopback endpoint: ${endpoint}`);
    }
    if (name === "ours")
    {
        // bench/run.js points BENCH_OURS_DIR at a snapshot of the package taken at start.
        const dir = process.env.BENCH_OURS_DIR || path.join(__dirname, "..");
        const Ours = require(dir);
        const binding = require(path.join(dir, "binding.js"));
        const dynamodb = () => ({ endpoint, region, credentials: { accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretAccessKey } });
        return {
            name,
            heldLockCount: () => binding.heldLockCount(),
            has: kind => typeof Ours[kind] === "function",
            create(kind, config)
            {
                const client = new Ours[kind](Object.assign({ dynamodb: dynamodb() }, config));
                return kind === "Fifo" ? wrapPromised(client) : wrap(client);
            },
        };
    }
    if (name === "original")
    {
        const AWS = require("aws-sdk");
        const Original = require("dynamodb-lock-client");
        const agent = new http.Agent({ keepAlive: true, maxSockets: ORIGINAL_MAX_SOCKETS });
        const documentClient = new AWS.DynamoDB.DocumentClient(
            {
                endpoint,
                region,
                credentials: new AWS.Credentials(credentials.accessKeyId, credentials.secretAccessKey),
                httpOptions: { agent, timeout: 30000 },
            }
        );
        return {
            name,
            heldLockCount: () => null,
            has: kind => kind !== "Fifo" && typeof Original[kind] === "function",
            create(kind, config)
            {
                const cfg = Object.assign({ dynamodb: documentClient }, config);
                for (const k of OURS_ONLY)
                {
                    delete cfg[k];
                }
                return wrap(new Original[kind](cfg));
            },
        };
    }
    throw new Error(`unknown library ${name}`);
}

function wrap(client)
{
    return {
        raw: client,
        acquire(id)
        {
            return new Promise((resolve, reject) =>
                client.acquireLock(id, (error, lock) => (error ? reject(error) : resolve(lock))));
        },
        release(lock)
        {
            return new Promise((resolve, reject) =>
                lock.release(error => (error ? reject(error) : resolve())));
        },
    };
}

// Ours' Fifo: acquireLock(id) returns a Promise of a lock; release() returns a Promise (a
// release that takes a callback instead is driven through it).
function wrapPromised(client)
{
    return {
        raw: client,
        acquire(id)
        {
            return Promise.resolve().then(() => client.acquireLock(id));
        },
        release(lock)
        {
            if (lock.release.length >= 1)
            {
                return new Promise((resolve, reject) =>
                    lock.release(error => (error ? reject(error) : resolve())));
            }
            return Promise.resolve().then(() => lock.release());
        },
    };
}

module.exports = { openLibrary, ORIGINAL_MAX_SOCKETS };
