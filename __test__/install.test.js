"use strict";

// Installing as an application does. `npm run pack:local` writes the main tarball and this
// platform's tarball; both install into a fresh application with cargo and rustc off PATH
// (stubs that record a call and fail stand in for them), and the application takes and
// releases a lock on dynalite with the platform package's binary. The install hook's choice
// between a prebuilt binary and a build from source is tested against the same stubs. The
// real build from source of the main tarball alone takes minutes of cargo: it runs only with
// DYNAMODB_LOCK_NATIVE_TEST_SOURCE_BUILD=1.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawn } = require("child_process");
const { startEngine } = require("./engines.js");
const { dynamodbOptions, uniqueId } = require("./helpers.js");
const { binaryName, platformSuffix } = require("../scripts/platform.js");

const root = path.join(__dirname, "..");
const pkg = require("../package.json");
const suffix = platformSuffix();
const platformPackage = `${pkg.name}-${suffix}`;
const NO_SHELL_STUBS = process.platform === "win32" && "the stand-in cargo and rustc are shell scripts";

// Runs a command to its end, killed after `timeoutMs` whatever happens.
function exec(cmd, args, { cwd, env, timeoutMs })
{
    return new Promise(resolve =>
        {
            const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
            let stdout = "";
            let stderr = "";
            child.stdout.setEncoding("utf8").on("data", d => stdout += d);
            child.stderr.setEncoding("utf8").on("data", d => stderr += d);
            const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
            child.on("error", error => { clearTimeout(killer); resolve({ code: null, error, stdout, stderr }); });
            child.on("close", (code, signal) => { clearTimeout(killer); resolve({ code, signal, stdout, stderr }); });
        });
}

