"use strict";

// Worker pools replace their workers: the package must load, work and unload in any number of
// worker_threads Workers, one after another or overlapping, without the main thread having
// loaded it first. The Workers run in a child process, so a crash shows as its exit status.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const { spawn } = require("node:child_process");
const { selectedEngines, startEngine } = require("./engines.js");

function runPool(engine, table)
{
    return new Promise((resolve, reject) =>
    {
        const child = spawn(process.execPath, [path.join(__dirname, "support", "recycled-workers.js"), engine.endpoint, table],
            { env: Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true" }) });
        let out = "";
        child.stdout.on("data", d => (out += d));
        child.stderr.on("data", d => (out += d));
        const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
        child.on("error", reject);
        child.on("exit", (code, signal) =>
        {
            clearTimeout(timer);
            resolve({ code, signal, out });
        });
    });
}

for (const name of selectedEngines())
{
    describe(`recycled worker threads (${name})`, () =>
    {
        let engine;
        before(async () =>
        {
            engine = await startEngine(name);
            await engine.createTable("workers", { partitionKey: "id" });
        });
        after(async () => engine && engine.stop());

        it("loads the package in 10 Workers one after another and 5 overlapping, each taking and releasing locks, also through a user object", async () =>
        {
            const { code, signal, out } = await runPool(engine, "workers");
            assert.equal(signal, null, `the process died of ${signal}:\n${out}`);
            assert.equal(code, 0, out);
            const reports = out.split("\n").filter(l => l.startsWith("{")).map(l => JSON.parse(l));
            assert.equal(reports.length, 15, out);
            for (const r of reports)
            {
                assert.ok(Number.isInteger(r.report.fencingToken) && r.report.fencingToken >= 1, JSON.stringify(r));
                assert.ok(r.report.held > 0 && r.report.held <= 2000, `a held lock has lease left: ${JSON.stringify(r)}`);
                assert.equal(r.report.objectToken, 1, JSON.stringify(r));
                assert.ok(r.report.objectHeartbeats >= 1, `heartbeats through the user object: ${JSON.stringify(r)}`);
            }
            assert.match(out, /all workers done/);
        });
    });
}
