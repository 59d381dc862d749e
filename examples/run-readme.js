"use strict";

// `npm run readme`: start an in-memory DynamoDB (dynalite) on 127.0.0.1, create the
// examples' tables, run examples/readme.js, promises.js, fifo.js, inspection.js and lifecycle.js against
// it, and stop the engine. No AWS account or network is needed.

const path = require("path");
const { spawn } = require("child_process");
const dynalite = require("dynalite");
const { DynamoDBClient, CreateTableCommand } = require("@aws-sdk/client-dynamodb");

const credentials = { accessKeyId: "local", secretAccessKey: "local" };

async function main()
{
    const server = dynalite({ createTableMs: 0 });
    await new Promise((resolve, reject) => server.listen(0, "127.0.0.1", e => (e ? reject(e) : resolve())));
    const endpoint = `http://127.0.0.1:${server.address().port}`;
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
        for (const example of ["readme.js", "promises.js", "fifo.js", "inspection.js", "lifecycle.js"])
        {
            code = code || await runExample(example, endpoint);
        }
        process.exitCode = code;
    }
    finally
    {
        await new Promise(resolve => server.close(resolve));
    }
}

function runExample(example, endpoint)
{
    console.log(`\n$ node examples/${example}`);
    return new Promise((resolve, reject) =>
            {
                const child = spawn(process.execPath, [path.join(__dirname, example)],
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
