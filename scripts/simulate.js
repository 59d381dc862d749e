"use strict";

// `npm run simulate -- [--seed N] [--steps M]`: builds the model crate (model/, release) and runs
// its seeded simulator: random runs of the core's heartbeat machine against a waiter, with
// pauses and late and lost answers, first as the protocol ships, then for each broken variant,
// which a run must catch. A failing run replays exactly from its seed.

const path = require("path");
const { spawnSync } = require("child_process");

const root = path.join(__dirname, "..");
const env = Object.assign({}, process.env, { CARGO_TARGET_DIR: path.join(root, "target", "model") });
const r = spawnSync("cargo", ["run", "--quiet", "--release", "--bin", "simulate", "--manifest-path", path.join(root, "model", "Cargo.toml"), "--", ...process.argv.slice(2)],
    { cwd: root, stdio: "inherit", env });
if (r.error)
{
    console.error(`cargo: ${r.error.message}`);
}
process.exit(r.status === null ? 1 : r.status);
