"use strict";

// An offline checker of Semaphore and ReadWriteLock histories recorded across processes
// (__test__/semaphore.test.js, support/semaphore-worker.js).
//
// A history is a list of critical sections of ONE id, one per granted acquisition:
//   { process, client, owner, token, permits, asked, start, end, lostAt, crashed, releaseOk,
//     after: { heldBySelf } }
// - asked: Date.now() when acquireLock was called;
// - start: Date.now() when the grant reached the caller;
// - end: when release() was called (for a process killed while holding: when it was killed,
//   or when it called release() if it died releasing);
// - lostAt: when "lost" was reported, if it was: the hold ends there;
// - permits: the permits the section held (a ReadWriteLock's exclusive hold holds them all);
// - after.heldBySelf: whether the head read right after release() resolved still names a holder
//   with this client's owner (each client holds one section at a time).
//
// Every recorded interval lies inside the real hold: the permits are granted before the grant
// reaches the caller and still held when release() is called. So recorded intervals that
// overlap mean real holds that overlapped. All processes read one machine's clock; the bound
// `clockBoundMs` (default 2 ms, as support/history.js) is allowed as slack.
//
// Checks:
// 1. capacity: at no instant do the sections overlapping it hold more than `limit` permits
//    together, allowing `clockBoundMs` of overlap between any two;
// 2. tokens are unique;
// 3. tokens rise: if section A's grant reached its caller before B's acquisition was even asked
//    for (by more than the bound), A's ticket was drawn before B's, so A.token < B.token. (A
//    looser rule, "A released before B started", is not sound: B may be granted first and learn
//    of it late, after a reply was lost, while A, next in line, is granted, holds and releases.)
// 4. every reported release is visible: the read right after it shows no holder of that client,
//    and none of the `finalHolders` belongs to an owner whose every section reported a
//    successful release; `finalPermitsHeld` equals the permits those holders hold.

const DEFAULT_CLOCK_BOUND_MS = 2;
const MAX_REPORTED = 20;

function describe(s)
{
    const end = s.end === Infinity ? "∞" : s.end;
    return `${s.owner || s.process}#${s.token} (${s.permits} permits) [${s.start}, ${end}]`;
}

