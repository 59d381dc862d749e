"use strict";

// Fuzzing of the public API: random configurations, random lock ids, call-order abuse and
// throwing callbacks. Each part runs in a child process (__test__/support/fuzz-worker.js) so
// that a native abort or a crash shows up as an exit signal or code, not as a dead test runner.
// Seeded: FUZZ_SEED=<n> reproduces a run; FUZZ_CONFIGS / FUZZ_IDS change the counts.
//
//   node --test __test__/fuzz.test.js

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const path = require("path");
const { spawn } = require("child_process");
const { startEngine } = require("./engines.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const SEED = Number(process.env.FUZZ_SEED) || 20240611;
const CONFIGS = Number(process.env.FUZZ_CONFIGS) || 2000;
const IDS = Number(process.env.FUZZ_IDS) || 1000;

const TABLES =
[
    ["fz_s", { partitionKey: "id", partitionType: "S" }],
    ["fzc_s", { partitionKey: "id", partitionType: "S" }],
    ["fzo_s", { partitionKey: "id", partitionType: "S" }],
    ["fzc_n", { partitionKey: "id", partitionType: "N" }],
    ["fzo_n", { partitionKey: "id", partitionType: "N" }],
    ["fzc_b", { partitionKey: "id", partitionType: "B" }],
    ["fzo_b", { partitionKey: "id", partitionType: "B" }],
    ["fzc_r", { partitionKey: "pk", partitionType: "S", sortKey: "sk", sortType: "N" }],
    ["fzo_r", { partitionKey: "pk", partitionType: "S", sortKey: "sk", sortType: "N" }],
];

// Runs the fuzz worker with a job; resolves with its exit and its JSON lines. Killed after
// `timeoutMs` whatever happens.
function runFuzz(job, { timeoutMs, nodeArgs = [] })
{
    return new Promise(resolve =>
        {
            const child = spawn(process.execPath, [...nodeArgs, path.join(__dirname, "support", "fuzz-worker.js"), JSON.stringify(job)],
                { stdio: ["ignore", "pipe", "pipe"], env: Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true" }) });
            let stdout = "";
            let stderr = "";
            child.stdout.setEncoding("utf8");
            child.stderr.setEncoding("utf8");
            child.stdout.on("data", c => (stdout += c));
            child.stderr.on("data", c => (stderr = (stderr + c).slice(-20000)));
            const started = Date.now();
            const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
            child.on("exit", (code, signal) =>
                {
                    clearTimeout(killer);
                    // Let the pipes drain.
                    setImmediate(() =>
                        {
                            const lines = stdout.split("\n").filter(Boolean).map(text =>
                                {
                                    try
                                    {
                                        return JSON.parse(text);
                                    }
                                    catch (_)
                                    {
                                        return { unparsed: text };
                                    }
                                });
                            resolve({ code, signal, ms: Date.now() - started, lines, stderr });
                        });
                });
        });
}

// The process survived and got to the end; then, nothing it checked was violated.
function checkRun(t, run, mode)
{
    const complete = run.lines.find(l => l.complete);
    const violations = run.lines.filter(l => l.violation).map(l => l.violation);
    for (const note of run.lines.filter(l => l.note))
    {
        t.diagnostic(note.note);
    }
    if (complete)
    {
        t.diagnostic(`${mode}: ${complete.ms} ms, stats ${JSON.stringify(complete.stats)}, ${complete.violations} violation(s) ${JSON.stringify(complete.violationKinds)}`);
    }
    const tail = `exit code ${run.code}, signal ${run.signal}; last lines ${JSON.stringify(run.lines.slice(-3))}; stderr tail: ${run.stderr.slice(-2000)}`;
    assert.equal(run.signal, null, `the fuzz process was not killed by a signal (${tail})`);
    assert.equal(run.code, 0, `the fuzz process exited 0 (${tail})`);
    assert.ok(complete, `the fuzz process printed its completion line (${tail})`);
    assert.equal(complete.mode, mode);
    assert.deepEqual(violations, [], `${complete.violations} violation(s) (at most 5 shown per kind): ${JSON.stringify(complete.violationKinds)}`);
    return complete;
}

describe("fuzz", { timeout: 300000 }, () =>
{
    let engine;
    before(async () =>
        {
            engine = await startEngine("dynalite");
            for (const [name, schema] of TABLES)
            {
                await engine.createTable(name, schema);
            }
        }
    );
    after(async () => engine && engine.stop());

    const engineJob = () => ({ endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials });

    it(`${CONFIGS} random configurations per kind either construct or throw a ValidationError`, async t =>
        {
            const run = await runFuzz({ mode: "config", seed: SEED, count: CONFIGS }, { timeoutMs: 120000 });
            const complete = checkRun(t, run, "config");
            assert.ok(complete.stats.constructed > 0 && complete.stats.validationErrors > 0, "both outcomes were exercised");
        }
    );

    it(`${IDS} random lock ids: every call settles once, asynchronously, with a lock or a coded Error`, async t =>
        {
            const run = await runFuzz({ mode: "ids", seed: SEED + 1, count: IDS, engine: engineJob() }, { timeoutMs: 150000 });
            const complete = checkRun(t, run, "ids");
            assert.ok(complete.stats.locks > 0, "some ids were acquired");
        }
    );

    it("call-order abuse, odd arguments and throwing callbacks: the library keeps its contract and keeps working", async t =>
        {
            const run = await runFuzz({ mode: "abuse", seed: SEED + 2, engine: engineJob() }, { timeoutMs: 120000, nodeArgs: ["--expose-gc"] });
            checkRun(t, run, "abuse");
        }
    );
});
