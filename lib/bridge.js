"use strict";

// The bridge to the native core (loaded by lib/native.js): native clients and the two channels
// each of them answers on, one for the answers to requests (by request number) and one for lock
// events (by lock id); cancellation of acquisitions; and the timer handle that keeps the
// process alive while anything waits on the core. The other files call the addon through here.

const native = require("./native.js");
const { toError, internalError, abortError } = require("./errors.js");
const debugLog = require("./debug.js");

// NODE_DEBUG=dynamodb-lock-native turns the native core's log of requests on too.
if (debugLog.enabled)
{
    native.setDebug(true);
}

// The defaults JavaScript applies itself, as the native core states them.
const defaults = Object.freeze(native.defaults());

// Heartbeating locks and awaited answers keep the process alive, as the original's timers
// and requests do: one timer handle, referenced while anything holds it.
let holds = 0;
const keepAlive = setInterval(() => {}, 1 << 30);
keepAlive.unref();
function holdProcess(delta)
{
    holds += delta;
    if (holds > 0)
    {
        keepAlive.ref();
    }
    else
    {
        holds = 0;
        keepAlive.unref();
    }
}

// Lock events arrive from the native core by lock id. One that arrives before its lock
// object exists (the acquisition's answer and the event travel separately) waits here. A
// pending acquisition's `waiting` (it found the lock held) comes by request number instead.
const liveLocks = new Map();
const earlyEvents = new Map();
function onNativeEvent(ev)
{
    if (ev.event === "waiting")
    {
        const onWaiting = waitingHandlers.get(ev.request);
        return onWaiting && onWaiting(ev);
    }
    const lock = liveLocks.get(ev.lockId);
    if (lock)
    {
        return lock._onNativeEvent(ev);
    }
    if (earlyEvents.size < 10000)
    {
        const list = earlyEvents.get(ev.lockId) || [];
        list.push(ev);
        earlyEvents.set(ev.lockId, list);
    }
}

// From now on, the events of native lock `lockId` go to `lock` (its `_onNativeEvent`), those
// that came early first, on the next tick.
function routeEvents(lockId, lock)
{
    liveLocks.set(lockId, lock);
    const early = earlyEvents.get(lockId);
    if (early)
    {
        earlyEvents.delete(lockId);
        process.nextTick(() => early.forEach(ev => lock._onNativeEvent(ev)));
    }
}

// The events of native lock `lockId` go nowhere from now on.
function stopEvents(lockId)
{
    liveLocks.delete(lockId);
}

// Answers to acquisitions and releases arrive from the native core by request number, all
// through one channel per client, as plain arguments (cheaper to pass than an object): the
// request number, the lock's id and fencing token and whether the acquisition found the lock
// held (acquisitions), and the rest (`error`, `lockIds`, `info`, `body`), each null when absent.
// The promise of `ask` resolves with them as one object, whose absent fields are undefined.
const awaiting = new Map();
const waitingHandlers = new Map();
// Requests that do not keep the process alive (`request` with `background`).
const unheld = new Set();
let nextRequest = 1;
function onNativeAnswer(request, lockId, fencingToken, waited, rest)
{
    const resolve = awaiting.get(request);
    if (resolve)
    {
        awaiting.delete(request);
        waitingHandlers.delete(request);
        if (!unheld.delete(request))
        {
            holdProcess(-1);
        }
        resolve(rest === null
            ? { request, error: undefined, lockId: orUndefined(lockId), fencingToken: orUndefined(fencingToken), lockIds: undefined, info: undefined, body: undefined, waited: orUndefined(waited) }
            : { request, error: orUndefined(rest.error), lockId: orUndefined(lockId), fencingToken: orUndefined(fencingToken), lockIds: rest.lockIds, info: rest.info, body: rest.body, waited: orUndefined(waited) });
    }
}

function orUndefined(v)
{
    return v === null ? undefined : v;
}

// A native client for `options` (the settings that lib/options.js gathers, plus where and how
// to reach DynamoDB), answering on this file's channels. `objectCall`: the requests go through
// the user's `dynamodb` object instead (lib/object-store.js).
function nativeClient(options, credentials, objectCall)
{
    return new native.NativeClient(options, credentials, onNativeEvent, onNativeAnswer, objectCall);
}

