"use strict";

// Loads the native core through binding.js, the loader that `napi build` generates. It tries
// the `.node` file beside it, then the platform's package (dynamodb-lock-native-<platform>).
// When both fail its error speaks of npm's bugs; this one says what was looked for, why each
// attempt failed, and how to build the addon from source.

const path = require("path");
const { binaryName, platformSuffix, rustNeeded } = require("../scripts/platform.js");

const root = path.join(__dirname, "..");

// The generated loader chains the error of each attempt through `cause`, last attempt first.
function attempts(error)
{
    const reasons = [];
    for (let e = error && error.cause; e; e = e.cause)
    {
        reasons.unshift(String(e.message).split("\n")[0]);
    }
    return reasons;
}

function notLoaded(cause)
{
    const suffix = platformSuffix();
    const file = path.join(root, binaryName());
    const pkg = `dynamodb-lock-native-${suffix}`;
    // WASI attempts are part of the generated chain, but no WASI build is published.
    const reasons = attempts(cause).filter(r => !/wasi/i.test(r));
    const lines = [
        `dynamodb-lock-native: no native addon could be loaded for this platform (${suffix}).`,
        "Looked for:",
        `  - ${file}, built from source by the install hook or by \`npm run build\``,
        `  - the package ${pkg}, an optional dependency that npm installs where it matches the platform`
            + " (not with --omit=optional or --no-optional)",
        "Why each attempt failed:",
        ...(reasons.length ? reasons : [String(cause && cause.message)]).map(r => `  - ${r}`),
        `To build the addon from source: install ${rustNeeded()} and a C compiler, then run`
            + " `npm rebuild dynamodb-lock-native` (a release build takes about 4 minutes).",
    ];
    const error = new Error(lines.join("\n"));
    error.cause = cause;
    return error;
}

function load()
{
    try
    {
        return require("../binding.js");
    }
    catch (e)
    {
        throw notLoaded(e);
    }
}

module.exports = load();
