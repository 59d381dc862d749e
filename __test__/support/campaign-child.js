"use strict";

// A candidate in a leader election, for tests. Job (argv[2]): { kind, config, id,
// resignAfterMs? }. Prints {"elected":term,"at":ms} and {"deposed":reason,"term":term,"at":ms}
// lines, and campaigns until it is killed, or resigns `resignAfterMs` after its first election.

const DynamoDBLockClient = require("../..");

const job = JSON.parse(process.argv[2]);
const say = obj => process.stdout.write(JSON.stringify(obj) + "\n");
const client = new DynamoDBLockClient[job.kind](job.config);
const campaign = client.campaign(job.id);
campaign.on("elected", ({ term }) =>
{
    say({ elected: term, at: Date.now() });
    if (job.resignAfterMs !== undefined)
    {
        setTimeout(() => campaign.resign().then(() => say({ resigned: true })), job.resignAfterMs);
    }
});
campaign.on("deposed", ({ term, reason }) => say({ deposed: reason, term, at: Date.now() }));
campaign.on("error", e => say({ error: e.code }));
say({ campaigning: true });
