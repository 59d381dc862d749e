"use strict";

// Fuzzing of the public API, run in a child process by __test__/fuzz.test.js so that a native
// abort shows as a signal instead of taking the test runner down. Seeded and bounded.
//
//   node fuzz-worker.js '{"mode":"config","seed":1,"count":2000}'
//   node fuzz-worker.js '{"mode":"ids","seed":2,"count":400,"engine":{...}}'
//   node fuzz-worker.js '{"mode":"abuse","engine":{...}}'
//
// Prints JSON lines: {"violation": {...}} for every broken expectation, {"note": ...} for
// information, and finally {"complete": true, "mode", "stats", "violations": n}. Exits 0 when
// it got to the end (violations are reported, not turned into an exit code: the parent asserts
// them), so any other exit means the process itself did not survive.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const emitWarning = process.emitWarning;
process.emitWarning = function(warning, ...rest)
{
    const type = typeof rest[0] === "string" ? rest[0] : rest[0] && rest[0].type;
    if (type === "NodeVersionSupportWarning" || (warning && warning.name === "NodeVersionSupportWarning"))
    {
        return;
    }
    return emitWarning.call(process, warning, ...rest);
};

const { EventEmitter } = require("events");
const DynamoDBLockClient = require("../..");
const binding = require("../../binding.js");

const job = JSON.parse(process.argv[2]);
const out = obj => process.stdout.write(JSON.stringify(obj) + "\n");
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

let violations = 0;
const MAX_PRINTED_PER_KIND = 5;
const violationKinds = new Map();
function violation(kind, details)
{
    violations++;
    const n = (violationKinds.get(kind) || 0) + 1;
    violationKinds.set(kind, n);
    if (n <= MAX_PRINTED_PER_KIND)
    {
        out({ violation: Object.assign({ kind }, details) });
    }
}

// Errors nobody expected. Tests that expect one install their own expectation through
// `expectUncaught` and this handler hands the error over.
let expectUncaught = null;
process.on("uncaughtException", error =>
    {
        if (expectUncaught)
        {
            return expectUncaught(error);
        }
        violation("unexpected uncaughtException", { error: describeError(error) });
    });
process.on("unhandledRejection", reason =>
    {
        violation("unhandledRejection", { error: describeError(reason) });
    });

// ---------------------------------------------------------------------------------------------
// Seeded randomness and value generators

const { mulberry32 } = require("./random.js");

const random = mulberry32(job.seed || 1);
const chance = p => random() < p;
const pick = list => list[Math.floor(random() * list.length)];
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));

const LONG = "L".repeat(100000);
const RESERVED = ["fencingToken", "leaseDurationMs", "lockAcquiredTimeUnixMs", "owner", "guid"];

function randomString()
{
    return pick([
        "", "a", "locks", "id", "pk", "sk", "10", "-1", "NaN", "true", "auto", "sdk", "object", "AUTO",
        ...RESERVED, "\u0000", "\uD800", "\uDFFF", "🔒", "é", " ", "\n", "__proto__", "constructor",
        LONG, "x".repeat(int(1, 3000)), String.fromCharCode(...Array.from({ length: int(1, 20) }, () => int(0, 0xffff))),
    ]);
}

const NUMBERS = [
    0, -0, 1, 2, 7, 10, 100, 1000, 5000, 60000, -1, -1000, 0.5, 1.5, -0.5, 1e-7, NaN, Infinity, -Infinity,
    Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 1, 2 ** 53 + 2, 2 ** 32, 2 ** 32 + 1, 2 ** 31, 2 ** 64, 1e21,
    1e308, Number.MAX_VALUE, -Number.MAX_VALUE, Number.MIN_VALUE, Number.EPSILON, -(2 ** 53),
];

function cyclic()
{
    const o = { a: 1 };
    o.self = o;
    return o;
}

function randomValue(depth = 2)
{
    switch (int(0, 21))
    {
        case 0: return undefined;
        case 1: return null;
        case 2: case 3: case 4: return pick(NUMBERS);
        case 5: return int(-5, 5000);
        case 6: return chance(0.5);
        case 7: case 8: return randomString();
        case 9: return Symbol(randomString().slice(0, 10));
        case 10: return pick([0n, 1n, -1n, 10n ** 30n, 2n ** 64n]);
        case 11: return depth > 0 ? Array.from({ length: int(0, 3) }, () => randomValue(depth - 1)) : [];
        case 12: case 13: return depth > 0 ? randomObject(depth - 1) : {};
        case 14: return pick([() => {}, function named() {}, class K {}, async () => {}, function* g() {}, Math.max]);
        case 15: return pick([new Date(), /re/g, new Map([[1, 2]]), new Set([1]), Buffer.alloc(int(0, 8)), new Uint8Array(3), new ArrayBuffer(2)]);
        case 16: return pick([new Number(5), new String("x"), new Boolean(true), Object(Symbol("boxed")), Object(1n)]);
        case 17: return Object.assign(Object.create(null), depth > 0 ? randomObject(depth - 1) : {});
        case 18: return cyclic();
        case 19: return new Proxy(depth > 0 ? randomObject(depth - 1) : {}, {});
        case 20: return Object.freeze(depth > 0 ? randomObject(depth - 1) : {});
        default: return new Error("as a value");
    }
}

function randomObject(depth)
{
    const o = {};
    for (let k = int(0, 4); k > 0; k--)
    {
        o[pick(["a", "b", "region", "endpoint", "get", "put", "delete", "send", "config", randomString().slice(0, 50)])] = randomValue(depth);
    }
    return o;
}

function randomEndpoint()
{
    return pick([
        undefined, null, "http://127.0.0.1:1", "", "not a url", 5, Symbol("e"), 1n, {}, [], Object.create(null),
        { hostname: "127.0.0.1", port: 1, protocol: "http" }, { hostname: Symbol("h") }, { hostname: 5 },
        { href: "http://127.0.0.1:1" }, { href: 5 }, new URL("http://127.0.0.1:1"), () => "x", randomValue(1),
    ]);
}

