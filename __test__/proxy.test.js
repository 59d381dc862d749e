"use strict";

// Self-test of the fault-injection proxy: node --test __test__/proxy.test.js

const { test, before, after, beforeEach } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const { startProxy, crc32 } = require("./support/proxy");

const NS = "com.amazonaws.dynamodb.v20120810";

// --- a tiny fake DynamoDB: answers JSON and records what it applied -------------

function startFakeUpstream() {
  const applied = []; // { op, body, host }
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const target = req.headers["x-amz-target"] || "";
      const op = target.slice(target.lastIndexOf(".") + 1);
      const raw = Buffer.concat(chunks).toString("utf8");
      applied.push({ op, body: raw ? JSON.parse(raw) : null, host: req.headers.host, method: req.method, url: req.url });
      const payload = Buffer.from(JSON.stringify({ ok: true, op, n: applied.length }));
      res.writeHead(200, {
        "content-type": "application/x-amz-json-1.0",
        "content-length": payload.length,
        "x-amzn-requestid": "UPSTREAM",
        "x-amz-crc32": String(crc32(payload)),
      });
      res.end(payload);
    });
  });
  const sockets = new Set();
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        applied,
        count: (op) => applied.filter((a) => a.op === op).length,
        close: () =>
          new Promise((r) => {
            server.close(() => r());
            for (const s of sockets) s.destroy();
          }),
      });
    });
  });
}

// --- an SDK-like client: keep-alive agent, POST / with x-amz-target -----------

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

function call(endpoint, op, body = {}, { timeoutMs = 5000 } = {}) {
  return new Promise((resolve, reject) => {
    const url = new URL(endpoint);
    const payload = Buffer.from(JSON.stringify(body));
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: "POST",
        path: "/",
        agent,
        headers: {
          "content-type": "application/x-amz-json-1.0",
          "x-amz-target": `DynamoDB_20120810.${op}`,
          "content-length": payload.length,
        },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: res.statusCode, headers: res.headers, raw: text, json: text ? JSON.parse(text) : null });
        });
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`client timeout after ${timeoutMs}ms`)));
    req.on("error", reject);
    req.end(payload);
  });
}

let upstream;
let proxy;

before(async () => {
  upstream = await startFakeUpstream();
  proxy = await startProxy({ target: upstream.url });
});

after(async () => {
  await proxy.close();
  await upstream.close();
  agent.destroy();
});

beforeEach(() => {
  proxy.clearFaults();
  proxy.resetCounts();
  proxy.onRequest = null;
  proxy.onResponse = null;
  upstream.applied.length = 0;
});

