"use strict";

// A client's configuration checked as the original checks it (Joi, `abortEarly: false`,
// `convert: false`): every problem at once, in the schema's order, and a string is not a
// number. Each problem is { message, path, type, limit }; lib/options.js shapes them into a
// ValidationError whose `details` are Joi's.

// What a rule accepts. `reserved`: the lock item's own attribute names are refused.
const str = reserved => ({ type: "string", reserved });
const int = min => ({ type: "integer", min });
const bool = { type: "boolean" };
const dynamodb = { type: "dynamodb" };
const oneOf = values => ({ type: "oneOf", values });

const TRANSPORTS = ["auto", "sdk", "object"];

// Where every client's keys start: [key, rule, required]. Fifo's table has a sort key.
const head = sortKeyRequired => [
    ["owner", str(false)],
    ["dynamodb", dynamodb],
    ["lockTable", str(false), true],
    ["partitionKey", str(true), true],
    ["sortKey", str(true), sortKeyRequired],
];
const requestTimes = [["requestTimeoutMs", int(1)], ["rereadPeriodMs", int(1)]];
const ttlAndTable = [
    ["transport", oneOf(TRANSPORTS)],
    ["ttlAttribute", str(true)],
    ["ttlSeconds", int(1)],
    ["allowEventuallyConsistentGlobalTable", bool],
];

// The original's keys in its order, then this library's additions.
const SCHEMAS = {
    FailClosed: [...head(false), ["acquirePeriodMs", int(0), true], ["retryCount", int(0)], ...requestTimes, ...ttlAndTable],
    FailOpen: [
        ...head(false),
        ["heartbeatPeriodMs", int(0)],
        ["leaseDurationMs", int(0), true],
        ["trustLocalTime", bool],
        ["retryCount", int(0)],
        ...requestTimes,
        ["dangerMarginMs", int(0)],
        ["maxHeartbeatsPerSecond", int(1)],
        ...ttlAndTable,
        ["session", bool],
    ],
    // This library's own options only.
    Fifo: [
        ...head(true),
        ["leaseDurationMs", int(2), true],
        ["heartbeatPeriodMs", int(1)],
        ...requestTimes,
        ["dangerMarginMs", int(0)],
        ["ttlAttribute", str(true)],
        ["allowEventuallyConsistentGlobalTable", bool],
    ],
};

// The methods a user-supplied `dynamodb` object must have (the original's requirement).
const OBJECT_METHODS = ["delete", "get", "put"];

function problem(path, type, what, limit)
{
    return { message: `"${path.join(".")}" ${what}`, path, type, limit: limit === undefined ? null : limit };
}

const isObject = v => v !== null && typeof v === "object" && !Array.isArray(v);
// Only an object's own enumerable properties are options, as for Joi.
const own = (o, k) => Object.prototype.propertyIsEnumerable.call(o, k);
const get = (o, k) => (own(o, k) ? o[k] : undefined);
// An option set to `undefined` is an option left out.
const present = (o, k) => get(o, k) !== undefined;
const stringOf = (o, k) => (typeof get(o, k) === "string" ? o[k] : undefined);
const numberOf = (o, k) => (typeof get(o, k) === "number" ? o[k] : undefined);

function checkNumber(key, v, min, out)
{
    if (typeof v !== "number" || Number.isNaN(v))
    {
        return out.push(problem([key], "number.base", "must be a number"));
    }
    if (!Number.isFinite(v))
    {
        return out.push(problem([key], "number.infinity", "cannot be infinity"));
    }
    if (!Number.isInteger(v))
    {
        out.push(problem([key], "number.integer", "must be an integer"));
    }
    else if (v > Number.MAX_SAFE_INTEGER)
    {
        out.push(problem([key], "number.unsafe", "must be a safe number"));
    }
    if (v < min)
    {
        out.push(problem([key], "number.min", `must be larger than or equal to ${min}`, min));
    }
}

// An object that offers any of get/put/delete (as lib/transport.js describes it) is a user
// object: it needs all three, as in the original. Other objects are SDK clients or options.
function offersMethods(db)
{
    return isObject(db) && OBJECT_METHODS.some(m => own(db, m));
}

