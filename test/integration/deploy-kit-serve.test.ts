// The kit's containers run as rendered: the Redis example's three pods (each its redis and
// sentinel containers: their commands, scripts and config files) with real redis-server
// processes, then the proxy container's command (dist/proxy.js, its flags, its environment, its
// configuration files and Secret files) against them. Only what a laptop cannot have is changed:
// the paths of the mounts (into a temporary directory, one per pod), the listen addresses
// (loopback, port 0 or a free port), the pods' names (127.0.0.1 and a port each) and the
// values the downward API gives. The proxy itself then checks the Redis settings (it warns when
// appendonly or maxmemory-policy is not as the kit promises) and serves /healthz; the master's pod
// killed, the sentinels fail over and the proxy follows, and the pod started again joins the set
// as a replica of the new master, as its script finds it.
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
import { redisAsk } from '../support/redis-sentinel.ts';
import { BUNDLE, ROOT } from '../support/proxy-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'deploy-kit-serve-'));
const children: ChildProcess[] = [];
after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** The mounts' paths, moved under the temporary directory: the proxy's, and each Redis pod's own. */
const MOUNTS: [string, string][] = [
  ['/etc/credential-proxy/', join(dir, 'config') + '/'],
  ['/var/run/secrets/credential-proxy/', join(dir, 'secrets') + '/'],
  ['/app/proxy.js', BUNDLE],
];
const moved = (text: string) => MOUNTS.reduce((t, [from, to]) => t.split(from).join(to), text);
const podDir = (i: number) => join(dir, `redis-${i}`);
const podMounts = (i: number): [string, string][] => [
  ['/etc/redis/', join(podDir(i), 'config') + '/'],
  ['/run/redis/', join(podDir(i), 'run-redis') + '/'],
  ['/run/sentinel', join(podDir(i), 'run-sentinel')],
  ['dir /data', `dir ${join(podDir(i), 'data')}`],
  ...MOUNTS,
];
const movedIn = (i: number, text: string) => podMounts(i).reduce((t, [from, to]) => t.split(from).join(to), text);

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

