"use strict";

// The command line's usage errors: exit status 2, as its help says, and the flag named as it
// is typed, not the option of the JavaScript API behind it. No engine is reached: each case is
// refused before any request (the endpoint is a closed local port all the same).

const { it } = require("node:test");
const assert = require("node:assert/strict");
const path = require("path");
const { spawnSync } = require("child_process");

const BIN = path.join(__dirname, "..", "bin", "dynamodb-lock-native.js");

function cli(...args)
{
    const env = Object.assign({}, process.env, { AWS_EC2_METADATA_DISABLED: "true", AWS_REGION: "us-east-1",
        AWS_ENDPOINT_URL_DYNAMODB: "http://127.0.0.1:9", AWS_ACCESS_KEY_ID: "dummy", AWS_SECRET_ACCESS_KEY: "dummy" });
    return spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", env, timeout: 30000 });
}

it("--help exits 0 and states the exit statuses", () =>
    {
        const r = cli("--help");
        assert.equal(r.status, 0);
        assert.match(r.stdout, /Exit status: 0 on success \(create-table: the table is ACTIVE;/);
        assert.match(r.stdout, /2 on a usage error/);
    }
);

const cases = [
    [["create-table", "--table", "t"], /--partition-key must be a non-empty string/],
    [["create-table", "--partition-key", "id"], /--table must be a non-empty string/],
    [["create-table", "--table", "t", "--partition-key", "id", "--partition-key-type", "X"], /--partition-key-type must be one of \[S, N, B\]/],
    [["create-table", "--table", "t", "--partition-key", "id", "--billing-mode", "FREE"], /--billing-mode must be one of/],
    [["create-table", "--table", "t", "--partition-key", "id", "--read-capacity", "many"], /--read-capacity must be a whole number, not "many"/],
    [["create-table", "--table", "t", "--partition-key", "id", "--ttl-attribute", "id"], /--ttl-attribute must differ from --partition-key and --sort-key/],
    [["create-table", "--table", "t", "--partition-key", "id", "--endpoint", "localhost:8000"], /--endpoint must be an http or https URL, not "localhost:8000"/],
    [["create-table", "--table", "t", "--partition-key", "id", "--colour", "red"], /Unknown option '--colour'/],
    [["drop-table"], /expected a command: create-table, list, show, release, check-table/],
    [["list"], /--table is required/],
    [["show", "--table", "t"], /show takes the lock id/],
    [["release", "x", "--table", "t"], /release needs --force/],
];
for (const [args, message] of cases)
{
    it(`${args.join(" ")}: exits 2 and names the flag`, () =>
        {
            const r = cli(...args);
            assert.equal(r.status, 2, r.stderr);
            assert.match(r.stderr, message);
            assert.doesNotMatch(r.stderr, /"(lockTable|partitionKey|partitionKeyType|billingMode|readCapacityUnits|ttlAttribute|sortKey)"/);
            assert.match(r.stderr, /Usage: dynamodb-lock-native <command>/);
            assert.equal(r.stdout, "");
        }
    );
}