test("endpoint is on 127.0.0.1", () => {
  assert.match(proxy.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
});

test("pass-through: status, headers and body relayed; counts per operation", async () => {
  const r1 = await call(proxy.endpoint, "GetItem", { TableName: "t", Key: { k: { S: "a" } } });
  const r2 = await call(proxy.endpoint, "GetItem", { TableName: "t" });
  const r3 = await call(proxy.endpoint, "UpdateItem", { TableName: "t" });
  assert.equal(r1.status, 200);
  assert.deepEqual(r1.json, { ok: true, op: "GetItem", n: 1 });
  assert.equal(r1.headers["x-amzn-requestid"], "UPSTREAM");
  assert.equal(r1.headers["x-amz-crc32"], String(crc32(Buffer.from(r1.raw))));
  assert.equal(r3.json.op, "UpdateItem");
  assert.equal(r2.json.n, 2);
  assert.deepEqual(proxy.counts, { GetItem: 2, UpdateItem: 1 });
  assert.equal(upstream.count("GetItem"), 2);
  assert.equal(upstream.count("UpdateItem"), 1);
  // method, path and body preserved; host rewritten to the target
  const first = upstream.applied[0];
  assert.equal(first.method, "POST");
  assert.equal(first.url, "/");
  assert.deepEqual(first.body, { TableName: "t", Key: { k: { S: "a" } } });
  assert.equal(first.host, new URL(upstream.url).host);
  assert.deepEqual(proxy.faultCounts, { throttled: 0, errored: 0, droppedBefore: 0, droppedAfter: 0, hung: 0, delayed: 0, responded: 0 });

  proxy.resetCounts();
  assert.deepEqual(proxy.counts, {});
});

test("throttleRate 1: 400 ProvisionedThroughputExceededException, not forwarded", async () => {
  proxy.setFaults({ throttleRate: 1 });
  const r = await call(proxy.endpoint, "PutItem", { TableName: "t" });
  assert.equal(r.status, 400);
  assert.equal(r.json.__type, `${NS}#ProvisionedThroughputExceededException`);
  assert.equal(typeof r.json.message, "string");
  assert.match(r.headers["x-amzn-errortype"], /^ProvisionedThroughputExceededException:/);
  assert.match(r.headers["x-amzn-requestid"], /^[A-Z0-9]{52}$/);
  assert.equal(r.headers["content-type"], "application/x-amz-json-1.0");
  assert.equal(r.headers["x-amz-crc32"], String(crc32(Buffer.from(r.raw))));
  assert.equal(upstream.applied.length, 0);
  assert.equal(proxy.counts.PutItem, 1);
  assert.equal(proxy.faultCounts.throttled, 1);
});

test("onRequest { respond }: the given DynamoDB error and headers, not forwarded", async () => {
  proxy.onRequest = () => ({ respond: { status: 400, type: "InvalidSignatureException", message: "no", headers: { date: "Sun, 22 Nov 2026 10:00:00 GMT" } } });
  try {
    const r = await call(proxy.endpoint, "UpdateItem");
    assert.equal(r.status, 400);
    assert.equal(r.json.__type, `${NS}#InvalidSignatureException`);
    assert.equal(r.json.message, "no");
    assert.match(r.headers["x-amzn-errortype"], /^InvalidSignatureException:/);
    assert.equal(r.headers.date, "Sun, 22 Nov 2026 10:00:00 GMT");
    assert.equal(upstream.applied.length, 0);
    assert.equal(proxy.faultCounts.responded, 1);
  } finally {
    proxy.onRequest = null;
  }
});

test("errorRate 1: 500 InternalServerError, not forwarded", async () => {
  proxy.setFaults({ errorRate: 1 });
  const r = await call(proxy.endpoint, "GetItem");
  assert.equal(r.status, 500);
  assert.equal(r.json.__type, `${NS}#InternalServerError`);
  assert.match(r.headers["x-amzn-errortype"], /^InternalServerError:/);
  assert.match(r.headers["x-amzn-requestid"], /^[A-Z0-9]{52}$/);
  assert.equal(upstream.applied.length, 0);
  assert.equal(proxy.faultCounts.errored, 1);
});

test("dropBefore: client sees a socket error, upstream not applied", async () => {
  proxy.setFaults({ dropBeforeRate: 1 });
  await assert.rejects(call(proxy.endpoint, "UpdateItem"), (err) => {
    assert.match(err.code || "", /ECONNRESET|EPIPE/);
    return true;
  });
  assert.equal(upstream.count("UpdateItem"), 0);
  assert.equal(proxy.counts.UpdateItem, 1);
  assert.equal(proxy.faultCounts.droppedBefore, 1);
  // the proxy keeps working for later requests
  proxy.clearFaults();
  assert.equal((await call(proxy.endpoint, "UpdateItem")).status, 200);
  assert.equal(upstream.count("UpdateItem"), 1);
});

test("dropAfter: client sees a socket error, upstream applied", async () => {
  proxy.setFaults({ dropAfterRate: 1 });
  await assert.rejects(call(proxy.endpoint, "UpdateItem", { TableName: "t" }), (err) => {
    assert.match(err.code || "", /ECONNRESET|EPIPE/);
    return true;
  });
  assert.equal(upstream.count("UpdateItem"), 1);
  assert.equal(proxy.faultCounts.droppedAfter, 1);
});

test("latency adds at least the requested delay (number and function)", async () => {
  proxy.setFaults({ latencyMs: 150 });
  let t0 = performance.now();
  let r = await call(proxy.endpoint, "GetItem");
  let elapsed = performance.now() - t0;
  assert.equal(r.status, 200);
  assert.ok(elapsed >= 145, `elapsed ${elapsed}ms < 150ms`); // timer granularity slack
  assert.equal(proxy.faultCounts.delayed, 1);

  proxy.setFaults({ latencyMs: (op) => (op === "PutItem" ? 120 : 0) });
  t0 = performance.now();
  r = await call(proxy.endpoint, "PutItem");
  elapsed = performance.now() - t0;
  assert.equal(r.status, 200);
  assert.ok(elapsed >= 115, `elapsed ${elapsed}ms < 120ms`);
  await call(proxy.endpoint, "GetItem");
  assert.equal(proxy.faultCounts.delayed, 2); // the GetItem got 0ms
});

test("operations filter: faults only hit the listed operations", async () => {
  proxy.setFaults({ throttleRate: 1, operations: ["UpdateItem"] });
  const get = await call(proxy.endpoint, "GetItem");
  const upd = await call(proxy.endpoint, "UpdateItem");
  const put = await call(proxy.endpoint, "PutItem");
  assert.equal(get.status, 200);
  assert.equal(put.status, 200);
  assert.equal(upd.status, 400);
  assert.equal(upstream.count("UpdateItem"), 0);
  assert.equal(upstream.applied.length, 2);
  assert.deepEqual(proxy.counts, { GetItem: 1, UpdateItem: 1, PutItem: 1 });
});

test("random rates use the injected RNG, one draw per request", async () => {
  // cumulative: [0, .25) throttle, [.25, .5) error, otherwise forward
  const draws = [0.1, 0.3, 0.9, 0.2];
  proxy.setFaults({ throttleRate: 0.25, errorRate: 0.25, random: () => draws.shift() });
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await call(proxy.endpoint, "GetItem")).status);
  assert.deepEqual(statuses, [400, 500, 200, 400]);
  assert.equal(draws.length, 0);
  assert.equal(upstream.applied.length, 1);
});

