// Goal: the Node.js driver's everyday calls work against strata: connect, insertMany,
// createIndex, find on the index, update, delete, aggregate, a duplicate-key error; once
// against a plain server and once against one with --auth and requireTLS (SCRAM over TLS).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, MongoServerError } from 'mongodb';
import { startStrata } from './strata.mjs';

for (const secure of [false, true]) test(`node driver smoke${secure ? ' (auth + TLS)' : ''}`, async () => {
  const server = await startStrata({ secure });
  const client = new MongoClient(`${server.uri}&compressors=zlib`);
  try {
    await client.connect();
    const status = await client.db('admin').command({ connectionStatus: 1 });
    assert.deepEqual(status.authInfo.authenticatedUsers, secure ? [{ user: 'admin', db: 'admin' }] : []);
    const items = client.db('nodesmoke').collection('items');
    const docs = Array.from({ length: 300 }, (_, i) => ({ sku: `s${i}`, qty: i }));
    assert.equal((await items.insertMany(docs)).insertedCount, 300);
    assert.equal(await items.createIndex({ sku: 1 }, { unique: true }), 'sku_1');
    assert.equal((await items.findOne({ sku: 's42' })).qty, 42);
    assert.equal((await items.find({ qty: { $gte: 100 } }).batchSize(30).toArray()).length, 200);
    assert.equal((await items.updateMany({ qty: { $lt: 10 } }, { $set: { low: true } })).modifiedCount, 10);
    assert.equal((await items.deleteMany({ low: true })).deletedCount, 10);
    const [group] = await items.aggregate([
      { $match: { qty: { $gte: 290 } } },
      { $group: { _id: null, count: { $sum: 1 } } },
    ]).toArray();
    assert.equal(group.count, 10);
    await assert.rejects(items.insertOne({ sku: 's42' }), (error) => {
      assert.ok(error instanceof MongoServerError);
      assert.equal(error.code, 11000);
      assert.deepEqual(error.keyValue, { sku: 's42' });
      return true;
    });
  } finally {
    await client.close();
    assert.equal(await server.stop(), 0);
  }
});
