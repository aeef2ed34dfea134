// Goal: mongosh (the npm package) connects and runs the same everyday operations as a user
// would type them. Method: one --eval script printing a JSON summary, checked here; once
// against a plain server and once with --auth and requireTLS (user and password over TLS); then a
// transaction and a change stream on a one-member replica set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { startStrata } from './strata.mjs';

const run = promisify(execFile);
const mongosh = join(dirname(fileURLToPath(import.meta.url)), 'node_modules', '.bin', 'mongosh');

const script = `
const c = db.getSiblingDB('shsmoke').items;
c.insertMany(Array.from({ length: 100 }, (_, i) => ({ sku: 's' + i, qty: i })));
const index = c.createIndex({ sku: 1 }, { unique: true });
const one = c.findOne({ sku: 's7' }).qty;
const updated = c.updateMany({ qty: { $lt: 10 } }, { $set: { low: true } }).modifiedCount;
const deleted = c.deleteMany({ low: true }).deletedCount;
const total = c.aggregate([{ $group: { _id: null, n: { $sum: 1 } } }]).toArray()[0].n;
let duplicate = 0;
try { c.insertOne({ sku: 's50' }); } catch (e) { duplicate = e.code; }
const stats = c.stats();
const counted = stats.count === total && stats.ns === 'shsmoke.items' && stats.nindexes === 2;
print(JSON.stringify({ index, one, updated, deleted, total, duplicate, counted, version: db.version() }));
`;

for (const secure of [false, true]) test(`mongosh smoke${secure ? ' (auth + TLS)' : ''}`, async () => {
  const server = await startStrata({ secure });
  try {
    const { stdout } = await run(mongosh, [server.uri, '--quiet', '--norc', '--eval', script], {
      timeout: 120_000,
      env: { ...process.env, MONGOSH_NO_UPDATE_CHECK: '1', DO_NOT_TRACK: '1' },
    });
    const summary = JSON.parse(stdout.trim().split('\n').pop());
    assert.deepEqual(summary, {
      index: 'sku_1', one: 7, updated: 10, deleted: 10, total: 90, duplicate: 11000, counted: true, version: '7.0.0',
    });
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

// On a one-member replica set: session.withTransaction over two collections (another connection
// sees nothing before the commit, both documents after), one aborted by a throwing function, and
// a collection's change stream (insert, update, delete) resumed after its first event.
const replicaSetScript = (uri) => `
const other = new Mongo(${JSON.stringify(uri)}).getDB('shtx');
const seen = () => [other.orders.findOne({ _id: 1 }), other.stock.findOne({ _id: 'a' })];
const session = db.getMongo().startSession();
const tx = session.getDatabase('shtx');
let before = null;
session.withTransaction(() => {
  tx.orders.insertOne({ _id: 1, sku: 'a' });
  tx.stock.insertOne({ _id: 'a', reserved: 1 });
  before = seen();
});
const after = seen();
let aborted = null;
try {
  session.withTransaction(() => {
    tx.orders.insertOne({ _id: 2 });
    tx.stock.insertOne({ _id: 'b' });
    throw new Error('changed my mind');
  });
} catch (e) { aborted = e.message; }
const left = other.orders.countDocuments({ _id: 2 }) + other.stock.countDocuments({ _id: 'b' });
session.endSession();

const events = db.getSiblingDB('shtx').events;
const stream = events.watch();
events.insertOne({ _id: 1, n: 1 });
events.updateOne({ _id: 1 }, { $set: { n: 2 } });
events.deleteOne({ _id: 1 });
const [insert, update, remove] = [stream.next(), stream.next(), stream.next()];
stream.close();
const resumed = events.watch([], { resumeAfter: insert._id });
const again = [resumed.next(), resumed.next()];
resumed.close();
print(JSON.stringify({
  before, after, aborted, left,
  kinds: [insert, update, remove].map((e) => e.operationType),
  fullDocument: insert.fullDocument,
  updatedFields: update.updateDescription.updatedFields,
  resumedKinds: again.map((e) => e.operationType),
  resumedTokens: again.map((e) => e._id._data).join() === [update, remove].map((e) => e._id._data).join(),
}));
`;

test('mongosh transaction and change stream (replica set)', async () => {
  const server = await startStrata({ replSet: 'rs0' });
  try {
    const { stdout } = await run(mongosh, [server.uri, '--quiet', '--norc', '--eval', replicaSetScript(server.uri)], {
      timeout: 120_000,
      env: { ...process.env, MONGOSH_NO_UPDATE_CHECK: '1', DO_NOT_TRACK: '1' },
    });
    const summary = JSON.parse(stdout.trim().split('\n').pop());
    assert.deepEqual(summary, {
      before: [null, null],
      after: [{ _id: 1, sku: 'a' }, { _id: 'a', reserved: 1 }],
      aborted: 'changed my mind',
      left: 0,
      kinds: ['insert', 'update', 'delete'],
      fullDocument: { _id: 1, n: 1 },
      updatedFields: { n: 2 },
      resumedKinds: ['update', 'delete'],
      resumedTokens: true,
    });
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
