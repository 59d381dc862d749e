#!/usr/bin/env node
"use strict";

// Cold start, bundled and not: a fresh Node process requires the package and acquires (then
// releases) a FailClosed lock, as a Lambda function's first invocation does. Measured from
// inside the process: `require` alone, and `require` plus the first acquisition. Three forms
// of one handler: the package from node_modules, an esbuild bundle with --loader:.node=copy,
// and one with --loader:.node=file, each run from a directory that is not the bundle's.
//
//   node bench/cold-start.js [--runs N]      (default 21; medians are printed)
//
// Nothing but loopback is contacted: dynalite listens on 127.0.0.1, dummy static credentials.

process.env.AWS_EC2_METADATA_DISABLED = "true";
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");
const esbuild = require("esbuild");
const { startEngine } = require("../__test__/engines.js");
const { binaryName } = require("../scripts/platform.js");

const root = path.join(__dirname, "..");
const runsAt = process.argv.indexOf("--runs");
const RUNS = runsAt > 0 ? Math.max(1, Math.min(201, Number(process.argv[runsAt + 1]) || 21)) : 21;

const HANDLER = `
const t0 = process.hrtime.bigint();
const DynamoDBLockClient = require("dynamodb-lock-native");
const t1 = process.hrtime.bigint();
const e = JSON.parse(process.argv[2]);
const client = new DynamoDBLockClient.FailClosed({
    dynamodb: { endpoint: e.endpoint, region: e.region, credentials: e.credentials },
    lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50, retryCount: 0,
});
client.acquireLock("cold-" + process.pid).then(async lock =>
{
    const t2 = process.hrtime.bigint();
    await lock.release();
    console.log(JSON.stringify({ requireMs: Number(t1 - t0) / 1e6, firstAcquireMs: Number(t2 - t0) / 1e6 }));
});
`;

const median = xs => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main()
{
    const engine = await startEngine("dynalite");
    const app = fs.mkdtempSync(path.join(os.tmpdir(), "dln-cold-"));
    try
    {
        await engine.createTable("locks", { partitionKey: "id" });
        const pkg = path.join(app, "node_modules", "dynamodb-lock-native");
        for (const f of ["package.json", "index.js", "index.mjs", "binding.js", "lib", "scripts", binaryName()])
        {
            fs.cpSync(path.join(root, f), path.join(pkg, f), { recursive: true });
        }
        fs.writeFileSync(path.join(app, "handler.js"), HANDLER);
        const forms = { "node_modules (not bundled)": path.join(app, "handler.js") };
        for (const loader of ["copy", "file"])
        {
            const outdir = path.join(app, `esbuild-${loader}`);
            await esbuild.build({ entryPoints: [path.join(app, "handler.js")], bundle: true, platform: "node", outdir, loader: { ".node": loader }, logLevel: "silent" });
            forms[`esbuild --loader:.node=${loader}`] = path.join(outdir, "handler.js");
        }
        const event = JSON.stringify({ endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials });
        const rows = [];
        for (const [form, file] of Object.entries(forms))
        {
            const samples = [];
            for (let i = 0; i < RUNS; i++)
            {
                const r = spawnSync(process.execPath, [file, event], { cwd: os.tmpdir(), encoding: "utf8", timeout: 30000 });
                if (r.status !== 0)
                {
                    throw new Error(`${form}: exit ${r.status}: ${r.stderr}`);
                }
                samples.push(JSON.parse(r.stdout));
            }
            rows.push([form, median(samples.map(s => s.requireMs)), median(samples.map(s => s.firstAcquireMs))]);
        }
        console.log(`Node ${process.version}, ${RUNS} runs each, medians:\n`);
        console.log("| form | require (ms) | require + first acquire (ms) |");
        console.log("|---|---:|---:|");
        for (const [form, req, first] of rows)
        {
            console.log(`| ${form} | ${req.toFixed(1)} | ${first.toFixed(1)} |`);
        }
    }
    finally
    {
        fs.rmSync(app, { recursive: true, force: true });
        await engine.stop();
    }
}

main().catch(e =>
{
    console.error(e);
    process.exitCode = 1;
});
