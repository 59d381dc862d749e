"use strict";

// The napi-rs name of this platform's binary (dynamodb-lock-native.<platform>.node), and what
// a build from source needs.

const fs = require("fs");
const path = require("path");

// Whether this Linux runs on musl, decided as the generated loader (binding.js) decides, so
// that the install hook, a bundle and the loader agree on the binary: /usr/bin/ldd names musl;
// else Node's report (no glibc runtime, or a musl library loaded); else Alpine's release file.
function isMusl()
{
    if (process.platform !== "linux")
    {
        return false;
    }
    try
    {
        return fs.readFileSync("/usr/bin/ldd", "utf8").includes("musl");
    }
    catch (_)
    {
        // No ldd: ask the report.
    }
    try
    {
        const report = process.report.getReport();
        if (report.header && report.header.glibcVersionRuntime)
        {
            return false;
        }
        return (report.sharedObjects || []).some(f => f.includes("libc.musl-") || f.includes("ld-musl-"));
    }
    catch (_)
    {
        return fs.existsSync("/etc/alpine-release");
    }
}

function platformSuffix()
{
    const arch = process.arch;
    switch (process.platform)
    {
        case "linux":
            return `linux-${arch}-${isMusl() ? "musl" : "gnu"}`;
        case "win32":
            return `win32-${arch}-msvc`;
        default:
            return `${process.platform}-${arch}`;
    }
}

function binaryName()
{
    return `dynamodb-lock-native.${platformSuffix()}.node`;
}

function hostTriple()
{
    const out = require("child_process").execFileSync("rustc", ["-vV"], { encoding: "utf8" });
    const line = out.split("\n").find(l => l.startsWith("host: "));
    return line.slice("host: ".length).trim();
}

// "Rust 1.94 or newer": the crate's rust-version, read from the manifest the build uses.
function rustNeeded()
{
    try
    {
        const manifest = fs.readFileSync(path.join(__dirname, "..", "Cargo.toml"), "utf8");
        const m = /^rust-version\s*=\s*"([^"]+)"/m.exec(manifest);
        if (m)
        {
            return `Rust ${m[1]} or newer`;
        }
    }
    catch (_)
    {
        // Reported below as a recent Rust.
    }
    return "a recent Rust";
}

module.exports = { binaryName, platformSuffix, hostTriple, rustNeeded, isMusl };
