"use strict";

// Turns bench/run.js's results into rows (metric, ours, original, ratio, target) and a
// markdown document.

function num(v)
{
    return typeof v === "number" && Number.isFinite(v);
}

function fmt(v, digits)
{
    if (!num(v))
    {
        return v === null || v === undefined ? "n/a" : String(v);
    }
    if (digits !== undefined)
    {
        return v.toFixed(digits);
    }
    if (Number.isInteger(v))
    {
        return v.toLocaleString("en-US");
    }
    const a = Math.abs(v);
    if (a >= 1000)
    {
        return Math.round(v).toLocaleString("en-US");
    }
    if (a >= 100)
    {
        return v.toFixed(0);
    }
    if (a >= 10)
    {
        return v.toFixed(1);
    }
    return v.toFixed(2);
}

function ratioOf(a, b)
{
    return num(a) && num(b) && b !== 0 ? a / b : null;
}

function breakdown(counts)
{
    const keys = Object.keys(counts || {}).sort();
    return keys.length ? keys.map(k => `${k} ${counts[k]}`).join(", ") : "none";
}

class Rows
{
    constructor()
    {
        this.rows = [];
    }

    // ours/original: numbers (or null); texts override the display. target: { text, test(ours,
    // original, ratio) -> boolean }.
    add(section, metric, ours, original, extra = {})
    {
        const ratio = extra.noRatio ? null : ratioOf(ours, original);
        const row = {
            section,
            metric,
            ours: num(ours) ? ours : null,
            original: num(original) ? original : null,
            ratio,
            oursText: extra.oursText !== undefined ? extra.oursText : fmt(ours, extra.digits),
            originalText: extra.originalText !== undefined ? extra.originalText : fmt(original, extra.digits),
            target: extra.target ? extra.target.text : "",
            met: null,
            skipped: !!extra.skipped,
        };
        if (extra.target && num(ours) && !extra.skipped)
        {
            try
            {
                row.met = !!extra.target.test(ours, original, ratio);
            }
            catch (_)
            {
                row.met = null;
            }
        }
        this.rows.push(row);
        return row;
    }
}

function errText(r)
{
    return r && r.error ? `error: ${String(r.error).split("\n")[0]}` : null;
}

function requestRows(rows, res)
{
    const S = "1. Requests per operation";
    const o = res.ours || {};
    const g = res.original || {};
    if (o.error || g.error)
    {
        rows.add(S, "scenario failed", null, null, { oursText: errText(o) || "ok", originalText: errText(g) || "ok" });
    }
    const items = [
        ["failClosedAcquire", "FailClosed acquire (uncontended)"],
        ["failClosedRelease", "FailClosed release"],
        ["failOpenAcquireNew", "FailOpen acquire (uncontended, new id)"],
        ["failOpenRelease", "FailOpen release"],
        ["failOpenAcquireReleased", "FailOpen acquire of a released lock"],
    ];
    const one = { text: "ours = 1", test: v => v === 1 };
    for (const [key, label] of items)
    {
        const a = o[key];
        const b = g[key];
        rows.add(S, `${label}: requests`, a && a.total, b && b.total, {
            oursText: a ? `${a.total} (${breakdown(a.counts)})` : "n/a",
            originalText: b ? `${b.total} (${breakdown(b.counts)})` : "n/a",
            target: one,
        });
    }
    for (const [key, label] of [["failOpenAcquireNew", "FailOpen acquire (new id)"], ["failOpenAcquireReleased", "FailOpen acquire of a released lock"]])
    {
        rows.add(S, `${label}: latency (ms)`, o[key] && o[key].ms, g[key] && g[key].ms);
    }
    const a = o.heartbeat;
    const b = g.heartbeat;
    rows.add(S, `requests per heartbeat (one lock, ${a ? a.windowMs : "?"} ms at period ${a ? a.periodMs : "?"} ms)`,
        a && a.requestsPerHeartbeat, b && b.requestsPerHeartbeat, {
            oursText: a ? `${fmt(a.requestsPerHeartbeat)} (${a.heartbeatWrites} heartbeats; ${breakdown(a.counts)})` : "n/a",
            originalText: b ? `${fmt(b.requestsPerHeartbeat)} (${b.heartbeatWrites} heartbeats; ${breakdown(b.counts)})` : "n/a",
            target: one,
        });
}

function cycleRows(rows, runs)
{
    const S = "2. Acquire/release cycles";
    for (const run of runs)
    {
        const o = run.ours || {};
        const g = run.original || {};
        const p = run.params;
        const label = `${run.name} (${p.workers} worker${p.workers > 1 ? "s" : ""} × ${p.cycles})`;
        if (run.stub)
        {
            stubCycleRows(rows, S, run.name, o, g);
            continue;
        }
        if (o.error || g.error)
        {
            rows.add(S, `${label}: failed`, null, null, { oursText: errText(o) || "ok", originalText: errText(g) || "ok" });
            continue;
        }
        rows.add(S, `${label}: cycles done (failures)`, o.cycles, g.cycles, {
            oursText: `${o.cycles} (${o.failures})${o.timeLimited ? " time-limited" : ""}`,
            originalText: `${g.cycles} (${g.failures})${g.timeLimited ? " time-limited" : ""}`,
        });
        rows.add(S, `${label}: latency p50 (ms)`, o.latencyMs.p50, g.latencyMs.p50);
        rows.add(S, `${label}: latency p90 (ms)`, o.latencyMs.p90, g.latencyMs.p90);
        rows.add(S, `${label}: latency p99 (ms)`, o.latencyMs.p99, g.latencyMs.p99);
        rows.add(S, `${label}: client CPU per cycle (µs)`, o.cpuUsPerCycle, g.cpuUsPerCycle, {
            target: { text: "ratio ≤ 0.2", test: (_a, _b, r) => r !== null && r <= 0.2 },
        });
        rows.add(S, `${label}: of which kernel (system CPU) per cycle (µs)`, o.systemCpuUsPerCycle, g.systemCpuUsPerCycle);
        rows.add(S, `${label}: cycles/s`, o.cyclesPerSecond, g.cyclesPerSecond);
        rows.add(S, `${label}: requests per cycle`, o.requestsPerCycle, g.requestsPerCycle);
    }
}

/** Whether a cycles run went through: no error, every cycle done, none failed. */
function cyclesRan(r)
{
    return !!r && !r.error && r.cycles > 0 && r.failures === 0 && !r.timeLimited;
}

// A sequential run on the stub engine: ours against the target of at most 150 µs of client
// CPU per cycle; the original's figures and the ratio only where it ran without failures.
function stubCycleRows(rows, S, name, o, g)
{
    const failure = r => (r.error ? errText(r) : `${r.cycles} cycles, ${r.failures} failed${r.lastFailure ? ` (${r.lastFailure})` : ""}${r.timeLimited ? ", time-limited" : ""}`);
    const oursOk = cyclesRan(o);
    const originalOk = cyclesRan(g);
    const originalNote = originalOk ? undefined : `did not run on the stub engine: ${failure(g)}`;
    rows.add(S, `${name}: cycles done (failures)`, o.cycles, originalOk ? g.cycles : null, {
        oursText: o.error ? errText(o) : `${o.cycles} (${o.failures})${o.timeLimited ? " time-limited" : ""}`,
        originalText: originalOk ? `${g.cycles} (${g.failures})` : originalNote,
        noRatio: true,
    });
    rows.add(S, `${name}: client CPU per cycle (µs)`, oursOk ? o.cpuUsPerCycle : null, originalOk ? g.cpuUsPerCycle : null, {
        oursText: oursOk ? undefined : `not measured: ${failure(o)}`,
        originalText: originalOk ? undefined : "n/a (see above)",
        target: { text: "ours ≤ 150 µs", test: v => v <= 150 },
    });
    if (oursOk)
    {
        rows.add(S, `${name}: of which kernel (system CPU) per cycle (µs)`, o.systemCpuUsPerCycle, originalOk ? g.systemCpuUsPerCycle : null);
        rows.add(S, `${name}: latency p50 (ms)`, o.latencyMs.p50, originalOk ? g.latencyMs.p50 : null);
        rows.add(S, `${name}: cycles/s`, o.cyclesPerSecond, originalOk ? g.cyclesPerSecond : null);
    }
}

