"use strict";

// What a client counts on the JavaScript side (acquisitions and their waits, releases, held
// and lost locks) and the `node:diagnostics_channel` messages tracing tools subscribe to.
// `metrics()` merges these counters with the native core's (requests, throttles, heartbeats).
// A message is built only when its channel has subscribers, so that tracing costs nothing
// otherwise.

const diagnostics = require("node:diagnostics_channel");
const { performance } = require("node:perf_hooks");
const { debug, ms, shownId, shownError } = require("./debug.js");

const channels =
{
    acquired: diagnostics.channel("dynamodb-lock-native:acquired"),
    acquireFailed: diagnostics.channel("dynamodb-lock-native:acquire-failed"),
    waiting: diagnostics.channel("dynamodb-lock-native:waiting"),
    handedOver: diagnostics.channel("dynamodb-lock-native:handed-over"),
    released: diagnostics.channel("dynamodb-lock-native:released"),
    heartbeatFailed: diagnostics.channel("dynamodb-lock-native:heartbeat-failed"),
    lost: diagnostics.channel("dynamodb-lock-native:lost"),
};

// Tracing channels around each acquisition and release (start, end, asyncStart, asyncEnd,
// error, with one context object), which OpenTelemetry instrumentations and APM agents
// subscribe to for spans.
const tracing =
{
    acquire: diagnostics.tracingChannel("dynamodb-lock-native:acquire"),
    release: diagnostics.tracingChannel("dynamodb-lock-native:release"),
};

// Whether anyone listens on a tracing channel (its `hasSubscribers` is newer than Node 20.13).
function traced(channel)
{
    return channel.hasSubscribers === undefined
        ? ["start", "end", "asyncStart", "asyncEnd", "error"].some(e => channel[e].hasSubscribers)
        : channel.hasSubscribers;
}

// Runs `fn` (which returns a promise) inside `channel`'s trace with `context`, if anyone
// listens; otherwise just runs it.
function trace(channel, fn, context)
{
    return traced(channel) ? channel.tracePromise(fn, context) : fn();
}

// How an acquisition that did not grant a lock ended, by its error's code.
function failure(error)
{
    const code = error && error.code;
    return code === "AbortError" ? "aborted" : code === "ClientClosed" ? "closed" : "failed";
}

const OPERATIONS = ["GetItem", "PutItem", "UpdateItem", "DeleteItem"];

// Percentiles of waits are taken over this many of the latest acquisitions.
const WAIT_SAMPLES = 1024;

// Upper bounds (ms) of the histogram buckets, the same for every client and process, so that
// the counts of a fleet add up; a last bucket counts what is above the last bound.
const BUCKET_BOUNDS_MS = Object.freeze([1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000]);

