"use strict";

// Loopback HTTP intermediaries for the transport tests, all on 127.0.0.1:
//   startForwardProxy()                 an HTTP proxy: absolute-form requests and CONNECT
//                                       tunnels; `seen` lists what it was asked
//   startTlsFront({ target })           HTTPS (certificate of the test CA in ./tls) in front
//                                       of a plain-HTTP engine
//   startReverse({ target, onHeaders }) plain HTTP in front of an engine; `onHeaders` may
//                                       change each reply's headers

const fs = require("fs");
const http = require("http");
const https = require("https");
const net = require("net");
const path = require("path");

const TLS_DIR = path.join(__dirname, "tls");
const CA_FILE = path.join(TLS_DIR, "ca.pem");

function listen(server)
{
    return new Promise((resolve, reject) =>
        {
            server.once("error", reject);
            server.listen(0, "127.0.0.1", () => resolve(server.address().port));
        });
}

function closer(server, sockets)
{
    return () => new Promise(resolve =>
        {
            for (const s of sockets)
            {
                s.destroy();
            }
            server.close(() => resolve());
        });
}

function track(server)
{
    const sockets = new Set();
    server.on("connection", s =>
        {
            sockets.add(s);
            s.on("close", () => sockets.delete(s));
        });
    return sockets;
}

// Forwards `req` to `target` (a URL whose origin is used) and passes the reply back, through
// `onHeaders(headers)` when given.
function forward(req, res, target, onHeaders)
{
    const t = new URL(target);
    const chunks = [];
    req.on("data", c => chunks.push(c));
    req.on("end", () =>
        {
            const body = Buffer.concat(chunks);
            const headers = Object.assign({}, req.headers, { host: req.headers.host });
            delete headers["proxy-authorization"];
            const out = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url.startsWith("http") ? new URL(req.url).pathname : req.url, headers },
                up =>
                {
                    const upChunks = [];
                    up.on("data", c => upChunks.push(c));
                    up.on("end", () =>
                        {
                            let replyHeaders = Object.assign({}, up.headers);
                            if (onHeaders)
                            {
                                replyHeaders = onHeaders(replyHeaders) || replyHeaders;
                            }
                            res.writeHead(up.statusCode, replyHeaders);
                            res.end(Buffer.concat(upChunks));
                        });
                });
            out.on("error", e => res.destroy(e));
            out.end(body);
        });
}

async function startForwardProxy()
{
    const seen = [];
    const server = http.createServer((req, res) =>
        {
            seen.push({ method: req.method, url: req.url, auth: req.headers["proxy-authorization"] || null });
            if (!req.url.startsWith("http://"))
            {
                res.writeHead(400);
                return res.end("absolute-form requests only");
            }
            forward(req, res, req.url);
        });
    server.on("connect", (req, client, head) =>
        {
            seen.push({ method: "CONNECT", url: req.url, auth: req.headers["proxy-authorization"] || null });
            const [host, port] = req.url.split(":");
            if (host !== "127.0.0.1" && host !== "localhost")
            {
                client.end("HTTP/1.1 403 Forbidden\r\n\r\n");
                return;
            }
            const up = net.connect(Number(port), "127.0.0.1", () =>
                {
                    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
                    up.write(head);
                    up.pipe(client);
                    client.pipe(up);
                });
            up.on("error", () => client.destroy());
            client.on("error", () => up.destroy());
        });
    const sockets = track(server);
    const port = await listen(server);
    return { url: `http://127.0.0.1:${port}`, seen, close: closer(server, sockets) };
}

async function startTlsFront({ target })
{
    let requests = 0;
    const server = https.createServer(
        { key: fs.readFileSync(path.join(TLS_DIR, "server.key")), cert: fs.readFileSync(path.join(TLS_DIR, "server.pem")) },
        (req, res) =>
        {
            requests++;
            forward(req, res, target);
        });
    const sockets = track(server);
    const port = await listen(server);
    return { endpoint: `https://127.0.0.1:${port}`, requests: () => requests, close: closer(server, sockets) };
}

async function startReverse({ target, onHeaders })
{
    const server = http.createServer((req, res) => forward(req, res, target, onHeaders));
    const sockets = track(server);
    const port = await listen(server);
    return { endpoint: `http://127.0.0.1:${port}`, close: closer(server, sockets) };
}

module.exports = { startForwardProxy, startTlsFront, startReverse, CA_FILE };