function heldRowsFor(rows, S, label, o, g, targets)
{
    if ((o && o.error) || (g && g.error))
    {
        rows.add(S, `${label}: failed`, null, null, { oursText: errText(o) || "ok", originalText: errText(g) || "ok" });
        if (o && o.error)
        {
            return;
        }
    }
    o = o || {};
    g = g && !g.error ? g : {};
    const held = r => (r.locksAcquired === undefined ? "n/a" : `${r.locksAcquired}/${r.locksPlanned}${r.acquisitionTimeLimited ? " (time-limited)" : ""}`);
    rows.add(S, `${label}: locks held`, o.locksAcquired, g.locksAcquired, { oursText: held(o), originalText: held(g), noRatio: true });
    rows.add(S, `${label}: acquisitions/s in the acquisition phase`, o.acquisitionsPerSecond, g.acquisitionsPerSecond, {
        oursText: num(o.acquisitionsPerSecond) ? `${fmt(o.acquisitionsPerSecond)} (${fmt(o.acquisitionMs / 1000)} s)` : "n/a",
        originalText: num(g.acquisitionsPerSecond) ? `${fmt(g.acquisitionsPerSecond)} (${fmt(g.acquisitionMs / 1000)} s)` : "n/a",
    });
    rows.add(S, `${label}: heartbeats/s in window (target ${fmt(o.targetHeartbeatsPerSecond)})`, o.heartbeatsPerSecond, g.heartbeatsPerSecond, {
        oursText: num(o.heartbeatsPerSecond) ? `${fmt(o.heartbeatsPerSecond)} (${fmt(100 * o.heartbeatsPerSecond / o.targetHeartbeatsPerSecond, 0)}%)` : "n/a",
        originalText: num(g.heartbeatsPerSecond) ? `${fmt(g.heartbeatsPerSecond)} (${fmt(100 * g.heartbeatsPerSecond / g.targetHeartbeatsPerSecond, 0)}%)` : "n/a",
    });
    if (o.maxHeartbeatsPerSecond)
    {
        rows.add(S, `${label}: heartbeats/s as a share of maxHeartbeatsPerSecond ${o.maxHeartbeatsPerSecond}`, 100 * o.heartbeatsPerSecond / o.maxHeartbeatsPerSecond, null, {
            oursText: `${fmt(100 * o.heartbeatsPerSecond / o.maxHeartbeatsPerSecond, 0)}%`,
            originalText: "",
        });
    }
    rows.add(S, `${label}: client CPU per heartbeat (µs)`, o.cpuUsPerHeartbeat, g.cpuUsPerHeartbeat, {
        target: targets ? { text: "ratio ≤ 0.1", test: (_a, _b, r) => r !== null && r <= 0.1 } : undefined,
    });
    rows.add(S, `${label}: of which kernel (system CPU) per heartbeat (µs)`, o.systemCpuUsPerHeartbeat, g.systemCpuUsPerHeartbeat);
    rows.add(S, `${label}: client CPU (% of one core)`, o.cpuPercentOfOneCore, g.cpuPercentOfOneCore);
    // RSS moves by a few MiB on its own (allocator and V8 heap sizing): per-lock figures mean
    // something only when the locks' own memory is larger than that.
    const measurable = (o.locksAcquired || 0) >= 5000;
    rows.add(S, `${label}: RSS per held lock, over a warmed-up process (bytes${measurable ? "" : "; below RSS's noise at this count"})`, o.rssPerLockBytes, g.rssPerLockBytes, {
        target: targets && measurable ? { text: "ours ≤ 2048", test: v => v <= 2048 } : undefined,
        digits: 0,
    });
    rows.add(S, `${label}: RSS growth from a cold process, per held lock (bytes; includes one-off warm-up)`, o.rssPerLockColdBytes, g.rssPerLockColdBytes, {
        target: targets && measurable ? { text: "ours ≤ 2048", test: v => v <= 2048 } : undefined,
        digits: 0,
    });
    rows.add(S, `${label}: JS heap per held lock (bytes)`, o.heapUsedPerLockBytes, g.heapUsedPerLockBytes, { digits: 0 });
    rows.add(S, `${label}: open sockets, baseline → with locks`, o.socketsAfter, g.socketsAfter, {
        oursText: num(o.socketsAfter) ? `${o.socketsBaseline} → ${o.socketsAfter}` : "n/a",
        originalText: num(g.socketsAfter) ? `${g.socketsBaseline} → ${g.socketsAfter}` : "n/a",
        noRatio: true,
    });
    const sp = r => r.spread || {};
    rows.add(S, `${label}: heartbeats per ${o.bucketMs || 100} ms bucket, max/mean`, sp(o).maxOverMean, sp(g).maxOverMean, {
        oursText: num(sp(o).maxOverMean) ? `${fmt(sp(o).maxOverMean)} (mean ${fmt(sp(o).mean)}, max ${sp(o).max}, min ${sp(o).min})` : "n/a",
        originalText: num(sp(g).maxOverMean) ? `${fmt(sp(g).maxOverMean)} (mean ${fmt(sp(g).mean)}, max ${sp(g).max}, min ${sp(g).min})` : "n/a",
    });
    rows.add(S, `${label}: heartbeats per bucket, coefficient of variation`, sp(o).cv, sp(g).cv);
    rows.add(S, `${label}: engine CPU per heartbeat (µs; server side, for reference)`, o.engineCpuUsPerHeartbeat, g.engineCpuUsPerHeartbeat);
    rows.add(S, `${label}: engine / proxy CPU (% of one core)`, o.engineCpuPercentOfOneCore, g.engineCpuPercentOfOneCore, {
        oursText: num(o.engineCpuPercentOfOneCore) ? `${fmt(o.engineCpuPercentOfOneCore, 0)} / ${fmt(o.proxyCpuPercentOfOneCore, 0)}` : "n/a",
        originalText: num(g.engineCpuPercentOfOneCore) ? `${fmt(g.engineCpuPercentOfOneCore, 0)} / ${fmt(g.proxyCpuPercentOfOneCore, 0)}` : "n/a",
        noRatio: true,
    });
    const ri = r => r.renewalIntervalMs || {};
    rows.add(S, `${label}: locks renewed in window; renewal interval p50 / p99 / max (ms)`, ri(o).p50, ri(g).p50, {
        oursText: num(ri(o).p50) ? `${o.locksRenewedInWindow}; ${fmt(ri(o).p50, 0)} / ${fmt(ri(o).p99, 0)} / ${fmt(ri(o).max, 0)}` : "n/a",
        originalText: num(ri(g).p50) ? `${g.locksRenewedInWindow}; ${fmt(ri(g).p50, 0)} / ${fmt(ri(g).p99, 0)} / ${fmt(ri(g).max, 0)}` : "n/a",
    });
    rows.add(S, `${label}: renewals later than the lease (lease lapsed: a waiter could have taken the lock)`, o.renewalsOverLease, g.renewalsOverLease, { noRatio: true });
    const errs = r => (r.lockErrors ? `${r.lockErrors.errors} errors, ${r.lockErrors.lost} lost${r.lockErrors.lastError ? ` (${r.lockErrors.lastError})` : ""}` : "n/a");
    rows.add(S, `${label}: lock error / lost events`, o.lockErrors && o.lockErrors.errors, g.lockErrors && g.lockErrors.errors, { oursText: errs(o), originalText: errs(g), noRatio: true });
}

function heldRows(rows, held)
{
    const S = "3. Held heartbeating FailOpen locks";
    for (const entry of held.sizes)
    {
        const o = entry.ours || {};
        heldRowsFor(rows, S, `${entry.locks.toLocaleString("en-US")} locks (period ${o.periodMs || "?"} ms, lease ${o.leaseMs || "?"} ms)`, entry.ours, entry.original, true);
    }
    // Fixed costs (connections, buffers, runtime) divided by few locks overstate the cost of a
    // lock: the difference between two sizes shows what one more lock costs.
    for (let i = 1; i < held.sizes.length; i++)
    {
        const a = held.sizes[i - 1];
        const b = held.sizes[i];
        const marginal = lib =>
        {
            const x = a[lib];
            const y = b[lib];
            if (!x || !y || x.error || y.error || y.locksAcquired === x.locksAcquired)
            {
                return null;
            }
            // From the cold baselines: both processes are then in the same state (the client
            // made and used once), where warm-ups of different sizes leave different states.
            const base = r => (num(r.rssColdBaseline) ? r.rssColdBaseline : r.rssBaseline);
            return ((y.rssWithLocks - base(y)) - (x.rssWithLocks - base(x))) / (y.locksAcquired - x.locksAcquired);
        };
        const measurable = b.locks - a.locks >= 5000;
        rows.add(S, `marginal RSS per held lock between ${a.locks.toLocaleString("en-US")} and ${b.locks.toLocaleString("en-US")} locks (bytes${measurable ? "" : "; below RSS's noise, and Node's optimising compiler warms up in between"})`, marginal("ours"), marginal("original"), {
            target: measurable ? { text: "ours ≤ 2048", test: v => v <= 2048 } : undefined,
            digits: 0,
        });
    }
    if (held.calibration)
    {
        const c = held.calibration;
        rows.add(S, `calibration: ours, ${c.locksAcquired} locks at period ${c.periodMs} ms (demand ${fmt(c.targetHeartbeatsPerSecond)}/s): heartbeats/s the engine served`, c.heartbeatsPerSecond, null, {
            originalText: "",
            oursText: c.error ? errText(c) : `${fmt(c.heartbeatsPerSecond)} (engine ${fmt(c.engineCpuPercentOfOneCore, 0)}% / proxy ${fmt(c.proxyCpuPercentOfOneCore, 0)}% / client ${fmt(c.cpuPercentOfOneCore, 0)}% of a core; ${fmt(c.cpuUsPerHeartbeat)} µs client CPU per heartbeat)`,
        });
    }
    if (held.capped)
    {
        const c = held.capped;
        const orig = held.sizes.find(e => e.locks === c.locks);
        heldRowsFor(rows, S, `${c.locks.toLocaleString("en-US")} locks, ours with maxHeartbeatsPerSecond ${c.cap}, lease ${c.leaseMs} ms (original: uncapped run above)`, c.ours, orig && orig.original, true);
    }
}