function describeRun(r)
{
    return `exit ${r.code}${r.signal ? ` (${r.signal})` : ""}${r.error ? ` (${r.error.message})` : ""}\n`
        + `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
}

function hasTool(dir, name)
{
    return ["", ".exe", ".cmd"].some(ext => fs.existsSync(path.join(dir, name + ext)));
}

// PATH without any directory holding cargo or rustc, with `first` in front.
function pathWithoutRust(first)
{
    const kept = (process.env.PATH || "").split(path.delimiter)
        .filter(dir => dir && !hasTool(dir, "cargo") && !hasTool(dir, "rustc"));
    const nodeDir = path.dirname(process.execPath);
    if (!kept.includes(nodeDir) && !hasTool(nodeDir, "cargo"))
    {
        kept.unshift(nodeDir);
    }
    return [first, ...kept].filter(Boolean).join(path.delimiter);
}

// Stand-ins for cargo and rustc: each call is appended to `record`. They fail, unless
// STUB_CARGO_BUILDS is set, when cargo writes a fake library where a release build puts it.
function writeStubs(dir)
{
    fs.mkdirSync(dir, { recursive: true });
    const script = [
        "#!/bin/sh",
        "echo \"$(basename \"$0\") $*\" >> \"$STUB_RECORD\"",
        "if [ -n \"$STUB_CARGO_BUILDS\" ] && [ \"$(basename \"$0\")\" = cargo ]; then",
        "  mkdir -p target/release",
        "  for f in libdynamodb_lock_native.so libdynamodb_lock_native.dylib dynamodb_lock_native.dll; do",
        "    echo stub-build > \"target/release/$f\"",
        "  done",
        "  exit 0",
        "fi",
        "exit 1",
        "",
    ].join("\n");
    for (const tool of ["cargo", "rustc"])
    {
        fs.writeFileSync(path.join(dir, tool), script, { mode: 0o755 });
    }
}

function readRecord(file)
{
    return fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim().split("\n") : [];
}

// The environment of a process started by hand: no `npm run` context (npm_* variables),
// npm's cache in the test's own folder, and a registry on a closed loopback port so that
// nothing leaves the machine even if npm tried.
function appEnv(work, pathValue, extra)
{
    const env = {};
    for (const [k, v] of Object.entries(process.env))
    {
        if (!/^npm_/i.test(k))
        {
            env[k] = v;
        }
    }
    return Object.assign(env, {
        PATH: pathValue,
        npm_config_cache: path.join(work, "npm-cache"),
        npm_config_registry: "http://127.0.0.1:9/",
        npm_config_update_notifier: "false",
        AWS_EC2_METADATA_DISABLED: "true",
    }, extra);
}

function freshApp(work, name)
{
    const dir = path.join(work, name);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name, version: "1.0.0", private: true }) + "\n");
    // What an application does: take a lock and release it. Taking it again without waiting
    // (retryCount 0) shows the release happened. It says which binary was loaded.
    fs.writeFileSync(path.join(dir, "app.js"), `"use strict";
const Locks = require("dynamodb-lock-native");
const job = JSON.parse(process.argv[2]);
(async () => {
    const client = new Locks.FailClosed({ dynamodb: job.dynamodb, lockTable: "locks", partitionKey: "id", acquirePeriodMs: 50, retryCount: 0 });
    const steps = [];
    const first = await client.acquireLock(job.id);
    steps.push("acquired");
    await first.release();
    steps.push("released");
    const second = await client.acquireLock(job.id);
    steps.push("acquired");
    await second.release();
    steps.push("released");
    const loaded = Object.keys(require.cache).filter(f => f.endsWith(".node"));
    console.log(JSON.stringify({ steps, loaded }));
})().catch(e => { console.log(JSON.stringify({ error: e.code || e.message })); process.exitCode = 1; });
`);
    return dir;
}

async function npmInstall(app, env, tarballs, timeoutMs)
{
    return exec("npm", ["install", "--offline", "--no-audit", "--no-fund", "--foreground-scripts", ...tarballs],
        { cwd: app, env, timeoutMs });
}

async function runApp(app, env, engine)
{
    const job = { dynamodb: dynamodbOptions(engine), id: uniqueId("installed") };
    const r = await exec(process.execPath, ["app.js", JSON.stringify(job)], { cwd: app, env, timeoutMs: 30000 });
    assert.equal(r.code, 0, describeRun(r));
    return JSON.parse(r.stdout.trim().split("\n").pop());
}

// The build from source (opt-in) has a bound of its own, longer than the others' together.
const SOURCE_BUILD = Boolean(process.env.DYNAMODB_LOCK_NATIVE_TEST_SOURCE_BUILD);

describe("installing the packed tarballs", { timeout: SOURCE_BUILD ? 1500000 : 300000, skip: NO_SHELL_STUBS }, () =>
{
    let work;
    let engine;
    let tarballs;
    before(async () =>
        {
            work = fs.mkdtempSync(path.join(os.tmpdir(), "dynamodb-lock-native-install-"));
            engine = await startEngine("dynalite");
            await engine.createTable("locks", { partitionKey: "id" });
            const r = await exec(process.execPath, [path.join(root, "scripts", "pack-local.js"), "--pack-destination", path.join(work, "dist")],
                { cwd: root, env: appEnv(work, process.env.PATH), timeoutMs: 120000 });
            assert.equal(r.code, 0, describeRun(r));
            tarballs = r.stdout.trim().split("\n");
        }
    );
    after(async () =>
        {
            if (engine)
            {
                await engine.stop();
            }
            if (work)
            {
                fs.rmSync(work, { recursive: true, force: true });
            }
        }
    );

    it("pack:local writes the main tarball and this platform's", () =>
        {
            assert.deepEqual(tarballs.map(t => path.basename(t)),
                [`${pkg.name}-${pkg.version}.tgz`, `${platformPackage}-${pkg.version}.tgz`]);
            for (const t of tarballs)
            {
                assert.ok(fs.statSync(t).size > 0, t);
            }
        }
    );

    it("with the platform tarball, an application installs without cargo or rustc and takes a lock", async () =>
        {
            const stubs = path.join(work, "stubs");
            const record = path.join(work, "prebuilt-record");
            writeStubs(stubs);
            const env = appEnv(work, pathWithoutRust(stubs), { STUB_RECORD: record });
            const app = freshApp(work, "app-prebuilt");

            const install = await npmInstall(app, env, tarballs, 120000);
            assert.equal(install.code, 0, describeRun(install));
            assert.deepEqual(readRecord(record), [], "no build was attempted");
            assert.match(install.stdout, new RegExp(`using the prebuilt binary of ${platformPackage}`));

            const installed = path.join(app, "node_modules", pkg.name);
            const manifest = JSON.parse(fs.readFileSync(path.join(installed, "package.json"), "utf8"));
            assert.equal(manifest.optionalDependencies[platformPackage], pkg.version);
            assert.deepEqual(fs.readdirSync(installed).filter(f => f.endsWith(".node") || f === "target"), [],
                "the main package carries no binary and built none");

            const expected = fs.realpathSync(path.join(app, "node_modules", platformPackage, binaryName()));
            const result = await runApp(app, env, engine);
            assert.deepEqual(result.loaded, [expected]);
            assert.deepEqual(result.steps, ["acquired", "released", "acquired", "released"]);
            assert.deepEqual(readRecord(record), []);
        }
    );

    it("the main tarball alone builds from source, and says so",
        { skip: !SOURCE_BUILD && "takes minutes of cargo: set DYNAMODB_LOCK_NATIVE_TEST_SOURCE_BUILD=1", timeout: 1200000 },
        async () =>
        {
            const env = appEnv(work, process.env.PATH);
            const app = freshApp(work, "app-source");
            const started = Date.now();
            const install = await npmInstall(app, env, [tarballs[0]], 1140000);
            assert.equal(install.code, 0, describeRun(install));
            const target = path.join(app, "node_modules", pkg.name, binaryName());
            assert.match(install.stdout, new RegExp(`no prebuilt binary for ${suffix}`));
            assert.match(install.stdout, /building from source \(needs Rust \S+ or newer and a C compiler\); a release build takes about 4 minutes/);
            assert.ok(install.stdout.includes(`built ${target}`), install.stdout);
            console.log(`# npm install of the main tarball alone, with the build: ${Date.now() - started} ms`);

            const result = await runApp(app, env, engine);
            assert.deepEqual(result.loaded, [fs.realpathSync(target)]);
            assert.deepEqual(result.steps, ["acquired", "released", "acquired", "released"]);
        }
    );
});

