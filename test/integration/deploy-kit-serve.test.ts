// The kit's containers run as rendered: the Redis example's command and redis.conf with a real
// redis-server, then the proxy container's command (dist/proxy.js, its flags, its environment,
// its configuration files and Secret files) against that Redis. Only what a laptop cannot have is
// changed: the paths of the mounts (into a temporary directory), the listen addresses (loopback,
// port 0) and Redis's address. The proxy itself then checks the Redis settings (it warns when
// appendonly or maxmemory-policy is not as the kit promises) and serves /healthz.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { findKubectl, findValidator, INSTALL_COMMAND, renderKustomization, type K8sObject } from '../../scripts/deploy-tools.ts';
import { eventually } from '../support/eventually.ts';
import { BUNDLE, ROOT } from '../support/proxy-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'deploy-kit-serve-'));
const children: ChildProcess[] = [];
after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** The mounts' paths, moved under the temporary directory. */
const MOUNTS: [string, string][] = [
  ['/etc/credential-proxy/', join(dir, 'config') + '/'],
  ['/var/run/secrets/credential-proxy/', join(dir, 'secrets') + '/'],
  ['/etc/redis/', join(dir, 'redis-config') + '/'],
  ['/run/redis/', join(dir, 'redis-run') + '/'],
  ['/app/proxy.js', BUNDLE],
];
const moved = (text: string) => MOUNTS.reduce((t, [from, to]) => t.split(from).join(to), text);

function write(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, { mode: 0o600 });
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as { port: number };
  await new Promise((resolve) => s.close(resolve));
  return port;
}

function run(command: string[], args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const [file, ...rest] = command;
  const child = spawn(file!, [...rest, ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out += s));
  return { child, output: () => out };
}

/** Polls `probe` until it gives a value, bounded by the test's timeout (eventually); the failure names `what` and shows the output. */
async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, output: () => string, signal: AbortSignal): Promise<T> {
  let value: T | undefined;
  await eventually(what, async () => (value = await probe()) !== undefined, signal, 50, () => `output:\n${output()}`);
  return value!;
}

const httpGet = (port: number, path: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    get({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (s: string) => (body += s));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });

