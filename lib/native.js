"use strict";

// Loads the native core through binding.js, the loader that `napi build` generates. It tries
// the `.node` file beside it, then the platform's package (dynamodb-lock-native-<platform>).
// When both fail its error speaks of npm's bugs; this one says what was looked for, why each
// attempt failed, and how to build the addon from source. Bundled, the loader may hand back
// the path of the addon's copy instead of the addon, which is then opened here.

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

// Bundled, this file's code lives in the bundle's file, not in lib/native.js.
const bundled = path.basename(__filename) !== "native.js";

function notLoaded(cause)
{
    if (bundled)
    {
        return notShipped(cause);
    }
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

// A bundle whose loader still requires the addon's copy (esbuild's `--loader:.node=copy`) and
// did not find it: building from source or reinstalling does not apply to a bundle.
function notShipped(cause)
{
    const reasons = attempts(cause).filter(r => !/wasi/i.test(r));
    const error = new Error([
        `dynamodb-lock-native: this bundle could not load its native addon (${platformSuffix()}):`,
        ...(reasons.length ? reasons : [String(cause && cause.message)]).map(r => `  - ${r}`),
        "Ship the .node file the bundler wrote beside the bundle (of the files named above, the one the bundler wrote,"
            + " usually under a hashed name, in the same directory as the bundle's .js file), or leave the package out of"
            + " the bundle and ship it in node_modules.",
    ].join("\n"));
    // No `cause`: the loader's own error advises reinstalling with npm, which a bundle never does.
    return error;
}

// A bundler that copies `.node` files out as assets (esbuild's `--loader:.node=file`, webpack's
// `type: "asset/resource"`) turns the loader's `require("./x.node")` into the path of the copy,
// relative to the bundle's directory: the addon is then opened from there.
function fromAsset(file)
{
    const here = __dirname;
    const main = require.main && require.main.filename ? path.dirname(require.main.filename) : undefined;
    const places = path.isAbsolute(file) ? [file] : [here, main].filter(Boolean).map(dir => path.resolve(dir, file));
    const reasons = [];
    for (const place of [...new Set(places)])
    {
        const module = { exports: {} };
        try
        {
            process.dlopen(module, place);
            return module.exports;
        }
        catch (e)
        {
            reasons.push(`${place}: ${String(e.message).split("\n")[0]}`);
        }
    }
    throw new Error([
        `dynamodb-lock-native: the bundle names its native addon ${file}, but it could not be opened:`,
        ...reasons.map(r => `  - ${r}`),
        "Ship the .node file the bundler wrote beside the bundle (in the same directory as the bundle's .js file).",
    ].join("\n"));
}

// What a bundler made of the loader when it is neither the addon nor the path of its copy.
function notAnAddon(binding)
{
    return new Error([
        `dynamodb-lock-native: the native addon was bundled as ${binding !== null && typeof binding === "object" ? "an object without the addon's functions" : `a ${typeof binding}`},`
            + " not loaded as a Node.js addon.",
        "With esbuild, bundle with --loader:.node=copy (or =file) and ship the .node file written beside the bundle;"
            + " with webpack, add the rule { test: /\\.node$/, type: \"asset/resource\" };"
            + " or leave the package out of the bundle (esbuild --external:dynamodb-lock-native, webpack externals)"
            + " and ship it in node_modules.",
    ].join("\n"));
}

function load()
{
    let binding;
    try
    {
        binding = require("../binding.js");
    }
    catch (e)
    {
        throw notLoaded(e);
    }
    if (typeof binding === "string" && /\.node$/.test(binding))
    {
        binding = fromAsset(binding);
    }
    if (binding === null || typeof binding !== "object" || typeof binding.defaults !== "function")
    {
        throw notAnAddon(binding);
    }
    return binding;
}

module.exports = load();
