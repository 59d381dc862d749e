"use strict";

// Runs __test__/support/child.js and collects its JSON lines.

const path = require("path");
const { spawn } = require("child_process");

function startChild(job, { timeoutMs = 60000 } = {})
{
    const child = spawn(process.execPath, [path.join(__dirname, "child.js"), JSON.stringify(job)],
        { stdio: ["ignore", "pipe", "inherit"], env: Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true" }) });
    const lines = [];
    const waiters = [];
    let buffer = "";
    child.stdout.on("data", chunk =>
        {
            buffer += chunk;
            let i;
            while ((i = buffer.indexOf("\n")) >= 0)
            {
                const msg = JSON.parse(buffer.slice(0, i));
                buffer = buffer.slice(i + 1);
                lines.push(msg);
                waiters.splice(0).forEach(w => w());
            }
        });
    const started = Date.now();
    const exited = new Promise(resolve => child.on("exit", (code, signal) => resolve({ code, signal, ms: Date.now() - started })));
    const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    exited.then(() => clearTimeout(killer));
    function next(predicate, ms = 30000)
    {
        return new Promise((resolve, reject) =>
            {
                const timer = setTimeout(() => reject(new Error(`child said ${JSON.stringify(lines)}; waited ${ms} ms`)), ms);
                const check = () =>
                {
                    const found = lines.find(predicate);
                    if (found)
                    {
                        clearTimeout(timer);
                        return resolve(found);
                    }
                    waiters.push(check);
                };
                check();
            });
    }
    return { child, lines, next, exited, kill: () => child.kill("SIGKILL") };
}

module.exports = { startChild };
