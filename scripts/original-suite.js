"use strict";

// Runs dynamodb-lock-client@0.7.3's own jest suite against this package: the suite ships in
// the original's npm tarball (index.test.js, test/countdown.js). The tarball is fetched with
// `npm pack`, and jest maps the suite's `require("./index.js")` to this package's index.js;
// nothing else in the suite changes. Prints jest's per-test results as JSON on stdout.

const fs = require("fs");
const os = require("os");
const path = require("path");
const { execFileSync, spawnSync } = require("child_process");

const root = path.join(__dirname, "..");
const work = path.join(root, ".original-suite");

function main()
{
    fs.rmSync(work, { recursive: true, force: true });
    fs.mkdirSync(path.join(work, "test"), { recursive: true });
    const npm = process.platform === "win32" ? "npm.cmd" : "npm";
    const tarball = execFileSync(npm, ["pack", "dynamodb-lock-client@0.7.3", "--silent", "--pack-destination", work],
        { cwd: work, encoding: "utf8" }).trim().split("\n").pop();
    execFileSync("tar", ["xzf", path.join(work, tarball), "-C", work]);
    fs.copyFileSync(path.join(work, "package", "index.test.js"), path.join(work, "index.test.js"));
    fs.copyFileSync(path.join(work, "package", "test", "countdown.js"), path.join(work, "test", "countdown.js"));
    const config =
    {
        rootDir: work,
        testMatch: ["<rootDir>/index.test.js"],
        moduleNameMapper: { "^\\./index\\.js$": path.join(root, "index.js") },
        testEnvironment: "node",
    };
    fs.writeFileSync(path.join(work, "jest.config.json"), JSON.stringify(config));
    const out = path.join(os.tmpdir(), `original-suite-${process.pid}.json`);
    const jest = path.join(root, "node_modules", "jest", "bin", "jest.js");
    spawnSync(process.execPath, [jest, "--config", path.join(work, "jest.config.json"), "--json", "--outputFile", out, "--forceExit"],
        { cwd: root, stdio: ["ignore", "ignore", "inherit"], env: Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true" }) });
    const report = JSON.parse(fs.readFileSync(out, "utf8"));
    fs.rmSync(out, { force: true });
    const tests = report.testResults.flatMap(f => f.assertionResults.map(t => ({ name: t.fullName, status: t.status, failure: (t.failureMessages[0] || "").split("\n")[0] })));
    process.stdout.write(JSON.stringify({ total: report.numTotalTests, passed: report.numPassedTests, failed: report.numFailedTests, tests }, null, 2) + "\n");
}

main();
