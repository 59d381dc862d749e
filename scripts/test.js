"use strict";

// `npm test`: build the addon, run the Rust checks and unit tests, then every node:test
// suite against the built addon and the local DynamoDB engines, then the README's blocks and
// the core suites on Node.js 22 and 24.

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { hostTriple, binaryName } = require("./platform.js");
const { napiBuildArgs, recordBuild, builtFromCurrentSources } = require("./addon-build.js");
const { preferMachineNode } = require("./machine-node.js");

const root = path.join(__dirname, "..");
process.env.AWS_EC2_METADATA_DISABLED = "true";

// The full suite runs on the machine's Node.js, not on a devDependency's (scripts/machine-node.js).
const machineNode = preferMachineNode();

// How long each step took, printed after it and summed up at the end.
const started = Date.now();
const took = [];

function seconds(ms)
{
    return `${(ms / 1000).toFixed(0)} s`;
}

function run(cmd, args, extraEnv, label)
{
    console.log(`\n> ${cmd} ${args.join(" ")}`);
    const t0 = Date.now();
    const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", env: Object.assign({}, process.env, extraEnv) });
    took.push([label, Date.now() - t0]);
    console.log(`< ${label}: ${seconds(Date.now() - t0)}`);
    if (r.status !== 0)
    {
        console.error(`failed: ${cmd} ${args.join(" ")} (${r.error ? r.error.message : `exit ${r.status}`})`);
        process.exit(r.status || 1);
    }
}

process.on("exit", code =>
{
    if (code === 0)
    {
        console.log(`\nnpm test took ${seconds(Date.now() - started)}:`);
        for (const [name, ms] of took)
        {
            console.log(`  ${seconds(ms).padStart(6)}  ${name}`);
        }
    }
});

const napiCli = path.join(root, "node_modules", "@napi-rs", "cli", "dist", "cli.js");
const buildArgs = napiBuildArgs(Boolean(process.env.DEBUG_BUILD));
if (builtFromCurrentSources(buildArgs))
{
    // The install hook (or the last run) built it from these very sources (scripts/addon-build.js).
    console.log(`\n> ${binaryName()} was built from the current sources with \`napi ${buildArgs.join(" ")}\`: not built again`);
}
else
{
    run(machineNode, [napiCli, ...buildArgs], {}, `addon build (napi, ${process.env.DEBUG_BUILD ? "debug" : "release"})`);
    recordBuild(buildArgs);
}

// Share napi's target directory layout so the unit tests reuse its dependency builds.
const triple = hostTriple();
run("cargo", ["fmt", "--check"], {}, "cargo fmt");
// The workspace: the addon, the protocol's core (crates/core) and its DynamoDB requests (crates/wire).
run("cargo", ["clippy", "--workspace", "--target", triple, "--all-targets", "--", "-D", "warnings"], {}, "cargo clippy (addon, core, wire)");
run("cargo", ["test", "--workspace", "--target", triple], {}, "cargo test (addon, core, wire)");
// The protocol's model checker: its bounded run (`npm run model` runs the full one).
const model = ["--manifest-path", path.join("model", "Cargo.toml")];
run("cargo", ["fmt", "--check", ...model], {}, "cargo fmt (model)");
run("cargo", ["clippy", "--release", ...model, "--all-targets", "--", "-D", "warnings"], { CARGO_TARGET_DIR: path.join(root, "target", "model") }, "cargo clippy (model)");
run("cargo", ["test", "--release", ...model], { CARGO_TARGET_DIR: path.join(root, "target", "model") }, "model checker: unit tests and bounded run");
// The signing benchmark (`npm run bench:sign`) compiles the addon's signer: it must keep
// compiling, formatted and lint-clean, though it runs only on demand.
const signBench = ["--manifest-path", path.join("bench", "sign", "Cargo.toml")];
run("cargo", ["fmt", "--check", ...signBench], {}, "cargo fmt (sign bench)");
run("cargo", ["clippy", ...signBench, "--all-targets", "--", "-D", "warnings"], { CARGO_TARGET_DIR: path.join(root, "target", "sign-bench") }, "cargo clippy (sign bench)");
// A short run of the seeded simulator (`npm run simulate` takes --seed and --steps).
run(process.execPath, [path.join("scripts", "simulate.js"), "--seed", "1", "--steps", "2000000"], {}, "simulator, 2,000,000 steps");

const suites = fs.readdirSync(path.join(root, "__test__"))
    .filter(f => f.endsWith(".test.js") || f.endsWith(".test.mjs"))
    .filter(f => !process.env.TEST_ONLY || process.env.TEST_ONLY.split(",").some(p => f.includes(p)))
    .sort()
    .map(f => path.join("__test__", f));

// `node --test` without files would run every suite: TEST_ONLY=node-versions runs none here.
// Three suites at a time on two cores: the suites mostly wait for leases and timers (two at a
// time kept the machine about half idle); three took 391 s where two took 529 s here.
if (suites.length > 0)
{
    run(machineNode, ["--test", "--test-concurrency=3", ...suites], {}, `node --test: ${suites.length} suites`);
}

// The other Node.js versions users run (scripts/node-versions.js: the README's example and the
// core suites on dynalite), after the main suites: beside them, on two cores, they slowed the
// main suites by about as much as they took.
if (!process.env.TEST_ONLY || process.env.TEST_ONLY.split(",").includes("node-versions"))
{
    run(machineNode, [path.join(__dirname, "node-versions.js"), "node22", "node24"], {}, "Node.js 22 and 24: README example and core suites");
}
