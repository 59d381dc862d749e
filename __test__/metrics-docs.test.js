"use strict";

// The Prometheus and OpenTelemetry examples of docs/metrics.md run as shown, against dynalite,
// and export what the page says: prom-client's registry text holds the wait histogram with
// nonzero counts and the hand-over counter; the in-memory exporter holds one span per
// acquisition and per release, each with the lock id.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("fs");
const path = require("path");
const { spawn } = require("child_process");
const { startEngine } = require("./engines.js");

const root = path.join(__dirname, "..");
// Inside the package, so that `dynamodb-lock-native` resolves to it (a self-reference).
const dir = path.join(root, ".metrics-doc-blocks");
const page = fs.readFileSync(path.join(root, "docs", "metrics.md"), "utf8");
const blocks = [...page.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map(m => m[1]);

// The one block of the page that requires `module`.
function blockUsing(module)
{
    const found = blocks.filter(code => code.includes(`require("${module}")`));
    assert.equal(found.length, 1, `one block of docs/metrics.md requires ${module}`);
    return found[0];
}

function runBlock(name, code, engine)
{
    fs.writeFileSync(path.join(dir, name), code);
    return new Promise((resolve, reject) =>
    {
        const child = spawn(process.execPath, [path.join(dir, name)], {
            cwd: root,
            env: Object.assign({}, process.env, {
                AWS_REGION: engine.region,
                AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
                AWS_ACCESS_KEY_ID: engine.credentials.accessKeyId,
                AWS_SECRET_ACCESS_KEY: engine.credentials.secretAccessKey,
                AWS_EC2_METADATA_DISABLED: "true",
            }),
        });
        let out = "";
        let err = "";
        child.stdout.on("data", d => (out += d));
        child.stderr.on("data", d => (err += d));
        const timer = setTimeout(() => child.kill("SIGKILL"), 60000);
        child.on("error", reject);
        child.on("exit", code =>
        {
            clearTimeout(timer);
            resolve({ code, out, err });
        });
    });
}

describe("docs/metrics.md: Prometheus and OpenTelemetry wiring on dynalite", { timeout: 180000 }, () =>
{
    let engine;
    before(async () =>
    {
        engine = await startEngine("dynalite");
        await engine.createTable("my-lock-table-name", { partitionKey: "mylocks" });
        fs.rmSync(dir, { recursive: true, force: true });
        fs.mkdirSync(dir);
    });
    after(async () =>
    {
        fs.rmSync(dir, { recursive: true, force: true });
        if (engine)
        {
            await engine.stop();
        }
    });

    it("the prom-client example exports the wait histogram with nonzero counts and the counters", async () =>
    {
        const { code, out, err } = await runBlock("prometheus.js", blockUsing("prom-client"), engine);
        assert.equal(code, 0, out + err);
        assert.match(out, /^# TYPE lock_acquire_wait_seconds histogram$/m);
        assert.match(out, /^lock_acquire_wait_seconds_count\{kind="FailOpen"\} 2$/m);
        const buckets = [...out.matchAll(/^lock_acquire_wait_seconds_bucket\{le="([^"]+)",kind="FailOpen"\} (\d+)$/gm)];
        // The bounds of metrics(), in seconds, and +Inf.
        assert.deepEqual(buckets.map(b => b[1]), ["0.001", "0.002", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "+Inf"]);
        assert.equal(Number(buckets[buckets.length - 1][2]), 2, "both waits are counted");
        assert.match(out, /^lock_acquisitions_total 2$/m);
        assert.match(out, /^lock_handovers_total 1$/m);
        assert.match(out, /^lock_heartbeat_failures_total 0$/m);
    });

    it("the OpenTelemetry example makes one span per acquisition and per release, with the lock id", async () =>
    {
        const { code, out, err } = await runBlock("opentelemetry.js", blockUsing("@opentelemetry/api"), engine);
        assert.equal(code, 0, out + err);
        const spans = JSON.parse(out.trim().split("\n").pop());
        const acquires = spans.filter(s => s.name === "lock.acquire");
        const releases = spans.filter(s => s.name === "lock.release");
        assert.deepEqual(acquires.map(s => s.attributes["lock.id"]), ["otel-demo-1", "otel-demo-2"]);
        assert.deepEqual(releases.map(s => s.attributes["lock.id"]), ["otel-demo-1", "otel-demo-2"]);
        for (const s of spans)
        {
            assert.equal(s.attributes["lock.kind"], "FailOpen");
            assert.ok(Number.isInteger(s.attributes["lock.fencing_token"]) && s.attributes["lock.fencing_token"] >= 1, JSON.stringify(s));
        }
        assert.equal(spans.length, 4);
    });
});