function randomDynamodb()
{
    switch (int(0, 7))
    {
        case 0: return undefined;
        case 1: return randomValue(2);
        case 2: case 3:
        {
            // Options for the Rust SDK.
            const o = {};
            if (chance(0.7)) o.region = chance(0.6) ? "us-east-1" : randomValue(1);
            if (chance(0.8)) o.endpoint = randomEndpoint();
            if (chance(0.6))
            {
                o.credentials = chance(0.7)
                    ? { accessKeyId: chance(0.8) ? "dummy" : randomValue(0), secretAccessKey: chance(0.8) ? "dummy" : randomValue(0), sessionToken: chance(0.3) ? randomValue(0) : undefined }
                    : randomValue(1);
            }
            if (chance(0.3)) o[randomString().slice(0, 20)] = randomValue(1);
            return o;
        }
        case 4:
        {
            // A user object, maybe incomplete or with non-functions.
            const o = {};
            for (const m of ["get", "put", "delete"])
            {
                if (chance(0.8))
                {
                    o[m] = chance(0.75) ? function() {} : randomValue(1);
                }
            }
            return o;
        }
        case 5:
            // Looks like an AWS SDK v3 client.
            return { send: () => {}, config: { region: pick(["us-east-1", undefined, 5, () => "us-east-1", async () => { throw new Error("no region"); }]), endpoint: pick([undefined, "http://127.0.0.1:1", () => ({ hostname: "127.0.0.1" })]), credentials: randomValue(1) } };
        case 6:
            // Looks like an AWS SDK v2 client.
            return chance(0.5)
                ? { config: { region: randomValue(0), endpoint: randomEndpoint(), getCredentials: cb => cb(null, {}) }, makeRequest: () => {}, api: {} }
                : { service: { config: { region: "us-east-1" }, makeRequest: () => {} } };
        default:
            return { region: "us-east-1", endpoint: "http://127.0.0.1:1", credentials: { accessKeyId: "dummy", secretAccessKey: "dummy" } };
    }
}

const KEYS =
{
    FailClosed: ["owner", "dynamodb", "lockTable", "partitionKey", "sortKey", "acquirePeriodMs", "retryCount", "requestTimeoutMs", "transport"],
    FailOpen: ["owner", "dynamodb", "lockTable", "partitionKey", "sortKey", "heartbeatPeriodMs", "leaseDurationMs", "trustLocalTime", "retryCount", "requestTimeoutMs", "rereadPeriodMs", "dangerMarginMs", "maxHeartbeatsPerSecond", "transport"],
};
const ALL_KEYS = [...new Set([...KEYS.FailClosed, ...KEYS.FailOpen])];

function validBase(kind)
{
    const base =
    {
        dynamodb: { region: "us-east-1", endpoint: "http://127.0.0.1:1", credentials: { accessKeyId: "dummy", secretAccessKey: "dummy" } },
        lockTable: "locks",
        partitionKey: "id",
    };
    if (kind === "FailClosed")
    {
        base.acquirePeriodMs = 10;
    }
    else
    {
        base.leaseDurationMs = 1000;
        if (chance(0.5))
        {
            base.heartbeatPeriodMs = 100;
        }
    }
    return base;
}

function valueFor(key)
{
    if (key === "dynamodb")
    {
        return randomDynamodb();
    }
    if (key === "transport" && chance(0.5))
    {
        return pick(["auto", "sdk", "object"]);
    }
    if (/Ms$|Count$|PerSecond$/.test(key) && chance(0.5))
    {
        return pick(NUMBERS);
    }
    return randomValue(2);
}