// The hook as installed in an application's node_modules, run directly.
describe("the install hook decides between a prebuilt binary and a build from source", { timeout: 60000, skip: NO_SHELL_STUBS }, () =>
{
    let work;
    let stubs;
    before(() =>
        {
            work = fs.mkdtempSync(path.join(os.tmpdir(), "dynamodb-lock-native-hook-"));
            stubs = path.join(work, "stubs");
            writeStubs(stubs);
        }
    );
    after(() => work && fs.rmSync(work, { recursive: true, force: true }));

    let n = 0;
    // A fresh app/node_modules/dynamodb-lock-native holding what the hook reads.
    function installedPackage()
    {
        const app = path.join(work, `app-${++n}`);
        const dir = path.join(app, "node_modules", pkg.name);
        fs.mkdirSync(path.join(dir, "scripts"), { recursive: true });
        for (const f of ["scripts/install.js", "scripts/platform.js", "Cargo.toml"])
        {
            fs.copyFileSync(path.join(root, f), path.join(dir, f));
        }
        return { app, dir, record: path.join(app, "record") };
    }

    function hook(dir, record, { withStubs = true, extra } = {})
    {
        const env = appEnv(work, pathWithoutRust(withStubs ? stubs : null), Object.assign({ STUB_RECORD: record }, extra));
        return exec(process.execPath, ["scripts/install.js"], { cwd: dir, env, timeoutMs: 30000 });
    }

    it("with neither a .node file nor the platform package, it builds with cargo and says what that takes", async () =>
        {
            const { dir, record } = installedPackage();
            const r = await hook(dir, record);
            assert.equal(r.code, 1, describeRun(r));
            assert.deepEqual(readRecord(record), ["cargo build --release --lib"]);
            assert.ok(r.stdout.includes(`no prebuilt binary for ${suffix}: looked for ${path.join(dir, binaryName())} and for the package ${platformPackage}`), r.stdout);
            const rust = /^rust-version\s*=\s*"([^"]+)"/m.exec(fs.readFileSync(path.join(root, "Cargo.toml"), "utf8"))[1];
            assert.ok(r.stdout.includes(`building from source (needs Rust ${rust} or newer and a C compiler); a release build takes about 4 minutes.`), r.stdout);
            assert.match(r.stderr, /the build from source failed \(cargo exited with 1\)/);
            assert.equal(fs.existsSync(path.join(dir, binaryName())), false);
        }
    );

    it("copies what cargo built to the binary's napi name", async () =>
        {
            const { dir, record } = installedPackage();
            const r = await hook(dir, record, { extra: { STUB_CARGO_BUILDS: "1" } });
            assert.equal(r.code, 0, describeRun(r));
            assert.deepEqual(readRecord(record), ["cargo build --release --lib"]);
            const target = path.join(dir, binaryName());
            assert.equal(fs.readFileSync(target, "utf8"), "stub-build\n");
            assert.ok(r.stdout.includes(`built ${target}`), r.stdout);
        }
    );

    it("without cargo on PATH, it says what to install and how to build afterwards", async () =>
        {
            const { dir, record } = installedPackage();
            const r = await hook(dir, record, { withStubs: false });
            assert.equal(r.code, 1, describeRun(r));
            assert.match(r.stderr, /cargo was not found on PATH\. Install Rust \S+ or newer \(https:\/\/rustup\.rs\) and a C compiler, then run `npm rebuild dynamodb-lock-native`/);
        }
    );

    it("uses the platform package when it is installed", async () =>
        {
            const { app, dir, record } = installedPackage();
            const platformDir = path.join(app, "node_modules", platformPackage);
            fs.mkdirSync(platformDir);
            fs.copyFileSync(path.join(root, "npm", suffix, "package.json"), path.join(platformDir, "package.json"));
            fs.writeFileSync(path.join(platformDir, binaryName()), "a binary");
            const r = await hook(dir, record);
            assert.equal(r.code, 0, describeRun(r));
            assert.deepEqual(readRecord(record), []);
            assert.ok(r.stdout.includes(`using the prebuilt binary of ${platformPackage}: ${path.join(platformDir, binaryName())}`), r.stdout);
        }
    );

    it("does not count a platform package whose binary is missing", async () =>
        {
            const { app, dir, record } = installedPackage();
            const platformDir = path.join(app, "node_modules", platformPackage);
            fs.mkdirSync(platformDir);
            fs.copyFileSync(path.join(root, "npm", suffix, "package.json"), path.join(platformDir, "package.json"));
            const r = await hook(dir, record);
            assert.equal(r.code, 1, describeRun(r));
            assert.deepEqual(readRecord(record), ["cargo build --release --lib"]);
        }
    );

    it("uses a .node file in the package", async () =>
        {
            const { dir, record } = installedPackage();
            fs.writeFileSync(path.join(dir, binaryName()), "a binary");
            const r = await hook(dir, record);
            assert.equal(r.code, 0, describeRun(r));
            assert.deepEqual(readRecord(record), []);
            assert.ok(r.stdout.includes(`using ${path.join(dir, binaryName())}`), r.stdout);
        }
    );

    it("DYNAMODB_LOCK_NATIVE_SKIP_BUILD skips the build", async () =>
        {
            const { dir, record } = installedPackage();
            const r = await hook(dir, record, { extra: { DYNAMODB_LOCK_NATIVE_SKIP_BUILD: "1" } });
            assert.equal(r.code, 0, describeRun(r));
            assert.deepEqual(readRecord(record), []);
            assert.match(r.stdout, /DYNAMODB_LOCK_NATIVE_SKIP_BUILD is set/);
        }
    );
});

