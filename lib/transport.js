"use strict";

// Which transport a `dynamodb` option selects, and what the native core needs from it.

const METHODS = ["get", "put", "delete"];

function isObject(v)
{
    return v !== null && typeof v === "object";
}

// AWS SDK for JavaScript v3 clients (DynamoDBClient, DynamoDBDocumentClient).
function isV3Client(db)
{
    return isObject(db) && typeof db.send === "function" && isObject(db.config);
}

// AWS SDK for JavaScript v2 clients (AWS.DynamoDB, AWS.DynamoDB.DocumentClient).
function isV2Client(db)
{
    if (!isObject(db))
    {
        return false;
    }
    if (isObject(db.service) && isObject(db.service.config) && typeof db.service.makeRequest === "function")
    {
        return true;
    }
    return isObject(db.config) && typeof db.makeRequest === "function" && isObject(db.api);
}

function isSdkClient(db)
{
    return isV3Client(db) || isV2Client(db);
}

function offersMethods(db)
{
    return isObject(db) && METHODS.some(m => db[m] !== undefined);
}

// "sdk": the native core does the I/O (configured from options, an SDK client or the
// environment). "object": the user's object is called with the original's requests.
function chooseTransport(db, requested)
{
    if (requested === "sdk" || requested === "object")
    {
        return requested;
    }
    if (db === undefined || isSdkClient(db))
    {
        return "sdk";
    }
    return offersMethods(db) ? "object" : "sdk";
}

// What validation sees of `dynamodb`: for a user object, its three methods wherever they are
// defined (own or inherited); for SDK clients and options, an empty object.
function describeDynamodb(db, requested)
{
    if (!isObject(db))
    {
        return db;
    }
    if (chooseTransport(db, requested) !== "object")
    {
        return {};
    }
    // Chosen explicitly, the object transport needs all three methods, present or not.
    const out = {};
    for (const m of METHODS)
    {
        if (db[m] !== undefined || requested === "object")
        {
            out[m] = db[m];
        }
    }
    return out;
}

// An endpoint as text: a string, a URL, an SDK v2 Endpoint ({href}) or an SDK v3 endpoint
// ({protocol, hostname, port, path}). Anything else is refused rather than guessed at, so a
// typo never sends requests somewhere unintended.
function endpointString(endpoint)
{
    if (endpoint === undefined || endpoint === null)
    {
        return undefined;
    }
    if (typeof endpoint === "string")
    {
        return endpoint;
    }
    if (endpoint instanceof URL)
    {
        return endpoint.href;
    }
    if (isObject(endpoint) && typeof endpoint.hostname === "string" && endpoint.hostname)
    {
        const text = v => (typeof v === "string" || typeof v === "number" ? String(v) : "");
        const protocol = (text(endpoint.protocol) || "https:").replace(/:?$/, ":");
        const port = text(endpoint.port) ? `:${text(endpoint.port)}` : "";
        return `${protocol}//${endpoint.hostname}${port}${text(endpoint.path)}`;
    }
    if (isObject(endpoint) && typeof endpoint.href === "string")
    {
        return endpoint.href;
    }
    const err = new TypeError("dynamodb.endpoint must be a string or a URL");
    err.code = "InvalidEndpoint";
    throw err;
}

function isPlainObject(v)
{
    if (!isObject(v))
    {
        return false;
    }
    const proto = Object.getPrototypeOf(v);
    return proto === Object.prototype || proto === null;
}

const OPTION_KEYS = ["region", "endpoint", "credentials", "caBundle"];
// Keys an AWS SDK writes into the options object it is given, so that the same object can be
// passed on here: the SDK v2 DocumentClient adds `attrValue`. They are ignored.
const SDK_ADDED_KEYS = ["attrValue"];
const CREDENTIAL_KEYS = ["accessKeyId", "secretAccessKey", "sessionToken", "expiration"];

