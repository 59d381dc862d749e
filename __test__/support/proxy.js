"use strict";

// Fault-injection HTTP proxy for tests.
//
// Sits between an AWS SDK client (Rust aws-sdk-dynamodb, JS SDK v3 or v2) and a
// local DynamoDB engine, both plain http://127.0.0.1:PORT endpoints, and can
// delay, throttle, fail, drop or hang individual DynamoDB requests.
//
//   const { startProxy } = require("./support/proxy");
//   const proxy = await startProxy({ target: "http://127.0.0.1:8000" });
//   proxy.endpoint                       // "http://127.0.0.1:<port>"
//   proxy.setFaults({ throttleRate: 0.2, operations: ["UpdateItem"] });
//   proxy.nextFault("dropAfter", { operation: "PutItem" });
//   await proxy.close();
//
// Semantics:
// - Every request body is read completely before anything else happens, then
//   counted in `counts[operation]` (operation = the part of `x-amz-target`
//   after the last "."; "Unknown" when the header is missing), then passed to
//   `onRequest(op, bodyJson, info)` if set (info: { headers, body, receivedAt },
//   receivedAt being performance.now() when the body had arrived).
// - `onResponse(op, bodyJson, info, { status, body })`, if set, is called with
//   the engine's answer to every forwarded request (the same `info` object
//   onRequest got), whether or not the client is still there to receive it.
// - The fault for a request is chosen in this order:
//     1. the return value of `onRequest`, if it returned a fault kind;
//     2. the oldest pending one-shot from `nextFault()` whose operation matches;
//     3. the random faults of `setFaults()`, if the operation matches
//        `operations`: ONE number r = random() is drawn and compared with the
//        cumulative rates in the order throttle, error, dropBefore, dropAfter,
//        hang (so the rates are exclusive fractions; their sum should be <= 1).
//        `random` is only called when at least one rate is > 0.
// - `replyDelayMs` (a property of the proxy; number or `(op, body) => ms`) holds back the
//   engine's answer after the request was applied.
// - `latencyMs` (number or `(op, body) => ms`) applies to every request whose
//   operation matches `operations`, before the fault is acted on (a throttle is
//   answered late, a forward is sent late). A `{ delayMs }` one-shot adds to it.
//   Hung requests are not delayed (they are never answered anyway).
// - Fault kinds: "throttle" | "error" | "dropBefore" | "dropAfter" | "hang" |
//   { delayMs } | { respond: { status, type, message, headers } } (answer with that
//   DynamoDB error instead of forwarding) | null/"none" (forward normally).
// - `setFaults(f)` REPLACES the random fault configuration (unspecified
//   fields go back to their defaults) and keeps pending one-shots.
//   `clearFaults()` removes random faults AND pending one-shots.
// - DescribeTable (a lock client's global table check, docs/tables.md) is forwarded without
//   counting, hooks, faults or latency, and counted in `describeTables` instead, unless
//   `faultDescribeTable` is set.
// - `resetCounts()` zeroes `counts` and `faultCounts` in place (the objects
//   keep their identity).
// - If the target cannot be reached the client gets HTTP 502 (which both SDKs
//   treat as a transient, retryable error) and `upstreamErrors` is incremented.
//
// Only Node built-ins; listens on 127.0.0.1 only.

const http = require("node:http");
const crypto = require("node:crypto");
const { performance } = require("node:perf_hooks");

const DYNAMODB_NS = "com.amazonaws.dynamodb.v20120810";
const CORAL_URL = `http://internal.amazon.com/coral/${DYNAMODB_NS}/`;
const JSON_CONTENT_TYPE = "application/x-amz-json-1.0";

const FAULT_KINDS = new Set(["throttle", "error", "dropBefore", "dropAfter", "hang"]);
const RATE_KEYS = [
  ["throttleRate", "throttle"],
  ["errorRate", "error"],
  ["dropBeforeRate", "dropBefore"],
  ["dropAfterRate", "dropAfter"],
  ["hangRate", "hang"],
];
const SETTABLE_KEYS = new Set([...RATE_KEYS.map(([k]) => k), "latencyMs", "operations", "random"]);

// Hop-by-hop headers, plus the framing headers we recompute because bodies are buffered.
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "content-length",
]);

