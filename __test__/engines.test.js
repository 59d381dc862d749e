'use strict';
// Self-check for __test__/engines.js:  node --test __test__/engines.test.js
// Restrict engines with DDB_ENGINES=dynalite (or dynamodb-local).

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');

const { selectedEngines, startEngine } = require('./engines');

for (const name of selectedEngines()) {
  describe(`engine: ${name}`, () => {
    let engine;

    before(async () => {
      const t0 = Date.now();
      engine = await startEngine(name);
      console.log(`# ${name} started at ${engine.endpoint} in ${Date.now() - t0} ms`);
    });

    after(async () => {
      if (engine) await engine.stop();
    });

    it('exposes connection settings', () => {
      assert.equal(engine.name, name);
      assert.match(engine.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(engine.region, 'us-east-1');
      assert.deepEqual(engine.credentials, { accessKeyId: 'dummy', secretAccessKey: 'dummy' });
      assert.equal(process.env.AWS_EC2_METADATA_DISABLED, 'true');
    });

    it('hash-only table with S key: put/get round-trip', async () => {
      const table = 'hash_only';
      const desc = await engine.createTable(table, { partitionKey: 'id' });
      assert.equal(desc.TableStatus, 'ACTIVE');

      const item = {
        id: { S: 'lock-1' },
        owner: { S: 'worker-a' },
        rvn: { N: '42' },
        blob: { B: Uint8Array.from([0, 1, 254, 255]) },
        flag: { BOOL: true },
      };
      await engine.putItem(table, item);
      const got = await engine.getItem(table, { id: { S: 'lock-1' } });
      assert.deepEqual(got, item);

      assert.equal(await engine.getItem(table, { id: { S: 'missing' } }), undefined);
      assert.equal((await engine.scan(table)).length, 1);

      await engine.deleteTable(table);
    });

    it('hash+range table with N partition and B sort key: put/get round-trip', async () => {
      const table = 'hash_range';
      await engine.createTable(table, {
        partitionKey: 'pk',
        partitionType: 'N',
        sortKey: 'sk',
        sortType: 'B',
      });

      const key = { pk: { N: '7' }, sk: { B: Uint8Array.from([0xde, 0xad, 0xbe, 0xef]) } };
      const item = { ...key, value: { S: 'hello' }, count: { N: '3' } };
      await engine.putItem(table, item);
      await engine.putItem(table, { ...key, sk: { B: Uint8Array.from([1]) }, value: { S: 'other' } });

      const got = await engine.getItem(table, key);
      assert.deepEqual(got, item);

      const all = await engine.scan(table);
      assert.equal(all.length, 2);

      await engine.deleteTable(table);
    });
  });
}
