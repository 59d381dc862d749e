"use strict";

// Preloaded (`--require`) to make this Linux look like another: FAKE_LIBC "musl" or "glibc"
// answers both ways the loader and the install hook detect musl (/usr/bin/ldd and Node's
// report), FAKE_ARCH replaces process.arch. Every require of a binary (a `.node` file or a
// platform package) is recorded, and printed as JSON on exit: what the loader tried, in order.

const fs = require("fs");
const Module = require("module");

const libc = process.env.FAKE_LIBC;
if (libc)
{
    const readFileSync = fs.readFileSync;
    fs.readFileSync = function(file, ...rest)
    {
        if (file === "/usr/bin/ldd")
        {
            const text = libc === "musl" ? "#!/bin/sh\n# musl libc (x86_64)\n" : "#!/bin/bash\n# GNU C Library (Debian GLIBC)\n";
            return rest[0] ? text : Buffer.from(text);
        }
        return readFileSync.call(this, file, ...rest);
    };
    const getReport = process.report.getReport.bind(process.report);
    process.report.getReport = (...args) =>
    {
        const report = getReport(...args);
        if (libc === "musl")
        {
            delete report.header.glibcVersionRuntime;
            report.sharedObjects = ["/lib/ld-musl-x86_64.so.1"];
        }
        return report;
    };
}
if (process.env.FAKE_ARCH)
{
    Object.defineProperty(process, "arch", { value: process.env.FAKE_ARCH });
}

const tried = [];
const load = Module._load;
Module._load = function(request, ...rest)
{
    if (/^(\.\/)?dynamodb-lock-native[.-]/.test(request) && !request.endsWith("/package.json"))
    {
        tried.push(request);
    }
    return load.call(this, request, ...rest);
};
process.on("exit", () => process.stdout.write(`\nTRIED ${JSON.stringify(tried)}\n`));