function contentionRows(rows, c)
{
    const p = c.params;
    const S = `4. Contention: ${p.processes} processes, one FailOpen lock (lease ${p.leaseMs} ms, heartbeat ${p.heartbeatMs} ms, hold ${p.holdMs} ms, ${p.durationMs / 1000} s; library defaults otherwise)`;
    const o = c.ours || {};
    const g = c.original || {};
    if (o.error || g.error)
    {
        rows.add(S, "failed", null, null, { oursText: errText(o) || "ok", originalText: errText(g) || "ok" });
    }
    if (o.error && g.error)
    {
        return;
    }
    const h = r => r.handoffMs || {};
    const x = r => r.crossProcessHandoffMs || {};
    const w = r => r.waitPerAttemptMs || {};
    rows.add(S, "acquisitions (total)", o.acquisitions, g.acquisitions);
    rows.add(S, "acquisitions/s", o.acquisitionsPerSecond, g.acquisitionsPerSecond, {
        target: { text: "ours ≥ original", test: (a, b) => num(b) && a >= b },
    });
    rows.add(S, "acquisitions per process", null, null, {
        oursText: o.perProcess ? o.perProcess.join(" / ") : "n/a",
        originalText: g.perProcess ? g.perProcess.join(" / ") : "n/a",
    });
    rows.add(S, "Jain's fairness index over acquisitions per process", o.jain, g.jain, {
        target: { text: "ours ≥ 0.95", test: v => v >= 0.95 },
        digits: 3,
    });
    // Ours runs with its default rereadPeriodMs (documented as 10 ms): the longest waiter
    // re-reads that often.
    const defaultRereadMs = 10;
    const twoRereads = 2 * defaultRereadMs;
    rows.add(S, "handoff release→next acquisition p50 (ms)", h(o).p50, h(g).p50);
    rows.add(S, "handoff p90 (ms)", h(o).p90, h(g).p90);
    rows.add(S, "handoff p99 (ms)", h(o).p99, h(g).p99, { target: { text: `ours ≤ ${twoRereads} (2 re-reads at the default ${defaultRereadMs} ms)`, test: v => v <= twoRereads } });
    rows.add(S, "handoff max (ms)", h(o).max, h(g).max);
    rows.add(S, "handoffs to another process / to the releaser itself", o.crossHandoffs, g.crossHandoffs, {
        oursText: o.crossHandoffs === undefined ? "n/a" : `${o.crossHandoffs} / ${o.selfHandoffs}`,
        originalText: g.crossHandoffs === undefined ? "n/a" : `${g.crossHandoffs} / ${g.selfHandoffs}`,
        noRatio: true,
    });
    const st = r => r.longestStreak || {};
    rows.add(S, "longest streak of one process (acquisitions, ms)", st(o).count, st(g).count, {
        oursText: st(o).count ? `${st(o).count} in ${fmt(st(o).ms, 0)} ms` : "n/a",
        originalText: st(g).count ? `${st(g).count} in ${fmt(st(g).ms, 0)} ms` : "n/a",
    });
    rows.add(S, "handoff to another process p50 (ms)", x(o).p50, x(g).p50);
    rows.add(S, "handoff to another process p99 (ms)", x(o).p99, x(g).p99, { target: { text: `ours ≤ ${twoRereads}`, test: v => v <= twoRereads } });
    rows.add(S, "wait per attempt (acquire call→acquired) p50 (ms)", w(o).p50, w(g).p50);
    rows.add(S, "wait per attempt p99 (ms)", w(o).p99, w(g).p99);
    rows.add(S, "wait per attempt max (ms)", w(o).max, w(g).max);
    rows.add(S, "longest wait still pending at the end (ms)", o.pendingAtEndMaxWaitMs, g.pendingAtEndMaxWaitMs);
    rows.add(S, "failed attempts (FailedToAcquireLock)", o.failedAttempts, g.failedAttempts, { noRatio: true });
    rows.add(S, "overlapping holds (safety; must be 0)", o.overlaps, g.overlaps, { noRatio: true, target: { text: "0", test: v => v === 0 } });
    rows.add(S, "fencing tokens strictly increasing", null, null, {
        oursText: String(o.fencingTokensIncreasing),
        originalText: String(g.fencingTokensIncreasing),
    });
    rows.add(S, "client CPU per acquisition, all processes (µs)", o.cpuUsPerAcquisition, g.cpuUsPerAcquisition);
    rows.add(S, "requests per acquisition", o.requestsPerAcquisition, g.requestsPerAcquisition, {
        oursText: num(o.requestsPerAcquisition) ? `${fmt(o.requestsPerAcquisition)} (${breakdown(o.requests)})` : "n/a",
        originalText: num(g.requestsPerAcquisition) ? `${fmt(g.requestsPerAcquisition)} (${breakdown(g.requests)})` : "n/a",
    });
}

function poolRows(rows, pool)
{
    const p = pool.params;
    const S = `5. Pool: one client, ${p.tasks} async tasks, one lock (hold ${p.holdMs} ms, ${p.durationMs / 1000} s)`;
    const pct = v => (num(v) ? `${fmt(100 * v, 1)}%` : "n/a");
    const errs = r => (r.errors && Object.keys(r.errors).length ? breakdown(r.errors) : "none");
    for (const entry of pool.kinds)
    {
        const kind = entry.kind;
        const hasOriginal = entry.libs.includes("original");
        const o = entry.ours || {};
        const g = hasOriginal ? entry.original || {} : {};
        const none = hasOriginal ? "n/a" : "— (the original has no " + kind + ")";
        const conf = (p.kinds.find(k => k.kind === kind) || {}).config || {};
        const label = `${kind} (${Object.keys(conf).map(k => `${k} ${conf[k]}`).join(", ")})`;
        const jainMin = kind === "Fifo" ? 0.99 : 0.95;
        if (o.skipped)
        {
            rows.add(S, `${label}: not measured`, null, null, {
                oursText: `skipped: ${o.skipped}`,
                originalText: hasOriginal ? (g.skipped ? `skipped: ${g.skipped}` : errText(g) || "not compared") : none,
                target: { text: `idle ≤ 20%, Jain ≥ ${jainMin}, 0 overlaps${kind === "FailClosed" ? "" : ", tokens rising"}`, test: () => false },
                skipped: true,
            });
            continue;
        }
        if (o.error || g.error || g.skipped)
        {
            rows.add(S, `${label}: failed`, null, null, {
                oursText: errText(o) || "ok",
                originalText: hasOriginal ? errText(g) || (g.skipped ? `skipped: ${g.skipped}` : "ok") : none,
            });
            if (o.error)
            {
                continue;
            }
        }
        // The original's column: its figure, a text for it, or "no such kind".
        const ox = (extra, gText) => Object.assign({}, extra, hasOriginal ? (gText !== undefined ? { originalText: gText } : {}) : { originalText: none });
        rows.add(S, `${label}: acquisitions`, o.acquisitions, g.acquisitions, ox({
            oursText: `${fmt(o.acquisitions)} (per task ${(o.perTask || []).join(" / ")})`,
        }, g.perTask ? `${fmt(g.acquisitions)} (per task ${g.perTask.join(" / ")})` : undefined));
        rows.add(S, `${label}: acquisitions/s`, o.acquisitionsPerSecond, g.acquisitionsPerSecond, ox({}));
        // The least idle share a release call of the measured length allows: the lock is idle
        // at least while the call's write is on the wire.
        const floor = r => (r.releaseCallMs && r.holdMs && r.releaseCallMs.p50 !== undefined
            ? r.releaseCallMs.p50 / (r.holdMs.p50 + r.releaseCallMs.p50) : null);
        // Without the original (Fifo) there is nothing to compare with: 20% it is.
        const reachable = !hasOriginal || floor(o) === null || floor(o) <= 0.2;
        rows.add(S, `${label}: idle share of the lock`, o.idleShare, g.idleShare, ox({
            oursText: pct(o.idleShare),
            target: reachable
                ? { text: "ours ≤ 20%", test: v => v <= 0.2 }
                : { text: "ours ≤ 0.6 × original's (20% is below the release call's floor)", test: v => typeof g.idleShare === "number" && v <= 0.6 * g.idleShare },
        }, pct(g.idleShare)));
        const call = r => (r.releaseCallMs || {});
        rows.add(S, `${label}: release() call, releaseAt → releasedAt, p50 (ms)`, call(o).p50, call(g).p50, ox({}));
        rows.add(S, `${label}: idle share one release call allows at least (release p50 / (hold p50 + release p50))`, floor(o), floor(g), ox({
            oursText: floor(o) === null ? "n/a" : pct(floor(o)),
        }, floor(g) === null ? undefined : pct(floor(g))));
        rows.add(S, `${label}: Jain's fairness index over the tasks' acquisitions`, o.jain, g.jain, ox({
            digits: 3,
            target: { text: `ours ≥ ${jainMin}`, test: v => v >= jainMin },
        }));
        const h = r => r.handoffMs || {};
        rows.add(S, `${label}: handoff gap (next acquiredAt − previous releasedAt) p50 (ms)`, h(o).p50, h(g).p50, ox({}));
        rows.add(S, `${label}: handoff gap p99 (ms)`, h(o).p99, h(g).p99, ox({}));
        rows.add(S, `${label}: overlapping holds (safety; must be 0)`, o.overlaps, g.overlaps, ox({
            noRatio: true,
            target: { text: "0", test: v => v === 0 },
        }));
        if (kind === "FailOpen" || kind === "Fifo")
        {
            const tok = r => (r.fencingTokensRising === null || r.fencingTokensRising === undefined ? "n/a" : `${r.fencingTokensRising}${r.tokensMissing ? ` (${r.tokensMissing} without a token)` : ""}`);
            rows.add(S, `${label}: fencing tokens rise strictly in grant order`, o.fencingTokensRising === true ? 1 : o.fencingTokensRising === false ? 0 : null, null, ox({
                oursText: tok(o),
                noRatio: true,
                target: { text: "true", test: v => v === 1 },
            }, tok(g)));
        }
        rows.add(S, `${label}: errors by code`, null, null, ox({ oursText: errs(o) }, errs(g)));
        rows.add(S, `${label}: acquisitions still pending at the end (longest wait, ms)`, o.pendingAtEnd, g.pendingAtEnd, ox({
            oursText: num(o.pendingAtEnd) ? `${o.pendingAtEnd} (${fmt(o.pendingAtEndMaxWaitMs)})` : "n/a",
            noRatio: true,
        }, num(g.pendingAtEnd) ? `${g.pendingAtEnd} (${fmt(g.pendingAtEndMaxWaitMs)})` : undefined));
        rows.add(S, `${label}: client CPU per acquisition (µs)`, o.cpuUsPerAcquisition, g.cpuUsPerAcquisition, ox({}));
        rows.add(S, `${label}: requests per acquisition`, o.requestsPerAcquisition, g.requestsPerAcquisition, ox({
            oursText: num(o.requestsPerAcquisition) ? `${fmt(o.requestsPerAcquisition)} (${breakdown(o.requests)})` : "n/a",
        }, num(g.requestsPerAcquisition) ? `${fmt(g.requestsPerAcquisition)} (${breakdown(g.requests)})` : undefined));
    }
}

