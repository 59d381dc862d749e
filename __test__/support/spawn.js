"use strict";

// Runs a support script in a child Node process with a JSON job as its argument, collects the
// JSON lines it prints, and can write to its stdin. The child is SIGKILLed after `timeoutMs`
// whatever happens.

const path = require("path");
const { spawn } = require("child_process");

const SUPPORT = __dirname;
const CHILD_ENV = Object.assign({}, process.env,
    { AWS_EC2_METADATA_DISABLED: "true", AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE: "1" });

function runScript(script, job, { timeoutMs = 60000, env = CHILD_ENV } = {})
{
    const child = spawn(process.execPath, [path.join(SUPPORT, script), JSON.stringify(job)],
        { stdio: ["pipe", "pipe", "inherit"], env });
    const lines = [];
    const waiters = new Set();
    let buffer = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", chunk =>
        {
            buffer += chunk;
            let i;
            while ((i = buffer.indexOf("\n")) >= 0)
            {
                const text = buffer.slice(0, i);
                buffer = buffer.slice(i + 1);
                let msg;
                try
                {
                    msg = JSON.parse(text);
                }
                catch (_)
                {
                    msg = { unparsed: text };
                }
                lines.push(msg);
                for (const w of [...waiters])
                {
                    w();
                }
            }
        });
    child.stdin.on("error", () => {});
    const started = Date.now();
    const exited = new Promise(resolve => child.on("exit", (code, signal) => resolve({ code, signal, ms: Date.now() - started })));
    const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    exited.then(() => clearTimeout(killer));
    function next(predicate, ms = 30000)
    {
        return new Promise((resolve, reject) =>
            {
                const check = () =>
                {
                    const found = lines.find(predicate);
                    if (found)
                    {
                        clearTimeout(timer);
                        waiters.delete(check);
                        resolve(found);
                        return true;
                    }
                    return false;
                };
                const timer = setTimeout(() =>
                    {
                        waiters.delete(check);
                        reject(new Error(`${script} said ${JSON.stringify(lines)}; waited ${ms} ms`));
                    }, ms);
                if (!check())
                {
                    waiters.add(check);
                }
            });
    }
    return { child, lines, next, exited, send: text => child.stdin.write(text), kill: () => child.kill("SIGKILL") };
}

// Waits until every worker has said `ready`, tells them all `go` at once, and collects what
// they said once they are done and have exited.
async function runTogether(procs, hardTimeoutMs)
{
    await Promise.all(procs.map(p => p.next(l => l.ready || l.error || l.unparsed, 30000)));
    const notReady = procs.filter(p => !p.lines.some(l => l.ready));
    if (notReady.length > 0)
    {
        throw new Error(`workers did not start: ${JSON.stringify(notReady.map(p => p.lines))}`);
    }
    const started = Date.now();
    procs.forEach(p => p.send("go\n"));
    await Promise.all(procs.map(p => p.next(l => l.done || l.error, hardTimeoutMs)));
    const exits = await Promise.all(procs.map(p => p.exited));
    return { ms: Date.now() - started, exits, lines: procs.flatMap(p => p.lines) };
}

// A child holding a lock of this library (support/child.js).
function startChild(job, options)
{
    return runScript("child.js", job, options);
}

module.exports = { runScript, runTogether, startChild };
