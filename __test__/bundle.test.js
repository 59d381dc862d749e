"use strict";

// A handler bundled by esbuild and webpack, as a Lambda function is packaged: the bundle's
// directory is copied elsewhere and run from yet another working directory, where no
// node_modules can help it find the native addon.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawnSync } = require("child_process");
const { selectedEngines, startEngine } = require("./engines.js");
const { binaryName } = require("../scripts/platform.js");

const root = path.join(__dirname, "..");
const esbuild = require("esbuild");
const webpack = require("webpack");

const HANDLER = `
const DynamoDBLockClient = require("dynamodb-lock-native");
exports.handler = async (event) =>
{
    const client = new DynamoDBLockClient.FailClosed({
        dynamodb: { endpoint: event.endpoint, region: event.region, credentials: event.credentials },
        lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50, retryCount: 0,
    });
    // With retryCount 0, the second acquisition succeeds only if the first lock was released.
    const first = await client.acquireLock(event.id);
    await first.release();
    const second = await client.acquireLock(event.id);
    await second.release();
    return { acquired: 2, released: 2 };
};
`;

// Runs the bundled handler once, from a working directory that is neither the bundle's
// nor the project's.
const RUNNER = `
const bundle = require(process.argv[2]);
bundle.handler(JSON.parse(process.argv[3])).then(
    r => console.log(JSON.stringify(r)),
    e => { console.error(e && e.message); process.exit(3); });
`;

// The same handler as an ES module.
const HANDLER_ESM = HANDLER.replace('const DynamoDBLockClient = require("dynamodb-lock-native");', 'import DynamoDBLockClient from "dynamodb-lock-native";')
    .replace("exports.handler = ", "export const handler = ");

// An ES module bundle of a CommonJS package that loads an addon needs `require`, `__filename`
// and `__dirname` of its own (docs/lambda.md).
const ESM_BANNER = "import { createRequire as __createRequire } from 'module'; import { fileURLToPath as __fileURLToPath } from 'url'; "
    + "import { dirname as __pathDirname } from 'path'; const require = __createRequire(import.meta.url); "
    + "const __filename = __fileURLToPath(import.meta.url); const __dirname = __pathDirname(__filename);";

const RUNNER_ESM = `
const { handler } = await import(new URL(process.argv[2], "file://").href);
handler(JSON.parse(process.argv[3])).then(
    r => console.log(JSON.stringify(r)),
    e => { console.error(e && e.message); process.exit(3); });
`;

// The package as npm installs it into an application: the files it publishes and the addon.
function installInto(app)
{
    const pkg = path.join(app, "node_modules", "dynamodb-lock-native");
    const { files } = require("../package.json");
    for (const f of ["package.json", ...files, binaryName()])
    {
        if (["src", "Cargo.toml", "Cargo.lock", "build.rs"].includes(f) || !fs.existsSync(path.join(root, f)))
        {
            continue;
        }
        fs.cpSync(path.join(root, f), path.join(pkg, f), { recursive: true });
    }
}

function webpackBuild(app, outDir, rules)
{
    return new Promise((resolve, reject) =>
    {
        webpack({
            mode: "production",
            target: "node",
            context: app,
            entry: path.join(app, "handler.js"),
            output: { path: outDir, filename: "handler.js", library: { type: "commonjs2" } },
            optimization: { minimize: false },
            module: { rules },
            infrastructureLogging: { level: "none" },
        }, (err, stats) => (err ? reject(err) : resolve(stats)));
    });
}

