"use strict";

// The agreement test: the HTTP store's DynamoDB expressions against the core's `op::apply`.
// The Rust test `agreement::engine_agrees` (src/tests/agreement, compiled into the unit tests only,
// not into the addon) runs seeded random sequences of every store operation on a few keys,
// through the HTTP store to the engine and through the in-memory store side by side, and
// reports every step where the outcomes or the resulting items differ. A run must also have
// seen every kind of operation both applied and refused, else it would pass without checking
// anything.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { spawn } = require("node:child_process");
const path = require("node:path");
const { hostTriple } = require("../scripts/platform.js");

const SEEDS = [1, 2, 3];
const STEPS = 1000;

// Kinds without a condition: they always apply.
const UNCONDITIONAL = new Set(["get", "fifo_ticket"]);

const KINDS = [
    "get", "put_if_absent", "delete_if_guid", "take", "take_waited_out", "take_clear_mark",
    "hand_over_fail_open", "hand_over_fail_closed", "put_item_absent", "put_item_absent_or",
    "put_item_guid", "renew", "release", "set_data", "mark_waiting", "fifo_take_free",
    "fifo_ticket", "fifo_reserve", "fifo_untake", "fifo_put_entry", "fifo_grant",
    "fifo_finish_entry", "fifo_delete_finished", "fifo_touch_entry",
    "sem_take", "sem_grant", "sem_grant_reclaim", "sem_renew", "sem_release",
    "force_free", "force_delete", "revoke", "revoke_session", "mark_revoked", "prune", "prune_semaphore",
];

// One run of `agreement::engine_agrees` through cargo (built already by `npm test`'s unit
// tests; built here otherwise), its report read from the lines it prints.
function agreementRun(o)
{
    const args = ["test", "--workspace", "--target", hostTriple(), "--lib", "--",
        "--ignored", "--exact", "agreement::engine_agrees", "--nocapture", "--test-threads=1"];
    const env = Object.assign({}, process.env, {
        AWS_EC2_METADATA_DISABLED: "true",
        AGREEMENT_ENDPOINT: o.endpoint,
        AGREEMENT_REGION: o.region,
        AGREEMENT_TABLE: o.table,
        AGREEMENT_FIFO_TABLE: o.fifoTable,
        AGREEMENT_SEED: String(o.seed),
        AGREEMENT_STEPS: String(o.steps),
        AGREEMENT_IGNORE_REFUSAL_ITEMS: String(o.ignoreRefusalItems),
    });
    return new Promise((resolve, reject) =>
    {
        const child = spawn("cargo", args, { cwd: path.join(__dirname, ".."), env, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        let err = "";
        child.stdout.on("data", d => (out += d));
        child.stderr.on("data", d => (err += d));
        child.on("error", reject);
        child.on("close", code =>
        {
            if (code !== 0)
            {
                reject(new Error(`cargo ${args.join(" ")} exited ${code}:\n${out.slice(-4000)}\n${err.slice(-4000)}`));
                return;
            }
            const report = { steps: undefined, counts: [], disagreements: [] };
            for (const l of out.split("\n"))
            {
                const f = l.split("\t");
                if (f[0] === "agreement-steps") report.steps = Number(f[1]);
                else if (f[0] === "agreement-count") report.counts.push({ kind: f[1], applied: Number(f[2]), refused: Number(f[3]) });
                else if (f[0] === "agreement-disagreement")
                {
                    const [seed, step, kind, key, op, before, engineOutcome, memoryOutcome, engineItem, memoryItem] = f.slice(1);
                    report.disagreements.push({ seed, step, kind, key, op, before, engineOutcome, memoryOutcome, engineItem, memoryItem });
                }
            }
            resolve(report);
        });
    });
}

function describeDisagreement(d)
{
    return [
        `seed ${d.seed}, step ${d.step}: ${d.kind} on ${d.key}`,
        `  op:      ${d.op}`,
        `  before:  ${d.before}`,
        `  engine:  ${d.engineOutcome}`,
        `  memory:  ${d.memoryOutcome}`,
        `  engine item: ${d.engineItem}`,
        `  memory item: ${d.memoryItem}`,
    ].join("\n");
}

for (const engineName of selectedEngines())
{
    describe(`the HTTP store agrees with op::apply on ${engineName}`, { timeout: 900000 }, () =>
    {
        let engine;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("agree", { partitionKey: "pk" });
                await engine.createTable("agree-fifo", { partitionKey: "pk", sortKey: "sk" });
            }
        );
        after(async () => engine && engine.stop());

        it(`${SEEDS.length} seeds of ${STEPS} steps: no disagreement, every operation applied and refused`, async () =>
            {
                const totals = new Map(KINDS.map(k => [k, { applied: 0, refused: 0 }]));
                const disagreements = [];
                for (const seed of SEEDS)
                {
                    const report = await agreementRun({
                        endpoint: engine.endpoint,
                        region: engine.region,
                        table: "agree",
                        fifoTable: "agree-fifo",
                        seed,
                        steps: STEPS,
                        // dynalite ignores ReturnValuesOnConditionCheckFailure: its refusals
                        // carry no item, so only DynamoDB Local's are compared.
                        ignoreRefusalItems: engineName === "dynalite",
                    });
                    assert.equal(report.steps, STEPS);
                    for (const c of report.counts)
                    {
                        assert.ok(totals.has(c.kind), `unknown kind ${c.kind}`);
                        totals.get(c.kind).applied += c.applied;
                        totals.get(c.kind).refused += c.refused;
                    }
                    disagreements.push(...report.disagreements);
                }
                assert.equal(disagreements.length, 0,
                    `${disagreements.length} disagreement(s):\n${disagreements.slice(0, 10).map(describeDisagreement).join("\n")}`);
                const unseen = [];
                for (const [kind, { applied, refused }] of totals)
                {
                    if (applied === 0) unseen.push(`${kind} never applied`);
                    if (refused === 0 && !UNCONDITIONAL.has(kind)) unseen.push(`${kind} never refused`);
                }
                assert.deepEqual(unseen, [], JSON.stringify(Object.fromEntries(totals)));
            }
        );
    });
}