function checkDynamodb(db, out)
{
    if (!isObject(db))
    {
        return out.push(problem(["dynamodb"], "object.base", "must be of type object"));
    }
    if (!offersMethods(db))
    {
        return;
    }
    for (const m of OBJECT_METHODS)
    {
        if (get(db, m) === undefined)
        {
            out.push(problem(["dynamodb", m], "any.required", "is required"));
        }
        else if (typeof db[m] !== "function")
        {
            out.push(problem(["dynamodb", m], "object.base", "must be of type function"));
        }
    }
}

// The client's I/O goes through a user object (a `dynamodb` with get/put/delete, or
// `transport: "object"`), which sends only the original library's requests.
function userObject(config)
{
    return offersMethods(get(config, "dynamodb")) || get(config, "transport") === "object";
}

// FailClosed and FailOpen: `ttlAttribute` is neither key; `ttlSeconds` goes with it (and
// FailClosed needs both: its items would never expire otherwise); a user object's
// get/put/delete cannot write it.
function checkTtl(kind, config, out)
{
    const ttl = stringOf(config, "ttlAttribute");
    if (ttl !== undefined && (ttl === stringOf(config, "partitionKey") || ttl === stringOf(config, "sortKey")))
    {
        out.push(problem(["ttlAttribute"], "any.invalid", "must differ from partitionKey and sortKey"));
    }
    if (present(config, "ttlSeconds") && !present(config, "ttlAttribute"))
    {
        out.push(problem(["ttlSeconds"], "object.with", "missing required peer \"ttlAttribute\""));
    }
    if (kind === "FailClosed" && present(config, "ttlAttribute") && !present(config, "ttlSeconds"))
    {
        out.push(problem(["ttlAttribute"], "object.with", "missing required peer \"ttlSeconds\""));
    }
    if (present(config, "ttlAttribute") && userObject(config))
    {
        out.push(problem(["ttlAttribute"], "any.invalid",
            "needs the native core's I/O: a dynamodb object's get/put/delete do not write it"));
    }
}

// FailOpen `session: true`: the session is renewed every `heartbeatPeriodMs`, shorter than the
// lease, and written through the native core's I/O. Checked once the rest is valid.
function checkSession(config, out)
{
    if (get(config, "session") !== true || out.length > 0)
    {
        return;
    }
    const hb = numberOf(config, "heartbeatPeriodMs");
    const lease = numberOf(config, "leaseDurationMs");
    if (!(hb > 0 && hb < lease))
    {
        out.push(problem(["session"], "any.invalid",
            "needs heartbeatPeriodMs above 0 and below leaseDurationMs: the session is renewed every heartbeat period"));
    }
    // A lock held through a session writes nothing while held: nothing would move its TTL
    // attribute on, and DynamoDB could delete a held lock's item.
    if (present(config, "ttlAttribute"))
    {
        out.push(problem(["session"], "any.invalid",
            "does not go with ttlAttribute: a lock held through a session writes nothing while held, so nothing"
                + " would move its TTL on"));
    }
    if (userObject(config))
    {
        out.push(problem(["session"], "any.invalid",
            "needs the native core's I/O: a dynamodb object's get/put/delete do not write sessions"));
    }
}

// Fifo's own rules: the TTL attribute is neither key, and the I/O is the native core's (a user
// object's get/put/delete cannot queue).
function checkFifo(config, out)
{
    const ttl = stringOf(config, "ttlAttribute") ?? "ttl";
    if (ttl === stringOf(config, "partitionKey") || ttl === stringOf(config, "sortKey"))
    {
        out.push(problem(["ttlAttribute"], "any.invalid", "must differ from partitionKey and sortKey (default \"ttl\")"));
    }
    if (offersMethods(get(config, "dynamodb")))
    {
        out.push(problem(["dynamodb"], "any.invalid",
            "must be an AWS SDK client or options for the native core: Fifo does not call get/put/delete objects"));
    }
}

