"use strict";

// The set-up most suites share: within a `describe`, start an engine with its tables and a
// fault-injecting proxy in front of it before the tests, and stop both after them.

const { before, after } = require("node:test");
const { startEngine } = require("../engines.js");
const { startProxy } = require("./proxy.js");

// `tables`: { name: { partitionKey, sortKey? } }. Returns an object whose `engine` and `proxy`
// are set once the suite's `before` has run.
function engineAndProxy(engineName, tables)
{
    const env = { engine: undefined, proxy: undefined };
    before(async () =>
    {
        env.engine = await startEngine(engineName);
        for (const [name, keys] of Object.entries(tables))
        {
            await env.engine.createTable(name, keys);
        }
        env.proxy = await startProxy({ target: env.engine.endpoint });
    });
    after(async () =>
    {
        if (env.proxy)
        {
            await env.proxy.close();
        }
        if (env.engine)
        {
            await env.engine.stop();
        }
    });
    return env;
}

module.exports = { engineAndProxy };
