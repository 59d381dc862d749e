"use strict";

// What the development build of the addon was made from: a digest of the Rust sources (src/,
// crates/, the manifests and lockfile, build.rs, toolchain and cargo configuration files),
// the toolchain (`rustc -vV`), the napi CLI's version, the build's environment (RUSTFLAGS,
// CARGO_PROFILE_*, DEBUG_BUILD, ...) and the .node file itself, recorded after each build by
// the install hook and by `npm test`. `npm test` builds again only when the digest differs:
// the napi CLI marks the first build of a fresh checkout with an environment variable that the
// next build does not set, so cargo would otherwise re-link the whole addon (about 45 s on two
// cores) although nothing changed.

const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const { spawnSync } = require("child_process");
const { binaryName } = require("./platform.js");

const root = path.join(__dirname, "..");
const STAMP = path.join(root, "target", "addon-build.json");
const SOURCE_DIRS = ["src", "crates"];
const SOURCE_FILES = ["build.rs", "Cargo.toml", "Cargo.lock", "rust-toolchain", "rust-toolchain.toml",
    path.join(".cargo", "config"), path.join(".cargo", "config.toml")];
const ENV = /^(RUSTFLAGS|RUSTC|RUSTC_WRAPPER|CARGO_BUILD_.*|CARGO_ENCODED_RUSTFLAGS|CARGO_PROFILE_.*|CARGO_TARGET_.*|DEBUG_BUILD|NAPI_.*)$/;

function filesUnder(dir, out)
{
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }))
    {
        const p = path.join(dir, entry.name);
        if (entry.isDirectory())
        {
            filesUnder(p, out);
        }
        else if (entry.isFile())
        {
            out.push(p);
        }
    }
    return out;
}

// The digest of everything the build depends on, with `args` (the build's arguments); null
// when the toolchain cannot be asked or the .node file is missing.
function digest(args)
{
    const binary = path.join(root, binaryName());
    const rustc = spawnSync("rustc", ["-vV"], { cwd: root, encoding: "utf8" });
    if (rustc.status !== 0 || !fs.existsSync(binary))
    {
        return null;
    }
    const hash = crypto.createHash("sha256");
    const add = (name, value) => hash.update(`${name}\0${value.length}\0`).update(value);
    add("args", args.join(" "));
    add("rustc", rustc.stdout);
    const napi = path.join(root, "node_modules", "@napi-rs", "cli", "package.json");
    add("napi", fs.existsSync(napi) ? JSON.parse(fs.readFileSync(napi, "utf8")).version : "");
    for (const key of Object.keys(process.env).filter(k => ENV.test(k)).sort())
    {
        add(`env ${key}`, process.env[key]);
    }
    const files = SOURCE_DIRS.flatMap(d => fs.existsSync(path.join(root, d)) ? filesUnder(path.join(root, d), []) : [])
        .concat(SOURCE_FILES.map(f => path.join(root, f)).filter(f => fs.existsSync(f)))
        .sort();
    for (const f of files)
    {
        add(path.relative(root, f), fs.readFileSync(f));
    }
    add("binary", fs.readFileSync(binary));
    return hash.digest("hex");
}

// The napi CLI's arguments for the development build (release unless `debug`), which also
// regenerates binding.js and binding.d.ts.
function napiBuildArgs(debug)
{
    return ["build", "--platform", ...(debug ? [] : ["--release"]), "--js", "binding.js", "--dts", "binding.d.ts"];
}

// Records that the .node file was just built from the current sources with `args`. Where no
// digest can be made, the record matches nothing; where none can be written, an earlier one
// matches only the sources and .node file it was made of. Either way, nothing fails.
function recordBuild(args)
{
    try
    {
        const d = digest(args);
        fs.mkdirSync(path.dirname(STAMP), { recursive: true });
        fs.writeFileSync(STAMP, JSON.stringify({ digest: d }) + "\n");
    }
    catch (_)
    {
        // The next `npm test` builds unless that earlier record still matches.
    }
}

// Whether the .node file is the one a build with `args` of the current sources made.
function builtFromCurrentSources(args)
{
    try
    {
        const recorded = JSON.parse(fs.readFileSync(STAMP, "utf8")).digest;
        return typeof recorded === "string" && recorded === digest(args);
    }
    catch (_)
    {
        return false;
    }
}

module.exports = { napiBuildArgs, recordBuild, builtFromCurrentSources };