// Nearest-rank percentile of sorted samples.
function percentile(sorted, p)
{
    if (sorted.length === 0)
    {
        return 0;
    }
    return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

// One latency: percentiles of its latest samples, and a histogram of all of them since the
// client was made.
// The holder a `waiting` report of the native core names: `{ holder: { owner, fencingToken,
// leaseDurationMs, session, unchangedMs } }`, or nothing when the answer did not carry the item.
function holderOf(report)
{
    if (!report || (report.holderOwner == null && report.holderFencingToken == null && report.holderLeaseDurationMs == null))
    {
        return {};
    }
    const value = v => (v === null ? undefined : v);
    return {
        holder: {
            owner: value(report.holderOwner),
            fencingToken: value(report.holderFencingToken),
            leaseDurationMs: value(report.holderLeaseDurationMs),
            session: value(report.holderSession),
            unchangedMs: value(report.holderUnchangedMs),
        },
    };
}

class Latency
{
    constructor()
    {
        this.samples = new Float64Array(WAIT_SAMPLES);
        this.count = 0;
        this.sum = 0;
        this.buckets = new Array(BUCKET_BOUNDS_MS.length + 1).fill(0);
    }

    record(ms)
    {
        this.samples[this.count % WAIT_SAMPLES] = ms;
        this.count++;
        this.sum += ms;
        let i = 0;
        while (i < BUCKET_BOUNDS_MS.length && ms > BUCKET_BOUNDS_MS[i])
        {
            i++;
        }
        this.buckets[i]++;
    }

    snapshot()
    {
        const n = Math.min(this.count, WAIT_SAMPLES);
        const sorted = Array.from(this.samples.subarray(0, n)).sort((a, b) => a - b);
        return {
            count: this.count,
            p50Ms: percentile(sorted, 0.5),
            p99Ms: percentile(sorted, 0.99),
            histogram: { boundsMs: BUCKET_BOUNDS_MS.slice(), counts: this.buckets.slice(), sumMs: this.sum },
        };
    }
}

// The record of one lock a client handed out: what the messages about it carry, and whether
// it still counts as held.
class Track
{
    constructor(metrics, id, acquiredAt)
    {
        this.metrics = metrics;
        this.id = id;
        this.acquiredAt = acquiredAt;
        this.held = true;
        // In `metrics.lapsed` while the lock is lapsed and not released.
        this.lapsedRef = undefined;
    }

    message(lock, extra)
    {
        return Object.assign(
            {
                id: this.id,
                kind: this.metrics.kind,
                fencingToken: lock.fencingToken,
                heldMs: performance.now() - this.acquiredAt,
            }, extra);
    }

    // The lock no longer counts as held: released, lost, or abandoned by `close()`.
    done(lock)
    {
        if (this.held)
        {
            this.held = false;
            this.metrics.live.delete(lock);
        }
        if (this.lapsedRef)
        {
            this.metrics.lapsed.delete(this.lapsedRef);
            this.lapsedRef = undefined;
        }
    }

    // The lock's lease ran out, and the item may still carry it: kept (weakly) for `close()`.
    lapsed(lock)
    {
        const lapsed = this.metrics.lapsed;
        // Now and then, forget the locks their holders let go of.
        if (lapsed.size >= 1024 && (lapsed.size & (lapsed.size - 1)) === 0)
        {
            lapsed.forEach(ref => ref.deref() === undefined && lapsed.delete(ref));
        }
        this.lapsedRef = new WeakRef(lock);
        lapsed.add(this.lapsedRef);
    }

    // Wraps the release that `release()` starts.
    released(lock, release)
    {
        const m = this.metrics;
        const promise = trace(tracing.release, release, { id: this.id, kind: m.kind, fencingToken: lock.fencingToken });
        return promise.then(
            value =>
            {
                debug(() => `release ${shownId(this.id)} (${m.kind}, fencing token ${lock.fencingToken}): released after holding it ${ms(performance.now() - this.acquiredAt)}`);
                m.releases.succeeded++;
                if (this.held)
                {
                    m.holds.record(performance.now() - this.acquiredAt);
                }
                this.done(lock);
                if (channels.released.hasSubscribers)
                {
                    channels.released.publish(this.message(lock));
                }
                return value;
            },
            error =>
            {
                debug(() => `release ${shownId(this.id)} (${m.kind}, fencing token ${lock.fencingToken}): failed: ${shownError(error)}`);
                m.releases.failed++;
                // Not ours to release any more: nothing is left to retry.
                if (error && error.code === "FailedToReleaseLock")
                {
                    this.done(lock);
                }
                throw error;
            });
    }

    // `error` is a function that makes the error: it is made only for a subscriber.
    heartbeatFailed(lock, error)
    {
        debug(() =>
        {
            const e = error();
            const left = typeof e.leaseRemainingMs === "number" ? `, ${ms(e.leaseRemainingMs)} of lease left` : "";
            return `lock ${shownId(this.id)} (${this.metrics.kind}, fencing token ${lock.fencingToken}): heartbeat failed: ${shownError(e)}${left}, lease ${e.leaseAtRisk ? "at risk" : "not at risk"}`;
        });
        if (channels.heartbeatFailed.hasSubscribers)
        {
            channels.heartbeatFailed.publish(this.message(lock, { error: error() }));
        }
    }

    lost(lock, error, releasable)
    {
        if (!this.held)
        {
            return;
        }
        debug(() => `lock ${shownId(this.id)} (${this.metrics.kind}, fencing token ${lock.fencingToken}): lost after holding it ${ms(performance.now() - this.acquiredAt)}: ${shownError(error)}`);
        this.metrics.lost++;
        this.metrics.holds.record(performance.now() - this.acquiredAt);
        this.done(lock);
        if (releasable)
        {
            this.lapsed(lock);
        }
        if (channels.lost.hasSubscribers)
        {
            channels.lost.publish(this.message(lock, { error }));
        }
    }
}

class Metrics
{
    constructor(kind)
    {
        this.kind = kind;
        this.succeeded = 0;
        this.failed = 0;
        this.byCode = Object.create(null);
        this.waits = new Latency();
        this.holds = new Latency();
        // Acquisitions that found the lock held, and those of them granted the lock.
        this.waited = 0;
        this.handedOver = 0;
        this.releases = { succeeded: 0, failed: 0 };
        this.lost = 0;
        // The locks handed out and still held, for `locks.held` and `close()`.
        this.live = new Set();
        // Weak references to the locks lost because their lease ran out and not released
        // since, whose items may still carry them: `close({ releaseLocks: true })` frees those.
        this.lapsed = new Set();
        // Acquisitions not yet settled, for `close()`.
        this.pending = new Set();
        // The courses of the acquisitions not yet settled, for the gauges of `metrics()`.
        this.courses = new Set();
    }

    // Wraps the acquisition of `id` that `start` begins (returning its promise). `start` is
    // given the acquisition's course, whose `waiting(report)` its code calls when the
    // acquisition finds the lock held, and again (`report.progress`) about once a lease while
    // it keeps waiting; `report` names the holder it saw, when the native core read it.
    acquisition(id, start)
    {
        const startedAt = performance.now();
        const course =
        {
            waitingAt: undefined,
            waiting: report =>
            {
                const progress = Boolean(report && report.progress);
                if (progress === (course.waitingAt !== undefined))
                {
                    if (!progress)
                    {
                        course.waitingAt = performance.now();
                        this.waited++;
                    }
                    if (channels.waiting.hasSubscribers)
                    {
                        channels.waiting.publish(Object.assign({ id, kind: this.kind, waitMs: performance.now() - startedAt, progress }, holderOf(report)));
                    }
                }
            },
        };
        this.courses.add(course);
        debug(() => `acquire ${shownId(id)} (${this.kind}): started`);
        const tracked = trace(tracing.acquire, () => start(course), { id, kind: this.kind }).then(
            lock =>
            {
                this.pending.delete(tracked);
                this.courses.delete(course);
                debug(() => `acquire ${shownId(id)} (${this.kind}): granted, fencing token ${lock.fencingToken}, after ${ms(performance.now() - startedAt)}`
                    + (course.waitingAt === undefined ? "" : `, of which ${ms(performance.now() - course.waitingAt)} waiting for a holder`));
                const now = performance.now();
                const waitMs = now - startedAt;
                this.succeeded++;
                this.waits.record(waitMs);
                lock._track = new Track(this, id, now);
                this.live.add(lock);
                if (channels.acquired.hasSubscribers)
                {
                    channels.acquired.publish({ id, kind: this.kind, fencingToken: lock.fencingToken, waitMs });
                }
                if (course.waitingAt !== undefined)
                {
                    this.handedOver++;
                    if (channels.handedOver.hasSubscribers)
                    {
                        channels.handedOver.publish({ id, kind: this.kind, fencingToken: lock.fencingToken, waitMs, waitedMs: now - course.waitingAt });
                    }
                }
                return lock;
            },
            error =>
            {
                this.pending.delete(tracked);
                this.courses.delete(course);
                debug(() => `acquire ${shownId(id)} (${this.kind}): failed after ${ms(performance.now() - startedAt)}: ${shownError(error)}`);
                this.failed++;
                const code = (error && error.code) || "Error";
                this.byCode[code] = (this.byCode[code] || 0) + 1;
                if (channels.acquireFailed.hasSubscribers)
                {
                    channels.acquireFailed.publish({ id, kind: this.kind, outcome: failure(error), waitMs: performance.now() - startedAt, error });
                }
                throw error;
            });
        this.pending.add(tracked);
        return tracked;
    }

    // A plain object of counters and gauges; `native` is the transport's snapshot (the native
    // core's, or the user-object transport's), if it has been made yet.
    snapshot(native)
    {
        const requests = {};
        for (const op of OPERATIONS)
        {
            requests[op] = { ok: 0, conditionFailed: 0, throttled: 0, error: 0 };
        }
        if (native)
        {
            native.requestOperations.forEach((op, i) =>
                {
                    const byOutcome = {};
                    native.requestOutcomes.forEach((outcome, j) => (byOutcome[outcome] = native.requests[i][j]));
                    requests[op] = byOutcome;
                });
        }
        // Requests the lock protocol sent (each attempt), by why they were sent.
        const requestsByPurpose = { acquiring: 0, waiting: 0, heartbeats: 0, releasing: 0 };
        if (native && native.requestPurposes)
        {
            native.requestPurposes.forEach((purpose, i) => (requestsByPurpose[purpose] = native.byPurpose[i]));
        }
        return {
            kind: this.kind,
            acquisitions:
            {
                succeeded: this.succeeded,
                failed: this.failed,
                byCode: Object.assign({}, this.byCode),
                waited: this.waited,
                handedOver: this.handedOver,
                // Gauges: acquisitions under way now, and those of them that found the lock
                // held and wait for it.
                pending: this.courses.size,
                waiting: [...this.courses].filter(c => c.waitingAt !== undefined).length,
            },
            waits: this.waits.snapshot(),
            holds: this.holds.snapshot(),
            releases: { succeeded: this.releases.succeeded, failed: this.releases.failed },
            heartbeats: native
                ? { sent: native.heartbeatsSent, retried: native.heartbeatsRetried, failed: native.heartbeatsFailed }
                : { sent: 0, retried: 0, failed: 0 },
            locks: { held: this.live.size, lost: this.lost },
            requests,
            requestsByPurpose,
            throttles: native ? native.throttles : 0,
        };
    }
}

module.exports = { Metrics, channels, tracing, WAIT_SAMPLES, BUCKET_BOUNDS_MS };
