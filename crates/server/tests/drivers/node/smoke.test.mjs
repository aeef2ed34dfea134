// Goal: the Node.js driver's everyday calls work against strata: connect, insertMany,
// createIndex, find on the index, update, delete, aggregate, a duplicate-key error; once
// against a plain server and once against one with --auth and requireTLS (SCRAM over TLS).
// Then, on a one-member replica set, a transaction and a change stream.
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

// A one-member replica set: a transaction through session.withTransaction (invisible to another
// client until it commits, then both documents at once), one aborted by a throwing callback, and
// a change stream on a collection with its events resumed from the first one's token.
test('node driver transaction and change stream (replica set)', async (t) => {
  const server = await startStrata({ replSet: 'rs0' });
  const client = new MongoClient(server.uri);
  const other = new MongoClient(server.uri);
  try {
    const db = client.db('nodetx');
    const [orders, stock] = [db.collection('orders'), db.collection('stock')];
    const seen = async () => [
      await other.db('nodetx').collection('orders').findOne({ _id: 1 }),
      await other.db('nodetx').collection('stock').findOne({ _id: 'a' }),
    ];
    const session = client.startSession();
    try {
      await session.withTransaction(async () => {
        await orders.insertOne({ _id: 1, sku: 'a' }, { session });
        await stock.insertOne({ _id: 'a', reserved: 1 }, { session });
        assert.deepEqual(await seen(), [null, null]);
      });
      assert.deepEqual(await seen(), [{ _id: 1, sku: 'a' }, { _id: 'a', reserved: 1 }]);
      await assert.rejects(session.withTransaction(async () => {
        await orders.insertOne({ _id: 2 }, { session });
        await stock.insertOne({ _id: 'b' }, { session });
        throw new Error('changed my mind');
      }), /changed my mind/);
      assert.equal(await orders.countDocuments({ _id: 2 }) + await stock.countDocuments({ _id: 'b' }), 0);
    } finally {
      await session.endSession();
    }

    const events = db.collection('events');
    const stream = events.watch([], { maxAwaitTimeMS: 100 });
    const opening = Date.now();
    assert.equal(await stream.tryNext(), null); // opens the stream before the changes
    const waited = Date.now() - opening;
    // Drivers send maxAwaitTimeMS as the getMore's maxTimeMS: the time to wait for events.
    assert.ok(waited < 800, `the empty getMore waits maxAwaitTimeMS (100 ms), not 1 s: tryNext took ${waited} ms`);
    await events.insertOne({ _id: 1, n: 1 });
    await events.updateOne({ _id: 1 }, { $set: { n: 2 } });
    await events.deleteOne({ _id: 1 });
    const [insert, update, remove] = [await stream.next(), await stream.next(), await stream.next()];
    await stream.close();
    assert.deepEqual([insert, update, remove].map((e) => e.operationType), ['insert', 'update', 'delete']);
    assert.deepEqual(insert.fullDocument, { _id: 1, n: 1 });
    assert.deepEqual(update.updateDescription.updatedFields, { n: 2 });
    assert.deepEqual(remove.documentKey, { _id: 1 });
    const resumed = events.watch([], { resumeAfter: insert._id });
    const again = [await resumed.next(), await resumed.next()];
    await resumed.close();
    assert.deepEqual(again.map((e) => e._id), [update._id, remove._id]);
    assert.deepEqual(again.map((e) => e.operationType), ['update', 'delete']);
  } finally {
    await other.close();
    await client.close();
    assert.equal(await server.stop(), 0);
  }
});
