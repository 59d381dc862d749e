"use strict";

// `npm run build:targets`: builds the addon for every target of `napi.targets` that this
// machine can build, each as scripts/targets.js says (the release workflow runs this same
// script, one target per job), installing what each needs first (scripts/toolchains.js).
// Then prints one line per target: built (the binary the release ships, made the release's
// way), linked (a binary made here by another linker than the release's) or checked (compiled,
// not linked), its size, and what it needs of the C library; and fails if a glibc binary needs
// a newer glibc than the documentation promises (GLIBC_PROMISED).
//
//   node scripts/build-targets.js [--target TRIPLE]... [--out DIR]
//
// --target builds only those targets (default: all); --out is where the .node files go
// (default: target/targets). On the target's own platform (macOS, Windows) a target is built
// natively.

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { parseArgs } = require("util");
const { TARGETS, GLIBC_PROMISED, MACOS_DEPLOYMENT_TARGET } = require("./targets.js");
const toolchains = require("./toolchains.js");

const root = path.join(__dirname, "..");
const napiCli = path.join(root, "node_modules", "@napi-rs", "cli", "dist", "cli.js");
const BINARY = "dynamodb-lock-native";
// A target directory of their own: the cross toolchains' compilers and flags differ from a
// development build's, and would otherwise rebuild each other's artifacts in target/.
const TARGET_DIR = path.join(root, "target", "cross");

function say(line)
{
    console.log(`[build:targets] ${line}`);
}

function attempt(cmd, args, env)
{
    say(`${cmd === process.execPath ? "node" : cmd} ${args.join(" ")}`);
    const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", env: Object.assign({}, process.env, env) });
    return !r.error && r.status === 0;
}

function must(cmd, args, env)
{
    if (!attempt(cmd, args, env))
    {
        throw new Error(`${path.basename(cmd)} ${args.join(" ")} failed`);
    }
}

// Whether this host builds `target` natively: macOS builds both its architectures with
// Apple's toolchain, Windows its own. (Linux targets always take their cross toolchain, which
// fixes the glibc they need.)
function nativeTo(target)
{
    const os = target.platform.split("-")[0];
    return os !== "linux" && os === process.platform;
}

// The napi build of `target` into `out`, with `extra` flags and environment; `spelling` is the
// target as cargo-zigbuild is given it (with a glibc version).
function napiBuild(target, out, flags, env, spelling)
{
    must(process.execPath, [napiCli, "build", "--platform", "--release", "--target", spelling || target.triple, ...flags,
        "--target-dir", TARGET_DIR, "--output-dir", out, "--js", "binding.js", "--dts", "binding.d.ts"], env);
    return path.join(out, `${BINARY}.${target.platform}.node`);
}

// Environment for every build: the release's.
function releaseEnv(target)
{
    const env = { MACOSX_DEPLOYMENT_TARGET: MACOS_DEPLOYMENT_TARGET };
    if (target.triple.endsWith("-windows-msvc"))
    {
        // A static C runtime: no Visual C++ redistributable needed where it runs.
        env.RUSTFLAGS = [process.env.RUSTFLAGS, "-C target-feature=+crt-static"].filter(Boolean).join(" ");
    }
    if (target.triple.endsWith("-musl"))
    {
        // A Node.js addon on musl links musl dynamically, as Node.js itself does: a static C
        // runtime inside the addon would be a second libc in the process.
        env.RUSTFLAGS = [process.env.RUSTFLAGS, "-C target-feature=-crt-static"].filter(Boolean).join(" ");
    }
    return env;
}

// The `links` names of the crates whose build scripts compile C for the target: aws-lc-sys
// (its name carries its version, read from Cargo.lock) and libmimalloc-sys.
function cLinks()
{
    const lock = fs.readFileSync(path.join(root, "Cargo.lock"), "utf8");
    const m = /name = "aws-lc-sys"\nversion = "([^"]+)"/.exec(lock);
    return { awsLc: m ? `aws_lc_${m[1].replace(/[.-]/g, "_")}` : undefined, mimalloc: "mimalloc" };
}