// ---------------------------------------------------------------------------
// helpers

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC32 (IEEE) of a buffer, as DynamoDB puts in `x-amz-crc32` (decimal, unsigned). */
function crc32(buf) {
  let crc = 0xffffffff;
  for (let i = 0; i < buf.length; i++) crc = CRC_TABLE[(crc ^ buf[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

const REQUEST_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/** A DynamoDB-style request id: 52 characters of [A-Z0-9]. */
function requestId() {
  const bytes = crypto.randomBytes(52);
  let id = "";
  for (let i = 0; i < bytes.length; i++) id += REQUEST_ID_ALPHABET[bytes[i] % REQUEST_ID_ALPHABET.length];
  return id;
}

function operationOf(headers) {
  const target = headers["x-amz-target"];
  if (typeof target !== "string" || target.length === 0) return "Unknown";
  const dot = target.lastIndexOf(".");
  return dot >= 0 ? target.slice(dot + 1) : target;
}

function checkRate(name, value) {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || value > 1) {
    throw new TypeError(`${name} must be a number in [0, 1], got ${String(value)}`);
  }
  return value;
}

/** Normalises a fault kind; returns null for "forward normally". Throws on unknown kinds. */
function normaliseKind(kind) {
  if (kind === null || kind === undefined || kind === "none") return null;
  if (typeof kind === "string") {
    if (!FAULT_KINDS.has(kind)) {
      throw new TypeError(`unknown fault kind ${JSON.stringify(kind)} (expected one of ${[...FAULT_KINDS].join(", ")} or { delayMs })`);
    }
    return kind;
  }
  if (typeof kind === "object" && typeof kind.delayMs === "number" && Number.isFinite(kind.delayMs) && kind.delayMs >= 0) {
    return { delayMs: kind.delayMs };
  }
  if (typeof kind === "object" && kind.respond && Number.isInteger(kind.respond.status) && typeof kind.respond.type === "string") {
    return { respond: kind.respond };
  }
  throw new TypeError(`unknown fault kind ${JSON.stringify(kind)}`);
}

function opMatcher(operation) {
  if (operation === undefined || operation === null) return () => true;
  if (typeof operation === "string") return (op) => op === operation;
  if (Array.isArray(operation)) {
    const set = new Set(operation);
    return (op) => set.has(op);
  }
  throw new TypeError("operation(s) must be a string, an array of strings, or null");
}

function defaultFaults() {
  return {
    latencyMs: 0,
    throttleRate: 0,
    errorRate: 0,
    dropBeforeRate: 0,
    dropAfterRate: 0,
    hangRate: 0,
    operations: null,
    random: Math.random,
  };
}

function emptyFaultCounts() {
  return { throttled: 0, errored: 0, droppedBefore: 0, droppedAfter: 0, hung: 0, delayed: 0, responded: 0 };
}

// ---------------------------------------------------------------------------
// the proxy

/**
 * Starts the proxy.
 * @param {object} options
 * @param {string} options.target  upstream engine, e.g. "http://127.0.0.1:8000"
 * @param {number} [options.port=0]  port to listen on (127.0.0.1 only)
 * @param {boolean} [options.preserveHost=false]  forward the client's Host header unchanged
 * @param {number} [options.keepAliveTimeoutMs=65000]  idle keep-alive timeout towards clients
 * @param {object} [options.faults]  initial setFaults() argument
 */
const RESENT = Symbol("resent");

async function startProxy(options = {}) {
  const { target, port = 0, preserveHost = false, keepAliveTimeoutMs = 65_000, faults } = options;
  if (typeof target !== "string") throw new TypeError("startProxy: options.target (an http:// URL) is required");
  const targetUrl = new URL(target);
  if (targetUrl.protocol !== "http:") throw new TypeError(`startProxy: only http:// targets are supported, got ${target}`);
  const targetHost = targetUrl.hostname.replace(/^\[|\]$/g, "");
  const targetPort = Number(targetUrl.port || 80);

  // Idle upstream connections are closed after 4 s, before the engine's own keep-alive
  // timeout (Node's server default, 5 s, as dynalite's) can close one under a request.
  const upstreamAgent = new http.Agent({ keepAlive: true, maxSockets: 256, timeout: 4000 });
  const clientSockets = new Set();
  const upstreamRequests = new Set();
  const sleepers = new Set();
  let closed = false;
  let closePromise = null;

  let faultConfig = defaultFaults();
  let faultOpMatches = opMatcher(null);
  let oneShots = []; // { kind, matches, resolve }

  const counts = {};
  const faultCounts = emptyFaultCounts();

  // Resolves after `ms`, or early (with false) when the proxy closes.
  function sleep(ms) {
    return new Promise((resolve) => {
      if (closed) return resolve(false);
      const entry = {
        resolve,
        timer: setTimeout(() => {
          sleepers.delete(entry);
          resolve(true);
        }, ms),
      };
      sleepers.add(entry);
    });
  }

  function sendJson(res, status, body, extraHeaders = {}) {
    if (res.destroyed || res.headersSent) return;
    const payload = Buffer.from(JSON.stringify(body));
    res.writeHead(status, {
      "content-type": JSON_CONTENT_TYPE,
      "content-length": payload.length,
      "x-amzn-requestid": requestId(),
      "x-amz-crc32": String(crc32(payload)),
      ...extraHeaders,
    });
    res.end(payload);
  }

  function sendDynamoError(res, status, name, message) {
    sendJson(res, status, { __type: `${DYNAMODB_NS}#${name}`, message }, { "x-amzn-errortype": `${name}:${CORAL_URL}` });
  }

  // Forwards the buffered request; resolves to { status, headers, body } or null on upstream failure.
  // A request written on a kept-alive connection that the engine closed at that moment was
  // never read by it (Node's `reusedSocket`): it is sent again on a new connection, as a
  // network would carry it, instead of being answered as unreachable.
  async function forward(req, body) {
    const first = await forwardOnce(req, body);
    return first === RESENT ? forwardOnce(req, body) : first;
  }

  function forwardOnce(req, body) {
    return new Promise((resolve) => {
      const headers = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (!HOP_BY_HOP.has(name)) headers[name] = value;
      }
      if (!preserveHost) headers.host = targetUrl.host;
      headers["content-length"] = String(body.length);

      const upReq = http.request({
        host: targetHost,
        port: targetPort,
        method: req.method,
        path: req.url,
        headers,
        agent: upstreamAgent,
      });
      upstreamRequests.add(upReq);
      let settled = false;
      const done = (value) => {
        if (settled) return;
        settled = true;
        upstreamRequests.delete(upReq);
        resolve(value);
      };
      upReq.on("error", (err) => {
        if (upReq.reusedSocket && err.code === "ECONNRESET" && !settled) {
          return done(RESENT);
        }
        api.upstreamErrors += 1;
        api.lastUpstreamError = err;
        done(null);
      });
      upReq.on("response", (upRes) => {
        const chunks = [];
        upRes.on("data", (c) => chunks.push(c));
        upRes.on("error", (err) => {
          api.upstreamErrors += 1;
          api.lastUpstreamError = err;
          done(null);
        });
        upRes.on("aborted", () => {
          api.upstreamErrors += 1;
          api.lastUpstreamError = new Error("upstream response aborted");
          done(null);
        });
        upRes.on("end", () => done({ status: upRes.statusCode, headers: upRes.headers, body: Buffer.concat(chunks) }));
      });
      upReq.end(body);
    });
  }

  function relay(res, upstream) {
    if (res.destroyed || res.headersSent) return;
    const headers = {};
    for (const [name, value] of Object.entries(upstream.headers)) {
      if (!HOP_BY_HOP.has(name)) headers[name] = value;
    }
    if (!headers["x-amzn-requestid"]) headers["x-amzn-requestid"] = requestId();
    headers["content-length"] = String(upstream.body.length);
    res.writeHead(upstream.status, headers);
    res.end(upstream.body);
  }

  function chooseFault(op) {
    for (let i = 0; i < oneShots.length; i++) {
      const shot = oneShots[i];
      if (shot.matches(op)) {
        oneShots.splice(i, 1);
        return shot;
      }
    }
    if (!faultOpMatches(op)) return null;
    const cfg = faultConfig;
    let total = 0;
    for (const [key] of RATE_KEYS) total += cfg[key];
    if (total <= 0) return null;
    const r = cfg.random();
    let acc = 0;
    for (const [key, kind] of RATE_KEYS) {
      acc += cfg[key];
      if (cfg[key] > 0 && r < acc) return { kind };
    }
    return null;
  }

  function latencyFor(op, json) {
    if (!faultOpMatches(op)) return 0;
    const l = faultConfig.latencyMs;
    const ms = typeof l === "function" ? l(op, json) : l;
    return typeof ms === "number" && Number.isFinite(ms) && ms > 0 ? ms : 0;
  }

  async function handle(req, res, body) {
    const op = operationOf(req.headers);
    // A lock client's one DescribeTable (its global table check) is forwarded as it is: it
    // is not counted with the item requests, seen by the hooks, faulted or delayed.
    if (op === "DescribeTable" && !api.faultDescribeTable) {
      api.describeTables += 1;
      const upstream = await forward(req, body);
      if (closed) return;
      if (!upstream) return sendJson(res, 502, { __type: "ProxyUpstreamError", message: "unreachable" });
      return relay(res, upstream);
    }
    counts[op] = (counts[op] || 0) + 1;

    let json = null;
    try {
      json = body.length ? JSON.parse(body.toString("utf8")) : null;
    } catch {
      json = null;
    }

    const info = { headers: req.headers, body, receivedAt: performance.now() };
    let fault;
    let fromHook = false;
    if (typeof api.onRequest === "function") {
      try {
        const verdict = await api.onRequest(op, json, info);
        if (verdict !== undefined) {
          fault = { kind: normaliseKind(verdict) };
          fromHook = true;
        }
      } catch (err) {
        // A broken hook must not wedge the client; report it and forward normally.
        api.hookErrors.push(err);
      }
    }
    if (!fromHook) fault = chooseFault(op);
    const kind = fault ? fault.kind : null;
    if (fault && fault.resolve) fault.resolve({ operation: op, kind, body: json });

    if (kind === "hang") {
      faultCounts.hung += 1;
      return; // never answered; the socket stays tracked and is destroyed by close()
    }

    let delay = latencyFor(op, json);
    if (kind && typeof kind === "object" && kind.delayMs) delay += kind.delayMs;
    if (delay > 0) {
      faultCounts.delayed += 1;
      if (!(await sleep(delay))) return; // closed meanwhile
    }
    if (closed || req.socket.destroyed) return;

    switch (kind) {
      case "throttle":
        faultCounts.throttled += 1;
        return sendDynamoError(
          res,
          400,
          "ProvisionedThroughputExceededException",
          "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API. (injected by test proxy)",
        );
      case "error":
        faultCounts.errored += 1;
        return sendDynamoError(res, 500, "InternalServerError", "Internal server error (injected by test proxy)");
      case "dropBefore":
        faultCounts.droppedBefore += 1;
        req.socket.destroy();
        return;
      default:
        break;
    }
    if (kind && kind.respond) {
      const { status, type, message = "injected by test proxy", headers = {} } = kind.respond;
      faultCounts.responded += 1;
      return sendJson(res, status, { __type: `${DYNAMODB_NS}#${type}`, message }, { "x-amzn-errortype": `${type}:${CORAL_URL}`, ...headers });
    }

    const upstream = await forward(req, body);
    if (upstream && typeof api.onResponse === "function") {
      try {
        api.onResponse(op, json, info, { status: upstream.status, body: upstream.body });
      } catch (err) {
        api.hookErrors.push(err);
      }
    }
    // `replyDelayMs` (number or `(op, body) => ms`): the request has reached the engine (it
    // applied), and its answer is held back this long.
    const replyDelay = typeof api.replyDelayMs === "function" ? api.replyDelayMs(op, json) : api.replyDelayMs;
    if (replyDelay > 0 && !(await sleep(replyDelay))) return;
    if (closed) return;
    if (kind === "dropAfter") {
      faultCounts.droppedAfter += 1;
      req.socket.destroy();
      return;
    }
    if (!upstream) {
      const message = `test proxy could not reach ${target}: ${api.lastUpstreamError && api.lastUpstreamError.message}`;
      return sendJson(res, 502, { __type: "ProxyUpstreamError", message });
    }
    relay(res, upstream);
  }

  const server = http.createServer({ keepAliveTimeout: keepAliveTimeoutMs }, (req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("error", () => {}); // client went away while sending; nothing to do
    req.on("end", () => {
      if (closed) return req.socket.destroy();
      handle(req, res, Buffer.concat(chunks)).catch((err) => {
        api.hookErrors.push(err);
        if (!res.headersSent && !res.destroyed) sendJson(res, 500, { __type: "ProxyInternalError", message: String(err) });
      });
    });
  });
  server.keepAliveTimeout = keepAliveTimeoutMs;
  server.headersTimeout = Math.max(keepAliveTimeoutMs + 1000, 60_000);
  server.requestTimeout = 0; // hung requests are kept until the client gives up or close()
  server.on("connection", (socket) => {
    clientSockets.add(socket);
    socket.on("close", () => clientSockets.delete(socket));
  });
  server.on("clientError", (_err, socket) => socket.destroy());

  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();

  const api = {
    endpoint: `http://127.0.0.1:${address.port}`,
    port: address.port,
    target,
    counts,
    faultCounts,
    /** DescribeTable requests, forwarded apart from `counts` and faults unless `faultDescribeTable`. */
    describeTables: 0,
    faultDescribeTable: false,
    upstreamErrors: 0,
    lastUpstreamError: null,
    hookErrors: [],
    onRequest: null,
    onResponse: null,

    /** Replaces the random-fault configuration (pending one-shots are kept). */
    setFaults(f = {}) {
      for (const key of Object.keys(f)) {
        if (!SETTABLE_KEYS.has(key)) throw new TypeError(`setFaults: unknown option ${JSON.stringify(key)}`);
      }
      const next = defaultFaults();
      for (const [key] of RATE_KEYS) if (f[key] !== undefined) next[key] = checkRate(key, f[key]);
      if (f.latencyMs !== undefined) {
        if (typeof f.latencyMs !== "function" && !(typeof f.latencyMs === "number" && f.latencyMs >= 0)) {
          throw new TypeError("setFaults: latencyMs must be a number >= 0 or a function (op, body) => ms");
        }
        next.latencyMs = f.latencyMs;
      }
      if (f.random !== undefined) {
        if (typeof f.random !== "function") throw new TypeError("setFaults: random must be a function");
        next.random = f.random;
      }
      const matches = opMatcher(f.operations === undefined ? null : f.operations);
      next.operations = f.operations === undefined ? null : f.operations;
      faultConfig = next;
      faultOpMatches = matches;
      return api;
    },

    /** Removes random faults, latency and pending one-shots. */
    clearFaults() {
      faultConfig = defaultFaults();
      faultOpMatches = opMatcher(null);
      oneShots = [];
      return api;
    },

    /** Current random-fault configuration (a copy). */
    get faults() {
      return { ...faultConfig };
    },

    /** Number of one-shot faults not yet applied. */
    get pendingFaults() {
      return oneShots.length;
    },

    /**
     * Applies `kind` to the next request whose operation matches
     * (`operation`: a name, an array of names, or omitted for any).
     * Returns a promise resolving to { operation, kind, body } when it is applied.
     */
    nextFault(kind, { operation } = {}) {
      const normalised = normaliseKind(kind);
      const matches = opMatcher(operation);
      return new Promise((resolve) => {
        oneShots.push({ kind: normalised, matches, resolve });
      });
    },

    /** Zeroes `counts` and `faultCounts` in place. */
    resetCounts() {
      for (const key of Object.keys(counts)) delete counts[key];
      Object.assign(faultCounts, emptyFaultCounts());
      return api;
    },

    /** Closes the server and destroys every open socket (including hung requests). */
    close() {
      if (closePromise) return closePromise;
      closed = true;
      closePromise = new Promise((resolve) => {
        server.close(() => resolve());
        for (const entry of sleepers) {
          clearTimeout(entry.timer);
          entry.resolve(false);
        }
        sleepers.clear();
        for (const upReq of upstreamRequests) upReq.destroy();
        upstreamRequests.clear();
        for (const socket of clientSockets) socket.destroy();
        clientSockets.clear();
        upstreamAgent.destroy();
      });
      return closePromise;
    },
  };

  if (faults) api.setFaults(faults);
  return api;
}

module.exports = { startProxy, crc32 };
