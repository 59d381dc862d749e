"use strict";

// The platforms the package ships a binary for, and how each is built: the one list that
// `npm run build:targets` (scripts/build-targets.js), `npm run test:arm64` and the release
// workflow follow. It must name exactly `package.json`'s `napi.targets` (a test checks it).
//
// - "zig-glibc": a glibc target, compiled and linked by zig against glibc GLIBC_PROMISED
//   (`napi build -x --target <triple>.<glibc>`: cargo-zigbuild hands the version to zig). napi's
//   own cross toolchain (`--use-napi-cross`) is gcc 4.8, which has no <stdatomic.h> and so
//   cannot compile mimalloc.
// - "zig": a musl target, compiled and linked by zig (`napi build -x`, that is cargo-zigbuild).
// - "zig-or-check": a macOS target: linked by zig where a macOS SDK (SDKROOT) is there to link
//   against, otherwise its Rust compiled only (`cargo check --target`; the C of aws-lc and
//   mimalloc needs the SDK's headers).
// - "check": its Rust compiled only from Linux (`cargo check --target`; the C needs MSVC's
//   headers): its binary is built on its own platform by the release workflow.
// `native: true` where a build on the target's own platform (the release workflow's runner) is
// a plain `napi build --target`.

const TARGETS = [
    { triple: "x86_64-unknown-linux-gnu", platform: "linux-x64-gnu", how: "zig-glibc" },
    { triple: "aarch64-unknown-linux-gnu", platform: "linux-arm64-gnu", how: "zig-glibc" },
    { triple: "x86_64-unknown-linux-musl", platform: "linux-x64-musl", how: "zig" },
    { triple: "aarch64-unknown-linux-musl", platform: "linux-arm64-musl", how: "zig" },
    { triple: "x86_64-apple-darwin", platform: "darwin-x64", how: "zig-or-check" },
    { triple: "aarch64-apple-darwin", platform: "darwin-arm64", how: "zig-or-check" },
    { triple: "x86_64-pc-windows-msvc", platform: "win32-x64-msvc", how: "check" },
];

// The newest glibc a linux-*-gnu binary may need: what README.md and docs/lambda.md promise.
const GLIBC_PROMISED = "2.17";

// The oldest macOS the darwin binaries are built for (the release workflow's
// MACOSX_DEPLOYMENT_TARGET).
const MACOS_DEPLOYMENT_TARGET = "10.13";

module.exports = { TARGETS, GLIBC_PROMISED, MACOS_DEPLOYMENT_TARGET };