// FailOpen and Fifo: a `dangerMarginMs` is some of the lease, less than all of it: a margin of
// the whole lease or more would have "danger" due before the lease starts, and it never fires.
// Checked once both values are valid on their own.
function checkDangerMargin(config, out)
{
    if (out.some(p => p.path.length === 1 && (p.path[0] === "dangerMarginMs" || p.path[0] === "leaseDurationMs")))
    {
        return;
    }
    const margin = numberOf(config, "dangerMarginMs");
    const lease = numberOf(config, "leaseDurationMs");
    if (margin > 0 && margin >= lease)
    {
        out.push(problem(["dangerMarginMs"], "number.less",
            `must be less than leaseDurationMs (${lease} ms): "danger" fires when that much of the lease is left,`
                + " which a margin of the whole lease or more never is. Leave it out (a third of the lease) or choose"
                + " a part of the lease",
            lease));
    }
}

// The problems of a FailClosed, FailOpen or Fifo configuration (none: valid). `config.dynamodb`
// is as lib/transport.js describes it. `reserved` and `fifoReserved` are the attribute names
// of the lock item and of Fifo's head item, which key and TTL attribute names may not take.
function configProblems(kind, config, { reserved, fifoReserved })
{
    if (config === undefined)
    {
        return [Object.assign(problem(["value"], "any.required", "is required"), { path: [] })];
    }
    if (!isObject(config))
    {
        return [Object.assign(problem(["value"], "object.base", "must be of type object"), { path: [] })];
    }
    const schema = SCHEMAS[kind];
    if (!schema)
    {
        throw new TypeError(`unknown lock kind ${kind}`);
    }
    const taken = name => reserved.includes(name) || (kind === "Fifo" && fifoReserved.includes(name));
    const out = [];
    for (const [key, rule, required] of schema)
    {
        if (!present(config, key))
        {
            if (required)
            {
                out.push(problem([key], "any.required", "is required"));
            }
            continue;
        }
        const v = config[key];
        switch (rule.type)
        {
        case "string":
            if (typeof v !== "string")
            {
                out.push(problem([key], "string.base", "must be a string"));
            }
            else if (v === "")
            {
                out.push(problem([key], "string.empty", "is not allowed to be empty"));
            }
            else if (rule.reserved && taken(v))
            {
                out.push(problem([key], "any.invalid", "contains an invalid value"));
            }
            break;
        case "integer":
            checkNumber(key, v, rule.min, out);
            break;
        case "boolean":
            if (typeof v !== "boolean")
            {
                out.push(problem([key], "boolean.base", "must be a boolean"));
            }
            break;
        case "dynamodb":
            checkDynamodb(v, out);
            break;
        default:
            if (!rule.values.includes(v))
            {
                out.push(problem([key], "any.only", `must be one of [${rule.values.join(", ")}]`));
            }
        }
    }
    if (get(config, "transport") === "object" && !present(config, "dynamodb"))
    {
        out.push(problem(["dynamodb"], "any.required", "is required when transport is \"object\""));
    }
    if (kind === "Fifo")
    {
        checkFifo(config, out);
    }
    else
    {
        checkTtl(kind, config, out);
    }
    if (kind === "FailOpen")
    {
        checkSession(config, out);
    }
    if (kind !== "FailClosed")
    {
        checkDangerMargin(config, out);
    }
    // FailOpen accepts a heartbeat period as long as the lease, as the original does (the
    // caller warns); Fifo, which has no such precedent, refuses it.
    const hb = numberOf(config, "heartbeatPeriodMs");
    if (kind === "Fifo" && out.length === 0 && hb > 0 && hb >= numberOf(config, "leaseDurationMs"))
    {
        out.push(problem(["heartbeatPeriodMs"], "number.less",
            "must be less than leaseDurationMs, or the lease lapses between heartbeats"));
    }
    for (const key of Object.keys(config))
    {
        if (!schema.some(([k]) => k === key))
        {
            out.push(problem([key], "object.unknown", "is not allowed"));
        }
    }
    return out;
}

module.exports = { configProblems };