function fifoRows(rows, fifo)
{
    const none = "— (the original has no fair lock)";
    const pct = v => (num(v) ? `${fmt(100 * v, 1)}%` : "n/a");
    const errs = r => (r.errors && Object.keys(r.errors).length ? breakdown(r.errors) : "none");
    // Ours only: every row's original column says so.
    const add = (S, metric, value, extra = {}) => rows.add(S, metric, value, null, Object.assign({ originalText: none, noRatio: true }, extra));
    const failedOr = (S, r) =>
    {
        if (r.skipped)
        {
            add(S, "not measured", null, { oursText: `skipped: ${r.skipped}`, target: { text: "measured", test: () => false }, skipped: true });
            return true;
        }
        if (r.error)
        {
            add(S, "failed", null, { oursText: errText(r) });
            return true;
        }
        return false;
    };
    const zero = { text: "0", test: v => v === 0 };

    const po = fifo.params.order;
    const o = fifo.order || {};
    const S1 = `6a. Fifo order: ${po.processes} processes, one Fifo lock of ours (lease ${po.leaseMs} ms, heartbeat ${po.heartbeatMs} ms, hold ${po.holdMs} ms, ${po.durationMs / 1000} s; library defaults otherwise)`;
    if (!failedOr(S1, o))
    {
        add(S1, "acquisitions (total)", o.acquisitions);
        add(S1, "acquisitions/s", o.acquisitionsPerSecond);
        add(S1, "acquisitions per process", null, { oursText: o.perProcess.join(" / ") });
        add(S1, "Jain's fairness index over acquisitions per process", o.jain, { digits: 3, target: { text: "≥ 0.99", test: v => v >= 0.99 } });
        add(S1, "overlapping holds (safety; must be 0)", o.overlaps, { target: zero });
        add(S1, "grant order equals ticket order: grants whose token is not above the previous grant's", o.orderExceptions, {
            oursText: `${o.orderExceptions}${o.tokensMissing ? ` (${o.tokensMissing} grants without a token)` : ""}`,
            target: zero,
        });
        add(S1, "tickets never granted between the first and last grant", o.ticketsNotGranted);
        add(S1, "handoff gap (next acquiredAt − previous releasedAt) p50 (ms)", o.handoffMs.p50);
        add(S1, "handoff gap p99 (ms)", o.handoffMs.p99);
        add(S1, "handoff gap max (ms)", o.handoffMs.max);
        add(S1, "wait per attempt (acquire call→acquired) p50 / p99 (ms)", o.waitPerAttemptMs.p50, { oursText: `${fmt(o.waitPerAttemptMs.p50)} / ${fmt(o.waitPerAttemptMs.p99)}` });
        add(S1, "idle share of the lock", o.idleShare, { oursText: pct(o.idleShare) });
        add(S1, "errors by code", null, { oursText: errs(o) });
        add(S1, "acquisitions still pending at the end (longest wait, ms)", o.pendingAtEnd, { oursText: `${o.pendingAtEnd} (${fmt(o.pendingAtEndMaxWaitMs)})` });
        add(S1, "client CPU per acquisition, all processes (µs)", o.cpuUsPerAcquisition);
        add(S1, "requests per acquisition", o.requestsPerAcquisition, {
            oursText: num(o.requestsPerAcquisition) ? `${fmt(o.requestsPerAcquisition)} (${breakdown(o.requests)})` : "n/a",
        });
    }

    const pk = fifo.params.kill;
    const k = fifo.kill || {};
    const bound = pk.leaseMs + 2 * 250;
    const S2 = `6b. Fifo with a SIGKILLed waiter: ${pk.processes} processes (lease ${pk.leaseMs} ms, heartbeat ${pk.heartbeatMs} ms, hold ${pk.holdMs} ms, ${pk.durationMs / 1000} s); one waiter killed from ${pk.killAfterMs / 1000} s in`;
    if (!failedOr(S2, k))
    {
        const x = k.kill || {};
        const killed = num(x.index);
        add(S2, "the waiter killed", x.index, {
            oursText: killed
                ? `process ${x.index}, ${fmt(x.afterStartMs, 0)} ms in, after waiting ${fmt(x.waitedMs, 0)} ms: ${x.rule}`
                    + (x.grantedBeforeKill ? `; BUT it reported a grant just before the kill (it died holding)` : "")
                : x.rule || "n/a",
            target: { text: "a waiter, not first in line", test: () => killed && !x.grantedBeforeKill && x.waiting >= 3 },
        });
        add(S2, "largest release→next grant gap after the kill (ms)", x.maxGapAfterKillMs, {
            oursText: num(x.maxGapAfterKillMs) ? `${fmt(x.maxGapAfterKillMs, 0)} (ended ${fmt(x.maxGapAfterKillAtMs, 0)} ms after the kill)` : "n/a",
            target: { text: `≤ ${bound} (lease + 2 × 250)`, test: v => v <= bound },
        });
        add(S2, "largest handoff gap over the whole run (ms)", k.handoffMs.max, {
            oursText: num(k.handoffMs.max) ? `${fmt(k.handoffMs.max, 0)}${num(x.maxGapEndedAfterKillMs) ? ` (ended ${fmt(x.maxGapEndedAfterKillMs, 0)} ms after the kill)` : ""}` : "n/a",
            target: { text: `≤ ${bound}`, test: v => v <= bound },
        });
        add(S2, "first grants after the kill: ms after the kill (gap ms, process)", null, {
            oursText: (x.firstGapsAfterKill || []).map(([at, gap, proc]) => `${at} (${fmt(gap)}, p${proc})`).join(", ") || "n/a",
        });
        add(S2, "acquisitions after the kill (the queue kept going)", x.acquisitionsAfterKill, { target: { text: "> 0", test: v => v > 0 } });
        add(S2, "acquisitions (total; the victim's up to its death)", k.acquisitions, {
            oursText: `${fmt(k.acquisitions)} (per process ${k.perProcess.map((n, i) => (i === x.index ? `${n} killed` : n)).join(" / ")})`,
        });
        add(S2, "overlapping holds (survivors and the victim's holds; must be 0)", k.overlaps, { target: zero });
        add(S2, "grants whose token is not above the previous grant's", k.orderExceptions, {
            oursText: `${k.orderExceptions}${k.tokensMissing ? ` (${k.tokensMissing} grants without a token)` : ""}`,
            target: zero,
        });
        add(S2, "tickets never granted between the first and last grant (the victim's place)", k.ticketsNotGranted);
        add(S2, "handoff gap p50 / p99 (ms)", k.handoffMs.p50, { oursText: `${fmt(k.handoffMs.p50)} / ${fmt(k.handoffMs.p99)}` });
        add(S2, "idle share of the lock", k.idleShare, { oursText: pct(k.idleShare) });
        add(S2, "errors by code (survivors)", null, { oursText: errs(k) });
        add(S2, "requests per acquisition", k.requestsPerAcquisition, {
            oursText: num(k.requestsPerAcquisition) ? `${fmt(k.requestsPerAcquisition)} (${breakdown(k.requests)})` : "n/a",
        });
    }
}

