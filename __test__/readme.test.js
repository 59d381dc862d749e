"use strict";

// The README and docs/ as a new user reads them: every JavaScript block runs as shown
// (examples/run-readme.js, `npm run readme`) against each engine, they point at no file the npm
// tarball leaves out, and every link within them leads to a heading that exists.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const path = require("path");
const { spawn, spawnSync } = require("child_process");
const { selectedEngines, startEngine } = require("./engines.js");

const root = path.join(__dirname, "..");
const readme = fs.readFileSync(path.join(root, "README.md"), "utf8");
// README.md and every page of docs/, by their path in the repository.
const documents = new Map([["README.md", readme]]);
for (const f of fs.readdirSync(path.join(root, "docs")).filter(f => f.endsWith(".md")).sort())
{
    documents.set(`docs/${f}`, fs.readFileSync(path.join(root, "docs", f), "utf8"));
}

// The line of each JavaScript block of a document.
function blockLines(text)
{
    return [...text.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map(m => text.slice(0, m.index).split("\n").length);
}

// The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces as
// hyphens, repeated headings numbered.
function anchors(text)
{
    const seen = new Map();
    const out = new Set();
    for (const [, heading] of text.replace(/^```[\s\S]*?^```$/gm, "").matchAll(/^#{1,6} (.+)$/gm))
    {
        const base = heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
        const n = seen.get(base) || 0;
        seen.set(base, n + 1);
        out.add(n ? `${base}-${n}` : base);
    }
    return out;
}

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

describe("README and docs blocks", () =>
{
    const blocks = [...documents.values()].flatMap(text => [...text.matchAll(/^```js\n([\s\S]*?)^```$/gm)]);

    it("has the blocks the runner runs, none with syntax newer than Node 18 or names it does not define", () =>
        {
            assert.ok(blockLines(readme).length >= 2, `${blockLines(readme).length} JavaScript blocks in the README`);
            assert.ok(blocks.length >= 12, `${blocks.length} JavaScript blocks in the README and docs/`);
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
                    const ran = [...out.matchAll(/^((?:README|docs\/[\w.-]+)\.md):(\d+) exited with (\d+)$/gm)];
                    assert.equal(ran.length, blocks.length, out);
                    for (const [doc, text] of documents)
                    {
                        assert.deepEqual(ran.filter(r => r[1] === doc).map(r => Number(r[2])), blockLines(text), `the blocks of ${doc} ran\n${out}`);
                    }
                    for (const [line, , , status] of ran)
                    {
                        assert.equal(status, "0", `${line}\n${out}`);
                    }
                    assert.equal(code, 0, out);
                    assert.match(out, /released closed lock/);
                    assert.match(out, /my-lock-table-name is ready/);
                    assert.match(out, /balance 10, written under fencing token \d+/);
                    assert.match(out, /acct-1 and acct-2 under ticket \d+/);
                    assert.match(out, /order 42 handled under fencing token \d+/);
                }
            );
        });
    }
});

describe("the README, docs/ and the package", () =>
{
    it("name only files that the tarball holds (others are links to the repository)", () =>
        {
            const r = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8" });
            assert.equal(r.status, 0, r.stderr);
            const files = new Set(JSON.parse(r.stdout)[0].files.map(f => f.path));
            const holds = file => files.has(file) || [...files].some(f => f.startsWith(file));
            for (const [doc, text] of documents)
            {
                assert.ok(files.has(doc), `the tarball holds ${doc}`);
                const prose = text.replace(/^```[\s\S]*?^```$/gm, "");
                const named = [...prose.matchAll(/(?<!\[)`([^`\n]+)`/g)].map(m => m[1])
                    .filter(x => /^(\.?[\w-]+\/)+[\w.-]*$/.test(x) || /^[\w.-]+\.(js|mjs|cjs|md|yml|json|toml|ts)$/.test(x))
                    .filter(x => x !== "dist/");
                for (const file of named)
                {
                    assert.ok(holds(file), `${doc} names ${file}, which the tarball leaves out`);
                }
                // Relative links are read inside the installed package too: they must lead into it.
                for (const [, target] of prose.matchAll(/\]\(([^)\s]+)\)/g))
                {
                    if (/^[a-z]+:/.test(target) || target.startsWith("#"))
                    {
                        continue;
                    }
                    const file = path.posix.normalize(path.posix.join(path.posix.dirname(doc), target.split("#")[0]));
                    assert.ok(holds(file), `${doc} links to ${target}, which the tarball leaves out`);
                }
            }
            for (const file of ["LICENSE", "README.md", "index.js", "index.d.ts"])
            {
                assert.ok(files.has(file), `the tarball holds ${file}`);
            }
        }
    );

    it("link only to headings that exist, and the README's contents list every section", () =>
        {
            for (const [doc, text] of documents)
            {
                const prose = text.replace(/^```[\s\S]*?^```$/gm, "");
                for (const [, target] of prose.matchAll(/\]\(([^)\s]*#[^)\s]+)\)/g))
                {
                    if (/^[a-z]+:/.test(target))
                    {
                        continue;
                    }
                    const [file, anchor] = target.split("#");
                    const other = file ? path.posix.normalize(path.posix.join(path.posix.dirname(doc), file)) : doc;
                    assert.ok(documents.has(other), `${doc} links to ${target}: no such document`);
                    assert.ok(anchors(documents.get(other)).has(anchor), `${doc} links to ${target}: no such heading`);
                }
            }
            const contents = readme.slice(readme.indexOf("## Contents"), readme.indexOf("\n## ", readme.indexOf("## Contents") + 1));
            for (const [, section] of readme.replace(/^```[\s\S]*?^```$/gm, "").matchAll(/^## (.+)$/gm))
            {
                if (section !== "Contents")
                {
                    assert.ok(contents.includes(`](#${[...anchors(`## ${section}`)][0]})`), `the contents list "${section}"`);
                }
            }
        }
    );

    it("keep the README short enough to read in minutes", () =>
        {
            const lines = readme.split("\n").length - 1;
            assert.ok(lines <= 600, `README.md has ${lines} lines`);
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
                "CRC32CheckFailed", "AbortError", "LockLost", "LeaseExpired", "InternalError", "ValidationError", "ResourceNotFoundException",
                "PermitsMismatch"])
            {
                assert.ok(errors.includes(`\`${code}`), `the Errors section lists ${code}`);
            }
        }
    );
});