function checkPermitHistory(sections, { limit, clockBoundMs = DEFAULT_CLOCK_BOUND_MS, finalHolders, finalPermitsHeld } = {})
{
    if (!(limit >= 1))
    {
        throw new TypeError("checkPermitHistory: limit (the permits of the id) is required");
    }
    const violations = [];
    const report = message =>
    {
        if (violations.length < MAX_REPORTED)
        {
            violations.push(message);
        }
    };
    const list = [];
    for (const s of sections)
    {
        if (!Number.isFinite(s.start) || !(Number.isInteger(s.permits) && s.permits > 0))
        {
            report(`${describe(s)}: no start time or permits`);
            continue;
        }
        let end = s.end;
        if (Number.isFinite(s.lostAt))
        {
            end = Math.min(end, s.lostAt);
        }
        if (!(end >= s.start))
        {
            report(`${describe(s)}: ends before it starts`);
            continue;
        }
        list.push(Object.assign({}, s, { end }));
    }

    // 1. Capacity: each interval shrunk by half the bound at both ends, so that two of them
    // overlap exactly when the originals overlap by more than the bound; an end at the same
    // instant as a start comes first.
    const half = clockBoundMs / 2;
    const events = [];
    for (const s of list)
    {
        const from = s.start + half;
        const to = s.end - half;
        if (to > from)
        {
            events.push({ at: from, delta: s.permits, s }, { at: to, delta: -s.permits, s });
        }
    }
    events.sort((a, b) => a.at - b.at || a.delta - b.delta);
    const open = new Set();
    let held = 0;
    let reportedOver = false;
    for (const e of events)
    {
        held += e.delta;
        if (e.delta > 0)
        {
            open.add(e.s);
        }
        else
        {
            open.delete(e.s);
        }
        if (held > limit && !reportedOver)
        {
            reportedOver = true;
            report(`more than ${limit} permits held at ${e.at}: ${held} by ${[...open].map(describe).join(", ")}`);
        }
        else if (held <= limit)
        {
            reportedOver = false;
        }
    }

    // 2. Unique tokens.
    const byToken = new Map();
    for (const s of list)
    {
        if (!Number.isInteger(s.token))
        {
            report(`${describe(s)}: the token is not an integer`);
        }
        else if (byToken.has(s.token))
        {
            report(`token ${s.token} granted twice: ${describe(byToken.get(s.token))} and ${describe(s)}`);
        }
        else
        {
            byToken.set(s.token, s);
        }
    }

    // 3. Tokens rise: a grant known before another acquisition was asked for has the smaller token.
    const byAsked = list.filter(s => Number.isFinite(s.asked)).sort((a, b) => a.asked - b.asked);
    for (const a of list)
    {
        for (const b of byAsked)
        {
            if (b.asked - a.start > clockBoundMs && !(a.token < b.token))
            {
                report(`tokens out of order: ${describe(a)} was granted before ${describe(b)} was asked for at ${b.asked}, with a token not below`);
            }
        }
    }

    // 4. Releases visible.
    for (const s of list)
    {
        if (s.releaseOk && s.after && s.after.heldBySelf)
        {
            report(`release of ${describe(s)} reported success, and the head read after it still names its client`);
        }
    }
    if (finalHolders)
    {
        const owners = new Map();
        for (const s of list)
        {
            const o = owners.get(s.owner) || { sections: 0, released: 0 };
            o.sections++;
            o.released += s.releaseOk ? 1 : 0;
            owners.set(s.owner, o);
        }
        let sum = 0;
        for (const h of finalHolders)
        {
            sum += h.permits;
            const o = owners.get(h.owner);
            if (!o)
            {
                report(`the final read names a holder ${h.owner} that no section knows`);
            }
            else if (o.released === o.sections)
            {
                report(`the final read names ${h.owner} (${h.permits} permits), every section of which reported a successful release`);
            }
        }
        if (finalPermitsHeld !== undefined && finalPermitsHeld !== sum)
        {
            report(`the final read counts ${finalPermitsHeld} permits held, and its holders hold ${sum}`);
        }
        if (sum > limit)
        {
            report(`the final read names holders of ${sum} permits, more than ${limit}`);
        }
    }
    return violations;
}

// The holders a head item (DynamoDB JSON) names: [{ owner, permits }] (docs: "holder.<guid hex>"
// holding "<permits> <leaseDurationMs> <guid hex> <written Unix ms> <owner>").
function holdersOfItem(item)
{
    const out = [];
    for (const [name, value] of Object.entries(item || {}))
    {
        if (name.startsWith("holder.") && value && typeof value.S === "string")
        {
            const [permits, , , , ...owner] = value.S.split(" ");
            out.push({ owner: owner.join(" "), permits: Number(permits) });
        }
    }
    return out;
}


// The most permits the sections hold together at one instant, overlaps within `clockBoundMs`
// left out (for reports: how much a history exercised the permits).
function peakPermits(sections, clockBoundMs = DEFAULT_CLOCK_BOUND_MS)
{
    const half = clockBoundMs / 2;
    const events = [];
    for (const s of sections)
    {
        const end = Number.isFinite(s.lostAt) ? Math.min(s.end, s.lostAt) : s.end;
        if (end - half > s.start + half)
        {
            events.push({ at: s.start + half, delta: s.permits }, { at: end - half, delta: -s.permits });
        }
    }
    events.sort((a, b) => a.at - b.at || a.delta - b.delta);
    let held = 0;
    let peak = 0;
    for (const e of events)
    {
        held += e.delta;
        peak = Math.max(peak, held);
    }
    return peak;
}

module.exports = { checkPermitHistory, peakPermits, holdersOfItem, DEFAULT_CLOCK_BOUND_MS };