// What waiting costs, per kind of waiter (results of before the kinds: one waiting process).
function waitingRows(rows, res)
{
    const S = "8. Waiting for a held lock (lease 10 s, heartbeat 3 s)";
    const byKind = r => (r && num(r.readsPerSecond) ? { one: r } : r || {});
    const ours = byKind(res.ours);
    const original = byKind(res.original);
    const kinds = [
        ["one", "one waiting process", 0.5, 0.34],
        ["five", "five waiting processes on one key, together", 2.5, null],
        ["follower", "a campaign() follower (the original: a waiter)", 0.5, 0.34],
        ["fifo", "a Fifo waiter (ours only)", 0.5, 0.34],
    ];
    for (const [kind, label, readsTarget, writesTarget] of kinds)
    {
        const o = ours[kind] || {};
        const g = (kind === "follower" ? original.one : original[kind]) || {};
        if (!ours[kind])
        {
            continue;
        }
        if (o.error || g.error)
        {
            rows.add(S, `${label}: scenario failed`, null, null, { oursText: errText(o) || "ok", originalText: errText(g) || "ok" });
            continue;
        }
        const window = `over ${fmt((o.windowMs || 0) / 1000)} s`;
        rows.add(S, `${label}: reads a second ${window}`, o.readsPerSecond, g.readsPerSecond, {
            oursText: num(o.readsPerSecond) ? `${fmt(o.readsPerSecond)} (${breakdown(o.counts)})` : "n/a",
            originalText: num(g.readsPerSecond) ? `${fmt(g.readsPerSecond)} (${breakdown(g.counts)})` : "n/a",
            target: { text: `ours <= ${readsTarget}`, test: v => v <= readsTarget },
        });
        rows.add(S, `${label}: writes a second ${window}`, o.writesPerSecond, g.writesPerSecond,
            writesTarget === null ? {} : { target: { text: `ours <= ${writesTarget}`, test: v => v <= writesTarget } });
        rows.add(S, `${label}: hand-over after the release (ms)`, o.handOverMs, g.handOverMs, {
            target: { text: "ours <= half the wait + 50 ms", test: v => v <= (o.waitedMs || 0) / 2 + 50 },
        });
    }
}

function latencyRows(rows, latency)
{
    const total = counts => Object.values(counts || {}).reduce((a, b) => a + b, 0);
    for (const entry of latency.settings)
    {
        const c = entry.config;
        const S = `7. Leases kept against added round trip: ${entry.locks.toLocaleString("en-US")} FailOpen locks (lease ${c.leaseDurationMs} ms, heartbeat ${c.heartbeatPeriodMs} ms), taken with no added latency, then held ${entry.holdMs} ms with it`;
        for (const run of entry.runs)
        {
            const o = run.ours || {};
            const g = run.original || {};
            const label = `+${run.latencyMs} ms`;
            if (o.error || g.error)
            {
                rows.add(S, `${label}: failed`, null, null, { oursText: errText(o) || "ok", originalText: errText(g) || "ok" });
                if (o.error && g.error)
                {
                    continue;
                }
            }
            const keptText = r => (num(r.locksKept) ? `${r.locksKept}/${r.locksAcquired}${r.locksAcquired < r.locksPlanned ? ` (of ${r.locksPlanned} wanted)` : ""}` : "n/a");
            // The promise holds while every round trip stays below the heartbeat period.
            const promised = run.latencyMs < c.heartbeatPeriodMs;
            rows.add(S, `${label}: leases kept (no gap between successful writes longer than the lease)`, o.locksKept, g.locksKept, {
                oursText: keptText(o),
                originalText: keptText(g),
                noRatio: true,
                target: promised ? { text: "all", test: v => v === o.locksAcquired && o.locksAcquired === o.locksPlanned } : undefined,
            });
            const gapText = r => (r.gapMs ? `${fmt(r.gapMs.max, 0)} (p99 ${fmt(r.gapMs.p99, 0)}; ${r.gapsOverLease} over the lease)` : "n/a");
            rows.add(S, `${label}: longest gap between successful writes of a lock (ms)`, o.gapMs && o.gapMs.max, g.gapMs && g.gapMs.max, {
                oursText: gapText(o),
                originalText: gapText(g),
            });
            const ans = r => (r.answerMs && r.answerMs.n ? `${fmt(r.answerMs.p50)} / ${fmt(r.answerMs.p99)} / ${fmt(r.answerMs.max)}` : "n/a");
            rows.add(S, `${label}: writes of the hold answered by the proxy after p50 / p99 / max (ms, added latency included)`, o.answerMs && o.answerMs.p99, g.answerMs && g.answerMs.p99, {
                oursText: ans(o),
                originalText: ans(g),
            });
            const ev = (r, withLost) => (r.events ? `${withLost ? `lost ${r.events.lost}, ` : ""}error ${r.events.errors}${r.events.lastError ? ` (${r.events.lastError})` : ""}` : "n/a");
            rows.add(S, `${label}: "lost" and "error" events during the hold`, o.events && o.events.lost, null, {
                oursText: ev(o, true),
                originalText: g.events ? `${ev(g, false)}; no "lost" event` : "n/a",
                noRatio: true,
                target: promised ? { text: "0 lost", test: v => v === 0 } : undefined,
            });
            const hb = o.heartbeats;
            rows.add(S, `${label}: ours' own heartbeat counters during the hold: writes started, counted before waiting for a slot in flight (of which extra attempts), failed or reported slow`, hb && hb.sent, null, {
                oursText: hb ? `${fmt(hb.sent)} (${fmt(hb.retried)}), ${fmt(hb.failed)}` : "n/a",
                originalText: "— (none kept)",
                noRatio: true,
            });
            const req = r => (r.holdRequests
                ? `${fmt(total(r.holdRequests))} (${breakdown(r.holdRequests)}${r.refusedInHold ? `; refused: ${breakdown(r.refused)}` : ""}${r.unansweredAtReport ? `; ${r.unansweredAtReport} writes never answered` : ""})`
                : "n/a");
            rows.add(S, `${label}: requests during the hold`, o.holdRequests && total(o.holdRequests), g.holdRequests && total(g.holdRequests), {
                oursText: req(o),
                originalText: req(g),
            });
        }
    }
}

