"use strict";

// An offline checker of lock histories recorded across processes (__test__/history.test.js).
//
// A history is a list of critical sections, one per granted acquisition:
//   { process, id, token (FailOpen; null for FailClosed), guid (FailClosed: the item's guid
//     read right after the grant), start, end, lostAt, crashed, releaseOk, releasedAt,
//     after: { heldBySelf } (the item read right after release() resolved), errors }
// - start: wall-clock time (Date.now()) when the acquisition's result reached the caller;
// - end: when release() was called (or, for a process killed while holding, when it was killed);
// - lostAt: when "lost" was reported, if it was;
// - releaseOk: whether release() reported success; after: the item as read right after it did.
// plus, per lock id, the item read once everything is over (`finals`).
//
// Every recorded interval lies inside the real hold: the lock is granted before its result
// reaches the caller, and is still held when release() is called. So two recorded intervals that
// overlap mean two real holds that overlapped. Times come from each process's Date.now(); all
// processes run on one machine and read the same system clock, so they differ only by its
// resolution and the instant each reading is taken: the bound `clockBoundMs` (default 2 ms) is
// allowed as slack.
//
// Checks:
// 1. no overlapping holds: for one lock id, no two intervals overlap by more than the bound (a
//    FailOpen hold ends at `lostAt` if the lock was reported lost; a FailClosed holder that was
//    killed holds its lock for ever);
// 2. fencing: FailOpen tokens strictly increase in the real-time order of the grants;
// 3. every reported release is visible: the read right after it shows the lock released, gone or
//    someone else's, and the final read shows no lock still held by a section whose release
//    reported success.

const DEFAULT_CLOCK_BOUND_MS = 2;

function describe(s)
{
    return `${s.process}@${s.id}#${s.token === null || s.token === undefined ? "-" : s.token} [${s.start}, ${s.end === Infinity ? "∞" : s.end}]`;
}

// Returns the list of violations (empty when the history is sound).
function checkHistory(kind, sections, { finals = {}, clockBoundMs = DEFAULT_CLOCK_BOUND_MS } = {})
{
    const violations = [];
    const byId = new Map();
    for (const s of sections)
    {
        if (!Number.isFinite(s.start))
        {
            violations.push(`${describe(s)}: no start time`);
            continue;
        }
        let end = s.end;
        if (s.crashed && kind === "FailClosed")
        {
            end = Infinity;
        }
        if (kind === "FailOpen" && Number.isFinite(s.lostAt))
        {
            end = Math.min(end, s.lostAt);
        }
        if (!(end >= s.start))
        {
            violations.push(`${describe(s)}: ends before it starts`);
            continue;
        }
        const list = byId.get(s.id) || [];
        list.push(Object.assign({}, s, { end }));
        byId.set(s.id, list);
    }
    for (const [id, list] of byId)
    {
        list.sort((a, b) => a.start - b.start || a.end - b.end);
        // 1. Mutual exclusion: each hold against every later one that starts before it ends.
        for (let a = 0; a < list.length; a++)
        {
            for (let b = a + 1; b < list.length && list[b].start < list[a].end; b++)
            {
                const overlap = Math.min(list[a].end, list[b].end) - list[b].start;
                if (overlap > clockBoundMs)
                {
                    violations.push(`overlapping holds of ${id} (${overlap} ms): ${describe(list[a])} and ${describe(list[b])}`);
                }
            }
        }
        // 2. Fencing.
        if (kind === "FailOpen")
        {
            for (let k = 1; k < list.length; k++)
            {
                if (!(list[k].token > list[k - 1].token))
                {
                    violations.push(`tokens of ${id} do not rise in grant order: ${describe(list[k - 1])} then ${describe(list[k])}`);
                }
            }
        }
        // 3. Releases visible.
        for (const s of list)
        {
            if (s.releaseOk && s.after && s.after.heldBySelf)
            {
                violations.push(`release of ${describe(s)} reported success, and the item read after it is still its own`);
            }
        }
        const final = finals[id];
        if (final !== undefined)
        {
            for (const s of list.filter(x => x.releaseOk))
            {
                if (final && final.token !== undefined && kind === "FailOpen" && !final.released && final.token === s.token)
                {
                    violations.push(`release of ${describe(s)} reported success, and the final read shows it still held`);
                }
                if (final && kind === "FailClosed" && final.guid !== undefined && final.guid === s.guid)
                {
                    violations.push(`release of ${describe(s)} reported success, and the final read shows it still held`);
                }
            }
        }
    }
    return violations;
}

// The item as the checker compares it: { released, token, owner, guid (hex) } or null.
function summarizeItem(item)
{
    if (!item)
    {
        return null;
    }
    return {
        released: !!item.leaseDurationMs && item.leaseDurationMs.N === "1",
        token: item.fencingToken ? Number(item.fencingToken.N) : undefined,
        owner: item.owner ? item.owner.S : undefined,
        guid: item.guid && item.guid.B ? Buffer.from(item.guid.B).toString("hex") : undefined,
    };
}

module.exports = { checkHistory, summarizeItem, DEFAULT_CLOCK_BOUND_MS };
