"use strict";

// The README as a new user reads it: every JavaScript block runs as shown (examples/run-readme.js,
// `npm run readme`) against each engine, and it points at no file the npm tarball leaves out.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const path = require("path");
const { spawn, spawnSync } = require("child_process");
const { selectedEngines, startEngine } = require("./engines.js");

const root = path.join(__dirname, "..");
const readme = fs.readFileSync(path.join(root, "README.md"), "utf8");

function run(args, timeoutMs)
{
    return new Promise((resolve, reject) =>
    {
        const child = spawn(process.execPath, args, { cwd: root, env: Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true" }) });
        let out = "";
        child.stdout.on("data", d => (out += d));
        child.stderr.on("data", d => (out += d));
        const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
        child.on("error", reject);
        child.on("exit", code =>
        {
            clearTimeout(timer);
            resolve({ code, out });
        });
    });
}

describe("README blocks", () =>
{
    const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)];

    it("has the blocks the runner runs, none with syntax newer than Node 18 or names it does not define", () =>
        {
            assert.ok(blocks.length >= 6, `${blocks.length} JavaScript blocks`);
            for (const [, code] of blocks)
            {
                assert.ok(!/\bawait using\b/.test(code), "`await using` does not parse before Node 24");
                assert.ok(!/^\s*await /m.test(code.split("\n").filter(l => !/^\s/.test(l)).join("\n")), "no top-level await in CommonJS");
            }
        }
    );

    for (const engineName of selectedEngines())
    {
        describe(`on ${engineName}`, { timeout: 300000 }, () =>
        {
            let engine;
            before(async () =>
                {
                    engine = await startEngine(engineName);
                }
            );
            after(async () => engine && engine.stop());

            it("every JavaScript block runs as shown and exits with 0", async () =>
                {
                    const { code, out } = await run([path.join(root, "examples", "run-readme.js"), "--engine-endpoint", engine.endpoint], 240000);
                    const ran = [...out.matchAll(/^README\.md:(\d+) exited with (\d+)$/gm)];
                    assert.equal(ran.length, blocks.length, out);
                    for (const [line, , status] of ran)
                    {
                        assert.equal(status, "0", `${line}\n${out}`);
                    }
                    assert.equal(code, 0, out);
                    assert.match(out, /released closed lock/);
                    assert.match(out, /my-lock-table-name is ready/);
                    assert.match(out, /balance 10, written under fencing token \d+/);
                    assert.match(out, /acct-1 and acct-2 under ticket \d+/);
                }
            );
        });
    }
});

describe("the README and the package", () =>
{
    it("names only files that the tarball holds (others are links to the repository)", () =>
        {
            const r = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8" });
            assert.equal(r.status, 0, r.stderr);
            const files = new Set(JSON.parse(r.stdout)[0].files.map(f => f.path));
            const prose = readme.replace(/^```[\s\S]*?^```$/gm, "");
            const named = [...prose.matchAll(/(?<!\[)`([^`\n]+)`/g)].map(m => m[1])
                .filter(x => /^(\.?[\w-]+\/)+[\w.-]*$/.test(x) || /^[\w.-]+\.(js|mjs|cjs|md|yml|json|toml|ts)$/.test(x))
                .filter(x => x !== "dist/");
            for (const file of named)
            {
                assert.ok(files.has(file) || [...files].some(f => f.startsWith(file)), `README names ${file}, which the tarball leaves out`);
            }
            for (const file of ["LICENSE", "README.md", "index.js", "index.d.ts"])
            {
                assert.ok(files.has(file), `the tarball holds ${file}`);
            }
        }
    );

    it("has a LICENSE matching package.json, and repository, bugs and homepage fields", () =>
        {
            const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
            assert.equal(pkg.license, "MIT");
            assert.match(fs.readFileSync(path.join(root, "LICENSE"), "utf8"), /^MIT License\n\nCopyright \(c\) \d{4} dynamodb-lock-native contributors\n/);
            assert.match(pkg.repository.url, /github\.com\/dynamodb-lock-native\/dynamodb-lock-native/);
            assert.match(pkg.bugs.url, /\/issues$/);
            assert.match(pkg.homepage, /^https:\/\/github\.com\/dynamodb-lock-native\/dynamodb-lock-native/);
        }
    );

    it("lists every error code the package gives", () =>
        {
            const errors = readme.slice(readme.indexOf("## Errors"), readme.indexOf("## Events"));
            for (const code of ["FailedToAcquireLock", "FailedToReleaseLock", "ConfigError", "CredentialsError", "InvalidArgument",
                "InvalidLockId", "InvalidResponse", "HttpStatus", "InternalServerError", "NetworkingError", "TimeoutError",
                "CRC32CheckFailed", "AbortError", "LockLost", "LeaseExpired", "InternalError", "ValidationError", "ResourceNotFoundException"])
            {
                assert.ok(errors.includes(`\`${code}`), `the Errors section lists ${code}`);
            }
        }
    );
});