// `cargo check` of `target`: the Rust code, every crate's, compiled for the target. The C of
// aws-lc and mimalloc is not compiled: their build scripts need the target's own system headers
// (macOS's SDK, MSVC's), which cannot be had here, so cargo is told what those scripts would
// say instead (aws-lc's portable bindings); the release compiles them on the target's platform.
function check(target)
{
    const links = cLinks();
    const key = `target.${target.triple}`;
    const overrides = [`${key}.${links.mimalloc}.rustc-link-lib=["mimalloc"]`];
    if (links.awsLc)
    {
        // aws-lc-rs's build script reads the include folder aws-lc-sys's would name.
        overrides.push(`${key}.${links.awsLc}.rustc-cfg=["universal"]`, `${key}.${links.awsLc}.rustc-link-lib=["${links.awsLc}"]`,
            `${key}.${links.awsLc}.include="${path.join(TARGET_DIR, "no-aws-lc-include")}"`);
    }
    must("cargo", ["check", "--release", "--lib", "--target", target.triple, "--target-dir", TARGET_DIR,
        ...overrides.flatMap(o => ["--config", o])], releaseEnv(target));
}

// Builds (or checks) `target`; returns { result, file, seconds, how }.
function buildOne(target, out)
{
    const started = Date.now();
    toolchains.rustTarget(target.triple);
    let result, file, how;
    if (nativeTo(target))
    {
        how = "napi build (native)";
        file = napiBuild(target, out, [], releaseEnv(target));
        result = "built";
    }
    else if (process.platform !== "linux")
    {
        throw new Error(`${target.triple} is built on Linux or on its own platform, not on ${process.platform}`);
    }
    else if (target.how === "zig-glibc")
    {
        how = `napi build -x (zig, glibc ${GLIBC_PROMISED})`;
        file = napiBuild(target, out, ["-x"], Object.assign(releaseEnv(target), toolchains.zigEnv()), `${target.triple}.${GLIBC_PROMISED}`);
        result = "built";
    }
    else if (target.how === "zig")
    {
        how = "napi build -x (zig)";
        file = napiBuild(target, out, ["-x"], Object.assign(releaseEnv(target), toolchains.zigEnv()));
        result = "built";
    }
    else if (target.how === "zig-or-check" && !process.env.SDKROOT)
    {
        // zig compiles for macOS, but links the frameworks the addon needs (Security and
        // CoreFoundation, for the system's certificates) only from a macOS SDK.
        say(`${target.triple}: no macOS SDK (SDKROOT) to link against: checking it`);
        how = "cargo check (Rust; no macOS SDK)";
        check(target);
        result = "checked";
    }
    else if (target.how === "zig-or-check")
    {
        try
        {
            how = "napi build -x (zig)";
            file = napiBuild(target, out, ["-x"], Object.assign(releaseEnv(target), toolchains.zigEnv()));
            result = "linked";
        }
        catch (err)
        {
            say(`${target.triple}: zig could not link it (${err.message}); checking it instead`);
            how = "cargo check (Rust)";
            check(target);
            result = "checked";
            file = undefined;
        }
    }
    else
    {
        how = "cargo check (Rust)";
        check(target);
        result = "checked";
    }
    return { result, file, how, seconds: Math.round((Date.now() - started) / 1000) };
}

