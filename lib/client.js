"use strict";

// What the three kinds of client (lib/clients.js) share: setting a client up from its
// configuration, the course of every acquisition (metrics, and `close()` cancelling it), and
// the methods besides acquireLock: close, metrics, getLock, campaign, and what JSON.stringify
// and util.inspect show.

const util = require("util");
const bridge = require("./bridge.js");
const { objectCaller } = require("./object-store.js");
const { chooseTransport, isSdkClient, sdkClientOptions, credentialsProvider, withoutCredentials } = require("./transport.js");
const { Metrics } = require("./metrics.js");
const { Campaign } = require("./campaign.js");
const { invalidArgument, clientClosed, notSupported } = require("./errors.js");
const { lockKey, fifoResource } = require("./lock-id.js");
const { validate, ownerOf, retryCountOf, nativeSettings, endpointOptions, checkAcquireOptions, UNTIL_ABORTED } = require("./options.js");
const { settle } = require("./settle.js");
const { checked } = require("./global-table.js");
const { performance } = require("node:perf_hooks");
const { debug, ms } = require("./debug.js");

// The longest wait for the table check's answer once a lock is granted (the default
// `requestTimeoutMs`).
const DEFAULT_REQUEST_TIMEOUT_MS = 5000;

// Sets up `self` as a client of `kind` ("FailClosed", "FailOpen" or "Fifo"): validates the
// configuration, then makes the native client, whose requests go to DynamoDB or through the
// user's object.
function setUp(self, kind, config)
{
    validate(kind, config);
    self._config = withoutCredentials(config);
    self._kind = kind;
    self._retryCount = retryCountOf(config);
    self._owner = ownerOf(config);
    self._metrics = new Metrics(kind);
    self._closing = undefined;
    self._campaigns = new Set();
    self._transport = chooseTransport(config.dynamodb, config.transport);
    const options = nativeSettings(kind, config, self._owner, self._retryCount);
    if (self._transport === "object")
    {
        self._native = bridge.nativeClient(options, undefined, objectCaller(config.dynamodb));
        return;
    }
    if (isSdkClient(config.dynamodb))
    {
        // Reading an SDK client's region and endpoint is asynchronous: the first
        // acquisition waits for it.
        self._nativeReady = sdkClientOptions(config.dynamodb).then(({ options: fromClient, credentials }) =>
            (self._native = bridge.nativeClient(Object.assign(options, fromClient), credentials)));
        self._nativeReady.catch(() => {});
        return;
    }
    const fromOptions = endpointOptions(config);
    self._native = bridge.nativeClient(Object.assign(options, fromOptions), credentialsProvider(config.dynamodb));
}

// The course of one acquisition of `id` that `start` begins: counted in the client's metrics,
// refused once the client is closing, cancelled by `close()`, and refused on a table where locks
// are unsafe (lib/global-table.js). `start` is given the course (lib/metrics.js), to say when
// the acquisition finds the lock held.
function acquisition(self, id, signal, start, callback)
{
    if (self._closing)
    {
        return settle(self._metrics.acquisition(id, () => Promise.reject(clientClosed())), callback);
    }
    const waitMs = self._config.requestTimeoutMs || DEFAULT_REQUEST_TIMEOUT_MS;
    return settle(self._metrics.acquisition(id, course => closable(self, signal, checked(self, () => start(course), waitMs))), callback);
}

// An acquisition that `close()` may cancel: cancelled, it fails with `ClientClosed`; granted
// while the client closes, its lock is released and it fails the same way.
function closable(self, signal, promise)
{
    return promise.then(
        lock =>
        {
            if (!self._closing)
            {
                return lock;
            }
            return lock.release().catch(() => {}).then(() =>
            {
                throw clientClosed();
            });
        },
        error =>
        {
            if (self._closing && error && error.code === "AbortError" && !(signal && signal.aborted))
            {
                throw clientClosed();
            }
            throw error;
        });
}

// Closes a client: stops its campaigns (each leader is deposed and releases its lock), cancels
// pending acquisitions (and, without `releaseLocks`, abandons every lock it holds, whose
// heartbeats stop at once: each is held until its lease ends, then lost) and waits for them to
// settle, then releases every lock it holds, each on its own, when asked, and those whose
// lease ran out, which the item may still carry. Resolves with one outcome per lock, once
// nothing the client started still speaks to DynamoDB (within the native bound, `closeWait`).
async function closeClient(self, releaseLocks)
{
    const startedAt = performance.now();
    debug(() => `close (${self._kind} on "${self._config.lockTable}"${releaseLocks ? ", releasing its locks" : ""}): ${self._metrics.pending.size} acquisitions pending, ${self._metrics.live.size} locks held`);
    // A leader's lock is released by its campaign, before any lock is abandoned.
    const led = (await Promise.all([...self._campaigns].map(campaign => campaign._close()))).filter(Boolean);
    let client = self._native;
    if (!client && self._nativeReady)
    {
        client = await self._nativeReady.catch(() => undefined);
    }
    if (client)
    {
        client.close(!releaseLocks);
    }
    await Promise.all([...self._metrics.pending].map(p => p.catch(() => {})));
    const locks = [...self._metrics.live];
    if (releaseLocks)
    {
        for (const ref of self._metrics.lapsed)
        {
            const lock = ref.deref();
            if (lock && !locks.includes(lock))
            {
                locks.push(lock);
            }
        }
    }
    const outcomes = releaseLocks
        ? await Promise.all(locks.map(lock => lock._closeRelease().then(
            () => ({ id: lock._track.id, fencingToken: lock.fencingToken, released: true }),
            error => ({ id: lock._track.id, fencingToken: lock.fencingToken, released: false, error }))))
        : locks.map(lock =>
        {
            lock._abandon();
            return { id: lock._track.id, fencingToken: lock.fencingToken, released: false };
        });
    if (client)
    {
        // An aborted acquisition's write may still be on the wire, and its undo after it: the
        // process may exit once close() resolves, so those must be over first. Past the bound,
        // close() resolves all the same.
        await bridge.ask(request => client.startSettle(request));
    }
    const all = led.concat(outcomes);
    debug(() => `close (${self._kind} on "${self._config.lockTable}"): done in ${ms(performance.now() - startedAt)}, ${all.filter(o => o.released).length} of ${all.length} locks released`);
    return all;
}