test('deploy kit: the Redis example (three pods, Redis and Sentinel) and the proxy container start as rendered, the proxy finds Redis as the kit promises (AOF, noeviction, password) and /healthz answers on the metrics listener; the master\'s pod killed, the proxy follows the promoted replica and the pod restarted joins it', async (t) => {
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

  // Redis: the set's pods in order (OrderedReady), each its redis, then its sentinel container.
  const sts = find(redisObjs, 'StatefulSet');
  const replicas: number = sts.spec.replicas;
  const redisPorts = await Promise.all(Array.from({ length: replicas }, freePort));
  const sentinelPorts = await Promise.all(Array.from({ length: replicas }, freePort));
  const files = (find(redisObjs, 'ConfigMap').data as Record<string, string>);
  const password = readFileSync(passwordFile, 'utf8').trim();
  // Each ask is one attempt of a poll: one that gets no answer (a connection the peer never
  // serves) is given up and asked again, instead of holding the poll past the test's bound.
  const ask = (port: number, ...command: string[]) => redisAsk(port, command, { password, idleMs: 5000 });
  /** A container's environment as the kubelet gives it to pod `i`, the pods' names and ports made local. */
  const podEnv = (i: number, c: K8sObject): Record<string, string> => {
    const local: Record<string, string> = {
      POD_NAME: `${sts.metadata.name}-${i}`,
      POD_NAMESPACE: 'kit',
      SELF: '127.0.0.1',
      FIRST_MASTER: `127.0.0.1 ${redisPorts[0]}`,
      SENTINELS: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(' '),
      REDIS_PORT: String(redisPorts[i]),
      SENTINEL_PORT: String(sentinelPorts[i]),
    };
    return Object.fromEntries((c.env as { name: string; value?: string }[]).map((e) => [e.name, local[e.name] ?? movedIn(i, e.value!)]));
  };
  const pods: { redis: ReturnType<typeof run>; sentinel: ReturnType<typeof run> }[] = [];
  const containers = sts.spec.template.spec.containers as K8sObject[];
  const startContainer = (i: number, name: string) => {
    const c = containers.find((x) => x.name === name)!;
    return run((c.command as string[]).map((a) => movedIn(i, a)), [], podEnv(i, c));
  };
  const accepting = (port: number) => () => new Promise<true | undefined>((resolve) => {
    const s = connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(undefined));
  });
  for (let i = 0; i < replicas; i++) {
    for (const [name, text] of Object.entries(files)) write(join(podDir(i), 'config', name), movedIn(i, text).replace(/^bind .*$/m, 'bind 127.0.0.1'));
    for (const d of ['run-redis', 'run-sentinel', 'data']) mkdirSync(join(podDir(i), d));
    const redis = startContainer(i, 'redis');
    await until(`pod ${i}: redis-server accepting connections`, accepting(redisPorts[i]!), redis.output, t.signal);
    const sentinel = startContainer(i, 'sentinel');
    await until(`pod ${i}: its sentinel accepting connections`, accepting(sentinelPorts[i]!), sentinel.output, t.signal);
    pods.push({ redis, sentinel });
  }
  const output = () => pods.map((p, i) => `pod ${i}:\n${p.redis.output()}${p.sentinel.output()}`).join('\n');
  const settledOn = (port: number) => until(`every sentinel naming 127.0.0.1:${port} the master, with its ${replicas - 1} replicas and ${replicas} sentinels`, async () => {
    const infos = await Promise.all(sentinelPorts.map((p) => ask(p, 'INFO', 'sentinel').catch(() => '')));
    return infos.every((info) => String(info).includes(`address=127.0.0.1:${port},slaves=${replicas - 1},sentinels=${replicas}`)) ? true : undefined;
  }, output, t.signal);
  await settledOn(redisPorts[0]!);
  assert.doesNotMatch(readFileSync(join(podDir(0), 'run-redis', 'runtime.conf'), 'utf8'), /replicaof/, 'the first pod starts as the master');
  assert.match(readFileSync(join(podDir(1), 'run-redis', 'runtime.conf'), 'utf8'), new RegExp(`^replicaof 127\\.0\\.0\\.1 ${redisPorts[0]}$`, 'm'), 'the others as its replicas');
  const cli = (port: number, ...a: string[]) => spawnSync('redis-cli', ['-p', String(port), '--no-auth-warning', ...a], { encoding: 'utf8' }).stdout.trim();
  assert.match(cli(redisPorts[0]!, 'PING'), /NOAUTH/, 'Redis refuses a client without the password');
  assert.match(cli(sentinelPorts[0]!, 'PING'), /NOAUTH/, 'and so do the sentinels');
  assert.equal(await ask(redisPorts[0]!, 'CONFIG', 'GET', 'appendonly').then(String), 'appendonly,yes');
  assert.equal(await ask(redisPorts[0]!, 'CONFIG', 'GET', 'maxmemory-policy').then(String), 'maxmemory-policy,noeviction');
  for (const p of pods) for (const c of [p.redis.child, p.sentinel.child]) assert.ok(!readFileSync(`/proc/${c.pid}/cmdline`, 'utf8').includes(password), 'no password in any argv');

  // The proxy: the container's command and args, listen addresses on loopback, Redis's address.
  const args = (container.args as string[]).map((a) => moved(a)
    .replace(/^--(git-auth|model-gateway|metrics)-listen=:\d+$/, '--$1-listen=127.0.0.1:0')
    .replace(/^--limits-store=redis\+sentinel:\/\/[^/]+\//, `--limits-store=redis+sentinel://${sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',')}/`));
  assert.ok(args.some((a) => a.startsWith('--limits-store=redis+sentinel://127.0.0.1:')), 'the proxy asks the set\'s sentinels');
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

  // The line is written by the thread pool, in its own time: waited for, not assumed read (the suite's load delayed it).
  const first = await until('the limits_store up line', () => lines().find((r) => r.event === 'limits_store' && r.state === 'up'), proxy.output, t.signal);
  assert.equal(first.node, `127.0.0.1:${redisPorts[0]}`, 'on the first pod, the master');

  // The master's pod lost: the sentinels promote a replica, the proxy follows without a restart.
  pods[0]!.redis.child.kill('SIGKILL');
  const up = await until('the proxy up on a promoted replica', () => lines().find((r) => r.event === 'limits_store' && r.state === 'up' && r.node !== `127.0.0.1:${redisPorts[0]}`), () => `${proxy.output()}\n${output()}`, t.signal);
  const promoted = Number(String(up.node).split(':')[1]);
  assert.ok(redisPorts.slice(1).includes(promoted));
  // The pod started again once the sentinels agree on the failover (its container's command, as
  // the kubelet runs it): a replica of the new master, found through them.
  await until('every sentinel naming the promoted replica', async () => ((await Promise.all(sentinelPorts.map((p) => ask(p, 'INFO', 'sentinel').catch(() => '')))).every((info) => String(info).includes(`address=127.0.0.1:${promoted},`)) ? true : undefined), output, t.signal);
  pods[0]!.redis = startContainer(0, 'redis');
  await until('the first pod replicating the new master', async () => (/master_port:(\d+)\r\nmaster_link_status:up/.exec(String(await ask(redisPorts[0]!, 'INFO', 'replication').catch(() => '')))?.[1] === String(promoted) ? true : undefined), output, t.signal);
  assert.match(readFileSync(join(podDir(0), 'run-redis', 'runtime.conf'), 'utf8'), new RegExp(`^replicaof 127\\.0\\.0\\.1 ${promoted}$`, 'm'), 'it started as the new master\'s replica, as its script found it');
  await settledOn(promoted);
  assert.ok(!proxy.output().includes(password), 'the Redis password in no output of the proxy');

  proxy.child.kill('SIGTERM');
  const code = await new Promise<number | null>((resolve) => proxy.child.once('exit', (c) => resolve(c)));
  assert.equal(code, 0, `SIGTERM to the container's process: a clean exit\n${proxy.output()}`);
});
