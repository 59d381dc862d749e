"use strict";

// Leader election over a lock: a campaign acquires the lock, leads while it holds it, and
// campaigns again when it loses it, until it is stopped. The term is the lock's fencing token,
// so every new leader's term is higher than every earlier one's.
//
// A leader is deposed on the lock's "danger" event, when `dangerMarginMs` of its lease is left
// without a successful heartbeat, or on "lost". A rival takes the lock only after a whole
// lease has passed, on its own clock, since it last saw the item change, so a deposed leader
// hears of it at least `dangerMarginMs` (less the event's delivery) before anyone else can be
// elected.

const { EventEmitter } = require("events");
const { defaults } = require("./bridge.js");

function sleep(ms, signal)
{
    return new Promise(resolve =>
    {
        const done = () =>
        {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            resolve();
        };
        const timer = setTimeout(done, ms);
        signal.addEventListener("abort", done, { once: true });
    });
}

function deposedError(reason, cause)
{
    const err = new Error(`Leadership ended: ${reason}.`);
    err.code = "Deposed";
    err.reason = reason;
    if (cause !== undefined)
    {
        err.cause = cause;
    }
    return err;
}

class Campaign extends EventEmitter
{
    // `acquire(signal)` acquires the lock; `stopped(campaign)` is told when the campaign ends.
    constructor(acquire, signal, ended)
    {
        super();
        this._acquire = acquire;
        this._stop = new AbortController();
        this._ended = ended;
        this._leader = undefined;
        // The lock of the current leadership, and the release of the last one's.
        this._lock = undefined;
        this._lastRelease = undefined;
        this._onAbort = undefined;
        if (signal)
        {
            if (signal.aborted)
            {
                this._stop.abort();
            }
            else
            {
                this._onAbort = () => this._stop.abort();
                signal.addEventListener("abort", this._onAbort, { once: true });
                this._signal = signal;
            }
        }
        this.done = Promise.resolve().then(() => this._run());
    }

    /** The current leadership, `{ term, signal }`, or undefined while not leading. */
    get leader()
    {
        return this._leader && { term: this._leader.term, signal: this._leader.abort.signal };
    }

    /** True until the campaign has ended. */
    get active()
    {
        return !this._stop.signal.aborted;
    }

    /** Gives up leadership (releasing the lock) and stops campaigning. */
    resign(callback)
    {
        this._stop.abort();
        const done = this.done;
        if (typeof callback === "function")
        {
            done.then(() => process.nextTick(callback));
            return undefined;
        }
        return done;
    }

    // The client closes: stops the campaign, and resolves once it has ended with the outcome
    // of the release of the lock it was leading with (`{ id, fencingToken, released, error? }`,
    // as `close()` reports), or undefined when it was not leading.
    async _close()
    {
        const lock = this._lock;
        this._stop.abort();
        await this.done.catch(() => {});
        const last = this._lastRelease;
        if (!lock || !last || last.lock !== lock)
        {
            return undefined;
        }
        const id = lock._track ? lock._track.id : undefined;
        return Object.assign({ id, fencingToken: lock.fencingToken }, await last.outcome);
    }

    async _run()
    {
        const stop = this._stop.signal;
        while (!stop.aborted)
        {
            let lock;
            try
            {
                lock = await this._acquire(stop);
            }
            catch (error)
            {
                if (stop.aborted || error.code === "ClientClosed")
                {
                    break;
                }
                if (error.code !== "FailedToAcquireLock")
                {
                    // An outage, not a rival: say so, pause as long as the longest pause
                    // between a request's attempts, try again.
                    if (this.listenerCount("error") > 0)
                    {
                        this.emit("error", error);
                    }
                    await sleep(defaults.outagePauseMs, stop);
                }
                continue;
            }
            await this._lead(lock);
        }
        if (this._signal)
        {
            this._signal.removeEventListener("abort", this._onAbort);
        }
        this._stop.abort();
        this._ended(this);
        this.emit("end");
    }

    // Leads with `lock` until it is in danger, lost, or the campaign stops; then releases it.
    async _lead(lock)
    {
        const stop = this._stop.signal;
        const term = lock.fencingToken;
        const abort = new AbortController();
        this._leader = { term, abort };
        this._lock = lock;
        let finish;
        const ended = new Promise(resolve => (finish = resolve));
        const onDanger = info => finish({ reason: "danger", remainingMs: info && info.remainingMs });
        const onLost = error => finish({ reason: "lost", error });
        const onStop = () => finish({ reason: "resigned" });
        lock.once("danger", onDanger);
        lock.once("lost", onLost);
        stop.addEventListener("abort", onStop, { once: true });
        if (lock.lost)
        {
            onLost(lock.signal.reason);
        }
        if (stop.aborted)
        {
            onStop();
        }
        this.emit("elected", { term, signal: abort.signal });
        const why = await ended;
        lock.removeListener("danger", onDanger);
        lock.removeListener("lost", onLost);
        stop.removeEventListener("abort", onStop);
        this._leader = undefined;
        this._lock = undefined;
        abort.abort(deposedError(why.reason, why.error));
        this.emit("deposed", Object.assign({ term }, why));
        // A lost lock's release is quiet; a lock in danger is handed back if it can be.
        const outcome = lock.release().then(() => ({ released: true }), error => ({ released: false, error }));
        this._lastRelease = { lock, outcome };
        await outcome;
    }

    /** Yields `{ term, signal }` for every election from now on; ends with the campaign. */
    [Symbol.asyncIterator]()
    {
        const queue = [];
        const waiting = [];
        let ended = !this.active;
        const push = value =>
        {
            const w = waiting.shift();
            if (w)
            {
                w(value);
            }
            else
            {
                queue.push(value);
            }
        };
        const onElected = e => push({ value: e, done: false });
        const onEnd = () =>
        {
            ended = true;
            cleanup();
            while (waiting.length > 0)
            {
                waiting.shift()({ value: undefined, done: true });
            }
        };
        const cleanup = () =>
        {
            this.removeListener("elected", onElected);
            this.removeListener("end", onEnd);
        };
        if (!ended)
        {
            this.on("elected", onElected);
            this.on("end", onEnd);
        }
        return {
            next: () =>
            {
                if (queue.length > 0)
                {
                    return Promise.resolve(queue.shift());
                }
                if (ended)
                {
                    return Promise.resolve({ value: undefined, done: true });
                }
                return new Promise(resolve => waiting.push(resolve));
            },
            // Leaving a `for await` loop early resigns: the loop owned the campaign.
            return: async () =>
            {
                cleanup();
                ended = true;
                await this.resign();
                return { value: undefined, done: true };
            },
            [Symbol.asyncIterator]()
            {
                return this;
            },
        };
    }
}

module.exports = { Campaign, deposedError };