function randomConfig(kind)
{
    switch (int(0, 19))
    {
        case 2: case 3:
        {
            // A valid configuration whose `dynamodb` is a (possibly odd) options object for the
            // Rust SDK, with no undefined value anywhere at the top level.
            const cfg = validBase(kind);
            let db;
            do
            {
                db = randomDynamodb();
            } while (db === undefined);
            cfg.dynamodb = db;
            return cfg;
        }
        case 0: return pick([undefined, null, 5, "config", true, Symbol("c"), 1n, [], [validBase(kind)], () => {}, new Date(), Object.create(null), new Proxy({}, {})]);
        case 1:
        {
            // Keys of the other kind, or only unknown keys.
            const o = {};
            for (const k of KEYS[kind === "FailOpen" ? "FailClosed" : "FailOpen"])
            {
                o[k] = valueFor(k);
            }
            return o;
        }
        default:
        {
            const cfg = chance(0.7) ? validBase(kind) : {};
            for (let n = int(0, 4); n > 0; n--)
            {
                const key = chance(0.85) ? pick(KEYS[kind]) : pick([randomString().slice(0, 40), pick(ALL_KEYS), "toString", "hasOwnProperty"]);
                if (chance(0.1))
                {
                    delete cfg[key];
                }
                else
                {
                    cfg[key] = valueFor(key);
                }
            }
            if (chance(0.05))
            {
                cfg[Symbol("extra")] = 1; // symbol keys are not own enumerable string keys
            }
            if (chance(0.05))
            {
                Object.defineProperty(cfg, "hidden", { value: 1, enumerable: false });
            }
            if (chance(0.05))
            {
                return Object.assign(Object.create(null), cfg);
            }
            return cfg;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Describing values safely (symbols, bigints, cycles, huge strings, proxies)

function describe(v, depth = 2, seen = new Set())
{
    try
    {
        if (v === undefined) return "undefined";
        if (v === null) return "null";
        switch (typeof v)
        {
            case "string": return v.length > 40 ? `string(${v.length}):${JSON.stringify(v.slice(0, 20))}…` : JSON.stringify(v);
            case "number": return Object.is(v, -0) ? "-0" : String(v);
            case "bigint": return `${v}n`;
            case "symbol": return v.toString();
            case "boolean": return String(v);
            case "function": return `function ${v.name || "(anonymous)"}`;
            default: break;
        }
        if (seen.has(v)) return "[cycle]";
        if (Buffer.isBuffer(v)) return `Buffer(${v.length})`;
        if (Array.isArray(v)) return depth > 0 ? `[${v.map(x => describe(x, depth - 1, new Set([...seen, v]))).join(", ")}]` : "[…]";
        const proto = Object.getPrototypeOf(v);
        const name = proto === null ? "null-proto" : proto === Object.prototype ? "" : (proto.constructor && proto.constructor.name) || "?";
        if (depth <= 0) return `${name}{…}`;
        const entries = Object.keys(v).slice(0, 16).map(k => `${k.length > 30 ? k.slice(0, 30) + "…" : k}: ${describe(v[k], depth - 1, new Set([...seen, v]))}`);
        return `${name}{${entries.join(", ")}}`;
    }
    catch (e)
    {
        return `<undescribable: ${e.message}>`;
    }
}

// A short, stable name for an unexpected error, so that distinct bugs get distinct reports.
function errorSignature(e)
{
    if (!(e instanceof Error))
    {
        return `non-Error ${typeof e}`;
    }
    return `${e.name}${e.code ? `[${e.code}]` : ""}: ${String(e.message).replace(/\d+/g, "N").slice(0, 60)}`;
}

function describeError(e)
{
    if (!(e instanceof Error))
    {
        return { notAnError: describe(e) };
    }
    return { name: e.name, code: e.code, message: String(e.message).slice(0, 300), stack: String(e.stack).split("\n").slice(0, 4).join(" | ") };
}

// ---------------------------------------------------------------------------------------------
// An independent model of what validation must accept (the documented schema: Joi semantics,
// `convert: false`, plus this library's documented additions).

function isPlainish(v)
{
    return v !== null && typeof v === "object";
}

function modelAccepts(kind, cfg)
{
    if (!isPlainish(cfg) || Array.isArray(cfg))
    {
        return false;
    }
    const keys = Object.keys(cfg);
    for (const k of keys)
    {
        if (!KEYS[kind].includes(k))
        {
            return false;
        }
    }
    const present = k => cfg[k] !== undefined;
    const str = (k, reserved) => !present(k) || (typeof cfg[k] === "string" && cfg[k] !== "" && !(reserved && RESERVED.includes(cfg[k])));
    const num = (k, min) => !present(k) || (typeof cfg[k] === "number" && Number.isInteger(cfg[k]) && Number.isSafeInteger(cfg[k]) && cfg[k] >= min);
    const required = kind === "FailClosed" ? ["lockTable", "partitionKey", "acquirePeriodMs"] : ["lockTable", "partitionKey", "leaseDurationMs"];
    if (!required.every(present))
    {
        return false;
    }
    if (!str("owner") || !str("lockTable") || !str("partitionKey", true) || !str("sortKey", true))
    {
        return false;
    }
    if (present("transport") && !["auto", "sdk", "object"].includes(cfg.transport))
    {
        return false;
    }
    const mins = { acquirePeriodMs: 0, retryCount: 0, requestTimeoutMs: 1, heartbeatPeriodMs: 0, leaseDurationMs: 0, rereadPeriodMs: 1, dangerMarginMs: 0, maxHeartbeatsPerSecond: 1 };
    for (const [k, min] of Object.entries(mins))
    {
        if (KEYS[kind].includes(k) && !num(k, min))
        {
            return false;
        }
    }
    if (present("trustLocalTime") && typeof cfg.trustLocalTime !== "boolean")
    {
        return false;
    }
    // A danger margin is less than the lease (0: none).
    if (KEYS[kind].includes("dangerMarginMs") && present("dangerMarginMs") && cfg.dangerMarginMs > 0 && cfg.dangerMarginMs >= cfg.leaseDurationMs)
    {
        return false;
    }
    // A FailOpen heartbeat period not shorter than the lease is accepted, as by the original,
    // with a process warning (see dropin-differences.test.js).
    if (cfg.transport === "object" && !present("dynamodb"))
    {
        return false;
    }
    // `dynamodb`: omitted, or an object; an object offering any of get/put/delete (or any object
    // with transport "object") needs all three as functions.
    if (present("dynamodb"))
    {
        const db = cfg.dynamodb;
        if (!isPlainish(db))
        {
            return false;
        }
        const isSdk = (typeof db.send === "function" && isPlainish(db.config))
            || (isPlainish(db.service) && isPlainish(db.service.config) && typeof db.service.makeRequest === "function")
            || (isPlainish(db.config) && typeof db.makeRequest === "function" && isPlainish(db.api));
        const offers = ["get", "put", "delete"].some(m => db[m] !== undefined);
        const asObject = cfg.transport === "object" || (cfg.transport !== "sdk" && !isSdk && offers);
        if (asObject && !["get", "put", "delete"].every(m => typeof db[m] === "function"))
        {
            return false;
        }
        // Options for the Rust SDK: an endpoint must be a string, a URL, or an SDK endpoint
        // object ({hostname} or {href}); anything else is refused rather than guessed at.
        const ep = db.endpoint;
        const endpointOk = ep === undefined || ep === null || typeof ep === "string" || ep instanceof URL
            || (isPlainish(ep) && typeof ep.hostname === "string" && ep.hostname !== "")
            || (isPlainish(ep) && typeof ep.href === "string");
        if (!asObject && !isSdk && !endpointOk)
        {
            return false;
        }
        if (!asObject && !isSdk && !optionsAccepted(db))
        {
            return false;
        }
    }
    return true;
}

// Options for the native core (documented under "The dynamodb option"): a plain object has
// only region, endpoint, credentials and caBundle; region is a non-empty string; an endpoint
// is an http or https URL; credentials are a function or an object with non-empty string
// accessKeyId and secretAccessKey (a plain one with nothing but those, sessionToken and
// expiration).
function optionsAccepted(db)
{
    const proto = Object.getPrototypeOf(db);
    const plain = proto === Object.prototype || proto === null;
    const known = (obj, keys) => Object.keys(obj).every(k => keys.includes(k) || obj[k] === undefined);
    if (plain && !known(db, ["region", "endpoint", "credentials", "caBundle"]))
    {
        return false;
    }
    if (db.region !== undefined && (typeof db.region !== "string" || db.region === ""))
    {
        return false;
    }
    const ep = db.endpoint;
    if (ep !== undefined && ep !== null)
    {
        let text;
        if (typeof ep === "string")
        {
            text = ep;
        }
        else if (ep instanceof URL)
        {
            text = ep.href;
        }
        else if (typeof ep.hostname === "string" && ep.hostname !== "")
        {
            const t = v => (typeof v === "string" || typeof v === "number" ? String(v) : "");
            text = `${(t(ep.protocol) || "https:").replace(/:?$/, ":")}//${ep.hostname}${t(ep.port) ? ":" + t(ep.port) : ""}${t(ep.path)}`;
        }
        else
        {
            text = ep.href;
        }
        let url;
        try
        {
            url = new URL(text);
        }
        catch (_)
        {
            return false;
        }
        if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "")
        {
            return false;
        }
    }
    const c = db.credentials;
    if (c !== undefined && typeof c !== "function")
    {
        if (!isPlainish(c))
        {
            return false;
        }
        const text = v => typeof v === "string" && v !== "";
        if (!text(c.accessKeyId) || !text(c.secretAccessKey))
        {
            return false;
        }
        if (c.sessionToken !== undefined && c.sessionToken !== null && typeof c.sessionToken !== "string")
        {
            return false;
        }
        const cp = Object.getPrototypeOf(c);
        if ((cp === Object.prototype || cp === null) && !known(c, ["accessKeyId", "secretAccessKey", "sessionToken", "expiration"]))
        {
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// mode "config"

function checkValidationError(e, where)
{
    const problems = [];
    if (!(e instanceof Error)) problems.push("not an Error");
    if (!e || e.name !== "ValidationError") problems.push(`name is ${e && e.name}`);
    if (!e || typeof e.message !== "string" || e.message.length === 0) problems.push("empty message");
    if (!e || !Array.isArray(e.details) || e.details.length === 0) problems.push("no details");
    else
    {
        for (const d of e.details)
        {
            if (!d || typeof d.message !== "string" || d.message.length === 0 || !Array.isArray(d.path))
            {
                problems.push(`bad detail ${describe(d)}`);
                break;
            }
        }
        if (e.details.map(d => d.message).join(". ") !== e.message)
        {
            problems.push("message is not the details' messages joined");
        }
    }
    if (problems.length)
    {
        violation("not a proper ValidationError", Object.assign({ where, problems }, { error: describeError(e) }));
        return false;
    }
    return true;
}

function fuzzConfig()
{
    const stats = { constructed: 0, validationErrors: 0, otherErrors: 0, modelMismatches: 0, withoutNew: 0 };
    for (let n = 0; n < job.count; n++)
    {
        for (const kind of ["FailClosed", "FailOpen"])
        {
            const cfg = randomConfig(kind);
            const useNew = chance(0.8);
            let client;
            let error;
            const started = Date.now();
            try
            {
                client = useNew ? new DynamoDBLockClient[kind](cfg) : DynamoDBLockClient[kind](cfg);
            }
            catch (e)
            {
                error = e;
            }
            const took = Date.now() - started;
            if (took > 1000)
            {
                violation("slow constructor", { kind, took, config: describe(cfg) });
            }
            if (error === undefined)
            {
                stats.constructed++;
                if (!useNew) stats.withoutNew++;
                if (!(client instanceof DynamoDBLockClient[kind]) || typeof client.acquireLock !== "function")
                {
                    violation("constructor returned something else", { kind, useNew, config: describe(cfg) });
                }
            }
            else if (error && error.name === "ValidationError")
            {
                stats.validationErrors++;
                checkValidationError(error, { kind, config: describe(cfg) });
            }
            else
            {
                stats.otherErrors++;
                violation(`constructor threw something other than a ValidationError: ${errorSignature(error)}`, { kind, config: describe(cfg), error: describeError(error) });
            }
            if ((error === undefined) !== modelAccepts(kind, cfg) && (error === undefined || error.name === "ValidationError"))
            {
                stats.modelMismatches++;
                violation(error === undefined ? "accepted a config the documented schema refuses" : "refused a config the documented schema accepts",
                    { kind, config: describe(cfg), error: error && error.message.slice(0, 300) });
            }
        }
    }
    return stats;
}

// ---------------------------------------------------------------------------------------------
// Calling acquireLock/release and checking the settle contract

const CALL_TIMEOUT_MS = 20000;

// Calls acquireLock in a random form; resolves { error, lock } once it settled, after checking
// that a callback ran asynchronously and exactly once.
function callAcquire(client, id, { form, options } = {})
{
    form = form || pick(["callback", "promise", "callback+options", "promise+options"]);
    return new Promise(resolve =>
        {
            let settled = false;
            let calls = 0;
            let sync = true;
            const timer = setTimeout(() =>
                {
                    if (!settled)
                    {
                        settled = true;
                        resolve({ error: undefined, lock: undefined, timedOut: true, form });
                    }
                }, CALL_TIMEOUT_MS);
            const finish = (error, lock, extra) =>
            {
                if (settled)
                {
                    return;
                }
                settled = true;
                clearTimeout(timer);
                // Leave a moment for a second callback call to show up.
                setTimeout(() => resolve(Object.assign({ error, lock, form, calls }, extra, { calls })), 20);
            };
            const opts = form.endsWith("+options") ? (options || {}) : undefined;
            try
            {
                if (form.startsWith("callback"))
                {
                    const cb = (error, lock) =>
                    {
                        calls++;
                        if (calls > 1)
                        {
                            violation("acquireLock callback called more than once", { id: describe(id), form });
                            return;
                        }
                        if (sync)
                        {
                            violation("acquireLock callback called synchronously", { id: describe(id), form });
                        }
                        finish(error, lock);
                    };
                    const ret = opts === undefined ? client.acquireLock(id, cb) : client.acquireLock(id, opts, cb);
                    if (ret !== undefined)
                    {
                        violation("acquireLock with a callback returned something", { id: describe(id), returned: describe(ret) });
                    }
                }
                else
                {
                    const p = opts === undefined ? client.acquireLock(id) : client.acquireLock(id, opts);
                    if (!p || typeof p.then !== "function")
                    {
                        violation("acquireLock without a callback returned no Promise", { id: describe(id), returned: describe(p) });
                        finish(undefined, undefined);
                    }
                    else
                    {
                        p.then(lock => finish(undefined, lock), error => finish(error, undefined));
                    }
                }
            }
            catch (e)
            {
                violation("acquireLock threw synchronously", { id: describe(id), form, error: describeError(e) });
                finish(e, undefined, { threw: true });
            }
            sync = false;
        });
}

function callRelease(lock, form)
{
    form = form || pick(["callback", "promise"]);
    return new Promise(resolve =>
        {
            let calls = 0;
            let sync = true;
            let settled = false;
            const timer = setTimeout(() =>
                {
                    if (!settled)
                    {
                        settled = true;
                        resolve({ timedOut: true });
                    }
                }, CALL_TIMEOUT_MS);
            const finish = error =>
            {
                if (settled)
                {
                    return;
                }
                settled = true;
                clearTimeout(timer);
                setTimeout(() => resolve({ error, calls }), 20);
            };
            try
            {
                if (form === "callback")
                {
                    lock.release(error =>
                        {
                            calls++;
                            if (calls > 1)
                            {
                                violation("release callback called more than once", {});
                                return;
                            }
                            if (sync)
                            {
                                violation("release callback called synchronously", {});
                            }
                            finish(error || undefined);
                        });
                }
                else
                {
                    lock.release().then(() => finish(undefined), error => finish(error));
                }
            }
            catch (e)
            {
                violation("release threw synchronously", { error: describeError(e) });
                finish(e);
            }
            sync = false;
        });
}

function checkOutcome(where, r, kind)
{
    if (r.timedOut)
    {
        violation("never settled", Object.assign({ afterMs: CALL_TIMEOUT_MS }, where));
        return "timeout";
    }
    if (r.lock !== undefined && r.lock !== null)
    {
        if (r.error !== undefined && r.error !== null)
        {
            violation("settled with both an error and a lock", Object.assign({ error: describeError(r.error) }, where));
        }
        if (!(r.lock instanceof EventEmitter) || typeof r.lock.release !== "function")
        {
            violation("the lock is not an EventEmitter with release()", where);
            return "bad lock";
        }
        if (kind === "FailOpen" && !(Number.isInteger(r.lock.fencingToken) && r.lock.fencingToken > 0))
        {
            violation("a FailOpen lock without an integer fencing token", Object.assign({ token: describe(r.lock.fencingToken) }, where));
        }
        return "lock";
    }
    if (!(r.error instanceof Error))
    {
        violation("settled with neither a lock nor an Error", Object.assign({ value: describe(r.error) }, where));
        return "nothing";
    }
    if (typeof r.error.code !== "string" || r.error.code.length === 0)
    {
        violation("an error without a code", Object.assign({ error: describeError(r.error) }, where));
        return "uncoded";
    }
    return r.error.code;
}

// ---------------------------------------------------------------------------------------------
// Lock ids

function randomId(client)
{
    const keyName = client._fuzzKeys;
    const scalar = () => pick([
        // strings
        "", "a", "lock", "\u0000", "\uD800", "🔒", " ", "x".repeat(2049), "x".repeat(100000), "€".repeat(700), randomString(),
        `id-${int(0, 50)}`, `id-${int(0, 50)}`, `id-${int(0, 50)}`,
        // numbers
        0, -0, 1, -1, int(0, 50), 0.1, NaN, Infinity, -Infinity, 1e308, -1e308, 5e-324, Number.MAX_SAFE_INTEGER, 1e21, 1e125, 1e126,
        // bigints
        0n, -1n, 12345678901234567890n, 10n ** 37n, 10n ** 40n, 10n ** 200n,
        // binary
        Buffer.alloc(0), Buffer.from([int(0, 255)]), Buffer.alloc(2048, 1), Buffer.alloc(4096, 2), Buffer.alloc(1 << 20, 3), new Uint8Array([1, 2, 3]),
        new Uint8Array(0), new DataView(new ArrayBuffer(4)), new ArrayBuffer(4),
        // everything else
        null, undefined, true, false, Symbol("id"), () => "id", [], ["a"], [1, 2], {}, Object.create(null), new Date(), /id/, new Map(),
        new Proxy({}, {}), new String("boxed"), new Number(3), cyclic(),
    ]);
    switch (int(0, 5))
    {
        case 0: case 1: case 2:
            return scalar();
        case 3:
        {
            // An object with the right keys (maybe).
            const o = {};
            o[chance(0.8) ? keyName.partition : pick(["wrong", "ID", ""])] = scalar();
            if (keyName.sort && chance(0.8))
            {
                o[keyName.sort] = scalar();
            }
            return o;
        }
        case 4:
            return randomObject(1);
        default:
            return randomValue(2);
    }
}

async function makeEngineClient()
{
    const { DynamoDBClient, ScanCommand } = require("@aws-sdk/client-dynamodb");
    const direct = new DynamoDBClient({ endpoint: job.engine.endpoint, region: job.engine.region, credentials: Object.assign({}, job.engine.credentials) });
    async function scan(table)
    {
        const items = [];
        let ExclusiveStartKey;
        do
        {
            const page = await direct.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey }));
            items.push(...(page.Items || []));
            ExclusiveStartKey = page.LastEvaluatedKey;
        } while (ExclusiveStartKey);
        return items;
    }
    return { direct, scan };
}

function clients()
{
    const dynamodb = { endpoint: job.engine.endpoint, region: job.engine.region, credentials: Object.assign({}, job.engine.credentials) };
    const make = (kind, table, keys, extra) =>
    {
        const c = new DynamoDBLockClient[kind](Object.assign(
            // (No `sortKey: undefined`: see the "undefined option" finding of the config fuzz.)
            Object.assign({ dynamodb, lockTable: table, partitionKey: keys.partition, requestTimeoutMs: 3000, retryCount: 0 }, keys.sort ? { sortKey: keys.sort } : {}),
            kind === "FailClosed" ? { acquirePeriodMs: 10 } : { leaseDurationMs: 400, heartbeatPeriodMs: 100 },
            extra));
        c._fuzzKind = kind;
        c._fuzzTable = table;
        c._fuzzKeys = keys;
        return c;
    };
    // One table per kind: a FailOpen client would take over a FailClosed item after a lease.
    return [
        make("FailClosed", "fzc_s", { partition: "id" }),
        make("FailOpen", "fzo_s", { partition: "id" }),
        make("FailClosed", "fzc_n", { partition: "id" }),
        make("FailOpen", "fzo_n", { partition: "id" }),
        make("FailClosed", "fzc_b", { partition: "id" }),
        make("FailOpen", "fzo_b", { partition: "id" }),
        make("FailClosed", "fzc_r", { partition: "pk", sort: "sk" }),
        make("FailOpen", "fzo_r", { partition: "pk", sort: "sk" }),
    ];
}

async function fuzzIds()
{
    const stats = { calls: 0, locks: 0, codes: {} };
    const all = clients();
    const CONCURRENCY = 12;
    let next = 0;
    async function lane()
    {
        while (next < job.count)
        {
            const n = next++;
            const client = all[Math.floor(random() * all.length)];
            const id = randomId(client);
            const where = { n, kind: client._fuzzKind, table: client._fuzzTable, id: describe(id) };
            const r = await callAcquire(client, id);
            stats.calls++;
            where.form = r.form;
            const outcome = checkOutcome(where, r, client._fuzzKind);
            stats.codes[outcome] = (stats.codes[outcome] || 0) + 1;
            if (outcome === "lock")
            {
                stats.locks++;
                const rel = await callRelease(r.lock);
                if (rel.timedOut)
                {
                    violation("release never settled", where);
                }
                else if (rel.error !== undefined)
                {
                    violation("release of a freshly acquired lock failed", Object.assign({ error: describeError(rel.error) }, where));
                }
            }
        }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, lane));
    await sleep(300);
    // Nothing may be left held: no native lock, no FailClosed item, no unreleased FailOpen item.
    const held = binding.heldLockCount();
    if (held !== 0)
    {
        violation("locks still held natively after every lock was released", { held });
    }
    const { direct, scan } = await makeEngineClient();
    for (const table of ["fzc_s", "fzo_s", "fzc_n", "fzo_n", "fzc_b", "fzo_b", "fzc_r", "fzo_r"])
    {
        const items = await scan(table);
        // FailClosed: no item at all; FailOpen: every item released.
        const stuck = items.filter(i => table.startsWith("fzc") || !i.leaseDurationMs || i.leaseDurationMs.N !== "1");
        if (stuck.length)
        {
            violation("lock items left held after every lock was released", { table, items: stuck.slice(0, 3).map(i => describe(i, 3)) });
        }
    }
    direct.destroy();
    return stats;
}

// ---------------------------------------------------------------------------------------------
// mode "abuse": call-order abuse and throwing callbacks, one scenario after the other

async function fuzzAbuse()
{
    const stats = { scenarios: 0 };
    const { direct, scan } = await makeEngineClient();
    const { PutItemCommand, DeleteItemCommand, GetItemCommand } = require("@aws-sdk/client-dynamodb");
    const getItem = async (table, id) => (await direct.send(new GetItemCommand({ TableName: table, Key: { id: { S: id } }, ConsistentRead: true }))).Item;
    const dynamodb = { endpoint: job.engine.endpoint, region: job.engine.region, credentials: Object.assign({}, job.engine.credentials) };
    // `DELETE` as a value leaves the key out (an explicit `undefined` is a finding of its own).
    const DELETE = Symbol("delete");
    const withExtra = (base, extra) =>
    {
        const cfg = Object.assign(base, extra);
        for (const k of Object.keys(cfg))
        {
            if (cfg[k] === DELETE)
            {
                delete cfg[k];
            }
        }
        return cfg;
    };
    const fo = (extra) => new DynamoDBLockClient.FailOpen(withExtra({ dynamodb, lockTable: "fz_s", partitionKey: "id", leaseDurationMs: 1000, heartbeatPeriodMs: 100, requestTimeoutMs: 3000 }, extra));
    const fc = (extra) => new DynamoDBLockClient.FailClosed(withExtra({ dynamodb, lockTable: "fz_s", partitionKey: "id", acquirePeriodMs: 10, requestTimeoutMs: 3000 }, extra));
    let uniq = 0;
    const uid = p => `${p}-${process.pid}-${uniq++}`;
    let registryLeaks = 0; // reported where they happen; not counted again at the end

    async function scenario(name, fn)
    {
        stats.scenarios++;
        const started = Date.now();
        try
        {
            await fn();
        }
        catch (e)
        {
            violation(`scenario failed: ${name}`, { error: describeError(e) });
        }
        out({ note: `${name}: ${Date.now() - started} ms` });
    }

    function expect(cond, kind, details)
    {
        if (!cond)
        {
            violation(kind, details || {});
        }
    }

    async function acquireOk(client, id, what)
    {
        const r = await callAcquire(client, id, { form: "promise" });
        expect(r.lock, `${what}: acquisition failed`, { error: r.error && describeError(r.error) });
        return r.lock;
    }

    await scenario("release twice (sequential and concurrent, callbacks and promises)", async () =>
        {
            for (const form of ["callback", "promise"])
            {
                const a = await acquireOk(fo(), uid("twice-fo"), "FailOpen");
                const r1 = await callRelease(a, form);
                const r2 = await callRelease(a, form);
                expect(r1.error === undefined && r2.error === undefined, "FailOpen: releasing twice is quiet", { r1: r1.error && describeError(r1.error), r2: r2.error && describeError(r2.error) });
                const b = await acquireOk(fc(), uid("twice-fc"), "FailClosed");
                const s1 = await callRelease(b, form);
                const s2 = await callRelease(b, form);
                expect(s1.error === undefined, "FailClosed: first release succeeds", { error: s1.error && describeError(s1.error) });
                expect(s2.error && s2.error.code === "FailedToReleaseLock", "FailClosed: a second release is FailedToReleaseLock", { error: s2.error && describeError(s2.error) });
                // Concurrently.
                const idc = uid("conc-fc");
                const c = await acquireOk(fc(), idc, "FailClosed");
                const [c1, c2] = await Promise.all([callRelease(c, form), callRelease(c, form)]);
                const codes = [c1, c2].map(x => (x.error ? x.error.code : "ok")).sort();
                expect(codes[0] === "FailedToReleaseLock" && codes[1] === "ok", "FailClosed: two concurrent releases: one succeeds, one is FailedToReleaseLock", { codes });
                expect((await getItem("fz_s", idc)) === undefined, "FailClosed: the item is gone after concurrent releases");
                const ido = uid("conc-fo");
                const d = await acquireOk(fo(), ido, "FailOpen");
                const [d1, d2] = await Promise.all([callRelease(d, form), callRelease(d, form)]);
                expect(!d1.error && !d2.error, "FailOpen: two concurrent releases are quiet", { d1: d1.error && describeError(d1.error), d2: d2.error && describeError(d2.error) });
                const item = await getItem("fz_s", ido);
                expect(item && item.leaseDurationMs.N === "1", "FailOpen: released after concurrent releases", { item: describe(item, 3) });
            }
        });

    await scenario("release after lost", async () =>
        {
            const id = uid("lost-fo");
            const lock = await acquireOk(fo(), id, "FailOpen");
            const lost = new Promise(resolve => lock.once("lost", resolve));
            lock.on("error", () => {});
            await direct.send(new PutItemCommand({ TableName: "fz_s", Item: { id: { S: id }, guid: { B: Buffer.alloc(64, 9) }, leaseDurationMs: { N: "1000" }, fencingToken: { N: "77" }, owner: { S: "usurper" } } }));
            const reason = await Promise.race([lost, sleep(3000).then(() => null)]);
            expect(reason && reason.code === "LockLost", "FailOpen: lost when another owner's item appears", { reason: reason && describeError(reason) });
            expect(lock.lost === true && lock.signal.aborted === true, "FailOpen: lock.lost and lock.signal after lost");
            for (const form of ["callback", "promise", "callback"])
            {
                const r = await callRelease(lock, form);
                expect(!r.timedOut && r.error === undefined, "FailOpen: releasing a lost lock is quiet", { error: r.error && describeError(r.error), timedOut: r.timedOut });
            }
            const item = await getItem("fz_s", id);
            expect(item && item.owner.S === "usurper" && item.leaseDurationMs.N === "1000", "FailOpen: releasing a lost lock leaves the new owner's item alone", { item: describe(item, 3) });

            const idc = uid("lost-fc");
            const before = binding.heldLockCount();
            const held = await acquireOk(fc(), idc, "FailClosed");
            await direct.send(new DeleteItemCommand({ TableName: "fz_s", Key: { id: { S: idc } } }));
            const r = await callRelease(held, "promise");
            expect(r.error && r.error.code === "FailedToReleaseLock", "FailClosed: releasing a lock whose item is gone is FailedToReleaseLock", { error: r.error && describeError(r.error) });
            const r2 = await callRelease(held, "callback");
            expect(r2.error && typeof r2.error.code === "string", "FailClosed: releasing it again settles with a coded error", { error: r2.error && describeError(r2.error) });
            const after = binding.heldLockCount();
            expect(after === before, "FailClosed: a lock whose release failed for good (FailedToReleaseLock) stays in the native registry forever (leak)", { before, after });
            registryLeaks += after - before;
        });

    await scenario("acquire on a missing table", async () =>
        {
            for (const kind of ["FailClosed", "FailOpen"])
            {
                for (const form of ["callback", "promise"])
                {
                    const client = kind === "FailOpen" ? fo({ lockTable: "no_such_table" }) : fc({ lockTable: "no_such_table" });
                    const r = await callAcquire(client, uid("missing"), { form });
                    const outcome = checkOutcome({ scenario: "missing table", kind, form }, r, kind);
                    expect(outcome === "ResourceNotFoundException", `${kind}: a missing table is ResourceNotFoundException`, { outcome, error: r.error && describeError(r.error) });
                    if (r.lock) await r.lock.release().catch(() => {});
                }
            }
        });

    await scenario("callbacks and listeners that throw surface once as uncaughtException", async () =>
        {
            async function throwing(name, start)
            {
                const thrown = new Error(`thrown by ${name}`);
                const seen = [];
                expectUncaught = e => seen.push(e);
                try
                {
                    await start(thrown);
                    const deadline = Date.now() + 5000;
                    while (seen.length === 0 && Date.now() < deadline)
                    {
                        await sleep(10);
                    }
                    await sleep(200); // a second report would show up by now
                }
                finally
                {
                    expectUncaught = null;
                }
                expect(seen.length === 1, `${name}: surfaced as uncaughtException exactly once`, { seen: seen.length, first: seen[0] && describeError(seen[0]) });
                expect(seen.every(e => e === thrown), `${name}: the uncaughtException is the thrown error itself`, { seen: seen.map(describeError) });
            }
            let kept;
            await throwing("acquireLock callback (success)", thrown => new Promise(resolve =>
                fo().acquireLock(uid("throw-ok"), (error, lock) =>
                    {
                        kept = lock;
                        resolve();
                        throw thrown;
                    })));
            expect(kept, "the throwing callback got its lock");
            if (kept)
            {
                const r = await callRelease(kept, "promise");
                expect(!r.error, "the lock of a throwing callback can be released", { error: r.error && describeError(r.error) });
            }
            await throwing("acquireLock callback (invalid id)", thrown => new Promise(resolve =>
                fc().acquireLock(undefined, () =>
                    {
                        resolve();
                        throw thrown;
                    })));
            await throwing("acquireLock callback (missing table)", thrown => new Promise(resolve =>
                fc({ lockTable: "no_such_table" }).acquireLock(uid("throw-missing"), () =>
                    {
                        resolve();
                        throw thrown;
                    })));
            await throwing("acquireLock callback (FailedToAcquireLock)", async thrown =>
                {
                    const id = uid("throw-busy");
                    const held = await fc().acquireLock(id);
                    await new Promise(resolve => fc({ retryCount: 0 }).acquireLock(id, () =>
                        {
                            resolve();
                            throw thrown;
                        }));
                    await held.release();
                });
            await throwing("release callback", async thrown =>
                {
                    const lock = await fo().acquireLock(uid("throw-release"));
                    await new Promise(resolve => lock.release(() =>
                        {
                            resolve();
                            throw thrown;
                        }));
                });
            await throwing("\"lost\" listener", async thrown =>
                {
                    const id = uid("throw-lost");
                    const lock = await fo().acquireLock(id);
                    lock.on("error", () => {});
                    lock.on("lost", () =>
                        {
                            throw thrown;
                        });
                    await direct.send(new PutItemCommand({ TableName: "fz_s", Item: { id: { S: id }, guid: { B: Buffer.alloc(64, 5) }, leaseDurationMs: { N: "1000" } } }));
                });
            // The library keeps working afterwards.
            for (const make of [fo, fc])
            {
                const lock = await acquireOk(make(), uid("after-throws"), "after throwing callbacks");
                if (lock)
                {
                    const r = await callRelease(lock, "callback");
                    expect(!r.error, "release after throwing callbacks", { error: r.error && describeError(r.error) });
                }
            }
        });

    await scenario("distinct string ids are distinct locks (unpaired surrogates)", async () =>
        {
            // "\uD800", "\uDBFF" and "\uFFFD" are three different JavaScript strings, hence three
            // different lock ids. Acceptable: three locks, or a coded refusal of the ill-formed ones.
            // Not acceptable: the first silently standing for the others.
            const client = fc({ retryCount: 0 });
            const prefix = uid("sur");
            const first = await callAcquire(client, `${prefix}\uD800`, { form: "promise" });
            for (const other of [`${prefix}\uDBFF`, `${prefix}\uFFFD`])
            {
                const r = await callAcquire(client, other, { form: "promise" });
                expect(!(r.error && r.error.code === "FailedToAcquireLock"),
                    "two different lock ids (differing only in an unpaired surrogate) are the same lock",
                    { held: JSON.stringify(`${prefix}\uD800`).slice(-9), asked: JSON.stringify(other).slice(-9), error: r.error && describeError(r.error) });
                if (r.lock)
                {
                    await r.lock.release();
                }
            }
            if (first.lock)
            {
                await first.lock.release();
            }
        });

    await scenario("odd arguments and AbortSignals", async () =>
        {
            const client = fc({ retryCount: 0 });
            let baseline = binding.heldLockCount();
            const signals = [
                ["an aborted AbortSignal", () => AbortSignal.abort(), "AbortError"],
                ["AbortSignal.timeout(1)", () => AbortSignal.timeout(1), null],
                ["a live AbortSignal", () => new AbortController().signal, null],
                ["null", () => null, null],
                ["a string", () => "signal", null],
                ["a number", () => 5, null],
                ["an empty object", () => ({}), null],
                ["{ aborted: true }", () => ({ aborted: true }), null],
                ["an object with addEventListener only", () => ({ aborted: false, addEventListener() {} }), null],
                ["an EventTarget", () => Object.assign(new EventTarget(), { aborted: false }), null],
            ];
            for (const [name, make, wantCode] of signals)
            {
                const id = uid("signal");
                const r = await callAcquire(client, id, { form: pick(["promise+options", "callback+options"]), options: { signal: make() } });
                if (r.timedOut)
                {
                    violation("never settled", { signal: name });
                    continue;
                }
                if (r.lock)
                {
                    await r.lock.release().catch(e => violation("release failed", { signal: name, error: describeError(e) }));
                }
                else
                {
                    expect(r.error instanceof Error, `signal ${name}: rejected with an Error`, { error: describe(r.error) });
                    if (wantCode)
                    {
                        expect(r.error && r.error.code === wantCode, `signal ${name}: ${wantCode}`, { error: describeError(r.error) });
                    }
                    // Whatever the error, a failed acquisition must not leave the lock held.
                    await sleep(50);
                    const item = await getItem("fz_s", id);
                    expect(item === undefined, "an acquisition that rejected left its lock held (orphaned: nobody can release it)",
                        { signal: name, error: describeError(r.error), item: describe(item, 2) });
                    if (item)
                    {
                        await direct.send(new DeleteItemCommand({ TableName: "fz_s", Key: { id: { S: id } } }));
                    }
                }
                const held = binding.heldLockCount();
                expect(held === baseline, "an acquisition that settled left a lock in the native registry", { signal: name, held, baseline, error: r.error && describeError(r.error) });
                registryLeaks += Math.max(0, held - baseline);
                baseline = held;
            }
            // No id, extra arguments, non-function callbacks.
            const r1 = await callAcquire(client, undefined, { form: "promise" });
            expect(r1.error && r1.error.code === "InvalidLockId", "acquireLock() without an id is InvalidLockId", { error: r1.error && describeError(r1.error) });
            const p = client.acquireLock(uid("odd"), "not options", "not a callback");
            expect(p && typeof p.then === "function", "acquireLock(id, junk, junk) returns a Promise");
            if (p && typeof p.then === "function")
            {
                await p.then(l => l.release(), e => expect(typeof e.code === "string", "acquireLock(id, junk, junk): coded error", { error: describeError(e) }));
            }
            const lock = await acquireOk(client, uid("odd-release"), "odd release");
            if (lock)
            {
                const rp = lock.release(42);
                expect(rp && typeof rp.then === "function", "release(non-function) returns a Promise");
                if (rp && rp.then)
                {
                    await rp.catch(e => violation("release(42) failed", { error: describeError(e) }));
                }
            }
        });

    await scenario("configurations that validation accepts give working clients", async () =>
        {
            const MAX = Number.MAX_SAFE_INTEGER;
            const configs = [
                ["FailOpen", { leaseDurationMs: MAX, heartbeatPeriodMs: MAX - 1 }],
                ["FailOpen", { leaseDurationMs: MAX, heartbeatPeriodMs: 100, dangerMarginMs: MAX - 1, rereadPeriodMs: MAX, maxHeartbeatsPerSecond: MAX }],
                ["FailOpen", { leaseDurationMs: 0 }],
                ["FailOpen", { leaseDurationMs: 1 }],
                ["FailOpen", { leaseDurationMs: 1000, heartbeatPeriodMs: 0, requestTimeoutMs: MAX, retryCount: MAX }],
                ["FailOpen", { leaseDurationMs: 1000, heartbeatPeriodMs: 1, maxHeartbeatsPerSecond: 1 }],
                ["FailOpen", { leaseDurationMs: 1000, trustLocalTime: true, owner: LONG }],
                ["FailClosed", { acquirePeriodMs: MAX, retryCount: 0 }],
                ["FailClosed", { acquirePeriodMs: 0, retryCount: MAX, requestTimeoutMs: 1 }],
                ["FailClosed", { acquirePeriodMs: 0, transport: "sdk" }],
                ["FailClosed", { acquirePeriodMs: 0, transport: "object" }],
                ["FailOpen", { leaseDurationMs: 1000, transport: "object", dynamodb: DELETE }],
            ];
            for (const [kind, extra] of configs)
            {
                let client;
                try
                {
                    client = kind === "FailOpen" ? fo(extra) : fc(extra);
                }
                catch (e)
                {
                    if (e.name !== "ValidationError")
                    {
                        violation(`constructor threw something other than a ValidationError: ${errorSignature(e)}`, { kind, config: describe(extra), error: describeError(e) });
                    }
                    continue;
                }
                const where = { kind, config: describe(extra) };
                const r = await callAcquire(client, uid("extreme"), { form: "promise" });
                const outcome = checkOutcome(where, r, kind);
                if (outcome === "lock")
                {
                    let rel = await callRelease(r.lock, "promise");
                    // A 1 ms request timeout runs out on most requests of a loaded machine
                    // (36 calls in a row here under load): a release that failed with a
                    // transport error may be called again (documented) until it succeeds.
                    // Bounded by time, not by a count of calls, which a slow machine exhausts.
                    const until = Date.now() + 20000;
                    while (rel.error && ["TimeoutError", "NetworkingError"].includes(rel.error.code) && Date.now() < until)
                    {
                        rel = await callRelease(r.lock, "promise");
                    }
                    expect(!rel.timedOut && !rel.error, "release with an extreme configuration", Object.assign({ error: rel.error && describeError(rel.error) }, where));
                }
            }
            // A retryCount validation accepts must be honoured, not wrapped around.
            for (const retryCount of [2 ** 32, 2 ** 32 + 1])
            {
                const id = uid("retries");
                const held = await fc({ retryCount: 0 }).acquireLock(id);
                const started = Date.now();
                const r = await callAcquire(fc({ retryCount, acquirePeriodMs: 20 }), id, { form: "promise+options", options: { signal: AbortSignal.timeout(600) } });
                const took = Date.now() - started;
                expect(r.error && r.error.code === "AbortError",
                    `retryCount ${retryCount} is honoured (still retrying when the 600 ms signal fired)`,
                    { took, outcome: r.error ? r.error.code : "lock" });
                await held.release();
            }
        });

    await scenario("a lock outlives its client (garbage collection)", async () =>
        {
            if (typeof global.gc !== "function")
            {
                out({ note: "no --expose-gc: skipped" });
                return;
            }
            const id = uid("gc");
            let client = fo();
            const lock = await client.acquireLock(id);
            client = null;
            for (let k = 0; k < 3; k++)
            {
                global.gc();
                await sleep(150);
            }
            expect(!lock.lost, "a lock whose client was collected keeps heartbeating");
            const r = await callRelease(lock, "promise");
            expect(!r.error, "a lock whose client was collected can be released", { error: r.error && describeError(r.error) });
            const item = await getItem("fz_s", id);
            expect(item && item.leaseDurationMs.N === "1", "released after its client was collected");
        });

    await sleep(200);
    expect(binding.heldLockCount() <= registryLeaks, "no lock is left in the native registry at the end (beyond leaks reported above)", { held: binding.heldLockCount(), reportedAbove: registryLeaks });
    // An acquisition that timed out undoes its write in the background, in rounds 5 s apart
    // (the 1 ms request timeout above makes that likely). Each attempt of a round has that
    // timeout too, so on a loaded machine a round may fail whole (one in a CI run left the
    // item after two more rounds): wait for six more rounds at most.
    const leftHeld = async () => (await scan("fz_s"))
        .filter(i => !i.leaseDurationMs || i.leaseDurationMs.N !== "1")
        .filter(i => !(i.owner && i.owner.S === "usurper") && !(i.guid && Buffer.from(i.guid.B).equals(Buffer.alloc(64, 5))));
    let unexpected = await leftHeld();
    for (const until = Date.now() + 32000; unexpected.length > 0 && Date.now() < until;)
    {
        await sleep(500);
        unexpected = await leftHeld();
    }
    expect(unexpected.length === 0, "no lock item is left held at the end", { items: unexpected.slice(0, 3).map(i => describe(i, 3)) });
    direct.destroy();
    return stats;
}

// ---------------------------------------------------------------------------------------------

async function main()
{
    const started = Date.now();
    let stats;
    if (job.mode === "config")
    {
        stats = fuzzConfig();
    }
    else if (job.mode === "ids")
    {
        stats = await fuzzIds();
    }
    else if (job.mode === "abuse")
    {
        stats = await fuzzAbuse();
    }
    else
    {
        throw new Error(`unknown mode ${job.mode}`);
    }
    out({ complete: true, mode: job.mode, seed: job.seed, ms: Date.now() - started, stats, violations, violationKinds: Object.fromEntries(violationKinds) });
}

main().then(
    () => process.exit(0),
    e =>
    {
        out({ crash: describeError(e) });
        process.exit(2);
    });
