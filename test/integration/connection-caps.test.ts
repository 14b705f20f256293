// Connection caps on the proxy as `serve` starts it: one client holding twice its cap of idle connections on
// both listeners cannot keep another client from cloning, pushing and calling the gateway, and
// /healthz stays 200; the refusals are counted by listener and reason. And on the git listener,
// a workload token's requests in progress are capped, so that one workload's pushes cannot take
// every connection: the next one gets 429 with Retry-After while other workloads go on.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startBothListeners, type BothListeners } from '../support/both-listeners.ts';
import { eventually } from '../support/eventually.ts';
import { makeGitHome, runGit } from '../support/git-client.ts';
import { startGitServer, type GitServer } from '../support/git-server.ts';
import { send } from '../support/http-client.ts';
import type { ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition } from '../support/prometheus.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import type { TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

const PER_CLIENT = 6;
const HOG = '127.0.0.2';
const GIT_TOKEN = `capsA_${randomBytes(8).toString('hex')}`;
let pki: TestPki;
let gitServer: GitServer;
let modelUpstream: ModelUpstream;
let proxy: ProxyProcess;
let both: BothListeners<GitServer> | undefined;
let home: { home: string; cleanup(): void };
let work: string;

before(async () => {
  both = await startBothListeners({
    gitUpstream: (pki) => startGitServer({ pki, auth: { type: 'bearer', token: GIT_TOKEN } }),
    env: { GIT_HOST_A_TOKEN: GIT_TOKEN },
    args: ['--max-connections-per-client', String(PER_CLIENT), '--max-connections', '100'],
  });
  ({ pki, gitUpstream: gitServer, modelUpstream, proxy } = both);
  home = makeGitHome();
  work = mkdtempSync(join(tmpdir(), 'test-caps-'));
});

