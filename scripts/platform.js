"use strict";

// The napi-rs name of this platform's binary: dynamodb-lock-native.<platform>.node

const fs = require("fs");

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

module.exports = { binaryName, platformSuffix, hostTriple };