// getLock(id[, callback]): the lock item as one consistent read finds it, or null.
async function getLock(self, id)
{
    if (self._transport === "object")
    {
        throw invalidArgument("getLock needs the native transport: it is not available with a dynamodb object of get/put/delete");
    }
    const { partition, sort } = self._kind === "Fifo" ? { partition: fifoResource(id, "") } : lockKey(self._config, id);
    const client = self._native || await self._nativeReady;
    const info = (await bridge.request(request => client.startGetLock(request, partition, sort))).info;
    if (!info)
    {
        return null;
    }
    const value = v => (v === null ? undefined : v);
    const out = {
        owner: value(info.owner),
        fencingToken: value(info.fencingToken),
        leaseDurationMs: value(info.leaseDurationMs),
        released: info.released,
        data: info.dataS !== undefined && info.dataS !== null ? info.dataS : value(info.dataB),
        heldByThisClient: info.heldByThisClient,
        // When this library last wrote the item (its writer's clock), for people; undefined
        // when unknown.
        lastWrittenUnixMs: value(info.lastWrittenUnixMs),
    };
    // The session the lock is held through (`session: true`), only when there is one.
    if (typeof info.session === "string")
    {
        out.session = info.session;
    }
    return out;
}

// campaign(id[, { signal }]): leader election on FailOpen and Fifo clients (lib/campaign.js).
function campaign(self, id, options)
{
    if (self._kind === "FailClosed")
    {
        throw notSupported("FailClosed has no campaign: a crashed leader would keep its lock, and leadership, forever. Use FailOpen or Fifo.");
    }
    if (self._transport === "object")
    {
        throw notSupported("campaign needs the native transport: over a user dynamodb object, a waiting candidate sleeps out the whole lease, as the original does, so a resigned leader would be replaced only a lease later");
    }
    if (self._kind === "FailOpen" && !(self._config.heartbeatPeriodMs > 0))
    {
        throw invalidArgument("campaign needs a FailOpen client with heartbeatPeriodMs: a leader keeps its lease with heartbeats");
    }
    const problem = checkAcquireOptions(options, "campaign");
    if (problem)
    {
        throw problem;
    }
    // A bad id is refused now, not by every acquisition of the campaign.
    if (self._kind === "Fifo")
    {
        fifoResource(id, "");
    }
    else
    {
        lockKey(self._config, id);
    }
    const signal = options === undefined || options === null ? undefined : options.signal;
    // Candidates wait for as long as the campaign lasts: Fifo ones in line, FailOpen ones in one
    // acquisition, whose re-reads keep slowing while the same leader leads.
    const acquireOptions = self._kind === "Fifo"
        ? stop => ({ signal: stop, waitMs: Infinity })
        : stop => ({ signal: stop, [UNTIL_ABORTED]: true });
    const c = new Campaign(stop => self.acquireLock(id, acquireOptions(stop)), signal, ended => self._campaigns.delete(ended));
    if (self._closing)
    {
        c._stop.abort();
    }
    self._campaigns.add(c);
    return c;
}

function describeClient(client)
{
    const c = client._config || {};
    const out = { lockTable: c.lockTable, partitionKey: c.partitionKey };
    if (c.sortKey !== undefined)
    {
        out.sortKey = c.sortKey;
    }
    out.owner = client._owner;
    out.transport = client._transport;
    out.closed = Boolean(client._closing);
    return out;
}

// close([options][, callback]), metrics(), getLock, campaign, toJSON and util.inspect, on every
// kind of client.
const clientMethods =
{
    close(options, callback)
    {
        if (typeof options === "function")
        {
            callback = options;
            options = undefined;
        }
        if (options !== undefined && options !== null && typeof options !== "object")
        {
            return settle(Promise.reject(invalidArgument("close options must be an object")), callback);
        }
        if (!this._closing)
        {
            this._closing = closeClient(this, Boolean(options && options.releaseLocks));
        }
        return settle(this._closing, callback);
    },

    metrics()
    {
        const transport = this._native && this._native.stats();
        return this._metrics.snapshot(transport);
    },

    // What JSON.stringify and util.inspect (a logger's view) show of a client: its table and
    // identity, never the `dynamodb` value it was given, whose SDK client may carry keys.
    toJSON()
    {
        return describeClient(this);
    },

    [util.inspect.custom](depth, options, inspect)
    {
        return `${this._kind} ${inspect(describeClient(this), options)}`;
    },

    campaign(id, options)
    {
        return campaign(this, id, options);
    },

    getLock(id, callback)
    {
        return settle(getLock(this, id), callback);
    },
};

module.exports = { setUp, acquisition, clientMethods };