// Sessions: FailOpen with session: true against per-lock heartbeats and the original.
function sessionRows(rows, res, params, engineName)
{
    const S1 = `9a. Sessions: writes of ${params.writes.locks} held FailOpen locks (lease ${params.writes.leaseMs / 1000} s, heartbeat ${params.writes.periodMs / 1000} s), held ${params.writes.holdMs / 1000} s`;
    const w = res.writes || {};
    const ses = w.session || {};
    const per = w.perLock || {};
    const orig = w.original || {};
    for (const [label, r] of [["ours, one session", ses], ["ours, per-lock heartbeats", per]])
    {
        if (r.error)
        {
            rows.add(S1, `${label}: failed`, null, null, { oursText: errText(r), originalText: errText(orig) || "ok" });
        }
    }
    const wtext = r => (num(r.writesPerSecond) ? `${fmt(r.writesPerSecond)} (${r.writes} writes in ${fmt(r.holdMs / 1000)} s: ${breakdown(r.counts)}; ${r.locksAcquired} held${r.sessions ? `; ${sessText(r.sessions)}` : ""})` : errText(r) || "n/a");
    rows.add(S1, "ours with session: true: writes a second, all locks together", ses.writesPerSecond, orig.writesPerSecond, {
        oursText: wtext(ses),
        originalText: wtext(orig),
        target: { text: "ours <= 0.5", test: v => v <= 0.5 && ses.locksAcquired === ses.locksPlanned },
    });
    rows.add(S1, "ours with per-lock heartbeats (no session): writes a second", per.writesPerSecond, orig.writesPerSecond, {
        oursText: wtext(per),
        originalText: wtext(orig),
    });
    rows.add(S1, "session / per-lock heartbeats, same run (writes a second)", ratioOf(ses.writesPerSecond, per.writesPerSecond), null, { digits: 4, noRatio: true, originalText: "—" });
    const ev = r => (r.events ? `lost ${r.events.lost}, error ${r.events.errors}, danger ${r.events.danger}` : "n/a");
    rows.add(S1, "\"lost\" / \"error\" / \"danger\" events in the hold (session; per-lock)", ses.events && ses.events.lost + ses.events.errors, orig.events && orig.events.errors, {
        oursText: `${ev(ses)}; ${ev(per)}`,
        originalText: orig.events ? `error ${orig.events.errors} (no "lost" event)` : "n/a",
        noRatio: true,
    });

    const S2 = `9b. Sessions: ${params.many.locks.toLocaleString("en-US")} locks through one session (lease ${params.many.leaseMs / 1000} s, heartbeat ${params.many.periodMs / 1000} s), ours only`;
    const m = res.many || {};
    const st = res.stub || {};
    if (m.error)
    {
        rows.add(S2, "failed", null, null, { oursText: errText(m), originalText: "—" });
    }
    else
    {
        const h = m.hold || {};
        const hev = h.events || {};
        rows.add(S2, `locks held through one session (acquired / wanted; sessions)`, m.locksAcquired, null, {
            oursText: `${fmt(m.locksAcquired)} / ${fmt(m.locksPlanned)} (${sessText(m.sessions)}; ${m.acquireFailures} failed acquisitions${m.lastAcquireFailure ? `, last ${m.lastAcquireFailure}` : ""})`,
            originalText: "—",
            noRatio: true,
        });
        rows.add(S2, `"lost" and "error" events while held ${fmt((h.holdMs || 0) / 1000)} s (and during acquisition)`, num(hev.lost) ? hev.lost + hev.errors + m.eventsDuringAcquisition.lost + m.eventsDuringAcquisition.errors : null, null, {
            oursText: `lost ${hev.lost}, error ${hev.errors}${hev.lastError ? ` (${hev.lastError})` : ""}, danger ${hev.danger}; during acquisition: lost ${m.eventsDuringAcquisition.lost}, error ${m.eventsDuringAcquisition.errors}`,
            originalText: "—",
            noRatio: true,
            target: { text: "0 lost, 0 error", test: v => v === 0 && m.locksAcquired === m.locksPlanned },
        });
        rows.add(S2, `writes a second in the hold (all ${fmt(m.locksAcquired)} locks and the session)`, h.writesPerSecond, null, {
            oursText: num(h.writesPerSecond) ? `${fmt(h.writesPerSecond)} (${breakdown(h.counts)}); smallest leaseRemainingMs sampled ${fmt(h.leaseRemainingMinMs, 0)}` : "n/a",
            originalText: "—",
            noRatio: true,
        });
        rows.add(S2, "RSS per held lock right after acquiring (bytes; over the warmed-up process; over the cold one)", m.rssPerLockBytes, null, {
            oursText: `${fmt(m.rssPerLockBytes, 0)} (cold ${fmt(m.rssPerLockColdBytes, 0)}; V8 heap used ${fmt(m.heapUsedPerLockBytes, 0)}, committed ${fmt(m.heapTotalPerLockBytes, 0)}; external ${fmt(m.externalPerLockBytes, 0)})`,
            originalText: "—",
            noRatio: true,
            target: { text: "<= 2,048", test: v => v <= 2048 },
        });
        rows.add(S2, `RSS per held lock after the ${fmt((h.holdMs || 0) / 1000)} s hold (bytes; over the warmed-up process)`, h.rssPerLockAfterHoldBytes, null, {
            oursText: `${fmt(h.rssPerLockAfterHoldBytes, 0)} (V8 heap used ${fmt(h.heapUsedPerLockAfterHoldBytes, 0)}, committed ${fmt(h.heapTotalPerLockAfterHoldBytes, 0)})`,
            originalText: "—",
            noRatio: true,
            target: { text: "<= 2,048 (once V8 has shrunk its heap)", test: v => v <= 2048 },
        });
        rows.add(S2, `acquisitions a second, ${params.many.acquireConcurrency} at a time (${engineName} behind the counting proxy)`, m.acquisitionsPerSecond, null, {
            oursText: `${fmt(m.acquisitionsPerSecond)} (${fmt(m.acquisitionMs / 1000)} s; ${fmt(m.acquisitionCpuUsPerLock, 0)} µs client CPU each; ${breakdown(m.acquisitionCounts)})`,
            originalText: "—",
            noRatio: true,
            target: { text: ">= 2,000", test: v => v >= 2000 },
        });
    }
    if (st.error)
    {
        rows.add(S2, "stub engine: failed", null, null, { oursText: errText(st), originalText: "—" });
    }
    else if (num(st.acquisitionsPerSecond))
    {
        rows.add(S2, `acquisitions a second on the stub engine (bench/stub-engine.js, no proxy; ${fmt(st.locksAcquired)} locks, ${params.stub.acquireConcurrency} at a time)`, st.acquisitionsPerSecond, null, {
            oursText: `${fmt(st.acquisitionsPerSecond)} (${fmt(st.acquisitionMs / 1000)} s; ${fmt(st.acquisitionCpuUsPerLock, 0)} µs client CPU each, i.e. ${fmt(1e6 / st.acquisitionCpuUsPerLock, 0)} a second per core of client CPU)`,
            originalText: "—",
            noRatio: true,
            target: { text: ">= 2,000 (the client, engine not limiting)", test: v => v >= 2000 },
        });
    }

    const trials = res.trials || {};
    const pk = params.kill;
    const S3 = `9c. Sessions: a holder of ${pk.locks} session locks SIGKILLed (lease ${pk.leaseMs / 1000} s, heartbeat ${pk.periodMs / 1000} s), ${pk.waiters} waiter processes (FailOpen, no session) waiting`;
    const allKill = trials.kill || [];
    const killOk = allKill.filter(t => !t.error);
    allKill.filter(t => t.error).forEach(t => rows.add(S3, `trial failed`, null, null, { oursText: errText(t), originalText: "—" }));
    const modeText = {
        steady: `waiters asking since ${pk.waitBeforeKillMs / 1000} s before the kill`,
        renewal: "killed as the first session renewal lands that followed the waiters' reads of the session item",
    };
    for (const mode of pk.modes || ["steady"])
    {
        const kOk = killOk.filter(t => (t.mode || "steady") === mode);
        if (!kOk.length)
        {
            continue;
        }
        const label = modeText[mode] || mode;
        const worst = Math.max(...kOk.map(t => t.afterKillMs.max));
        rows.add(S3, `${label}: the last lock taken, after the kill (ms; per trial)`, worst, null, {
            oursText: `${fmt(worst, 0)} (${kOk.map(t => `${fmt(t.afterKillMs.max, 0)}`).join(" / ")})`
                + (mode === "renewal" ? `; the renewal reached the proxy ${kOk.map(t => fmt(t.trigger && t.trigger.renewalReceivedAfterLastReadMs, 0)).join(" / ")} ms after the waiters' last read of the session` : ""),
            originalText: "—",
            noRatio: true,
            target: { text: `every lock <= ${pk.targetMs} ms`, test: v => v <= pk.targetMs && kOk.every(t => t.granted === t.locks && t.grantedBeforeKill === 0) },
        });
        rows.add(S3, `${label}: median (ms; per trial); first lock taken`, median(kOk.map(t => t.afterKillMs.median)), null, {
            oursText: `${kOk.map(t => fmt(t.afterKillMs.median, 0)).join(" / ")}; first ${kOk.map(t => fmt(t.afterKillMs.min, 0)).join(" / ")}`,
            originalText: "—",
            noRatio: true,
        });
        rows.add(S3, `${label}: locks taken with a higher fencing token than the holder's (per trial)`, kOk.reduce((a, t) => a + t.higherTokens, 0), null, {
            oursText: kOk.map(t => `${t.higherTokens}/${t.granted} of ${t.locks}${t.grantedBeforeKill ? ` (${t.grantedBeforeKill} granted BEFORE the kill)` : ""}${t.failures.length ? ` (failed: ${t.failures.join(",")})` : ""}`).join(" / "),
            originalText: "—",
            noRatio: true,
            target: { text: "all", test: () => kOk.every(t => t.higherTokens === t.locks) },
        });
    }

    const b = trials.blackhole || [];
    const pb = params.blackhole;
    const S4 = `9d. Sessions: the holder's connection black-holed (every request hangs) while a rival waits (lease ${pb.leaseMs / 1000} s, heartbeat ${pb.periodMs / 1000} s, ${pb.locks} session locks), ${b.length} trials; times from the black-hole`;
    b.filter(t => t.error).forEach(t => rows.add(S4, "trial failed", null, null, { oursText: errText(t), originalText: "—" }));
    const bOk = b.filter(t => !t.error);
    if (bOk.length)
    {
        rows.add(S4, `"danger" then "lost" for every lock before the rival's first grant (trials in order)`, bOk.filter(t => t.ordered).length, null, {
            oursText: `${bOk.filter(t => t.ordered).length} of ${b.length} trials (locks in order per trial: ${bOk.map(t => `${t.orderedLocks}/${t.locks}`).join(" / ")})`,
            originalText: "—",
            noRatio: true,
            target: { text: "every trial", test: v => v === b.length && bOk.every(t => t.granted === t.locks) },
        });
        rows.add(S4, "margin: rival's first grant − holder's last \"lost\" (ms; per trial)", Math.min(...bOk.map(t => (num(t.marginMs) ? t.marginMs : -Infinity))), null, {
            oursText: bOk.map(t => fmt(t.marginMs, 0)).join(" / "),
            originalText: "—",
            noRatio: true,
        });
        rows.add(S4, "first \"danger\" / last \"lost\" / rival's first grant after the black-hole (ms; per trial)", null, null, {
            oursText: bOk.map(t => `${fmt(t.firstDangerMs, 0)} / ${fmt(t.lastLostMs, 0)} / ${fmt(t.firstGrantMs, 0)} (rival waiting since ${fmt(t.rivalLeadMs / 1000)} s before)`).join("; "),
            originalText: "—",
            noRatio: true,
        });
        rows.add(S4, "\"danger\" ahead of \"lost\", smallest over the locks (ms; per trial); \"error\" events; lost codes", null, null, {
            oursText: bOk.map(t => `${fmt(t.dangerLeadMs, 0)}`).join(" / ") + `; errors ${bOk.map(t => t.errors).join(" / ")}; ${[...new Set(bOk.flatMap(t => t.lostCodes))].join(", ") || "none"}`,
            originalText: "—",
            noRatio: true,
        });
        rows.add(S4, "fencing tokens: holder → rival (per trial)", null, null, {
            oursText: bOk.map(t => `${t.tokens.holder.join(",")} → ${t.tokens.rival.join(",")}`).join(" / "),
            originalText: "—",
            noRatio: true,
        });
    }

    const s = trials.stop || [];
    const ps = params.stop;
    const S5 = `9e. Sessions: the holder SIGSTOPped ${ps.stopMs / 1000} s (lease ${ps.leaseMs / 1000} s, heartbeat ${ps.periodMs / 1000} s, ${ps.locks} session locks), then SIGCONTinued`;
    s.filter(t => t.error).forEach(t => rows.add(S5, "trial failed", null, null, { oursText: errText(t), originalText: "—" }));
    const sOk = s.filter(t => !t.error);
    if (sOk.length)
    {
        rows.add(S5, "leaseRemainingMs of every lock, first read after SIGCONT (in the SIGCONT handler; per trial)", sOk.filter(t => t.allZeroAtSigcont).length, null, {
            oursText: sOk.map(t => (t.sigcont ? `[${t.sigcont.map(v => fmt(v, 0)).join(", ")}]` : "no read")).join(" / "),
            originalText: "—",
            noRatio: true,
            target: { text: "0 for every lock, every trial", test: v => v === s.length },
        });
        rows.add(S5, "leaseRemainingMs on the first 10 ms timer step after the pause (per trial)", sOk.filter(t => t.allZeroAtFirstStep).length, null, {
            oursText: sOk.map(t => (t.resumed ? `[${t.resumed.map(v => fmt(v, 0)).join(", ")}] (gap ${fmt(t.resumedGapMs, 0)} ms)` : "no step")).join(" / "),
            originalText: "—",
            noRatio: true,
        });
        rows.add(S5, "\"lost\" events after SIGCONT (count; last, ms after SIGCONT; per trial)", null, null, {
            oursText: sOk.map(t => `${t.lost} (${fmt(t.lostAfterContMs, 0)})`).join(" / "),
            originalText: "—",
            noRatio: true,
        });
    }
}