after(async () => {
  await both?.close();
  home?.cleanup();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Opens `n` connections from `from` and resolves once the server has closed all but `keep` of them. */
async function hold(port: number, n: number, keep = PER_CLIENT, from = HOG): Promise<{ open: Socket[]; closed: number }> {
  const sockets = Array.from({ length: n }, () => connect({ port, host: '127.0.0.1', localAddress: from }));
  // A refused connection is accepted by the kernel and then closed by the proxy: it ends.
  const ended = sockets.map((s) => new Promise<boolean>((resolve) => {
    s.on('error', () => {});
    s.once('close', () => resolve(true));
  }));
  await Promise.all(sockets.map((s) => once(s, 'connect')));
  // The proxy closes exactly the excess: wait for that many closes.
  let closed = 0;
  await new Promise<void>((resolve) => ended.forEach((p) => void p.then(() => ++closed === n - keep && resolve())));
  return { open: sockets.filter((s) => !s.destroyed && s.readyState === 'open'), closed };
}

async function refusedConnections(listener: string, reason = 'per_client', of = proxy): Promise<number | undefined> {
  const res = await send(of.ports.metrics!, 'GET', '/metrics');
  return parseExposition(res.body.toString()).find((s) => s.name === 'proxy_connections_refused_total' && s.labels.listener === listener && s.labels.reason === reason)?.value;
}

/** A proxy with the model listener only, its connection caps at their defaults but for `args`. */
function startModelProxy(args: string[]): Promise<ProxyProcess> {
  return startServe({
    env: {
      UPSTREAM_BASE_URL: modelUpstream.baseUrl,
      UPSTREAM_API_KEY: `sk-${randomBytes(8).toString('hex')}`,
      UPSTREAM_ALLOWED_MODELS: 'gpt-test',
      UPSTREAM_CA_FILE: pki.caFile,
    },
    args: ['--model-gateway-listen', '127.0.0.1:0', ...args],
    listeners: ['model'],
  });
}

test('connection caps: a client holding twice --max-connections-per-client on both listeners leaves another client able to clone, push and call the gateway, and /healthz stays 200', { timeout: 60_000 }, async (t) => {
  const git = await hold(proxy.ports.git!, 2 * PER_CLIENT);
  const model = await hold(proxy.ports.model!, 2 * PER_CLIENT);
  try {
    assert.equal(git.closed, PER_CLIENT);
    assert.equal(model.closed, PER_CLIENT);
    assert.equal((await send(proxy.ports.git!, 'GET', '/healthz')).status, 200);
    assert.equal((await send(proxy.ports.model!, 'GET', '/healthz')).status, 200);

    // Another client: the real git clones and pushes through the proxy.
    gitServer.createBareRepo('org/caps.git');
    const dir = join(work, 'caps');
    const url = `http://127.0.0.1:${proxy.ports.git}/${gitServer.hostKey}/org/caps.git`;
    const cloned = await runGit(['clone', '--quiet', url, dir], { home: home.home });
    assert.equal(cloned.code, 0, cloned.stderr);
    writeFileSync(join(dir, 'f.txt'), 'through the cap\n');
    for (const args of [['add', 'f.txt'], ['commit', '--quiet', '-m', 'c']]) assert.equal((await runGit(args, { cwd: dir, home: home.home })).code, 0);
    const pushed = await runGit(['push', '--quiet', 'origin', 'HEAD:main'], { cwd: dir, home: home.home });
    assert.equal(pushed.code, 0, pushed.stderr);
    // And calls the gateway.
    const call = await send(proxy.ports.model!, 'POST', '/v1/chat/completions', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(call.status, 200);

    assert.equal(await refusedConnections('git'), PER_CLIENT);
    assert.equal(await refusedConnections('model'), PER_CLIENT);
    // Nothing waited for the refusals' lines: they may still be on their way.
    const refusalLines = () => proxy.records().filter((r) => r.event === 'connection_refused');
    await eventually('the refusal lines of both listeners', () => refusalLines().length >= 2, t.signal);
    const logged = refusalLines();
    assert.deepEqual(logged.map((r) => [r.listener, r.reason, r.client]).sort(), [['git', 'per_client', HOG], ['model', 'per_client', HOG]]);
  } finally {
    for (const s of [...git.open, ...model.open]) s.destroy();
  }
});

test('connection caps: a workload token with --git-max-concurrent-per-workload requests in progress gets 429 workload_busy with Retry-After for the next, while another workload goes on', { timeout: 60_000 }, async () => {
  const signingKey = randomBytes(32).toString('hex');
  const upstream: TestUpstream = await startUpstream(pki);
  const limited = await startServe({
    env: { GIT_HOST_A: upstream.hostKey, GIT_HOST_A_TOKEN: 'tok-caps', GIT_PROXY_SIGNING_KEY: signingKey, NODE_EXTRA_CA_CERTS: pki.caFile },
    args: ['--git-auth-listen', '127.0.0.1:0', '--git-max-concurrent-per-workload', '2'],
  });
  const mint = async (instance: string) => {
    const r = await runCommandInProcess(['mint-token', '--instance-id', instance, '--workflow', 'w', '--run-id', 'r', '--git-repo', `${upstream.hostKey}/org/*:read`], { GIT_PROXY_SIGNING_KEY: signingKey });
    assert.equal(r.code, 0, r.stderr);
    return `Basic ${Buffer.from(`x:${r.stdout.trim()}`).toString('base64')}`;
  };
  const [busy, other] = await Promise.all([mint('bot-busy'), mint('bot-other')]);
  const path = `/${upstream.hostKey}/org/repo.git/info/refs?service=git-upload-pack`;
  const held: (() => void)[] = [];
  let arrived = 0;
  let twoArrived!: () => void;
  const both = new Promise<void>((resolve) => (twoArrived = resolve));
  try {
    upstream.handle((_req, res) => {
      held.push(() => res.end());
      if (++arrived === 2) twoArrived();
    });
    const first = [send(limited.ports.git!, 'GET', path, { headers: { authorization: busy } }), send(limited.ports.git!, 'GET', path, { headers: { authorization: busy } })];
    await both;
    const third = await send(limited.ports.git!, 'GET', path, { headers: { authorization: busy } });
    assert.equal(third.status, 429);
    assert.equal(third.headers['retry-after'], '1');
    assert.match(third.body.toString(), /--git-max-concurrent-per-workload/);
    upstream.handle(undefined);
    assert.equal((await send(limited.ports.git!, 'GET', path, { headers: { authorization: other } })).status, 200, 'another workload is not held up');
    for (const release of held) release();
    for (const r of await Promise.all(first)) assert.equal(r.status, 200);
    assert.equal((await send(limited.ports.git!, 'GET', path, { headers: { authorization: busy } })).status, 200, 'its slots are given back as its requests end');
    assert.equal(upstream.requests.length, 4, 'the refused request never reached the upstream');
    // The refusal's line is written after its answer: wait for it.
    const record = await limited.waitForRecord((r) => r.event === 'request' && r.status === 429, 'the workload_busy line');
    assert.equal(record?.error, 'workload_busy');
    assert.equal(record?.instance_id, 'bot-busy');
  } finally {
    upstream.handle(undefined);
    await limited.stop();
    await upstream.close();
  }
});

test('connection caps: a client holding the model listener\'s whole --max-connections leaves /healthz and /metrics on the metrics port answering 200; by default one source address (a mesh sidecar, a NAT) is not capped on its own', { timeout: 60_000 }, async () => {
  const TOTAL = 200; // above the per-client cap of 128 the proxy had by default before
  const capped = await startModelProxy(['--max-connections', String(TOTAL)]);
  let model: { open: Socket[]; closed: number } | undefined;
  try {
    model = await hold(capped.ports.model!, TOTAL + 1, TOTAL);
    assert.equal(model.closed, 1);
    assert.equal(model.open.length, TOTAL, 'one address holds the whole total: no per-client cap by default');
    const health = await send(capped.ports.metrics!, 'GET', '/healthz');
    assert.equal(health.status, 200);
    const scrape = await send(capped.ports.metrics!, 'GET', '/metrics');
    assert.equal(scrape.status, 200);
    assert.equal(await refusedConnections('model', 'total', capped), 1);
    assert.equal(await refusedConnections('model', 'per_client', capped), undefined);
  } finally {
    for (const s of model?.open ?? []) s.destroy();
    await capped.stop();
  }
});

test('connection caps: the metrics listener has its own caps, 16 per source address whatever --max-connections-per-client says, so one client cannot hold it while another scrapes', { timeout: 60_000 }, async (t) => {
  const capped = await startModelProxy(['--max-connections', '4']);
  let metrics: { open: Socket[]; closed: number } | undefined;
  try {
    // The proxy listeners' caps (4 in all, none per client) are not the metrics listener's.
    metrics = await hold(capped.ports.metrics!, 32, 16);
    assert.equal(metrics.closed, 16);
    assert.equal(metrics.open.length, 16);
    assert.equal((await send(capped.ports.metrics!, 'GET', '/healthz')).status, 200, 'another address still gets the probe');
    assert.equal(await refusedConnections('metrics', 'per_client', capped), 16);
    const refusalLines = () => capped.records().filter((r) => r.event === 'connection_refused');
    await eventually('the metrics listener\'s refusal line', () => refusalLines().length >= 1, t.signal);
    const logged = refusalLines();
    assert.deepEqual(logged.map((r) => [r.listener, r.reason, r.client, r.cap]), [['metrics', 'per_client', HOG, 16]]);
  } finally {
    for (const s of metrics?.open ?? []) s.destroy();
    await capped.stop();
  }
});
