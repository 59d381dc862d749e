"use strict";

// `npm run model`: builds the protocol's model checker (model/, release) and runs it. It
// explores every reachable state of the FailClosed, FailOpen and Fifo models, checks each broken
// variant for a counterexample, prints a summary and ends with one JSON line. Arguments are
// passed on (`npm run model -- --bounded` runs the test suite's smaller configurations).

const path = require("path");
const { spawnSync } = require("child_process");

const root = path.join(__dirname, "..");
const env = Object.assign({}, process.env, { CARGO_TARGET_DIR: path.join(root, "target", "model") });
const r = spawnSync("cargo", ["run", "--quiet", "--release", "--bin", "model", "--manifest-path", path.join(root, "model", "Cargo.toml"), "--", ...process.argv.slice(2)],
    { cwd: root, stdio: "inherit", env });
if (r.error)
{
    console.error(`cargo: ${r.error.message}`);
}
process.exit(r.status === null ? 1 : r.status);
