"use strict";

// A client's configuration is checked as the original's Joi schema checks it: every problem
// at once, in the schema's order, without converting types; and this library's own rules (TTL,
// sessions, Fifo, the danger margin) on top. No engine: the checks run before any request.

const { describe, it } = require("node:test");
const assert = require("node:assert/strict");
const { configProblems } = require("../lib/config.js");
const { defaults } = require("../lib/bridge.js");
const { DynamoDBLockClient } = require("./helpers.js");

const names = { reserved: defaults.reservedNames, fifoReserved: defaults.fifoReservedNames };
const check = (kind, config) => configProblems(kind, config, names);
// The whole ValidationError's message: every detail, as Joi joins them.
const summary = problems => problems.map(p => p.message).join(". ");

describe("configuration checks", () =>
{
    it("know the lock item's attribute names from the native core", () =>
    {
        for (const name of ["fencingToken", "leaseDurationMs", "guid", "owner", "lockData", "lockSession"])
        {
            assert.ok(defaults.reservedNames.includes(name), name);
        }
        assert.ok(defaults.fifoReservedNames.includes("ticketNext"));
        assert.ok(!defaults.reservedNames.includes("ticketNext"), "a FailOpen key may be called ticketNext");
        assert.equal(defaults.outagePauseMs, 1000, "a campaign pauses after an outage as long as the core's longest backoff");
    });

    it("want a danger margin less than the lease", () =>
    {
        const open = margin => ({ lockTable: "t", partitionKey: "id", leaseDurationMs: 1000, dangerMarginMs: margin });
        for (const margin of [0, 1, 999])
        {
            assert.deepEqual(check("FailOpen", open(margin)), [], String(margin));
        }
        for (const margin of [1000, 5000])
        {
            const p = check("FailOpen", open(margin));
            assert.equal(p.length, 1);
            assert.deepEqual(p[0].path, ["dangerMarginMs"]);
            assert.equal(p[0].type, "number.less");
            assert.equal(p[0].limit, 1000);
            assert.match(p[0].message, /^"dangerMarginMs" must be less than leaseDurationMs \(1000 ms\)/);
        }
        const fifo = { lockTable: "t", partitionKey: "resource", sortKey: "entry", leaseDurationMs: 1000, dangerMarginMs: 1000 };
        assert.deepEqual(check("Fifo", fifo)[0].path, ["dangerMarginMs"]);
        // A margin that is itself refused is not compared with the lease.
        assert.equal(check("FailOpen", open(1e4 + 0.5)).length, 1);
    });

    it("want TTL options together, naming a free attribute", () =>
    {
        const closed = extra => Object.assign({ lockTable: "t", partitionKey: "id", acquirePeriodMs: 10 }, extra);
        const open = extra => Object.assign({ lockTable: "t", partitionKey: "id", leaseDurationMs: 1000 }, extra);
        assert.deepEqual(check("FailOpen", open({ ttlAttribute: "expires" })), []);
        assert.deepEqual(check("FailClosed", closed({ ttlAttribute: "expires", ttlSeconds: 60 })), []);
        assert.equal(summary(check("FailClosed", closed({ ttlAttribute: "expires" }))),
            "\"ttlAttribute\" missing required peer \"ttlSeconds\"");
        assert.equal(summary(check("FailOpen", open({ ttlSeconds: 60 }))),
            "\"ttlSeconds\" missing required peer \"ttlAttribute\"");
        assert.equal(summary(check("FailOpen", open({ ttlAttribute: "id" }))),
            "\"ttlAttribute\" must differ from partitionKey and sortKey");
        assert.equal(summary(check("FailOpen", open({ ttlAttribute: "lockData" }))),
            "\"ttlAttribute\" contains an invalid value");
        assert.equal(summary(check("FailOpen", open({ ttlAttribute: "x", ttlSeconds: 0 }))),
            "\"ttlSeconds\" must be larger than or equal to 1");
        assert.equal(summary(check("FailOpen", { lockTable: "t", partitionKey: "lockData", leaseDurationMs: 1 })),
            "\"partitionKey\" contains an invalid value");
        const userObject = { get() {}, put() {}, delete() {} };
        assert.match(summary(check("FailOpen", open({ dynamodb: userObject, ttlAttribute: "expires" }))),
            /^"ttlAttribute" needs the native core's I\/O/);
    });

    it("report every missing key in the schema's order", () =>
    {
        const p = check("FailClosed", {});
        assert.equal(summary(p), "\"lockTable\" is required. \"partitionKey\" is required. \"acquirePeriodMs\" is required");
        assert.deepEqual(p[0].path, ["lockTable"]);
        assert.equal(p[0].type, "any.required");
    });

    it("refuse what is not an object as Joi does", () =>
    {
        assert.equal(summary(check("FailOpen", undefined)), "\"value\" is required");
        for (const v of [5, null, [], () => {}, "x"])
        {
            const p = check("FailOpen", v);
            assert.equal(summary(p), "\"value\" must be of type object");
            assert.deepEqual(p[0].path, []);
        }
    });

    it("do not convert types", () =>
    {
        const p = check("FailClosed", { owner: 3, lockTable: 5, partitionKey: "owner", acquirePeriodMs: "10", retryCount: -1, extra: 1 });
        assert.equal(summary(p), "\"owner\" must be a string. \"lockTable\" must be a string. \"partitionKey\" contains an invalid"
            + " value. \"acquirePeriodMs\" must be a number. \"retryCount\" must be larger than or equal to 0. \"extra\" is not allowed");
        assert.equal(p[4].limit, 0);
    });

    it("want numbers finite, whole and safe", () =>
    {
        const p = check("FailOpen", {
            lockTable: "t",
            partitionKey: "fencingToken",
            sortKey: "leaseDurationMs",
            leaseDurationMs: NaN,
            heartbeatPeriodMs: Infinity,
            trustLocalTime: "yes",
            retryCount: -1.5,
        });
        assert.equal(summary(p), "\"partitionKey\" contains an invalid value. \"sortKey\" contains an invalid value."
            + " \"heartbeatPeriodMs\" cannot be infinity. \"leaseDurationMs\" must be a number. \"trustLocalTime\" must be a"
            + " boolean. \"retryCount\" must be an integer. \"retryCount\" must be larger than or equal to 0");
        assert.equal(summary(check("FailClosed", { lockTable: "t", partitionKey: "p", acquirePeriodMs: 2 ** 60 })),
            "\"acquirePeriodMs\" must be a safe number");
        assert.equal(summary(check("FailClosed", { lockTable: "t", partitionKey: "p", acquirePeriodMs: -(2 ** 60) })),
            "\"acquirePeriodMs\" must be larger than or equal to 0");
    });

    it("accept a FailClosed sort key", () =>
    {
        assert.deepEqual(check("FailClosed", { lockTable: "t", partitionKey: "p", sortKey: "s", acquirePeriodMs: 0 }), []);
    });

    it("want a user object's three methods", () =>
    {
        const base = dynamodb => ({ dynamodb, lockTable: "t", partitionKey: "p", acquirePeriodMs: 1 });
        assert.equal(summary(check("FailClosed", base({ get: 1 }))),
            "\"dynamodb.delete\" is required. \"dynamodb.get\" must be of type function. \"dynamodb.put\" is required");
        assert.deepEqual(check("FailClosed", base({})), [], "options for the native core (as transport.js describes them)");
        assert.equal(summary(check("FailClosed", base(null))), "\"dynamodb\" must be of type object");
        assert.equal(summary(check("FailClosed", base([]))), "\"dynamodb\" must be of type object");
    });

    it("want an object for the object transport, and leave out what is undefined", () =>
    {
        const base = { lockTable: "t", partitionKey: "p", acquirePeriodMs: 1 };
        assert.equal(summary(check("FailClosed", Object.assign({ transport: "object" }, base))),
            "\"dynamodb\" is required when transport is \"object\"");
        assert.equal(summary(check("FailClosed", Object.assign({ transport: "http" }, base))),
            "\"transport\" must be one of [auto, sdk, object]");
        assert.deepEqual(check("FailClosed", Object.assign({ sortKey: undefined }, base)), []);
    });

    it("read only own enumerable options, as Joi does", () =>
    {
        const inherited = Object.create({ lockTable: "t" });
        Object.assign(inherited, { partitionKey: "p", acquirePeriodMs: 1 });
        Object.defineProperty(inherited, "retryCount", { value: "many", enumerable: false });
        assert.equal(summary(check("FailClosed", inherited)), "\"lockTable\" is required");
    });

    it("refuse empty strings", () =>
    {
        const p = check("FailOpen", { lockTable: "", partitionKey: "", leaseDurationMs: -5, sortKey: 7 });
        assert.equal(summary(p), "\"lockTable\" is not allowed to be empty. \"partitionKey\" is not allowed to be empty."
            + " \"sortKey\" must be a string. \"leaseDurationMs\" must be larger than or equal to 0");
    });

    it("check a FailOpen session's heartbeat, TTL and transport", () =>
    {
        const open = extra => Object.assign({ lockTable: "t", partitionKey: "p", leaseDurationMs: 3000, session: true }, extra);
        assert.deepEqual(check("FailOpen", open({ heartbeatPeriodMs: 1000 })), []);
        assert.match(summary(check("FailOpen", open({}))), /^"session" needs heartbeatPeriodMs above 0 and below leaseDurationMs/);
        assert.match(summary(check("FailOpen", open({ heartbeatPeriodMs: 1000, ttlAttribute: "x" }))),
            /^"session" does not go with ttlAttribute/);
        assert.match(summary(check("FailOpen", open({ heartbeatPeriodMs: 1000, transport: "object", dynamodb: {} }))),
            /"session" needs the native core's I\/O/);
    });

    const fifo = extra => Object.assign({ lockTable: "t", partitionKey: "p", sortKey: "s", leaseDurationMs: 3000 }, extra);

    it("want Fifo's sort key and lease, and name what is missing or unknown", () =>
    {
        assert.deepEqual(check("Fifo", fifo({})), []);
        const p = check("Fifo", { lockTable: "t", partitionKey: "p" });
        assert.equal(summary(p), "\"sortKey\" is required. \"leaseDurationMs\" is required");
        assert.deepEqual(p[0].path, ["sortKey"]);
        assert.equal(summary(check("Fifo", fifo({ heartbeatPeriodMs: 3000, retryCount: 1, waitMs: 5 }))),
            "\"heartbeatPeriodMs\" must be less than leaseDurationMs, or the lease lapses between heartbeats."
                + " \"retryCount\" is not allowed. \"waitMs\" is not allowed");
        assert.equal(summary(check("Fifo", fifo({ leaseDurationMs: 1 }))), "\"leaseDurationMs\" must be larger than or equal to 2");
    });

    it("keep Fifo's attribute names apart from its keys", () =>
    {
        assert.equal(summary(check("Fifo", fifo({ sortKey: "ticketNext", ttlAttribute: "p" }))),
            "\"sortKey\" contains an invalid value. \"ttlAttribute\" must differ from partitionKey and sortKey (default \"ttl\")");
        assert.equal(summary(check("Fifo", fifo({ sortKey: "ttl" }))),
            "\"ttlAttribute\" must differ from partitionKey and sortKey (default \"ttl\")");
        assert.equal(summary(check("Fifo", fifo({ ttlAttribute: "guid" }))), "\"ttlAttribute\" contains an invalid value");
        assert.deepEqual(check("Fifo", fifo({ dynamodb: { get() {}, put() {}, delete() {} } }))[0].path, ["dynamodb"]);
    });

    it("let a FailOpen heartbeat period reach the lease, as the original does", () =>
    {
        const open = hb => ({ lockTable: "t", partitionKey: "p", leaseDurationMs: 100, heartbeatPeriodMs: hb });
        for (const hb of [30, 0, 100, 250])
        {
            assert.deepEqual(check("FailOpen", open(hb)), [], String(hb));
        }
    });

    it("reach users as a ValidationError with Joi's details", () =>
    {
        assert.throws(() => new DynamoDBLockClient.FailOpen({ lockTable: "t", partitionKey: "guid", leaseDurationMs: "1" }), err =>
        {
            assert.equal(err.name, "ValidationError");
            assert.equal(err.message, "\"partitionKey\" contains an invalid value. \"leaseDurationMs\" must be a number");
            assert.deepEqual(err.details.map(d => d.path), [["partitionKey"], ["leaseDurationMs"]]);
            assert.deepEqual(err.details[1].context, { label: "leaseDurationMs", key: "leaseDurationMs", value: "1" });
            return true;
        });
    });
});