function sessText(s)
{
    return s ? `the items of ${s.sampled} of them name ${s.sessions.length} session${s.sessions.length === 1 ? "" : "s"}` : "sessions not read";
}

function median(xs)
{
    const v = xs.filter(num).sort((a, b) => a - b);
    if (!v.length)
    {
        return null;
    }
    const m = v.length >> 1;
    return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

function esc(s)
{
    return String(s).replace(/\|/g, "\\|");
}

function renderMarkdown(report)
{
    const rows = new Rows();
    const r = report.results;
    if (r.requests)
    {
        requestRows(rows, r.requests);
    }
    if (r.cycles)
    {
        cycleRows(rows, r.cycles);
    }
    if (r.held)
    {
        heldRows(rows, r.held);
    }
    if (r.contention)
    {
        contentionRows(rows, r.contention);
    }
    if (r.pool)
    {
        poolRows(rows, r.pool);
    }
    if (r.fifo)
    {
        fifoRows(rows, r.fifo);
    }
    if (r.latency)
    {
        latencyRows(rows, r.latency);
    }
    if (r.waiting)
    {
        waitingRows(rows, r.waiting);
    }
    if (r.sessions)
    {
        sessionRows(rows, r.sessions, report.params.sessions, report.machine.engine);
    }

    const m = report.machine;
    const lines = [];
    lines.push(`# dynamodb-lock-native vs dynamodb-lock-client: benchmark`);
    lines.push("");
    lines.push(`- Generated: ${report.generatedAt} (${report.options.quick ? "quick" : "full"} run, ${report.durationS} s)`);
    lines.push(`- Machine: ${m.cpuModel}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.platform}; load average at start ${(m.loadAverageAtStart || []).join(" ")}, at end ${(m.loadAverageAtEnd || []).join(" ")}`);
    lines.push(`- Node ${m.node}; engine: ${m.engine} (${m.engineVersion}), behind a counting HTTP proxy, all on 127.0.0.1`);
    lines.push(`- Ours: ${m.ours}; original: ${m.original}`);
    if (m.addon)
    {
        lines.push(`- Addon: ${m.addon.file}, ${(m.addon.bytes / 2 ** 20).toFixed(1)} MiB, built ${m.addon.mtime}${m.addon.debugInfo ? " (DEBUG INFO PRESENT)" : ""}; loaded from a snapshot of the package taken at the start of the run`);
    }
    for (const w of report.warnings || [])
    {
        lines.push(`- **WARNING: ${w}**`);
    }
    lines.push(`- Each scenario ran in a fresh Node process per library (--expose-gc). CPU is process.cpuUsage() of that process (all its threads), measured over the loop only. Ratio = ours / original.`);
    lines.push("");
    let section = null;
    for (const row of rows.rows)
    {
        if (row.section !== section)
        {
            section = row.section;
            lines.push("");
            lines.push(`### ${section}`);
            lines.push("");
            lines.push("| metric | ours | original | ratio | target | met |");
            lines.push("|---|---|---|---|---|---|");
        }
        const met = row.skipped ? "**skipped**" : row.met === null ? "" : row.met ? "yes" : "**NO**";
        lines.push(`| ${esc(row.metric)} | ${esc(row.oursText)} | ${esc(row.originalText)} | ${row.ratio === null ? "" : fmt(row.ratio, row.ratio < 0.1 ? 3 : 2)} | ${esc(row.target)} | ${met} |`);
    }
    lines.push("");
    const notes = notesFor(report);
    if (notes.length)
    {
        lines.push("### Notes");
        lines.push("");
        for (const n of notes)
        {
            lines.push(`- ${n}`);
        }
        lines.push("");
    }
    return { text: lines.join("\n") + "\n", rows: rows.rows };
}

function notesFor(report)
{
    const notes = [];
    const r = report.results;
    if (r.cycles)
    {
        notes.push("Cycles: each worker acquires and releases the same id over and over (the steady state of a lock guarding one resource); concurrent workers use distinct ids. FailOpen: leaseDurationMs 5000, heartbeatPeriodMs 1000; FailClosed: acquirePeriodMs 50. The sequential runs are then repeated, with the same options, on the stub engine (bench/stub-engine.js: a Map behind an HTTP server on 127.0.0.1 in its own process, answering at once without evaluating conditions), so that the client CPU per cycle is the client's own; the original's figures and the ratio appear only where it ran there without failures.");
    }
    if (r.held)
    {
        const p = report.params.held;
        notes.push(`Held locks: acquired ${p.acquireConcurrency} at a time (acquisition bounded to ${p.acquireDeadlineMs / 1000} s), then ${p.settleMs} ms to settle, then a ${p.windowMs / 1000} s window. Heartbeats are the proxy's UpdateItem (ours) / PutItem (original) count in the window; rates divide it by the proxy's own recording time, which IPC delays on a busy machine make longer than the client's CPU window, and CPU per heartbeat divides the client's CPU by the heartbeats that rate puts in its window. RSS per lock = (RSS after the window − RSS of the same process after a warm-up) / locks held, both after gc(); the warm-up runs up to 1,000 acquire/release cycles on other ids with the same concurrency, so that one-off costs of the process (V8's optimised code and compiler memory, connections, allocator arenas) are not counted per lock. The cold row divides the growth from the process with the client made and used once instead.`);
        const largest = r.held.sizes[r.held.sizes.length - 1];
        for (const lib of ["ours", "original"])
        {
            const x = largest && largest[lib];
            if (x && !x.error && x.heartbeatsPerSecond < 0.9 * x.targetHeartbeatsPerSecond)
            {
                notes.push(`At ${largest.locks} locks, ${lib} reached ${Math.round(x.heartbeatsPerSecond)} heartbeats/s of the ${x.targetHeartbeatsPerSecond}/s wanted. The single-process local engine (${report.machine.engine}) and the JavaScript counting proxy share ${report.machine.cores} cores with the client, so this is what the setup sustained, not a limit of the client alone.`
                    + (lib === "original" ? " The original also restarts each lock's heartbeat timer only after the previous heartbeat's response, so its rate is at most N / (period + heartbeat latency) by design." : ""));
            }
        }
        for (const e of r.held.sizes)
        {
            const o = e.ours;
            if (o && !o.error && o.lockErrors && o.lockErrors.lost > 0)
            {
                notes.push(`At ${e.locks} locks ours lost ${o.lockErrors.lost} locks (last error ${o.lockErrors.lastError}): heartbeats that could not be written before the lease ran out, because the engine could not keep up. Ours then stops heartbeating those locks and emits "lost". The original keeps no lease clock: a late heartbeat still succeeds unless another client took the lock meanwhile ("renewals later than the lease" counts such lapses).`);
            }
        }
        if (r.held.capped)
        {
            notes.push(`Capped run: ${r.held.capped.note}.`);
            const c = r.held.capped.ours;
            if (c && !c.error && c.heartbeatsPerSecond < 0.9 * r.held.capped.cap)
            {
                notes.push(`With maxHeartbeatsPerSecond ${r.held.capped.cap}, ours sent ${Math.round(c.heartbeatsPerSecond)} heartbeats/s (${Math.round(100 * c.heartbeatsPerSecond / r.held.capped.cap)}% of the cap)${c.lockErrors && c.lockErrors.lost ? ` and lost ${c.lockErrors.lost} locks` : ""}, although the engine had served ${Math.round(r.held.capped.sustainedRate)}/s in the calibration run.`);
            }
        }
    }
    if (r.contention)
    {
        for (const lib of ["ours", "original"])
        {
            const x = r.contention[lib];
            if (x && !x.error && x.selfHandoffs > x.crossHandoffs)
            {
                notes.push(`Contention, ${lib}: ${x.selfHandoffs} of ${x.selfHandoffs + x.crossHandoffs} handoffs went back to the process that had just released (it asks again at once, while the others wait on a timer), so handoff times mostly measure self re-acquisition; see the "to another process" rows and the per-attempt waits.`);
            }
        }
        notes.push("Contention: handoff = next acquisition's completion time (in whichever process) − previous release's completion time, on wall clocks of one machine (performance.timeOrigin + now()); it can be slightly negative when the next acquirer's answer arrives before the releaser's. \"Overlapping holds\" counts acquisitions that completed before the previous holder started its release (a mutual-exclusion violation, since hold < lease). Both libraries get retryCount " + report.params.contention.retryCount + "; everything else is each library's default (ours: rereadPeriodMs not set).");
    }
    if (r.pool)
    {
        const p = report.params.pool;
        notes.push(`Pool: one client per library and lock kind, in a fresh process, with ${p.tasks} async tasks each looping acquire, hold ${p.holdMs} ms (setTimeout), release for ${p.durationMs / 1000} s (and at most ${p.maxAcquisitionsPerTask} iterations per task). Idle share = 1 − (Σ hold times, acquiredAt → releaseAt) / (last releasedAt − first acquiredAt). Handoff gap = an acquisition's acquiredAt − the previous acquisition's releasedAt (negative when the next task is answered before the releaser). An overlap is an acquisition granted before the previous holder started its release. The release call is releaseAt → releasedAt (ours, with a task waiting: the one hand-over write, through the proxy, and the hops to and from the addon); while it is out nobody holds the lock, so release p50 / (hold p50 + release p50) is the least idle share such calls allow, and where that is above 20% the target is 0.6 of the original's idle share in the same run. Requests are the proxy's counts after the warm-up, up to the end of the loop. An acquisition still waiting at the end is abandoned.`);
        for (const e of r.pool.kinds)
        {
            if (e.ours && e.ours.skipped)
            {
                notes.push(`Pool, ${e.kind}: NOT MEASURED: ${e.ours.skipped} (the row is reported as skipped, not as a pass).`);
            }
        }
    }
    if (r.fifo)
    {
        const p = report.params.fifo;
        notes.push(`Fifo (ours only; the original has no fair lock): ${p.order.processes} child processes, each with one Fifo client on a table with partition key "id" and string sort key "${p.sortKey}", loop acquire, hold (setTimeout), release on one id; times are wall clocks of one machine (performance.timeOrigin + now()). Grants are sorted by acquiredAt; grant order equals ticket order when each grant's fencing token (its ticket) is above the previous grant's. An overlap is a grant before the previous holder started its release. Handoff gap = acquiredAt − the previous grant's releasedAt. Idle share = 1 − (Σ hold times) / (last releasedAt − first acquiredAt). Requests are the proxy's counts from the start signal (after each process's warm-up on a private id) until every process exited. An acquisition still waiting at the end is aborted through its signal.`);
        const k = p.kill;
        notes.push(`Fifo with a SIGKILLed waiter: the children report over IPC when they call acquireLock and when they are granted; from ${k.killAfterMs} ms after the start the parent polls these every ${k.pollMs} ms and SIGKILLs the second latest of at least 3 waiters, each having waited ${k.minWaitedMs} ms or more (so at least one place ahead of it and one behind; the releasing process queues again at once), falling back by ${k.killByMs} ms to the latest of 2 waiters. The victim's finished holds come from its IPC reports and join the order and overlap checks. Its queue entry stops being heartbeated; the waiter behind it passes it once its lease has gone by unchanged, so the gap after the kill is bounded by the lease plus read and heartbeat periods (target lease + 2 × 250 ms).`);
        for (const part of ["order", "kill"])
        {
            const x = r.fifo[part];
            if (x && x.skipped)
            {
                notes.push(`Fifo, ${part}: NOT MEASURED: ${x.skipped} (reported as skipped, not as a pass).`);
            }
        }
    }
    if (r.latency)
    {
        const p = report.params.latency;
        notes.push(`Leases kept against added round trip: for each setting, added latency (${p.latencies.join(", ")} ms) and library, a fresh process takes the locks ${p.acquireConcurrency} at a time with no added latency, waits one heartbeat period, then the proxy adds the latency to every request (before forwarding it) for three heartbeat periods plus the lease. Both libraries get the same options (trustLocalTime true, retryCount 2, which only matter to acquisition). Measured at the proxy, the same way for both: for each lock, the times at which the proxy received its writes (PutItem, UpdateItem) that the engine answered with 200, whether or not the client was still waiting for the answer; the gaps between successive ones that end after the latency was switched on, and from the last one to the end of the hold. A lease is kept when no gap is longer than leaseDurationMs; a longer gap is a time in which a waiter could have taken the lock. Requests are the proxy's counts over the hold; a write's answer time is from its arrival at the proxy to the engine's answer coming back there, so it shows how far the engine (and the proxy) kept up, apart from anything queued in the client. A write "never answered" was received by the proxy before the end of the hold and had no answer from the engine when the proxy was asked, the added latency plus ${p.drainMarginMs} ms after the end (a request whose client closed its connection during the added delay is not forwarded). The locks are abandoned with the process afterwards. The target applies where the added round trip is below the heartbeat period.`);
    }
    if (r.sessions)
    {
        const p = report.params.sessions;
        notes.push(`Sessions (9): every part runs in fresh child processes (bench/sessions.js). Writes: each of the three runs takes ${p.writes.locks} locks (${p.writes.acquireConcurrency} at a time, after one warm-up acquire/release that also starts ours' session), then the proxy counts every request of the ${p.writes.holdMs / 1000} s hold that follows; writes = UpdateItem + PutItem + DeleteItem. The per-lock runs' first heartbeats come a period after each acquisition, so the hold holds about (hold − period) / period heartbeats per lock. ${p.many.locks.toLocaleString("en-US")} locks: acquired ${p.many.acquireConcurrency} at a time through one session (bounded to ${p.many.acquireDeadlineMs / 1000} s), held ${p.many.holdMs / 1000} s; RSS per lock = (RSS after acquiring − RSS after a warm-up of up to ${p.many.warmupCycles} acquire/release cycles on other ids), both after gc(), as in the held scenario; "cold" takes the process with the client made and used once instead. Right after the acquisitions V8's committed heap (heapTotal) still holds the room their garbage (promises, callbacks, answers) grew it by; V8 gives it back within seconds of idling, hence the second RSS figure, after the hold. The stub engine (bench/stub-engine.js) is a Map behind an HTTP server in its own process that answers every write at once without evaluating conditions: its figure is the client's acquisition rate when the engine is not the limit, on the same busy cores. SIGKILL: the waiters (FailOpen without a session, the holder's lease and heartbeat, retryCount ${p.kill.retryCount}) start asking for the locks together; "steady": ${p.kill.waitBeforeKillMs / 1000} s before the kill; "renewal": the parent's proxy sees the waiters' reads of the session's item (GetItem) and SIGKILLs the holder as the answer to its first session renewal passes that the proxy received after the last of those reads (and ${p.kill.renewalTriggerAfterGoMs} ms after the start): the waiters' reads are then of the version just replaced, the phase in which a waiter that checks the session's version only at the end of a lease waits longest. A grant is timed at the waiter (performance.timeOrigin + now(), one machine) from the parent's kill() call. Black-hole: the holder reaches the engine through a proxy of its own, whose every request hangs from the black-hole on (no answer, connection kept); the rival (FailOpen without a session, the same lease and heartbeat) asks for every lock of the session ${p.blackhole.rivalLeadMs.map(x => x / 1000).join(", ")} s before (trial by trial, in turn), so that in some trials it sees the session renewed while it waits; "danger", "lost" and grants are timed where they happen, in wall-clock time. SIGSTOP: the parent SIGSTOPs the holder ${p.stop.holdBeforeMs} ms after its acquisitions, SIGCONTs it ${p.stop.stopMs / 1000} s later; the holder reads every lock's leaseRemainingMs in its SIGCONT handler, and again on its first 10 ms timer step after the gap.`);
    }
    const missed = [];
    return notes.concat(missed);
}

module.exports = { renderMarkdown, fmt };
