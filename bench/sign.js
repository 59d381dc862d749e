#!/usr/bin/env node
"use strict";

// CPU per signature of DynamoDB UpdateItem requests: aws-sigv4's request signer against the
// addon's PostSigner (src/store/sigv4.rs), measured by the Rust binary in bench/sign (a cargo
// workspace of its own, built in release into target/sign-bench), then set against the client
// CPU per heartbeat that `npm run bench` recorded in bench/results.json.
//
//   node bench/sign.js [--rounds N]      (npm run bench:sign)
//
// Nothing is contacted: the binary signs in memory.

const { spawnSync } = require("child_process");
const fs = require("fs");
const path = require("path");

const ROOT = path.join(__dirname, "..");

function main()
{
    const args = process.argv.slice(2);
    const rounds = args[0] === "--rounds" && /^\d+$/.test(args[1] || "") ? args[1] : "7";
    if (args.length && !(args.length === 2 && rounds === args[1]))
    {
        console.error("usage: node bench/sign.js [--rounds N]");
        return 2;
    }
    const run = spawnSync("nice", ["-n", "10", "cargo", "run", "--quiet", "--release",
        "--manifest-path", path.join("bench", "sign", "Cargo.toml"), "--", "--json", "--rounds", rounds], {
        cwd: ROOT,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"],
        env: Object.assign({}, process.env, { CARGO_TARGET_DIR: path.join(ROOT, "target", "sign-bench") }),
    });
    if (run.status !== 0)
    {
        console.error(`sign-bench failed (status ${run.status})`);
        return 1;
    }
    const figures = JSON.parse(run.stdout.trim().split("\n").pop());
    const heartbeats = heartbeatCpu();
    const ns = (v) => `${Math.round(v)} ns`;
    const pct = (part, whole) => `${(100 * part / whole).toFixed(1)}%`;

    console.log(`Thread CPU per call, median of ${figures.rounds} rounds (${figures.calls} calls in all).`);
    for (const b of figures.bodies)
    {
        console.log(`\nUpdateItem ${b.name} (${b.bytes} bytes)`);
        const line = (label, v) => console.log(`  ${label.padEnd(50)} ${ns(v).padStart(8)}`);
        line("request signer (aws-sigv4 http_request::sign):", b.requestSignerNs);
        line("PostSigner (day key kept):", b.postSignerNs);
        console.log(`  ratio ${(b.requestSignerNs / b.postSignerNs).toFixed(2)}, difference ${ns(b.requestSignerNs - b.postSignerNs)}`);
        line("deriving a signing key (request signer: per call):", b.signingKeyNs);
        line("building the http::Request:", b.buildRequestNs);
    }
    const beat = figures.bodies.find((b) => b.name === "heartbeat");
    if (!heartbeats.length)
    {
        console.log("\nbench/results.json has no client CPU per heartbeat: run `npm run bench` for the share of a heartbeat.");
        return 0;
    }
    console.log(`\nShare of the client CPU per heartbeat recorded in bench/results.json (${heartbeats.generatedAt}):`);
    for (const h of heartbeats)
    {
        console.log(`  ${h.label}: ${h.us.toPrecision(3)} µs per heartbeat; request signer ${pct(beat.requestSignerNs / 1000, h.us)}, `
            + `PostSigner ${pct(beat.postSignerNs / 1000, h.us)}, difference ${pct((beat.requestSignerNs - beat.postSignerNs) / 1000, h.us)}`);
    }
    return 0;
}

/** Ours' client CPU per heartbeat (µs) for each size of the held scenario, from bench/results.json. */
function heartbeatCpu()
{
    let results;
    try
    {
        results = JSON.parse(fs.readFileSync(path.join(__dirname, "results.json"), "utf8"));
    }
    catch (e)
    {
        return [];
    }
    const out = (results.rows || [])
        .filter((r) => /: client CPU per heartbeat \(µs\)$/.test(r.metric) && typeof r.ours === "number")
        .map((r) => ({ label: r.metric.replace(/: client CPU per heartbeat \(µs\)$/, ""), us: r.ours }));
    out.generatedAt = results.generatedAt;
    return out;
}

process.exitCode = main();
