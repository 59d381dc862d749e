"use strict";

// The napi-rs name of this platform's binary (dynamodb-lock-native.<platform>.node), and what
// a build from source needs.

const fs = require("fs");
const path = require("path");

function isMusl()
{
    if (process.platform !== "linux")
    {
        return false;
    }
    try
    {
        return !process.report.getReport().header.glibcVersionRuntime;
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

module.exports = { binaryName, platformSuffix, hostTriple, rustNeeded };
