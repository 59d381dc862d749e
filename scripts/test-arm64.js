"use strict";

// `npm run test:arm64`: the linux arm64 binary run, not only built. Builds
// aarch64-unknown-linux-gnu as `npm run build:targets` does (--no-build: reuse
// target/targets/), installs qemu-user with Debian's arm64 runtimes and Node.js for linux arm64
// from npm, then under qemu-aarch64: loads the addon, runs `npm run readme` against dynalite on
// 127.0.0.1, and the FailOpen, FailClosed, sessions and Fifo suites (their dynalite runs on the
// machine's own Node.js: DDB_ENGINE_NODE). Prints how long each step took and what failed.
//
// Without binfmt_misc the kernel cannot start an arm64 program itself, so every Node.js the
// run starts goes through a wrapper script (target/arm64/node) that execs qemu-aarch64; a
// `--require` preload, handed down through NODE_OPTIONS, names that wrapper as
// `process.execPath`, which the test runner, the README runner and the engines start children
// with.

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { parseArgs } = require("util");
const { TARGETS } = require("./targets.js");
const toolchains = require("./toolchains.js");

const root = path.join(__dirname, "..");
const work = path.join(root, "target", "arm64");
const target = TARGETS.find(t => t.triple === "aarch64-unknown-linux-gnu");
const SUITES = ["failopen", "failclosed", "sessions", "fifo"];

function say(line)
{
    console.log(`[test:arm64] ${line}`);
}

function main(argv)
{
    const { values } = parseArgs({ args: argv, options: { "no-build": { type: "boolean", default: false } } });
    if (process.platform !== "linux" || process.arch !== "x64")
    {
        throw new Error(`runs on Linux x64 (emulating linux arm64), not on ${process.platform}-${process.arch}`);
    }
    const steps = [];
    const step = (name, fn) =>
    {
        const started = Date.now();
        let ok = false, detail = "";
        try
        {
            detail = fn() || "";
            ok = true;
        }
        catch (err)
        {
            detail = err.message;
        }
        steps.push({ name, ok, seconds: Math.round((Date.now() - started) / 1000), detail });
        say(`${ok ? "passed" : "FAILED"}: ${name} (${steps[steps.length - 1].seconds} s)${detail ? `: ${detail}` : ""}`);
        return ok;
    };

    const out = path.join(root, "target", "targets");
    const built = path.join(out, `dynamodb-lock-native.${target.platform}.node`);
    let setUp = true;
    if (!values["no-build"] || !fs.existsSync(built))
    {
        setUp = step(`build ${target.triple}`, () =>
        {
            const { main: build } = require("./build-targets.js");
            const saved = process.exitCode;
            build(["--target", target.triple]);
            if (process.exitCode)
            {
                throw new Error("the build failed (see its table above)");
            }
            process.exitCode = saved;
        });
    }
    let node, qemu;
    setUp = setUp && step("install qemu-user, the arm64 runtimes and Node.js for linux arm64", () =>
    {
        qemu = toolchains.qemuArm64();
        node = toolchains.arm64Node(process.versions.node.split(".")[0]);
        return node;
    });
    if (setUp)
    {
        // The wrapper every arm64 Node.js is started through, and the preload naming it.
        const wrapper = toolchains.writeScript(path.join(work, "node"),
            `#!/bin/sh\nexec ${qemu.qemu} -L ${qemu.sysroot} "${node}" "$@"\n`);
        const preload = path.join(work, "exec-path.js");
        fs.writeFileSync(preload, `"use strict";\n// Children started with process.execPath run under qemu too.\nprocess.execPath = ${JSON.stringify(wrapper)};\n`);
        // The loader looks for the binary of its platform (linux-arm64-gnu) in the package's folder.
        fs.copyFileSync(built, path.join(root, path.basename(built)));
        const env = Object.assign({}, process.env, {
            NODE_OPTIONS: [process.env.NODE_OPTIONS, `--require ${preload}`].filter(Boolean).join(" "),
            AWS_EC2_METADATA_DISABLED: "true",
            DDB_ENGINES: "dynalite",
            // The suites' engine runs natively: what runs under emulation is the addon and the
            // processes that use it, not the engine they talk to.
            DDB_ENGINE_NODE: process.execPath,
        });
        const arm64 = (args, extra) =>
        {
            say(`arm64 node ${args.join(" ")}`);
            const r = spawnSync(wrapper, args, Object.assign({ cwd: root, env, stdio: "inherit" }, extra));
            if (r.error || r.status !== 0)
            {
                throw new Error(r.error ? r.error.message : `exit ${r.status}`);
            }
            return r;
        };

        step("load the addon", () =>
        {
            const script = "const L = require('./index.js'); const b = require('./binding.js');"
                + "if (typeof L.FailOpen !== 'function') throw new Error('no FailOpen');"
                + "console.log(`${process.platform}-${process.arch} ${process.version}: ${Object.keys(b).length} native exports`);";
            const r = arm64(["-e", script], { stdio: ["ignore", "pipe", "inherit"], encoding: "utf8" });
            process.stdout.write(r.stdout);
            if (!r.stdout.includes("linux-arm64"))
            {
                throw new Error(`not arm64: ${r.stdout}`);
            }
            return r.stdout.trim();
        });
        step("npm run readme (dynalite on 127.0.0.1)", () => void arm64([path.join("examples", "run-readme.js")]));
        for (const suite of SUITES)
        {
            step(`the ${suite} suite`, () => void arm64(["--test", "--test-concurrency=1", path.join("__test__", `${suite}.test.js`)]));
        }
    }

    console.log("\nlinux arm64 under qemu-aarch64:");
    for (const s of steps)
    {
        console.log(`  ${s.ok ? "passed" : "FAILED"}  ${String(s.seconds).padStart(5)} s  ${s.name}`);
    }
    const total = steps.reduce((n, s) => n + s.seconds, 0);
    const failed = steps.filter(s => !s.ok);
    console.log(`${steps.length - failed.length} passed, ${failed.length} failed (${total} s in all)`);
    if (failed.length > 0)
    {
        process.exitCode = 1;
    }
}

try
{
    main(process.argv.slice(2));
}
catch (err)
{
    console.error(`test:arm64: ${err.message}`);
    process.exitCode = 1;
}
