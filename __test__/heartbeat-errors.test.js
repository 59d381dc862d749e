"use strict";

// A failed heartbeat's "error" says whether a retry will mend it or the lease is at risk
// (`error.leaseAtRisk`, with `error.leaseRemainingMs`): failures a retry mends early in the
// lease are the mended kind, those with the lease down to the danger margin, or that no retry
// mends, the at-risk kind. Heartbeats fail through a fault-injecting proxy.

const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const diagnostics = require("node:diagnostics_channel");
const { selectedEngines } = require("./engines.js");
const { engineAndProxy } = require("./support/engine-and-proxy.js");
const { failOpen, uniqueId, until } = require("./helpers.js");

process.env.AWS_EC2_METADATA_DISABLED = "true";

const LEASE = 3000;
// The default danger margin: a third of the lease.
const MARGIN = LEASE / 3;

for (const engineName of selectedEngines())
{
    describe(`heartbeat errors on ${engineName}`, { timeout: 120000 }, () =>
    {
        const env = engineAndProxy(engineName, { locks: { partitionKey: "id" } });

        function viaProxy(extra)
        {
            return failOpen(env.engine, Object.assign({
                dynamodb: { endpoint: env.proxy.endpoint, region: env.engine.region, credentials: env.engine.credentials },
                leaseDurationMs: LEASE,
                heartbeatPeriodMs: 500,
            }, extra));
        }

        it("heartbeats failing with 500s: mended early in the lease, at risk once the danger margin is reached, then lost", async () =>
        {
            const client = viaProxy();
            const lock = await client.acquireLock(uniqueId("hb-transient"));
            const errors = [];
            const published = [];
            const onFailed = message => published.push(message.error);
            diagnostics.subscribe("dynamodb-lock-native:heartbeat-failed", onFailed);
            let lost;
            lock.on("error", error => errors.push(error));
            lock.on("lost", error => (lost = error));
            try
            {
                env.proxy.setFaults({ errorRate: 1, operations: ["UpdateItem"] });
                await until(async () => lost !== undefined, 15000, "the loss");
            }
            finally
            {
                env.proxy.clearFaults();
                diagnostics.unsubscribe("dynamodb-lock-native:heartbeat-failed", onFailed);
            }
            const seen = errors.map(e => ({ code: e.code, leaseAtRisk: e.leaseAtRisk, leaseRemainingMs: Math.round(e.leaseRemainingMs) }));
            assert.ok(errors.length >= 2, JSON.stringify(seen));
            assert.ok(errors.every(e => e.code === "InternalServerError"), JSON.stringify(seen));
            assert.equal(errors[0].leaseAtRisk, false, `the first failure leaves room for retries: ${JSON.stringify(seen)}`);
            assert.ok(errors[0].leaseRemainingMs > MARGIN, JSON.stringify(seen));
            assert.ok(errors.some(e => e.leaseAtRisk === true), `a failure near the end of the lease is at risk: ${JSON.stringify(seen)}`);
            for (const e of errors)
            {
                assert.equal(typeof e.leaseRemainingMs, "number");
                // The at-risk kind is exactly the one with no more than the margin left.
                assert.equal(e.leaseAtRisk, e.leaseRemainingMs <= MARGIN, JSON.stringify(seen));
            }
            assert.equal(lost.code, "LeaseExpired");
            assert.deepEqual(published.map(e => e.leaseAtRisk), errors.map(e => e.leaseAtRisk), "the channel's errors say the same");
            await lock.release().catch(() => {});
            await client.close();
        });

        it("a session's failing renewals: each lock's \"error\" carries the session's lease left, at risk once the danger margin is reached", async () =>
        {
            const client = viaProxy({ session: true });
            const lock = await client.acquireLock(uniqueId("hb-session"));
            const errors = [];
            let danger;
            let lost;
            lock.on("error", error => errors.push(error));
            lock.on("danger", info => (danger = danger || Object.assign({ errors: errors.length }, info)));
            lock.on("lost", error => (lost = error));
            try
            {
                env.proxy.setFaults({ errorRate: 1, operations: ["UpdateItem"] });
                await until(async () => lost !== undefined, 15000, "the loss");
            }
            finally
            {
                env.proxy.clearFaults();
            }
            const seen = errors.map(e => ({ code: e.code, leaseAtRisk: e.leaseAtRisk, leaseRemainingMs: Math.round(e.leaseRemainingMs) }));
            assert.ok(errors.length >= 2, JSON.stringify(seen));
            for (const e of errors)
            {
                assert.equal(typeof e.leaseRemainingMs, "number", JSON.stringify(seen));
                assert.ok(e.leaseRemainingMs >= 0 && e.leaseRemainingMs <= LEASE, JSON.stringify(seen));
                assert.equal(e.leaseAtRisk, e.leaseRemainingMs <= MARGIN, JSON.stringify(seen));
            }
            assert.equal(errors[0].leaseAtRisk, false, JSON.stringify(seen));
            assert.ok(danger, "\"danger\" fired");
            assert.ok(errors.slice(danger.errors).every(e => e.leaseAtRisk), `after "danger", every error is at risk: ${JSON.stringify(seen)}`);
            assert.equal(lost.code, "LeaseExpired");
            await lock.release().catch(() => {});
            await client.close();
        });

        it("a heartbeat refused with an error no retry mends is at risk at once, early in the lease", async () =>
        {
            const client = viaProxy();
            const lock = await client.acquireLock(uniqueId("hb-fatal"));
            const errors = [];
            lock.on("error", error => errors.push(error));
            lock.on("lost", () => {});
            env.proxy.nextFault({ respond: { status: 400, type: "ValidationException", message: "refused by the test" } }, { operation: "UpdateItem" });
            await until(async () => errors.length > 0, 5000, "the refused heartbeat");
            assert.equal(errors[0].code, "ValidationException");
            assert.equal(errors[0].leaseAtRisk, true);
            assert.ok(errors[0].leaseRemainingMs > MARGIN, `early in the lease: ${errors[0].leaseRemainingMs}`);
            await lock.release().catch(() => {});
            await client.close();
        });
    });
}