test('deploy kit: the Redis example and the proxy container start as rendered, the proxy finds Redis as the kit promises (AOF, noeviction, password) and /healthz answers on the metrics listener', async (t) => {
  const kubectl = findKubectl() ?? assert.fail(`kubectl is missing: run \`${INSTALL_COMMAND}\` or put kubectl on PATH`);
  const validator = findValidator() ?? assert.fail(`the schema validator is missing: run \`${INSTALL_COMMAND}\``);
  const base = await renderKustomization(kubectl, validator, join(ROOT, 'deploy', 'base'));
  const redisObjs = await renderKustomization(kubectl, validator, join(ROOT, 'deploy', 'redis'));
  const find = (objs: K8sObject[], kind: string) => objs.find((o) => o.kind === kind)!;

  // The Secrets: one file per key the kit mounts, as `kubectl create secret --from-file` makes them.
  const container = find(base, 'Deployment').spec.template.spec.containers[0];
  const config = find(base, 'ConfigMap').data as Record<string, string>;
  for (const [name, text] of Object.entries(config)) write(join(dir, 'config', name), moved(text));
  const secretPaths = [
    ...JSON.parse(config['hosts.json']!).hosts.map((h: { tokenFile: string }) => h.tokenFile),
    ...JSON.parse(config['providers.json']!).providers.map((p: { keyFile: string }) => p.keyFile),
    ...(container.env as { name: string; value: string }[]).filter((e) => e.name.endsWith('SIGNING_KEY_FILE')).map((e) => e.value),
  ] as string[];
  for (const p of secretPaths) write(moved(p), `${p.split('/').pop()}-${'x'.repeat(40)}\n`);
  const passwordArg = (container.args as string[]).find((a) => a.startsWith('--limits-store-password-file='))!;
  const passwordFile = moved(passwordArg.split('=')[1]!);
  write(passwordFile, `redis-${Math.random().toString(36).slice(2)}-password\n`);

  // Redis: its container's command and its redis.conf, on a free loopback port.
  const redisPort = await freePort();
  const conf = (find(redisObjs, 'ConfigMap').data as Record<string, string>)['redis.conf']!;
  write(join(dir, 'redis-config', 'redis.conf'), moved(conf).replace(/^port 6379$/m, `port ${redisPort}`).replace(/^bind .*$/m, 'bind 127.0.0.1').replace(/^dir \/data$/m, `dir ${join(dir, 'redis-data')}`));
  mkdirSync(join(dir, 'redis-data'));
  mkdirSync(join(dir, 'redis-run'));
  const redisContainer = find(redisObjs, 'StatefulSet').spec.template.spec.containers[0];
  const redis = run((redisContainer.command as string[]).map(moved), [], {});
  await until('redis-server accepting connections', () => new Promise<true | undefined>((resolve) => {
    const s = connect(redisPort, '127.0.0.1', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(undefined));
  }), redis.output, t.signal);
  assert.doesNotMatch(readFileSync(join(dir, 'redis-run', 'auth.conf'), 'utf8'), /\n.+/, 'one line: the password');
  const password = readFileSync(passwordFile, 'utf8').trim();
  const cli = (...a: string[]) => spawnSync('redis-cli', ['-p', String(redisPort), '--no-auth-warning', ...a], { encoding: 'utf8' }).stdout.trim();
  assert.match(cli('PING'), /NOAUTH/, 'Redis refuses a client without the password');
  assert.equal(cli('-a', password, 'CONFIG', 'GET', 'appendonly'), 'appendonly\nyes');
  assert.equal(cli('-a', password, 'CONFIG', 'GET', 'maxmemory-policy'), 'maxmemory-policy\nnoeviction');

  // The proxy: the container's command and args, listen addresses on loopback, Redis's address.
  const args = (container.args as string[]).map((a) => moved(a)
    .replace(/^--(git-auth|model-gateway|metrics)-listen=:\d+$/, '--$1-listen=127.0.0.1:0')
    .replace(/^--limits-store=redis:\/\/[^:]+:6379$/, `--limits-store=redis://127.0.0.1:${redisPort}`));
  const env = Object.fromEntries((container.env as { name: string; value: string }[]).map((e) => [e.name, moved(e.value)]));
  const proxy = run((container.command as string[]).map(moved), args, env);
  const lines = () => proxy.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const ports: Record<string, number> = {};
  for (const listener of ['git', 'model', 'metrics']) {
    const rec = await until(`the ${listener} listening line`, () => lines().find((r) => r.event === 'listening' && r.listener === listener), proxy.output, t.signal);
    ports[listener] = Number(String(rec.address).split(':').pop());
  }
  // The probes' paths, as the Deployment names them, on the metrics listener.
  assert.equal((await httpGet(ports.metrics!, container.readinessProbe.httpGet.path)).status, 200, 'ready');
  assert.equal((await httpGet(ports.metrics!, container.livenessProbe.httpGet.path)).status, 200, 'live');
  // Connected to Redis with the password, its settings checked by the proxy at the first connection.
  await until('the limits store connected', async () => ((await httpGet(ports.metrics!, '/metrics')).body.includes('\nmodel_gateway_limits_store_up 1') ? true : undefined), proxy.output, t.signal);
  await httpGet(ports.metrics!, '/healthz'); // one more round trip: the lines logged before are read
  const warnings = lines().filter((r) => r.event === 'warning').map((r) => String(r.message));
  assert.deepEqual(warnings.filter((w) => /appendonly|maxmemory|CONFIG|settings/i.test(w)), [], 'Redis as the kit sets it up raises no warning');
  assert.deepEqual(warnings.filter((w) => /not authenticated|network-policy mode/.test(w)), [], 'both listeners verify tokens with the signing key files');
  assert.deepEqual(warnings.filter((w) => /cannot be read/.test(w)), [], 'every credential file the kit names is read');
  assert.ok(!proxy.output().includes('x'.repeat(40)), 'no secret in the output');

  proxy.child.kill('SIGTERM');
  const code = await new Promise<number | null>((resolve) => proxy.child.once('exit', (c) => resolve(c)));
  assert.equal(code, 0, `SIGTERM to the container's process: a clean exit\n${proxy.output()}`);
  redis.child.kill('SIGTERM');
});