test("nextFault is one-shot and honours the operation", async () => {
  const applied = proxy.nextFault("throttle", { operation: "UpdateItem" });
  assert.equal(proxy.pendingFaults, 1);
  assert.equal((await call(proxy.endpoint, "GetItem")).status, 200); // not matching
  assert.equal((await call(proxy.endpoint, "UpdateItem", { x: 1 })).status, 400); // consumed
  assert.equal((await call(proxy.endpoint, "UpdateItem")).status, 200); // back to normal
  assert.equal(proxy.pendingFaults, 0);
  assert.deepEqual(await applied, { operation: "UpdateItem", kind: "throttle", body: { x: 1 } });
  assert.equal(upstream.count("UpdateItem"), 1);

  proxy.nextFault("dropAfter");
  await assert.rejects(call(proxy.endpoint, "DeleteItem"));
  assert.equal(upstream.count("DeleteItem"), 1);
  assert.equal((await call(proxy.endpoint, "DeleteItem")).status, 200);

  proxy.nextFault({ delayMs: 100 }, { operation: "GetItem" });
  const t0 = performance.now();
  assert.equal((await call(proxy.endpoint, "GetItem")).status, 200);
  assert.ok(performance.now() - t0 >= 95);

  assert.throws(() => proxy.nextFault("explode"), TypeError);
  assert.throws(() => proxy.setFaults({ throttle: 1 }), TypeError);
  assert.throws(() => proxy.setFaults({ errorRate: 2 }), TypeError);
});

test("onRequest sees every request and may pick a fault", async () => {
  const seen = [];
  proxy.onRequest = (op, body) => {
    seen.push([op, body]);
    if (body && body.drop) return "dropBefore";
    return undefined;
  };
  assert.equal((await call(proxy.endpoint, "PutItem", { a: 1 })).status, 200);
  await assert.rejects(call(proxy.endpoint, "PutItem", { drop: true }));
  assert.deepEqual(seen, [
    ["PutItem", { a: 1 }],
    ["PutItem", { drop: true }],
  ]);
  assert.equal(upstream.count("PutItem"), 1);
});

