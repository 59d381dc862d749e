"use strict";

// A child process that holds locks, has an acquisition pending, closes its client and is then
// expected to exit by itself (no process.exit). Job (argv[2]):
//   { kind, config, ids: [...], pendingId, releaseLocks }
// Prints JSON lines: {"held":n}, {"pending":code}, {"closed":[outcomes]}.

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");

(async () =>
{
    const client = new DynamoDBLockClient[job.kind](job.config);
    const locks = [];
    for (const id of job.ids)
    {
        locks.push(await client.acquireLock(id));
    }
    say({ held: locks.length });
    const pending = job.pendingId === undefined ? undefined
        : client.acquireLock(job.pendingId).then(() => "acquired", e => e.code);
    // Let the pending acquisition reach DynamoDB and start waiting.
    await new Promise(resolve => setTimeout(resolve, 200));
    const outcomes = await client.close({ releaseLocks: job.releaseLocks });
    say({ pending: pending && await pending });
    say({ closed: outcomes.map(o => ({ id: o.id, released: o.released, error: o.error && o.error.code })) });
})().catch(e => say({ failed: String(e && e.stack || e) }));
