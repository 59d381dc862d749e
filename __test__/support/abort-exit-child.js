"use strict";

// A process whose acquisition is aborted while its write is on the wire, which then closes its
// client and exits at once with process.exit: whatever the aborted write took must be undone
// before close() resolves. Job (argv[2]): { kind, config (with dynamodb), id, abortMs }.
// Prints {"aborted":code}, then {"closed":[outcomes],"closeMs":n}, then exits.

process.env.AWS_EC2_METADATA_DISABLED = "true";

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");

(async () =>
{
    const client = new DynamoDBLockClient[job.kind](job.config);
    const code = await client.acquireLock(job.id, { signal: AbortSignal.timeout(job.abortMs) })
        .then(lock => `acquired ${lock.fencingToken}`, e => e.code || e.name);
    say({ aborted: code });
    const t0 = Date.now();
    const outcomes = await client.close({ releaseLocks: true });
    say({ closed: outcomes, closeMs: Date.now() - t0 });
    process.exit(0);
})().catch(e =>
{
    say({ failed: String(e && e.stack || e) });
    process.exit(1);
});
