"use strict";

// Install hook: use a prebuilt binary when one is present (in the package or in the
// per-platform optional package), otherwise build the addon from source with cargo.

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { binaryName, platformSuffix } = require("./platform.js");

const root = path.join(__dirname, "..");
const target = path.join(root, binaryName());

function hasPrebuilt()
{
    if (fs.existsSync(target))
    {
        return true;
    }
    try
    {
        require.resolve(`dynamodb-lock-native-${platformSuffix()}`);
        return true;
    }
    catch (_)
    {
        return false;
    }
}

function run(cmd, args)
{
    console.log(`dynamodb-lock-native: ${cmd} ${args.join(" ")}`);
    const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", shell: process.platform === "win32" });
    if (r.error)
    {
        throw r.error;
    }
    if (r.status !== 0)
    {
        process.exit(r.status || 1);
    }
}

if (process.env.DYNAMODB_LOCK_NATIVE_SKIP_BUILD)
{
    process.exit(0);
}
if (hasPrebuilt())
{
    process.exit(0);
}
const napiCli = path.join(root, "node_modules", "@napi-rs", "cli", "dist", "cli.js");
if (fs.existsSync(napiCli))
{
    run(process.execPath, [napiCli, "build", "--platform", "--release", "--js", "binding.js", "--dts", "binding.d.ts"]);
}
else
{
    // Installed from a tarball or git: no dev dependencies, so build with cargo alone.
    run("cargo", ["build", "--release", "--lib"]);
    const lib = { darwin: "libdynamodb_lock_native.dylib", win32: "dynamodb_lock_native.dll" }[process.platform]
        || "libdynamodb_lock_native.so";
    fs.copyFileSync(path.join(root, "target", "release", lib), target);
}
