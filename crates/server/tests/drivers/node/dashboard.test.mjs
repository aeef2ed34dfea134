// Goal: the dashboard at the HTTP port works in a real browser: the page loads in headless
// Chromium (Debian's package, $CHROMIUM_BIN or /usr/bin/chromium), its charts show values that
// move while a client inserts into an indexed collection, and the page logs no console error.
// A screenshot is written to target/test-artifacts/dashboard.png.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoClient } from 'mongodb';
import puppeteer from 'puppeteer-core';
import { startStrata } from './strata.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', '..');

async function chart(page, id) {
  return page.$eval(`#chart-${id}`, (box) => ({
    value: Number(box.dataset.value),
    points: Number(box.dataset.points),
    legend: box.querySelector('.legend').textContent,
  }));
}

test('dashboard in headless Chromium', { timeout: 180_000 }, async () => {
  const server = await startStrata({ http: true });
  const client = new MongoClient(server.uri);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    headless: true,
  });
  const problems = [];
  let inserting = true;
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    page.on('console', (message) => { if (message.type() === 'error') problems.push(message.text()); });
    page.on('pageerror', (error) => problems.push(String(error)));
    const response = await page.goto(`http://${server.httpAddress}/`, { waitUntil: 'load' });
    assert.equal(response.status(), 200);
    const items = client.db('dash').collection('items');
    await items.createIndex({ sku: 1 });
    let n = 0;
    const writer = (async () => {
      while (inserting) {
        await items.insertMany(Array.from({ length: 200 }, () => ({ sku: `s${n++}`, pad: 'x'.repeat(100) })));
      }
    })();
    await sleep(3500);
    const early = { inserts: await chart(page, 'inserts'), indexes: await chart(page, 'indexes') };
    await sleep(3000);
    const later = { inserts: await chart(page, 'inserts'), indexes: await chart(page, 'indexes') };
    inserting = false;
    await writer;
    assert.ok(early.inserts.value > 0 && later.inserts.value > 0, `insert rate shown: ${JSON.stringify([early, later])}`);
    assert.ok(later.inserts.points > early.inserts.points, 'the insert chart gained points');
    assert.match(later.indexes.legend, /dash\.items sku_1/);
    assert.ok(later.indexes.value > early.indexes.value, `index sizes grew: ${early.indexes.value} -> ${later.indexes.value}`);
    const status = await page.$eval('#status', (element) => element.textContent);
    assert.match(status, /^updated /);
    mkdirSync(join(root, 'target', 'test-artifacts'), { recursive: true });
    await page.screenshot({ path: join(root, 'target', 'test-artifacts', 'dashboard.png'), fullPage: true });
    assert.deepEqual(problems, [], 'console errors');
    const health = await fetch(`http://${server.httpAddress}/healthz`);
    assert.equal(health.status, 200);
  } finally {
    inserting = false;
    await browser.close();
    await client.close();
    assert.equal(await server.stop(), 0);
  }
});
