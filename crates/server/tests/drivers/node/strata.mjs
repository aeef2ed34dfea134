// Start the real strata binary ($STRATA_BIN) on a free loopback port with a temp dbpath.
// `startStrata({ secure: true })` starts it as production would run it: --auth and requireTLS
// with the certificates in $STRATA_TLS_DIR (made by ../run), creates a root user through the
// localhost exception, and returns a URI that logs in with it over TLS. `{ http: true }` also
// opens the HTTP port (metrics, dashboard) and returns its address. `{ replSet: 'rs0' }` starts it
// with --replSet, initiates the one-member set and returns a URI with ?replicaSet=rs0.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { MongoClient } from 'mongodb';

export const USER = 'admin';
export const PASSWORD = 'a long secret';

function secureArgs() {
  const dir = process.env.STRATA_TLS_DIR;
  if (!dir) throw new Error('STRATA_TLS_DIR is not set (crates/server/tests/drivers/run makes it)');
  return {
    ca: join(dir, 'ca.pem'),
    args: ['--auth', '--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', join(dir, 'server.pem'),
      '--tlsCAFile', join(dir, 'ca.pem'), '--tlsAllowConnectionsWithoutCertificates'],
  };
}

export async function startStrata({ secure = false, http = false, replSet = null } = {}) {
  const bin = process.env.STRATA_BIN;
  if (!bin) throw new Error('STRATA_BIN is not set');
  const dbpath = mkdtempSync(join(tmpdir(), 'strata-node-'));
  const tls = secure ? secureArgs() : null;
  const extra = [...(tls ? tls.args : []), ...(http ? ['--http-port', '0'] : []),
    ...(replSet ? ['--replSet', replSet] : [])];
  const child = spawn(bin, ['serve', '--dbpath', dbpath, '--port', '0', ...extra], {
    env: { ...process.env, RUST_LOG: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // Lines may come in one chunk, several 'line' events at once: queue them for nextLine().
  const lines = createInterface({ input: child.stdout });
  const queued = [];
  const waiting = [];
  lines.on('line', (line) => (waiting.length ? waiting.shift().resolve(line) : queued.push(line)));
  child.once('exit', (code) => waiting.splice(0).forEach((w) => w.reject(new Error(`strata exited with ${code}`))));
  const nextLine = () => new Promise((resolve, reject) => {
    if (queued.length) resolve(queued.shift());
    else waiting.push({ resolve, reject });
  });
  const first = await nextLine();
  if (!first.startsWith('strata listening on ')) throw new Error(`first line ${first}`);
  const address = first.slice('strata listening on '.length).trim();
  // With --http-port the server prints a second line: "strata http on ADDR:PORT".
  const httpAddress = http ? (await nextLine()).split(' ').pop() : null;
  let uri = `mongodb://${address}/?directConnection=true`;
  if (replSet) {
    const setup = new MongoClient(uri);
    await setup.db('admin').command({ replSetInitiate: {} });
    await setup.close();
    uri = `mongodb://${address}/?replicaSet=${replSet}`;
  }
  if (tls) {
    const tlsOptions = `directConnection=true&tls=true&tlsCAFile=${encodeURIComponent(tls.ca)}`;
    const setup = new MongoClient(`mongodb://${address}/?${tlsOptions}`);
    await setup.db('admin').command({ createUser: USER, pwd: PASSWORD, roles: ['root'] });
    await setup.close();
    const credentials = `${encodeURIComponent(USER)}:${encodeURIComponent(PASSWORD)}`;
    uri = `mongodb://${credentials}@${address}/?${tlsOptions}&authSource=admin`;
  }
  return {
    address,
    httpAddress,
    uri,
    caFile: tls?.ca,
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const code = await exited;
      rmSync(dbpath, { recursive: true, force: true });
      return code;
    },
  };
}