describe("when no binary loads", () =>
{
    it("the error says what was looked for, why each attempt failed, and how to build from source", () =>
        {
            const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dynamodb-lock-native-loader-"));
            try
            {
                fs.mkdirSync(path.join(dir, "lib"));
                fs.mkdirSync(path.join(dir, "scripts"));
                for (const f of ["binding.js", "lib/native.js", "scripts/platform.js", "Cargo.toml"])
                {
                    fs.copyFileSync(path.join(root, f), path.join(dir, f));
                }
                let error;
                try
                {
                    require(path.join(dir, "lib", "native.js"));
                }
                catch (e)
                {
                    error = e;
                }
                assert.ok(error, "loading without a binary throws");
                const lines = error.message.split("\n");
                assert.equal(lines[0], `dynamodb-lock-native: no native addon could be loaded for this platform (${suffix}).`);
                assert.ok(lines.includes(`  - ${path.join(dir, binaryName())}, built from source by the install hook or by \`npm run build\``), error.message);
                assert.ok(lines.some(l => l.startsWith(`  - the package ${platformPackage}, an optional dependency`)), error.message);
                assert.ok(lines.includes(`  - Cannot find module './${binaryName()}'`), error.message);
                assert.ok(lines.includes(`  - Cannot find module '${platformPackage}'`), error.message);
                assert.ok(!/wasi/i.test(error.message), "no WASI build exists to speak of");
                assert.match(lines[lines.length - 1], /^To build the addon from source: install Rust \S+ or newer and a C compiler, then run `npm rebuild dynamodb-lock-native`/);
                assert.match(error.cause.message, /Cannot find native binding/);
            }
            finally
            {
                fs.rmSync(dir, { recursive: true, force: true });
            }
        }
    );

    it("in this checkout, the loader hands over what binding.js exports", () =>
        {
            assert.equal(require("../lib/native.js"), require("../binding.js"));
        }
    );
});