// What a binary needs of the C library: for ELF, the newest GLIBC_ symbol version (objdump -T)
// or musl; otherwise nothing this machine can read.
function libcNeeds(file, triple)
{
    if (!file || !triple.includes("-linux-"))
    {
        return { text: "-" };
    }
    const dump = spawnSync("objdump", ["-T", file], { encoding: "utf8", maxBuffer: 64 << 20 });
    const versions = new Set();
    let symbols = "";
    if (!dump.error && dump.status === 0)
    {
        symbols = dump.stdout;
    }
    else
    {
        // An objdump without this architecture: readelf reads any ELF.
        const elf = spawnSync("readelf", ["--dyn-syms", "-W", file], { encoding: "utf8", maxBuffer: 64 << 20 });
        symbols = elf.stdout || "";
    }
    for (const m of symbols.matchAll(/GLIBC_(\d+(?:\.\d+)+)/g))
    {
        versions.add(m[1]);
    }
    const needed = spawnSync("readelf", ["-d", "-W", file], { encoding: "utf8" }).stdout || "";
    const libs = [...needed.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map(m => m[1]);
    if (triple.endsWith("-musl"))
    {
        const musl = libs.find(l => /^libc\.so|musl/.test(l));
        return { text: musl ? `musl (${musl})` : `musl, static (needs: ${libs.join(", ") || "nothing"})`, libs };
    }
    const newest = [...versions].sort(compareVersions).pop();
    return { text: newest ? `glibc ${newest}` : "no glibc symbols", glibc: newest, libs, symbols };
}

function compareVersions(a, b)
{
    const x = a.split(".").map(Number), y = b.split(".").map(Number);
    for (let i = 0; i < Math.max(x.length, y.length); i++)
    {
        if ((x[i] || 0) !== (y[i] || 0))
        {
            return (x[i] || 0) - (y[i] || 0);
        }
    }
    return 0;
}

// The symbols of `symbols` (objdump -T) that need a glibc newer than `limit`.
function tooNew(symbols, limit)
{
    return symbols.split("\n")
        .map(l => /GLIBC_(\d+(?:\.\d+)+)\)?\s+(\S+)\s*$/.exec(l))
        .filter(m => m && compareVersions(m[1], limit) > 0)
        .map(m => `${m[2]}@GLIBC_${m[1]}`);
}

function mib(bytes)
{
    return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

function table(rows)
{
    const head = ["target", "result", "size", "C library needed", "how", "time"];
    const lines = [head, ...rows.map(r => [r.triple, r.result, r.size, r.libc, r.how, r.time])];
    const widths = head.map((_, i) => Math.max(...lines.map(l => String(l[i]).length)));
    return lines.map(l => l.map((c, i) => String(c).padEnd(widths[i])).join("  ").trimEnd()).join("\n");
}

function main(argv)
{
    const { values } = parseArgs({ args: argv, options: {
        target: { type: "string", multiple: true },
        out: { type: "string", default: path.join("target", "targets") },
    } });
    const chosen = values.target ? values.target.map(t =>
    {
        const found = TARGETS.find(x => x.triple === t);
        if (!found)
        {
            throw new Error(`unknown target ${t}: napi.targets are ${TARGETS.map(x => x.triple).join(", ")}`);
        }
        return found;
    }) : TARGETS;
    const out = path.resolve(root, values.out);
    fs.mkdirSync(out, { recursive: true });
    const rows = [];
    const problems = [];
    for (const target of chosen)
    {
        let r;
        try
        {
            r = buildOne(target, out);
        }
        catch (err)
        {
            say(`${target.triple} FAILED: ${err.message}`);
            rows.push({ triple: target.triple, result: "FAILED", size: "-", libc: "-", how: target.how, time: "-" });
            problems.push(`${target.triple}: ${err.message}`);
            continue;
        }
        const libc = libcNeeds(r.file, target.triple);
        if (libc.glibc && compareVersions(libc.glibc, GLIBC_PROMISED) > 0)
        {
            problems.push(`${target.triple} needs glibc ${libc.glibc}, more than the ${GLIBC_PROMISED} promised: ${tooNew(libc.symbols, GLIBC_PROMISED).join(", ")}`);
        }
        if (target.triple.endsWith("-musl") && !/^musl \(/.test(libc.text))
        {
            problems.push(`${target.triple} does not link musl dynamically: ${libc.text}`);
        }
        rows.push({ triple: target.triple, result: r.result, size: r.file ? mib(fs.statSync(r.file).size) : "-",
            libc: libc.text, how: r.how, time: `${r.seconds} s` });
    }
    console.log(`\n${table(rows)}\n`);
    console.log(`glibc promised (README.md, docs/lambda.md): ${GLIBC_PROMISED} or newer. Binaries in ${path.relative(root, out) || "."}/.`);
    if (problems.length > 0)
    {
        console.error(`\n${problems.map(p => `problem: ${p}`).join("\n")}`);
        process.exitCode = 1;
    }
    return rows;
}

if (require.main === module)
{
    try
    {
        main(process.argv.slice(2));
    }
    catch (err)
    {
        console.error(`build:targets: ${err.message}`);
        process.exitCode = 1;
    }
}

module.exports = { buildOne, libcNeeds, main };
