// Start the real strata binary ($STRATA_BIN) on a free loopback port with a temp dbpath.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export async function startStrata() {
  const bin = process.env.STRATA_BIN;
  if (!bin) throw new Error('STRATA_BIN is not set');
  const dbpath = mkdtempSync(join(tmpdir(), 'strata-node-'));
  const child = spawn(bin, ['serve', '--dbpath', dbpath, '--port', '0'], {
    env: { ...process.env, RUST_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`strata exited with ${code}`)));
  });
  if (!first.startsWith('strata listening on ')) throw new Error(`first line ${first}`);
  const address = first.slice('strata listening on '.length).trim();
  return {
    address,
    uri: `mongodb://${address}/?directConnection=true`,
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const code = await exited;
      rmSync(dbpath, { recursive: true, force: true });
      return code;
    },
  };
}