// The problems of a `dynamodb` options object for the native core, as Joi-like details
// ({ message, path, type, context }). Named credentials that are malformed are refused here:
// the environment's are never used in their place. SDK clients and user objects are not
// options, and are not checked here.
function optionProblems(db, requested)
{
    if (!isObject(db) || isSdkClient(db) || chooseTransport(db, requested) === "object")
    {
        return [];
    }
    const out = [];
    const add = (path, type, what, value) =>
    {
        const label = ["dynamodb", ...path].join(".");
        const context = { label, key: path[path.length - 1] };
        // A credential's value is never repeated: the error may be logged.
        if (value !== undefined && path[0] !== "credentials")
        {
            context.value = value;
        }
        out.push({ message: `"${label}" ${what}`, path: ["dynamodb", ...path], type, context });
    };
    if (isPlainObject(db))
    {
        for (const key of Object.keys(db))
        {
            if (!OPTION_KEYS.includes(key) && !SDK_ADDED_KEYS.includes(key) && db[key] !== undefined)
            {
                add([key], "object.unknown", "is not allowed", db[key]);
            }
        }
    }
    if (db.region !== undefined && (typeof db.region !== "string" || db.region === ""))
    {
        add(["region"], typeof db.region === "string" ? "string.empty" : "string.base",
            typeof db.region === "string" ? "is not allowed to be empty" : "must be a string", db.region);
    }
    if (db.endpoint !== undefined && db.endpoint !== null)
    {
        let text;
        try
        {
            text = endpointString(db.endpoint);
        }
        catch (_)
        {
            text = undefined;
        }
        if (!isEndpointUrl(text))
        {
            add(["endpoint"], "string.uri", "must be a valid http or https URL", db.endpoint);
        }
    }
    const c = db.credentials;
    if (c !== undefined && typeof c !== "function")
    {
        if (!isObject(c))
        {
            add(["credentials"], "object.base", "must be of type object", c);
        }
        else
        {
            for (const key of ["accessKeyId", "secretAccessKey"])
            {
                if (c[key] === undefined)
                {
                    add(["credentials", key], "any.required", "is required");
                }
                else if (typeof c[key] !== "string")
                {
                    add(["credentials", key], "string.base", "must be a string", c[key]);
                }
                else if (c[key] === "")
                {
                    add(["credentials", key], "string.empty", "is not allowed to be empty", c[key]);
                }
            }
            if (c.sessionToken !== undefined && c.sessionToken !== null && typeof c.sessionToken !== "string")
            {
                add(["credentials", "sessionToken"], "string.base", "must be a string", c.sessionToken);
            }
            if (isPlainObject(c))
            {
                // Credentials the AWS SDKs resolve carry more fields ($source, credentialScope,
                // accountId, ...): those pass. A key that differs from one of ours only in
                // case (accessKeyID) is a typo, and refused.
                const ours = new Map(CREDENTIAL_KEYS.map(k => [k.toLowerCase(), k]));
                for (const key of Object.keys(c))
                {
                    if (!CREDENTIAL_KEYS.includes(key) && ours.has(key.toLowerCase()) && c[key] !== undefined)
                    {
                        add(["credentials", key], "object.unknown", "is not allowed", c[key]);
                    }
                }
            }
        }
    }
    return out;
}

// An absolute http(s) URL with a host.
function isEndpointUrl(text)
{
    if (typeof text !== "string")
    {
        return false;
    }
    try
    {
        const url = new URL(text);
        return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "";
    }
    catch (_)
    {
        return false;
    }
}

// Options for the native core from a plain options object ({region, endpoint, credentials}).
function sdkOptionsFrom(db)
{
    if (!isObject(db) || isSdkClient(db))
    {
        return {};
    }
    const out = {};
    if (typeof db.region === "string")
    {
        out.region = db.region;
    }
    const endpoint = endpointString(db.endpoint);
    if (endpoint)
    {
        out.endpoint = endpoint;
    }
    const c = db.credentials;
    if (isObject(c) && typeof c !== "function" && typeof c.accessKeyId === "string" && typeof c.secretAccessKey === "string")
    {
        out.accessKeyId = c.accessKeyId;
        out.secretAccessKey = c.secretAccessKey;
        if (typeof c.sessionToken === "string")
        {
            out.sessionToken = c.sessionToken;
        }
    }
    if (db.caBundle !== undefined)
    {
        out.caBundle = caBundle(db.caBundle);
    }
    return out;
}

// `dynamodb.caBundle`: PEM certificates (a Buffer or a string) or the path of a PEM file,
// trusted instead of the system's roots.
function caBundle(v)
{
    if (Buffer.isBuffer(v) || v instanceof Uint8Array)
    {
        return Buffer.from(v);
    }
    if (typeof v === "string" && v.includes("-----BEGIN"))
    {
        return Buffer.from(v, "utf8");
    }
    if (typeof v === "string" && v.length > 0)
    {
        try
        {
            return require("fs").readFileSync(v);
        }
        catch (e)
        {
            const err = new Error(`dynamodb.caBundle ${JSON.stringify(v)} could not be read: ${e.message}`);
            err.code = "InvalidCaBundle";
            throw err;
        }
    }
    const err = new Error("dynamodb.caBundle must be PEM certificates (a string or Buffer) or the path of a PEM file");
    err.code = "InvalidCaBundle";
    throw err;
}