// Starts a native request under a fresh number; resolves with its answer. `onWaiting`, for
// an acquisition, is called when it finds the lock held (perhaps more than once).
// `background`: the request does not keep the process alive (a check the client makes of its
// own accord, whose answer nobody waits for once the work that asked for it is over).
function ask(start, onWaiting, background)
{
    return new Promise(resolve =>
    {
        const request = nextRequest;
        nextRequest = nextRequest >= 0xffffffff ? 1 : nextRequest + 1;
        start(request);
        if (background)
        {
            unheld.add(request);
        }
        else
        {
            holdProcess(+1);
        }
        awaiting.set(request, resolve);
        if (onWaiting)
        {
            waitingHandlers.set(request, onWaiting);
        }
    });
}

// Starts a native request; resolves with its successful outcome, or throws its error.
// `background`: as `ask`'s.
async function request(start, background)
{
    let outcome;
    try
    {
        outcome = await ask(start, undefined, background);
    }
    catch (e)
    {
        throw internalError(e);
    }
    if (outcome.error)
    {
        throw toError(outcome.error);
    }
    return outcome;
}

let nextCancelId = 1;

// Starts a native acquisition that `signal` may cancel; resolves with its successful
// outcome, or throws its error. An abort rejects at once with an AbortError, even while a
// request is on the wire; the native acquisition is cancelled, and a lock it still returns
// is released in the background by `undo`. `onWaiting` as for `ask`.
async function askCancellable(client, signal, start, undo, onWaiting)
{
    let cancelId, onAbort;
    let answered;
    const aborted = {};
    let abort;
    if (signal)
    {
        cancelId = nextCancelId++ % 0xffffffff;
        abort = new Promise(resolve =>
        {
            onAbort = () =>
            {
                client.cancelAcquisition(cancelId);
                resolve(aborted);
            };
        });
        signal.addEventListener("abort", onAbort, { once: true });
    }
    let outcome;
    try
    {
        answered = ask(request => start(request, cancelId), onWaiting);
        outcome = await (signal ? Promise.race([answered, abort]) : answered);
    }
    catch (err)
    {
        throw internalError(err);
    }
    finally
    {
        if (signal)
        {
            try
            {
                signal.removeEventListener("abort", onAbort);
            }
            catch (_)
            {
                // A signal-like object that throws here must not orphan an acquired lock.
            }
        }
    }
    // The answer and the `waiting` event travel separately: the answer says it too.
    if (outcome !== aborted && outcome.waited && onWaiting)
    {
        onWaiting();
    }
    if (outcome === aborted)
    {
        // The native core forgets the cancellation when the acquisition ends.
        answered.then(late => !late.error && undo(late), () => {});
        throw abortError(signal);
    }
    if (signal)
    {
        client.forgetAcquisition(cancelId);
    }
    if (outcome.error)
    {
        throw outcome.error.code === "AbortError" ? abortError(signal) : toError(outcome.error);
    }
    return outcome;
}

// Releases, in the background, locks that an aborted acquisition returned all the same.
function releaseAbandoned(client, lockIds)
{
    for (const lockId of lockIds)
    {
        earlyEvents.delete(lockId);
        ask(request => client.startRelease(request, lockId)).catch(() => {});
    }
}

// A lock whose lease lapsed stays known to the native core until it is released, so that its
// release can still free the item; one that JavaScript lets go of unreleased is forgotten then.
const unreferenced = new FinalizationRegistry(lockId => native.forgetLock(lockId));

// When `holder` is collected, native lock `lockId` is forgotten if it is no longer held.
function forgetWhenCollected(holder, lockId)
{
    unreferenced.register(holder, lockId);
}

module.exports = {
    defaults,
    leaseRemainingMs: lockId => native.leaseRemainingMs(lockId),
    lockConditionTarget: lockId => native.lockConditionTarget(lockId),
    holdProcess,
    nativeClient,
    ask,
    request,
    askCancellable,
    releaseAbandoned,
    routeEvents,
    stopEvents,
    forgetWhenCollected,
};
