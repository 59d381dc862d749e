"use strict";

// npm puts node_modules/.bin first on the PATH of the scripts it runs, and the Node.js binaries
// among the devDependencies (node22, node24) link a `node` there, so `npm test` and `npm run
// bench` would start on one of those. The Node.js that runs npm is the machine's.

const fs = require("fs");
const path = require("path");

const nodeModules = path.join(__dirname, "..", "node_modules") + path.sep;

function machineNode()
{
    const linked = fs.realpathSync(process.execPath).startsWith(nodeModules);
    return linked && process.env.npm_node_execpath ? process.env.npm_node_execpath : process.execPath;
}

// Puts the machine's Node.js first on this process's PATH, for every `node` its children start.
function preferMachineNode()
{
    const node = machineNode();
    process.env.PATH = path.dirname(node) + path.delimiter + process.env.PATH;
    return node;
}

module.exports = { machineNode, preferMachineNode };