// An error of the AWS configuration, as the native core reports them.
function configError(message, cause)
{
    const err = new Error(message, cause === undefined ? undefined : { cause });
    err.name = "ConfigError";
    err.code = "ConfigError";
    return err;
}

async function resolveValue(v)
{
    return typeof v === "function" ? v() : v;
}

function v2Config(db)
{
    return isObject(db.service) && isObject(db.service.config) ? db.service.config : db.config;
}

// Region, endpoint and a credentials function read from an AWS SDK for JavaScript client.
// The function is called by the native core whenever its cached credentials near expiry, and
// goes through the client's own provider, so they refresh the way the user configured.
async function sdkClientOptions(db)
{
    if (isV3Client(db))
    {
        const cfg = db.config;
        const out = {};
        let region;
        try
        {
            region = await resolveValue(cfg.region);
        }
        catch (e)
        {
            // The SDK's "Region is missing" (no name, no code).
            throw configError(`No AWS region: the AWS SDK client has none (${e && e.message}); give it \`region\`, or set AWS_REGION or \`region\` in the AWS profile${process.env.AWS_PROFILE ? ` "${process.env.AWS_PROFILE}" (AWS_PROFILE), which must be in the AWS config file` : ""}`, e);
        }
        if (typeof region === "string")
        {
            out.region = region;
        }
        const endpoint = endpointString(await resolveValue(cfg.endpoint));
        if (endpoint)
        {
            out.endpoint = endpoint;
        }
        const credentials = typeof cfg.credentials === "function" || isObject(cfg.credentials)
            ? async () => exportCredentials(await resolveValue(cfg.credentials))
            : undefined;
        return { options: out, credentials };
    }
    const cfg = v2Config(db);
    const out = {};
    if (typeof cfg.region === "string")
    {
        out.region = cfg.region;
    }
    const endpoint = endpointString(cfg.endpoint);
    if (endpoint)
    {
        out.endpoint = endpoint;
    }
    const credentials = async () => exportCredentials(await new Promise((resolve, reject) =>
        cfg.getCredentials((error, creds) => (error ? reject(error) : resolve(creds || cfg.credentials)))));
    return { options: out, credentials };
}

// A credentials provider given as `dynamodb.credentials` (a function, as the AWS SDK v3's
// providers are): called by the native core whenever its cached credentials near expiry.
function credentialsProvider(db)
{
    if (!isObject(db) || isSdkClient(db) || typeof db.credentials !== "function")
    {
        return undefined;
    }
    const provider = db.credentials;
    return async () => exportCredentials(await provider());
}

function exportCredentials(c)
{
    if (!isObject(c) || typeof c.accessKeyId !== "string" || typeof c.secretAccessKey !== "string")
    {
        throw new Error("the credentials provider returned no credentials (an object with accessKeyId and secretAccessKey)");
    }
    const expiration = c.expiration || c.expireTime;
    return {
        accessKeyId: c.accessKeyId,
        secretAccessKey: c.secretAccessKey,
        sessionToken: typeof c.sessionToken === "string" && c.sessionToken ? c.sessionToken : undefined,
        expirationMs: expiration instanceof Date ? expiration.getTime() : undefined,
    };
}

// The configuration a client keeps: a `dynamodb` options object loses its `credentials`, which
// the native core has taken (static keys) or reaches through a closure (a provider), so that no
// walk over the client finds the secret.
function withoutCredentials(config)
{
    const db = config !== null && typeof config === "object" ? config.dynamodb : undefined;
    if (db === null || typeof db !== "object" || !("credentials" in db) || isSdkClient(db) || typeof db.get === "function")
    {
        return config;
    }
    const rest = Object.assign({}, db);
    delete rest.credentials;
    return Object.assign({}, config, { dynamodb: rest });
}

module.exports = { optionProblems, credentialsProvider, sdkClientOptions, chooseTransport, describeDynamodb, sdkOptionsFrom, isSdkClient, isV2Client, isV3Client, endpointString, withoutCredentials };
