// Goal: mongosh (the npm package) connects and runs the same everyday operations as a user
// would type them. Method: one --eval script printing a JSON summary, checked here; once
// against a plain server and once with --auth and requireTLS (user and password over TLS).
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
print(JSON.stringify({ index, one, updated, deleted, total, duplicate, version: db.version() }));
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
      index: 'sku_1', one: 7, updated: 10, deleted: 10, total: 90, duplicate: 11000, version: '7.0.0',
    });
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
