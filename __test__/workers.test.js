"use strict";

// Worker pools replace their workers: the package must load, work and unload in any number of
// worker_threads Workers, one after another or overlapping, without the main thread having
// loaded it first. The Workers run in a child process, so a crash shows as its exit status.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const fs = require("node:fs");
const os = require("node:os");
const { spawn } = require("node:child_process");
const { selectedEngines, startEngine } = require("./engines.js");
const { binaryName } = require("../scripts/platform.js");

const root = path.join(__dirname, "..");

function runChild(script, args)
{
    return new Promise((resolve, reject) =>
    {
        const child = spawn(process.execPath, [path.join(__dirname, "support", script), ...args],
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
            const { code, signal, out } = await runChild("recycled-workers.js", [engine.endpoint, "workers"]);
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

// A copy of the package as npm installs it (its JavaScript and the addon built here) in `dir`.
function copyPackage(dir)
{
    for (const entry of ["index.js", "binding.js", "package.json", "lib", "scripts", binaryName()])
    {
        fs.cpSync(path.join(root, entry), path.join(dir, entry), { recursive: true });
    }
}

describe(`copies of the package in one process (${selectedEngines()[0]})`, () =>
{
    let engine;
    let dir;
    before(async () =>
    {
        engine = await startEngine(selectedEngines()[0]);
        await engine.createTable("copies", { partitionKey: "id" });
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "dynamodb-lock-native-copies-"));
    });
    after(async () =>
    {
        fs.rmSync(dir, { recursive: true, force: true });
        await (engine && engine.stop());
    });

    // Each copy is a shared object of its own to the dynamic loader. One that asks for static
    // TLS space (an allocator built for the initial-exec model) takes it out of glibc's small
    // reserve, which two copies of this addon used up.
    it("four installed copies each load their own addon and take and release a lock", { timeout: 120000 }, async () =>
    {
        const copies = [0, 1, 2, 3].map(i => path.join(dir, `app${i}`, "node_modules", "dynamodb-lock-native"));
        copies.forEach(copyPackage);
        const { code, signal, out } = await runChild("copies.js", [engine.endpoint, "copies", ...copies]);
        assert.equal(signal, null, `the process died of ${signal}:\n${out}`);
        assert.equal(code, 0, out);
        const reports = out.split("\n").filter(l => l.startsWith("{")).map(l => JSON.parse(l));
        assert.deepEqual(reports, copies.map((_, i) => ({ copy: i, fencingToken: 1 })), out);
    });
});