// Copies the bundle's directory to a new place and runs it from another directory.
function runElsewhere(outDir, event, { dropNode } = {})
{
    const shipped = fs.mkdtempSync(path.join(os.tmpdir(), "dln-shipped-"));
    fs.cpSync(outDir, shipped, { recursive: true });
    if (dropNode)
    {
        for (const f of fs.readdirSync(shipped).filter(f => f.endsWith(".node")))
        {
            fs.rmSync(path.join(shipped, f));
        }
    }
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), "dln-cwd-"));
    const esm = fs.existsSync(path.join(shipped, "handler.mjs"));
    const runner = path.join(cwd, esm ? "run.mjs" : "run.js");
    fs.writeFileSync(runner, esm ? RUNNER_ESM : RUNNER);
    const r = spawnSync(process.execPath, [runner, path.join(shipped, esm ? "handler.mjs" : "handler.js"), JSON.stringify(event)],
        { cwd, encoding: "utf8", timeout: 60000, env: Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true", NODE_PATH: "" }) });
    fs.rmSync(shipped, { recursive: true, force: true });
    fs.rmSync(cwd, { recursive: true, force: true });
    return r;
}

describe("bundled handlers", { timeout: 300000 }, () =>
{
    let app;
    const out = {};
    before(async () =>
        {
            app = fs.mkdtempSync(path.join(os.tmpdir(), "dln-app-"));
            installInto(app);
            fs.writeFileSync(path.join(app, "handler.js"), HANDLER);
            for (const loader of ["file", "copy"])
            {
                out[`esbuild ${loader}`] = path.join(app, `esbuild-${loader}`);
                await esbuild.build({
                    entryPoints: [path.join(app, "handler.js")], bundle: true, platform: "node",
                    outdir: out[`esbuild ${loader}`], loader: { ".node": loader }, logLevel: "silent",
                });
            }
            fs.writeFileSync(path.join(app, "handler.mjs"), HANDLER_ESM);
            out["esbuild esm"] = path.join(app, "esbuild-esm");
            await esbuild.build({
                entryPoints: [path.join(app, "handler.mjs")], bundle: true, platform: "node", format: "esm",
                outExtension: { ".js": ".mjs" }, banner: { js: ESM_BANNER },
                outdir: out["esbuild esm"], loader: { ".node": "copy" }, logLevel: "silent",
            });
            out["esbuild external"] = path.join(app, "esbuild-external");
            await esbuild.build({
                entryPoints: [path.join(app, "handler.js")], bundle: true, platform: "node",
                outdir: out["esbuild external"], external: ["dynamodb-lock-native"], logLevel: "silent",
            });
            fs.cpSync(path.join(app, "node_modules"), path.join(out["esbuild external"], "node_modules"), { recursive: true });
            out["webpack asset/resource"] = path.join(app, "webpack-asset");
            const stats = await webpackBuild(app, out["webpack asset/resource"], [{ test: /\.node$/, type: "asset/resource" }]);
            assert.equal(stats.hasErrors(), false, stats.toString({ all: false, errors: true }));
        }
    );
    after(() => app && fs.rmSync(app, { recursive: true, force: true }));

    it("esbuild without a .node loader stops at build time, naming the addon file", async () =>
        {
            await assert.rejects(esbuild.build({
                entryPoints: [path.join(app, "handler.js")], bundle: true, platform: "node",
                outdir: path.join(app, "esbuild-none"), logLevel: "silent",
            }), e => /No loader is configured for "\.node" files/.test(e.message) && e.message.includes(binaryName()));
        }
    );

    it("webpack without a .node rule stops at build time", async () =>
        {
            const stats = await webpackBuild(app, path.join(app, "webpack-none"), []);
            assert.equal(stats.hasErrors(), true);
            assert.match(stats.toString({ all: false, errors: true }), /appropriate loader/);
        }
    );

    it("a bundle that inlined the addon as data says which bundler settings work", async () =>
        {
            for (const loader of ["empty", "text"])
            {
                const outdir = path.join(app, `esbuild-${loader}`);
                await esbuild.build({
                    entryPoints: [path.join(app, "handler.js")], bundle: true, platform: "node",
                    outdir, loader: { ".node": loader }, logLevel: "silent",
                });
                const r = runElsewhere(outdir, { endpoint: "http://127.0.0.1:9", region: "us-east-1", credentials: { accessKeyId: "a", secretAccessKey: "b" }, id: "x" });
                assert.notEqual(r.status, 0);
                assert.match(r.stderr, new RegExp(`the native addon was bundled as ${loader === "empty" ? "an object without the addon's functions" : "a string"}, not loaded as a Node.js addon`));
                assert.match(r.stderr, /--loader:\.node=copy/);
                assert.match(r.stderr, /type: "asset\/resource"/);
            }
        }
    );

    it("each bundle ships the addon beside its code, or the package in node_modules", () =>
        {
            for (const [name, dir] of Object.entries(out))
            {
                const shipped = name === "esbuild external"
                    ? fs.readdirSync(path.join(dir, "node_modules", "dynamodb-lock-native"))
                    : fs.readdirSync(dir);
                assert.ok(shipped.some(f => f.endsWith(".node")), `${name}: ${shipped.join(", ")}`);
            }
        }
    );

    it("a bundle whose .node file was not shipped says which file to ship", () =>
        {
            const r = runElsewhere(out["esbuild file"], { endpoint: "http://127.0.0.1:9", region: "us-east-1", credentials: { accessKeyId: "a", secretAccessKey: "b" }, id: "x" }, { dropNode: true });
            assert.notEqual(r.status, 0);
            assert.match(r.stderr, /the bundle names its native addon \.\/dynamodb-lock-native\.[\w-]+\.node, but it could not be opened/);
            assert.match(r.stderr, /Ship the \.node file the bundler wrote beside the bundle/);
        }
    );

    it("a bundle that requires its copy of the addon, not shipped, says only what applies to a bundle", () =>
        {
            const r = runElsewhere(out["esbuild copy"], { endpoint: "http://127.0.0.1:9", region: "us-east-1", credentials: { accessKeyId: "a", secretAccessKey: "b" }, id: "x" }, { dropNode: true });
            assert.notEqual(r.status, 0);
            assert.match(r.stderr, /this bundle could not load its native addon/);
            assert.match(r.stderr, /Cannot find module '\.\/dynamodb-lock-native\.[\w-]+\.node'/);
            assert.match(r.stderr, /Ship the \.node file the bundler wrote beside the bundle \(of the files named above, the one the bundler wrote/);
            assert.doesNotMatch(r.stderr, /Rust|npm rebuild|npm has a bug/);
        }
    );

    for (const engineName of selectedEngines())
    {
        describe(`on ${engineName}`, () =>
        {
            let engine;
            before(async () =>
                {
                    engine = await startEngine(engineName);
                    await engine.createTable("locks", { partitionKey: "id" });
                }
            );
            after(async () => engine && engine.stop());

            for (const name of ["esbuild file", "esbuild copy", "esbuild esm", "esbuild external", "webpack asset/resource"])
            {
                it(`${name}: the handler acquires and releases a lock from another directory`, () =>
                    {
                        const event = { endpoint: engine.endpoint, region: engine.region, credentials: engine.credentials, id: `bundle-${name}` };
                        const r = runElsewhere(out[name], event);
                        assert.equal(r.status, 0, r.stderr);
                        assert.deepEqual(JSON.parse(r.stdout.trim()), { acquired: 2, released: 2 });
                    }
                );
            }
        });
    }
});
