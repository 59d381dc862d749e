"use strict";

// `npm run readme`: start an in-memory DynamoDB (dynalite) on 127.0.0.1, create the
// examples' tables, run every JavaScript block of README.md and then of docs/*.md as it is shown
// (each in a fresh Node process), then examples/readme.js, promises.js, fifo.js, inspection.js
// and lifecycle.js, and stop the engine. No AWS account or network is needed.
// `--engine-endpoint URL` runs against an engine already started instead. Each block reports
// `<file>:<line> exited with <code>`; the exit code is that of the first block or example that
// failed.

const fs = require("fs");
const path = require("path");
const { spawn } = require("child_process");
const dynalite = require("dynalite");
const { DynamoDBClient, CreateTableCommand } = require("@aws-sdk/client-dynamodb");

const credentials = { accessKeyId: "local", secretAccessKey: "local" };

const root = path.join(__dirname, "..");

// The documents whose blocks run: README.md, then docs/*.md in name order.
function documents()
{
    const docs = fs.readdirSync(path.join(root, "docs")).filter(f => f.endsWith(".md")).sort();
    return ["README.md", ...docs.map(f => `docs/${f}`)];
}

// The JavaScript blocks of every document, in order: ES modules (`import`) as .mjs, others as .js.
function documentBlocks()
{
    const blocks = [];
    for (const doc of documents())
    {
        const text = fs.readFileSync(path.join(root, doc), "utf8");
        const fence = /^```js\n([\s\S]*?)^```$/gm;
        for (let m; (m = fence.exec(text));)
        {
            const line = text.slice(0, m.index).split("\n").length;
            const esm = /^import /m.test(m[1]);
            const name = doc.replace(/\W+/g, "-");
            blocks.push({ doc, line, code: m[1], file: `${name}-line-${line}.${esm ? "mjs" : "js"}` });
        }
    }
    return blocks;
}

async function main()
{
    const given = process.argv.indexOf("--engine-endpoint");
    const server = given > 0 ? undefined : dynalite({ createTableMs: 0 });
    if (server)
    {
        await new Promise((resolve, reject) => server.listen(0, "127.0.0.1", e => (e ? reject(e) : resolve())));
    }
    const endpoint = server ? `http://127.0.0.1:${server.address().port}` : process.argv[given + 1];
    // Inside the package, so that `dynamodb-lock-native` resolves to it (a self-reference).
    const dir = path.join(root, ".readme-blocks");
    try
    {
        const ddb = new DynamoDBClient({ endpoint, region: "us-east-1", credentials });
        await ddb.send(new CreateTableCommand(
            {
                TableName: "my-lock-table-name",
                KeySchema: [{ AttributeName: "mylocks", KeyType: "HASH" }],
                AttributeDefinitions: [{ AttributeName: "mylocks", AttributeType: "S" }],
                BillingMode: "PAY_PER_REQUEST",
            }
        ));
        await ddb.send(new CreateTableCommand(
            {
                TableName: "my-fifo-table",
                KeySchema: [{ AttributeName: "resource", KeyType: "HASH" }, { AttributeName: "entry", KeyType: "RANGE" }],
                AttributeDefinitions: [{ AttributeName: "resource", AttributeType: "S" }, { AttributeName: "entry", AttributeType: "S" }],
                BillingMode: "PAY_PER_REQUEST",
            }
        ));
        ddb.destroy();
        let code = 0;
        fs.rmSync(dir, { recursive: true, force: true });
        fs.mkdirSync(dir);
        for (const block of documentBlocks())
        {
            fs.writeFileSync(path.join(dir, block.file), block.code);
            console.log(`\n$ node ${block.doc}:${block.line}`);
            const result = await runExample(path.join(dir, block.file), endpoint);
            console.log(`${block.doc}:${block.line} exited with ${result}`);
            code = code || result;
        }
        for (const example of ["readme.js", "promises.js", "fifo.js", "inspection.js", "lifecycle.js"])
        {
            console.log(`\n$ node examples/${example}`);
            const result = await runExample(path.join(__dirname, example), endpoint);
            console.log(`examples/${example} exited with ${result}`);
            code = code || result;
        }
        process.exitCode = code;
    }
    finally
    {
        fs.rmSync(dir, { recursive: true, force: true });
        if (server)
        {
            await new Promise(resolve => server.close(resolve));
        }
    }
}

function runExample(file, endpoint)
{
    return new Promise((resolve, reject) =>
            {
                const child = spawn(process.execPath, [file],
                    {
                        stdio: "inherit",
                        env: Object.assign({}, process.env,
                            {
                                AWS_REGION: "us-east-1",
                                AWS_ENDPOINT_URL_DYNAMODB: endpoint,
                                AWS_ACCESS_KEY_ID: credentials.accessKeyId,
                                AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
                                AWS_EC2_METADATA_DISABLED: "true",
                            }),
                    });
                const timer = setTimeout(() => child.kill("SIGKILL"), 60000);
                child.on("error", reject);
                child.on("exit", (code, signal) =>
                    {
                        clearTimeout(timer);
                        resolve(signal ? 1 : code);
                    });
            });
}

main().catch(error =>
    {
        console.error(error);
        process.exitCode = 1;
    });
