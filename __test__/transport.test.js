"use strict";

// The transport: the environment's proxies (plain HTTP forwarding and CONNECT tunnels,
// NO_PROXY), TLS endpoints with a private CA, and replies whose x-amz-crc32 does not match.
// Each case runs a child process with its own environment, since proxies are read from it.

const { describe, it, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { selectedEngines, startEngine } = require("./engines.js");
const net = require("node:net");
const { DynamoDBLockClient, uniqueId } = require("./helpers.js");
const { startChild } = require("./support/spawn.js");
const { startForwardProxy, startTlsFront, startReverse, CA_FILE } = require("./support/http-proxies.js");

const BASE_ENV = Object.assign({}, process.env,
    { AWS_EC2_METADATA_DISABLED: "true", AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE: "1" });
for (const k of ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY", "all_proxy", "AWS_CA_BUNDLE"])
{
    delete BASE_ENV[k];
}

// Acquires and releases one FailOpen lock in a child process; returns what it said.
async function acquireAndRelease(engine, endpoint, { env = {}, dynamodb = {}, requestTimeoutMs } = {})
{
    const config = {
        dynamodb: Object.assign({ endpoint, region: engine.region, credentials: engine.credentials }, dynamodb),
        lockTable: "locks",
        partitionKey: "id",
        leaseDurationMs: 5000,
    };
    if (requestTimeoutMs)
    {
        config.requestTimeoutMs = requestTimeoutMs;
    }
    const child = startChild({ kind: "FailOpen", config, id: uniqueId("transport"), then: "release" },
        { env: Object.assign({}, BASE_ENV, env), timeoutMs: 60000 });
    const first = await child.next(l => l.acquired || l.error || l.unparsed);
    if (!first.acquired)
    {
        await child.exited;
        return first;
    }
    const released = await child.next(l => l.released !== undefined);
    await child.exited;
    return Object.assign({}, first, { released: released.released });
}

// A TCP relay to `target` on 127.0.0.1 that counts the connections made to it.
function countingRelay(target)
{
    const { port } = new URL(target);
    const sockets = new Set();
    const relay = { opened: 0 };
    const server = net.createServer(socket =>
    {
        relay.opened++;
        const upstream = net.connect(Number(port), "127.0.0.1");
        for (const s of [socket, upstream])
        {
            sockets.add(s);
            s.on("close", () => sockets.delete(s));
            s.on("error", () => {});
        }
        socket.pipe(upstream).pipe(socket);
        socket.on("close", () => upstream.destroy());
        upstream.on("close", () => socket.destroy());
    });
    return new Promise(resolve => server.listen(0, "127.0.0.1", () =>
    {
        relay.endpoint = `http://127.0.0.1:${server.address().port}`;
        relay.close = () => new Promise(done =>
        {
            sockets.forEach(s => s.destroy());
            server.close(() => done());
        });
        resolve(relay);
    }));
}

for (const engineName of selectedEngines())
{
    describe(`transport on ${engineName}`, { timeout: 180000 }, () =>
    {
        let engine;
        let proxy;
        let front;
        before(async () =>
            {
                engine = await startEngine(engineName);
                await engine.createTable("locks", { partitionKey: "id" });
                proxy = await startForwardProxy();
                front = await startTlsFront({ target: engine.endpoint });
            });
        after(async () =>
            {
                for (const s of [front, proxy])
                {
                    if (s)
                    {
                        await s.close();
                    }
                }
                if (engine)
                {
                    await engine.stop();
                }
            });

        it("HTTP_PROXY: plain HTTP requests go through the proxy in absolute form", async () =>
            {
                const before = proxy.seen.length;
                const r = await acquireAndRelease(engine, engine.endpoint, { env: { HTTP_PROXY: proxy.url } });
                assert.equal(r.acquired, true, JSON.stringify(r));
                assert.equal(r.released, true);
                const seen = proxy.seen.slice(before);
                assert.ok(seen.length >= 2, `the proxy forwarded the acquisition and the release: ${JSON.stringify(seen)}`);
                assert.ok(seen.every(s => s.method === "POST" && s.url.startsWith(engine.endpoint)), JSON.stringify(seen));
            });

        it("lowercase http_proxy with credentials sends Proxy-Authorization", async () =>
            {
                const before = proxy.seen.length;
                const withAuth = proxy.url.replace("http://", "http://user:pa%20ss@");
                const r = await acquireAndRelease(engine, engine.endpoint, { env: { http_proxy: withAuth } });
                assert.equal(r.acquired, true, JSON.stringify(r));
                const seen = proxy.seen.slice(before);
                assert.ok(seen.length >= 2);
                const expected = "Basic " + Buffer.from("user:pa ss").toString("base64");
                assert.ok(seen.every(s => s.auth === expected), JSON.stringify(seen));
            });

        it("HTTPS_PROXY: TLS goes through a CONNECT tunnel to the endpoint", async () =>
            {
                const before = proxy.seen.length;
                const served = front.requests();
                const r = await acquireAndRelease(engine, front.endpoint,
                    { env: { HTTPS_PROXY: proxy.url }, dynamodb: { caBundle: CA_FILE } });
                assert.equal(r.acquired, true, JSON.stringify(r));
                assert.equal(r.released, true);
                const seen = proxy.seen.slice(before);
                assert.ok(seen.length >= 1 && seen.every(s => s.method === "CONNECT" && s.url === new URL(front.endpoint).host),
                    JSON.stringify(seen));
                assert.ok(front.requests() - served >= 2, "the TLS endpoint served the requests");
            });

        it("NO_PROXY bypasses the proxy", async () =>
            {
                const before = proxy.seen.length;
                const r = await acquireAndRelease(engine, engine.endpoint,
                    { env: { HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url, NO_PROXY: "localhost,127.0.0.1" } });
                assert.equal(r.acquired, true, JSON.stringify(r));
                assert.equal(proxy.seen.length, before, "nothing went through the proxy");
            });

        it("a TLS endpoint of a private CA is trusted with AWS_CA_BUNDLE or caBundle, refused without", async () =>
            {
                const viaEnv = await acquireAndRelease(engine, front.endpoint, { env: { AWS_CA_BUNDLE: CA_FILE } });
                assert.equal(viaEnv.acquired, true, JSON.stringify(viaEnv));
                const viaOption = await acquireAndRelease(engine, front.endpoint,
                    { dynamodb: { caBundle: require("fs").readFileSync(CA_FILE, "utf8") } });
                assert.equal(viaOption.acquired, true, JSON.stringify(viaOption));
                const refused = await acquireAndRelease(engine, front.endpoint, { requestTimeoutMs: 1000 });
                assert.equal(refused.error, "NetworkingError", JSON.stringify(refused));
                assert.match(refused.message, /certificate/i);
                assert.match(refused.message, /UnknownIssuer/);
            });

        it("256 acquisitions at once, again and again, reuse the connections of the first round", async () =>
            {
                const relay = await countingRelay(engine.endpoint);
                const client = new DynamoDBLockClient.FailOpen({
                    dynamodb: { endpoint: relay.endpoint, region: engine.region, credentials: engine.credentials },
                    lockTable: "locks",
                    partitionKey: "id",
                    leaseDurationMs: 20000,
                    heartbeatPeriodMs: 10000,
                });
                try
                {
                    const ids = Array.from({ length: 256 }, (_, i) => uniqueId(`burst-${i}`));
                    const round = async () =>
                    {
                        const locks = await Promise.all(ids.map(id => client.acquireLock(id)));
                        await Promise.all(locks.map(lock => lock.release()));
                    };
                    await round();
                    const first = relay.opened;
                    assert.ok(first > 1, `the first round opened ${first} connections`);
                    for (let i = 0; i < 3; i++)
                    {
                        await round();
                    }
                    // A later round may have a few more requests out at once than the first had
                    // (the engine's pace varies under load), and opens that many; a pool that did
                    // not keep the first round's connections opens about as many again each round.
                    const later = relay.opened - first;
                    const allowed = Math.max(8, Math.ceil(first / 10));
                    assert.ok(later <= allowed, `three more rounds opened ${later} connections after the first round's ${first} (at most ${allowed})`);
                }
                finally
                {
                    await client.close();
                    await relay.close();
                }
            });

        it("a damaged x-amz-crc32 is retried, and reported clearly when it persists", async () =>
            {
                // First one reply that carries a checksum gets a wrong one; then every reply
                // does (a reply the engine sent without one gets a wrong one added).
                let damage = 1;
                let always = false;
                const reverse = await startReverse({
                    target: engine.endpoint,
                    onHeaders: h =>
                    {
                        const crc = h["x-amz-crc32"];
                        if (always || (crc !== undefined && damage > 0))
                        {
                            damage--;
                            h["x-amz-crc32"] = String(((crc === undefined ? 0 : Number(crc)) + 1) % 4294967296);
                        }
                        return h;
                    },
                });
                try
                {
                    const once = await acquireAndRelease(engine, reverse.endpoint);
                    assert.equal(damage, 0, "the engine sends x-amz-crc32, and one reply was damaged");
                    assert.equal(once.acquired, true, JSON.stringify(once));
                    assert.equal(once.released, true);
                    always = true;
                    const damaged = await acquireAndRelease(engine, reverse.endpoint);
                    assert.equal(damaged.error, "CRC32CheckFailed", JSON.stringify(damaged));
                    assert.match(damaged.message, /x-amz-crc32/);
                }
                finally
                {
                    await reverse.close();
                }
            });
    });
}
