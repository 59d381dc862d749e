"use strict";

// The public types: code written against @types/dynamodb-lock-client 0.7 compiles unchanged
// (module name aside), and the Promise, AbortSignal and `await using` forms type-check.

const { it } = require("node:test");
const assert = require("node:assert/strict");
const path = require("path");
const fs = require("fs");
const { spawnSync } = require("child_process");

const root = path.join(__dirname, "..");
const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc");

it("compiles the example files with tsc --noEmit --strict", { timeout: 120000 }, () =>
    {
        const r = spawnSync(process.execPath, [tsc, "-p", path.join(__dirname, "types", "tsconfig.json")], { encoding: "utf8" });
        assert.equal(r.status, 0, r.stdout + r.stderr);
    }
);

it("rejects a Fifo configuration without its sort key, and Fifo options that are not numbers", { timeout: 120000 }, () =>
    {
        const dir = fs.mkdtempSync(path.join(__dirname, "types", "tmp-"));
        try
        {
            fs.writeFileSync(path.join(dir, "bad.ts"),
                "import { Fifo } from \"dynamodb-lock-native\";\n" +
                "new Fifo({ lockTable: \"t\", partitionKey: \"p\", leaseDurationMs: 1000 });\n" +
                "new Fifo({ lockTable: \"t\", partitionKey: \"p\", sortKey: \"s\", leaseDurationMs: 1000 }).acquireLock(\"x\", { waitMs: \"5\" });\n");
            fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ extends: "../tsconfig.json", files: ["bad.ts"] }));
            const r = spawnSync(process.execPath, [tsc, "-p", path.join(dir, "tsconfig.json")], { encoding: "utf8" });
            assert.notEqual(r.status, 0);
            assert.match(r.stdout, /sortKey/);
            assert.match(r.stdout, /waitMs/);
        }
        finally
        {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
);

it("rejects code that misuses the types (the check is not vacuous)", { timeout: 120000 }, () =>
    {
        const dir = fs.mkdtempSync(path.join(__dirname, "types", "tmp-"));
        try
        {
            fs.writeFileSync(path.join(dir, "bad.ts"),
                "import { FailOpen } from \"dynamodb-lock-native\";\n" +
                "new FailOpen({ lockTable: \"t\", partitionKey: \"p\" });\n" +
                "const n: string = new FailOpen({ lockTable: \"t\", partitionKey: \"p\", leaseDurationMs: 1 }).acquireLock(\"x\");\n");
            fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify(
                {
                    extends: "../tsconfig.json",
                    files: ["bad.ts"],
                }));
            const r = spawnSync(process.execPath, [tsc, "-p", path.join(dir, "tsconfig.json")], { encoding: "utf8" });
            assert.notEqual(r.status, 0);
            assert.match(r.stdout, /leaseDurationMs/);
            assert.match(r.stdout, /Promise<Lock>/);
        }
        finally
        {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
);

it("rejects lock data that is not a string or bytes, and createTable without its keys", { timeout: 120000 }, () =>
    {
        const dir = fs.mkdtempSync(path.join(__dirname, "types", "tmp-"));
        try
        {
            fs.writeFileSync(path.join(dir, "bad.ts"),
                "import { FailOpen, createTable } from \"dynamodb-lock-native\";\n" +
                "new FailOpen({ lockTable: \"t\", partitionKey: \"p\", leaseDurationMs: 1 }).acquireLock(\"x\", { data: 5 });\n" +
                "createTable({ lockTable: \"t\" });\n");
            fs.writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ extends: "../tsconfig.json", files: ["bad.ts"] }));
            const r = spawnSync(process.execPath, [tsc, "-p", path.join(dir, "tsconfig.json")], { encoding: "utf8" });
            assert.notEqual(r.status, 0);
            assert.match(r.stdout, /data/);
            assert.match(r.stdout, /partitionKey/);
        }
        finally
        {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
);