test("onResponse gets the engine's answer to each forwarded request, with the info onRequest got", async () => {
  const requests = [];
  const answers = [];
  proxy.onRequest = (op, body, info) => {
    requests.push(info);
    return undefined;
  };
  proxy.onResponse = (op, body, info, response) => answers.push({ op, body, info, status: response.status, json: JSON.parse(response.body.toString("utf8")) });
  proxy.nextFault({ delayMs: 50 }, { operation: "PutItem" });
  proxy.nextFault("throttle", { operation: "UpdateItem" });
  const t0 = performance.now();
  assert.equal((await call(proxy.endpoint, "PutItem", { a: 1 })).status, 200);
  assert.equal((await call(proxy.endpoint, "UpdateItem", { b: 2 })).status, 400);
  assert.equal(requests.length, 2);
  // The throttled request never reached the engine: no answer from it.
  assert.equal(answers.length, 1);
  assert.equal(answers[0].op, "PutItem");
  assert.deepEqual(answers[0].body, { a: 1 });
  assert.equal(answers[0].status, 200);
  assert.equal(answers[0].json.op, "PutItem");
  assert.equal(answers[0].info, requests[0]);
  // receivedAt is when the request arrived, before the added delay.
  assert.ok(answers[0].info.receivedAt >= t0 && answers[0].info.receivedAt < t0 + 45, `received ${answers[0].info.receivedAt - t0} ms after the call`);
});

test("hang: never forwarded; the client times out; close() resolves promptly", async () => {
  const local = await startProxy({ target: upstream.url });
  const hangAgent = new http.Agent({ keepAlive: true });
  try {
    local.setFaults({ hangRate: 1 });
    // client gives up
    await assert.rejects(call(local.endpoint, "GetItem", {}, { timeoutMs: 200 }), /client timeout/);
    assert.equal(local.faultCounts.hung, 1);

    // a hung request still outstanding when the proxy closes (one-shot hang),
    // and a request sleeping in latency when close() is called
    local.setFaults({ latencyMs: 60_000, operations: ["PutItem"] });
    local.nextFault("hang", { operation: "UpdateItem" });
    const url = new URL(local.endpoint);
    const pending = new Promise((resolve) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: "POST",
          path: "/",
          agent: hangAgent,
          headers: { "x-amz-target": "DynamoDB_20120810.UpdateItem", "content-type": "application/x-amz-json-1.0" },
        },
        () => resolve("response"),
      );
      req.on("error", (err) => resolve(err));
      req.end("{}");
    });
    const sleeping = call(local.endpoint, "PutItem").catch((err) => err);

    // wait (bounded) until both reached the proxy
    for (let i = 0; i < 100 && !(local.counts.UpdateItem === 1 && local.counts.PutItem === 1); i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(local.counts.UpdateItem, 1);
    assert.equal(local.counts.PutItem, 1);
    assert.equal(local.faultCounts.hung, 2);

    const t0 = performance.now();
    await local.close();
    const closeMs = performance.now() - t0;
    assert.ok(closeMs < 1000, `close() took ${closeMs}ms`);
    const outcome = await pending;
    assert.ok(outcome instanceof Error, "hung request should end with a socket error");
    assert.ok((await sleeping) instanceof Error, "delayed request should end with a socket error");
    assert.equal(upstream.applied.length, 0);
    await local.close(); // idempotent
  } finally {
    await local.close();
    hangAgent.destroy();
  }
});

test("unreachable target: 502, counted as an upstream error", async () => {
  // grab a free port, then close it so nothing listens there
  const tmp = http.createServer();
  await new Promise((r) => tmp.listen(0, "127.0.0.1", r));
  const deadPort = tmp.address().port;
  await new Promise((r) => tmp.close(r));

  const local = await startProxy({ target: `http://127.0.0.1:${deadPort}` });
  try {
    const r = await call(local.endpoint, "GetItem");
    assert.equal(r.status, 502);
    assert.equal(local.upstreamErrors, 1);
  } finally {
    await local.close();
  }
});
