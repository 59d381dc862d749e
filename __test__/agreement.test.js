"use strict";

// The agreement test: the HTTP store's DynamoDB expressions against the core's `op::apply`.
// The addon's internal `agreementRun` (src/agreement, not exported by index.js) runs seeded
// random sequences of every store operation on a few keys, through the HTTP store to the
// engine and through the in-memory store side by side, and reports every step where the
// outcomes or the resulting items differ. A run must also have seen every kind of operation
// both applied and refused, else it would pass without checking anything.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const { agreementRun } = require("../binding.js");

const SEEDS = [1, 2, 3];
const STEPS = 400;

// Kinds without a condition: they always apply.
const UNCONDITIONAL = new Set(["get", "fifo_ticket"]);

const KINDS = [
    "get", "put_if_absent", "delete_if_guid", "take", "take_waited_out", "take_clear_mark",
    "hand_over_fail_open", "hand_over_fail_closed", "put_item_absent", "put_item_absent_or",
    "put_item_guid", "renew", "release", "set_data", "mark_waiting", "fifo_take_free",
    "fifo_ticket", "fifo_reserve", "fifo_untake", "fifo_put_entry", "fifo_grant",
    "fifo_finish_entry", "fifo_delete_finished", "fifo_touch_entry",
];

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
    describe(`the HTTP store agrees with op::apply on ${engineName}`, { timeout: 300000 }, () =>
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
