'use strict';
// Child-process wrapper around dynalite (in-memory). Listens on 127.0.0.1 with
// an OS-assigned port and prints {"port":N} as a single JSON line on stdout.
// Exits when its stdin closes, so it never outlives the parent test process.

const dynalite = require('dynalite');

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });

server.on('error', (err) => {
  process.stderr.write(`dynalite-server: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  process.stdout.write(JSON.stringify({ port }) + '\n');
});

const shutdown = () => process.exit(0);
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
// Parent gone (pipe closed) -> exit.
process.stdin.on('end', shutdown);
process.stdin.on('error', shutdown);
process.stdin.resume();
