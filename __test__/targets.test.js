"use strict";

// The platforms: the list `npm run build:targets` and `npm run test:arm64` build
// (scripts/targets.js) is `napi.targets`, the release workflow builds and tests the same, each
// platform package is installed by npm exactly where it runs (its `os`, `cpu` and `libc`, as
// npm's own check reads them), and the loader and the install hook pick the musl binary on
// musl (detection faked by a preload) and the glibc one elsewhere. The builds themselves take
// too long for this suite: `npm run build:targets` runs them.

const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { spawnSync, execFileSync } = require("node:child_process");
const { TARGETS, GLIBC_PROMISED } = require("../scripts/targets.js");

const root = path.join(__dirname, "..");
const pkg = require("../package.json");

// npm's own platform check, from the npm that runs here (undefined when it cannot be found).
function npmInstallChecks()
{
    try
    {
        const globalRoot = execFileSync("npm", ["root", "-g"], { encoding: "utf8", shell: process.platform === "win32" }).trim();
        return require(path.join(globalRoot, "npm", "node_modules", "npm-install-checks"));
    }
    catch (_)
    {
        return undefined;
    }
}

// npm's words for a target's platform: os, cpu and libc.
function npmPlatform(target)
{
    const [os, cpu, abi] = target.platform.split("-");
    return { os, cpu, libc: os === "linux" ? (abi === "musl" ? "musl" : "glibc") : undefined };
}

describe("the platforms", () =>
{
    it("the build scripts' targets are package.json's napi.targets, in order", () =>
    {
        assert.deepEqual(TARGETS.map(t => t.triple), pkg.napi.targets);
        for (const t of TARGETS)
        {
            assert.ok(["zig-glibc", "zig", "zig-or-check", "check"].includes(t.how), t.triple);
        }
    });

    it("the release workflow builds and tests every target through the build script, on Node.js 20, 22 and 24", () =>
    {
        const workflow = fs.readFileSync(path.join(root, ".github", "workflows", "release.yml"), "utf8");
        for (const t of TARGETS)
        {
            assert.ok(workflow.includes(`target: ${t.triple}`), `the workflow names ${t.triple}`);
        }
        assert.match(workflow, /node scripts\/build-targets\.js --target \$\{\{ matrix\.target \}\}/);
        assert.match(workflow, /node: \["20", "22", "24"\]/);
        assert.doesNotMatch(workflow, /node: \[[^\]]*"18"/);
    });

    it("the glibc promised is the one README.md, docs/lambda.md and CONTRIBUTING.md state", () =>
    {
        const readme = fs.readFileSync(path.join(root, "README.md"), "utf8");
        assert.match(readme, new RegExp(`glibc ${GLIBC_PROMISED.replace(".", "\\.")}\\+`));
        const lambda = fs.readFileSync(path.join(root, "docs", "lambda.md"), "utf8");
        assert.match(lambda, new RegExp(`glibc ${GLIBC_PROMISED.replace(".", "\\.")}\\b`));
        const contributing = fs.readFileSync(path.join(root, "CONTRIBUTING.md"), "utf8");
        assert.match(contributing, new RegExp(`glibc ${GLIBC_PROMISED.replace(".", "\\.")}\\b`));
        assert.match(contributing, /npm run build:targets/);
        assert.match(contributing, /npm run test:arm64/);
    });

    it("each platform package is named for its target, holds its binary, and says where it runs", () =>
    {
        const folders = fs.readdirSync(path.join(root, "npm")).sort();
        assert.deepEqual(folders, TARGETS.map(t => t.platform).sort());
        for (const t of TARGETS)
        {
            const manifest = JSON.parse(fs.readFileSync(path.join(root, "npm", t.platform, "package.json"), "utf8"));
            const want = npmPlatform(t);
            assert.equal(manifest.name, `dynamodb-lock-native-${t.platform}`);
            assert.equal(manifest.version, pkg.version);
            assert.equal(manifest.main, `dynamodb-lock-native.${t.platform}.node`);
            assert.deepEqual(manifest.files, [manifest.main]);
            assert.deepEqual(manifest.os, [want.os], t.platform);
            assert.deepEqual(manifest.cpu, [want.cpu], t.platform);
            assert.deepEqual(manifest.libc, want.libc ? [want.libc] : undefined, t.platform);
        }
    });

    it("on each platform npm installs exactly that platform's package (npm's own check)", t =>
    {
        const checks = npmInstallChecks();
        if (!checks)
        {
            t.skip("npm's npm-install-checks was not found beside the npm on PATH");
            return;
        }
        const manifests = TARGETS.map(x => JSON.parse(fs.readFileSync(path.join(root, "npm", x.platform, "package.json"), "utf8")));
        const installs = (manifest, env) =>
        {
            try
            {
                checks.checkPlatform(manifest, false, env);
                return true;
            }
            catch (err)
            {
                assert.equal(err.code, "EBADPLATFORM");
                return false;
            }
        };
        for (const target of TARGETS)
        {
            const env = npmPlatform(target);
            const chosen = manifests.filter(m => installs(m, env)).map(m => m.name);
            assert.deepEqual(chosen, [`dynamodb-lock-native-${target.platform}`], JSON.stringify(env));
        }
        // A Linux whose C library npm cannot tell installs no Linux package (it builds from source).
        const unknown = manifests.filter(m => installs(m, { os: "linux", cpu: "x64", libc: "bionic" }));
        assert.deepEqual(unknown.map(m => m.name), []);
    });

    // What the loader (binding.js) and the install hook's platform.js pick, with detection
    // faked by __test__/support/fake-libc.js.
    function pick(env)
    {
        const script = "const p = require('./scripts/platform.js');"
            + "console.log('SUFFIX ' + p.platformSuffix());"
            + "try { require('./binding.js'); console.log('LOADED'); } catch (e) { console.log('NOT LOADED'); }";
        const r = spawnSync(process.execPath, ["--require", path.join(__dirname, "support", "fake-libc.js"), "-e", script],
            { cwd: root, encoding: "utf8", env: Object.assign({}, process.env, env) });
        assert.equal(r.status, 0, r.stderr);
        return {
            suffix: /SUFFIX (\S+)/.exec(r.stdout)[1],
            tried: JSON.parse(/TRIED (.*)/.exec(r.stdout)[1]),
            loaded: r.stdout.includes("\nLOADED"),
        };
    }

    it("on musl the loader and the install hook pick the musl binary, file then package; on glibc the gnu one", { skip: process.platform !== "linux" }, () =>
    {
        for (const arch of ["x64", "arm64"])
        {
            const musl = pick({ FAKE_LIBC: "musl", FAKE_ARCH: arch });
            assert.equal(musl.suffix, `linux-${arch}-musl`);
            assert.deepEqual(musl.tried.slice(0, 2), [`./dynamodb-lock-native.linux-${arch}-musl.node`, `dynamodb-lock-native-linux-${arch}-musl`]);
            assert.ok(musl.tried.every(r => !r.includes("gnu")), JSON.stringify(musl.tried));
            assert.equal(musl.loaded, false, "no musl binary here");

            const glibc = pick({ FAKE_LIBC: "glibc", FAKE_ARCH: arch });
            assert.equal(glibc.suffix, `linux-${arch}-gnu`);
            assert.equal(glibc.tried[0], `./dynamodb-lock-native.linux-${arch}-gnu.node`);
            assert.ok(glibc.tried.every(r => !r.includes("musl")), JSON.stringify(glibc.tried));
        }
    });
});
