"use strict";

// Install hook. The native addon comes from one of two places, the ones the generated loader
// (binding.js) tries: a `.node` file in this package (a development build, or one this hook
// built before), or the platform's package `dynamodb-lock-native-<platform>`, an optional
// dependency that npm installs beside this one where it matches. Only when neither is there
// does the hook build the addon from source, which needs Rust and a C compiler and takes
// minutes. DYNAMODB_LOCK_NATIVE_SKIP_BUILD=1 skips the build whatever is there.

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { binaryName, platformSuffix, rustNeeded } = require("./platform.js");

const root = path.join(__dirname, "..");
const target = path.join(root, binaryName());
const platformPackage = `dynamodb-lock-native-${platformSuffix()}`;
// Measured on two cores from an empty target directory.
const BUILD_TIME = "about 4 minutes";

function say(line)
{
    console.log(`dynamodb-lock-native: ${line}`);
}

function fail(line, status)
{
    console.error(`dynamodb-lock-native: ${line}`);
    process.exit(status || 1);
}

// The installed platform package, or null. Resolving its `main` proves the binary file is
// there, not just its package.json.
function installedPlatformPackage()
{
    try
    {
        return require.resolve(platformPackage);
    }
    catch (_)
    {
        return null;
    }
}

function run(cmd, args)
{
    say(`${cmd === process.execPath ? "node" : cmd} ${args.join(" ")}`);
    const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", shell: process.platform === "win32" });
    if (r.error && r.error.code === "ENOENT")
    {
        fail(`${cmd} was not found on PATH. Install ${rustNeeded()} (https://rustup.rs) and a C compiler, `
            + "then run `npm rebuild dynamodb-lock-native`.");
    }
    if (r.error)
    {
        fail(`could not run ${cmd}: ${r.error.message}`);
    }
    if (r.status !== 0)
    {
        fail(`the build from source failed (${cmd} exited with ${r.status === null ? r.signal : r.status}).`, r.status);
    }
}

if (process.env.DYNAMODB_LOCK_NATIVE_SKIP_BUILD)
{
    say("DYNAMODB_LOCK_NATIVE_SKIP_BUILD is set: not looking for or building the native addon.");
    process.exit(0);
}
if (fs.existsSync(target))
{
    say(`using ${target}`);
    process.exit(0);
}
const prebuilt = installedPlatformPackage();
if (prebuilt)
{
    say(`using the prebuilt binary of ${platformPackage}: ${prebuilt}`);
    process.exit(0);
}

say(`no prebuilt binary for ${platformSuffix()}: looked for ${target} and for the package ${platformPackage} `
    + "(an optional dependency, left out where it does not match the platform or with --omit=optional).");
say(`building from source (needs ${rustNeeded()} and a C compiler); `
    + `a release build takes ${BUILD_TIME}.`);

const napiCli = path.join(root, "node_modules", "@napi-rs", "cli", "dist", "cli.js");
if (fs.existsSync(napiCli))
{
    // A development checkout: its dev dependencies include the napi CLI, which also
    // regenerates binding.js and binding.d.ts.
    const { napiBuildArgs, recordBuild } = require("./addon-build.js");
    run(process.execPath, [napiCli, ...napiBuildArgs(false)]);
    recordBuild(napiBuildArgs(false));
}
else
{
    // Installed from a tarball or git: no dev dependencies, so build with cargo alone.
    run("cargo", ["build", "--release", "--lib"]);
    const lib = { darwin: "libdynamodb_lock_native.dylib", win32: "dynamodb_lock_native.dll" }[process.platform]
        || "libdynamodb_lock_native.so";
    const targetDir = process.env.CARGO_TARGET_DIR ? path.resolve(root, process.env.CARGO_TARGET_DIR) : path.join(root, "target");
    fs.copyFileSync(path.join(targetDir, "release", lib), target);
}
say(`built ${target}`);
