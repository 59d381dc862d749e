"use strict";

// `npm test`: build the addon, run the Rust checks and unit tests, then every node:test
// suite against the built addon and the local DynamoDB engines.

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { hostTriple } = require("./platform.js");

const root = path.join(__dirname, "..");
process.env.AWS_EC2_METADATA_DISABLED = "true";

function run(cmd, args, extraEnv)
{
    console.log(`\n> ${cmd} ${args.join(" ")}`);
    const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", env: Object.assign({}, process.env, extraEnv) });
    if (r.status !== 0)
    {
        console.error(`failed: ${cmd} ${args.join(" ")} (${r.error ? r.error.message : `exit ${r.status}`})`);
        process.exit(r.status || 1);
    }
}

const napiCli = path.join(root, "node_modules", "@napi-rs", "cli", "dist", "cli.js");
const buildArgs = ["build", "--platform", "--js", "binding.js", "--dts", "binding.d.ts"];
if (!process.env.DEBUG_BUILD)
{
    buildArgs.push("--release");
}
run(process.execPath, [napiCli, ...buildArgs]);

// Share napi's target directory layout so the unit tests reuse its dependency builds.
const triple = hostTriple();
run("cargo", ["fmt", "--check"]);
// The workspace: the addon and the protocol's core (crates/core).
run("cargo", ["clippy", "--workspace", "--target", triple, "--all-targets", "--", "-D", "warnings"]);
run("cargo", ["test", "--workspace", "--target", triple]);
// The protocol's model checker: its bounded run (`npm run model` runs the full one).
const model = ["--manifest-path", path.join("model", "Cargo.toml")];
run("cargo", ["fmt", "--check", ...model]);
run("cargo", ["clippy", "--release", ...model, "--all-targets", "--", "-D", "warnings"], { CARGO_TARGET_DIR: path.join(root, "target", "model") });
run("cargo", ["test", "--release", ...model], { CARGO_TARGET_DIR: path.join(root, "target", "model") });

const suites = fs.readdirSync(path.join(root, "__test__"))
    .filter(f => f.endsWith(".test.js") || f.endsWith(".test.mjs"))
    .filter(f => !process.env.TEST_ONLY || process.env.TEST_ONLY.split(",").some(p => f.includes(p)))
    .sort()
    .map(f => path.join("__test__", f));
run(process.execPath, ["--test", "--test-concurrency=1", ...suites]);
