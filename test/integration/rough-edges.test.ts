// What a new user hit, each mended and tested against the proxy as `serve` starts it, as that user would meet it
// (issue 18, item 10): refusals that name what they refuse and how to send it instead, records
// that say what a refused request targeted, a git challenge that is no error, the root answered
// as a health check, command-line and config mistakes that exit 2 and suggest the right name.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startAnthropicUpstream, type AnthropicUpstream } from '../support/anthropic-upstream.ts';
import { rawExchange, send, statusOf } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition } from '../support/prometheus.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

const GATEWAY_KEY = randomBytes(32).toString('hex');
const GIT_KEY = randomBytes(32).toString('hex');
const GPT = 'gpt-5.1';
const CLAUDE = 'claude-sonnet-4-6';
let pki: TestPki;
let openai: ModelUpstream;
let anthropic: AnthropicUpstream;
let git: TestUpstream;
let proxy: ProxyProcess;
let dir: string;
let botToken: string;
let gitToken: string;

const env = () => ({ MODEL_PROXY_SIGNING_KEY: GATEWAY_KEY, GIT_PROXY_SIGNING_KEY: GIT_KEY, GIT_HOST_A: git.hostKey, GIT_HOST_A_TOKEN: 'tok-edges', NODE_EXTRA_CA_CERTS: pki.caFile, OPENAI_KEY: 'sk-o', ANTHROPIC_KEY: 'sk-a' });

before(async () => {
  pki = makeTestPki();
  [openai, anthropic, git] = await Promise.all([startModelUpstream(pki), startAnthropicUpstream(pki), startUpstream(pki)]);
  dir = mkdtempSync(join(tmpdir(), 'rough-edges-'));
  writeFileSync(
    join(dir, 'providers.json'),
    JSON.stringify({
      providers: [
        { name: 'openai', kind: 'openai', baseUrl: openai.baseUrl, keyEnv: 'OPENAI_KEY', models: [GPT], caFile: pki.caFile },
        { name: 'anthropic', kind: 'anthropic', baseUrl: anthropic.baseUrl, keyEnv: 'ANTHROPIC_KEY', models: [CLAUDE], caFile: pki.caFile },
      ],
    }),
  );
  proxy = await startServe({ env: env(), args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'providers.json')], listeners: ['git', 'model'] });
  const ids = ['mint-token', '--instance-id', 'bot-1', '--workflow', 'w', '--run-id', 'r'];
  const [bot, wl] = await Promise.all([runCommandInProcess(ids, env()), runCommandInProcess([...ids, '--git-repo', `${git.hostKey}/org/*:read`], env())]);
  assert.equal(bot.code, 0, bot.stderr);
  assert.equal(wl.code, 0, wl.stderr);
  [botToken, gitToken] = [bot.stdout.trim(), wl.stdout.trim()];
});

after(async () => {
  await proxy?.stop();
  await Promise.all([openai?.close(), anthropic?.close(), git?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const gateway = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  send(proxy.ports.model!, 'POST', path, { headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers }, body: JSON.stringify(body) });
const recordOf = (id: unknown) => proxy.waitForRecord((r) => r.event === 'request' && r.request_id === id);

test('rough edge: the 401 hint names the header the protocol\'s clients send: x-api-key on the Messages route, Authorization: Bearer on the OpenAI routes', async () => {
  const messages = await gateway('/v1/messages', { model: CLAUDE, max_tokens: 1, messages: [] });
  assert.equal(messages.status, 401);
  assert.match(messages.body.toString(), /as x-api-key: \$MODEL_PROXY_TOKEN/);
  const chat = await gateway('/v1/chat/completions', { model: GPT, messages: [] });
  assert.match(chat.body.toString(), /as Authorization: Bearer \$MODEL_PROXY_TOKEN/);
});

test('rough edge: a git workload token sent to the gateway (separate signing keys) is refused as meant for the git proxy, not as a bad signature', async () => {
  const r = await gateway('/v1/chat/completions', { model: GPT, messages: [] }, { authorization: `Bearer ${gitToken}` });
  assert.equal(r.status, 401);
  assert.match(r.body.toString(), /meant for the git proxy/);
});

test('rough edge: a refused model is named in the error; an authenticated request refused for what it asks is recorded with its model and provider, and no usage_complete (null: left out of the line)', async () => {
  const auth = { authorization: `Bearer ${botToken}` };
  const notAllowed = await gateway('/v1/chat/completions', { model: 'gpt-internal', messages: [] }, auth);
  assert.equal(notAllowed.status, 400);
  assert.match(notAllowed.body.toString(), /the model \\"gpt-internal\\" is not available/);
  const tool = await gateway('/v1/responses', { model: GPT, input: 'x', tools: [{ type: 'web_search' }] }, auth);
  assert.equal(tool.status, 400);
  const record = await recordOf(tool.headers['x-client-request-id']);
  assert.deepEqual([record.error, record.model, record.provider, record.usage_complete], ['tool_not_allowed', GPT, 'openai', undefined]);
  const wrongRoute = await gateway('/v1/messages', { model: GPT, max_tokens: 1, messages: [] }, auth);
  const onRoute = await recordOf(wrongRoute.headers['x-client-request-id']);
  assert.deepEqual([onRoute.error, onRoute.model, onRoute.provider, onRoute.usage_complete], ['model_not_on_route', GPT, 'openai', undefined]);
  const ok = await gateway('/v1/chat/completions', { model: GPT, messages: [{ role: 'user', content: 'hi' }] }, auth);
  assert.equal(ok.status, 200);
  assert.equal((await recordOf(ok.headers['x-client-request-id'])).usage_complete, true, 'an answered call still says whether its usage came');
});

test('rough edge: HEAD / and GET / on the gateway (Claude Code\'s start-up probe) answer 200 like /healthz, and are neither logged nor counted as requests', async () => {
  const before = proxy.records().filter((r) => r.event === 'request').length;
  const head = await send(proxy.ports.model!, 'HEAD', '/');
  const get = await send(proxy.ports.model!, 'GET', '/');
  assert.deepEqual([head.status, get.status, get.body.toString()], [200, 200, 'ok\n']);
  // A request after them is logged: by then the root probes would have been too.
  const marker = await send(proxy.ports.model!, 'GET', '/v1/models', { headers: { authorization: `Bearer ${botToken}` } });
  await recordOf(marker.headers['x-client-request-id']);
  assert.equal(proxy.records().filter((r) => r.event === 'request').length, before + 1);
});

test('rough edge: git\'s credential challenge is counted apart (git_proxy_auth_challenges_total), not as a 401 request or an error; two Authorization headers are refused', async () => {
  const path = `/${git.hostKey}/org/repo.git/info/refs?service=git-upload-pack`;
  const challenge = await send(proxy.ports.git!, 'GET', path);
  assert.equal(challenge.status, 401);
  assert.match(String(challenge.headers['www-authenticate']), /^Basic/);
  const basic = (t: string) => `Basic ${Buffer.from(`x:${t}`).toString('base64')}`;
  const two = await rawExchange(proxy.ports.git!, `GET ${path} HTTP/1.1\r\nHost: proxy\r\nAuthorization: ${basic(gitToken)}\r\nAuthorization: Bearer other\r\nConnection: close\r\n\r\n`);
  assert.equal(statusOf(two), 400);
  assert.match(two, /two Authorization headers/);
  const metrics = parseExposition((await send(proxy.ports.metrics!, 'GET', '/metrics')).body.toString());
  assert.equal(metrics.find((s) => s.name === 'git_proxy_auth_challenges_total')?.value, 1);
  assert.equal(metrics.find((s) => s.name === 'git_proxy_requests_total' && s.labels.status === '401'), undefined);
  // The challenge's line is written after its answer: wait for it.
  const record = await proxy.waitForRecord((r) => r.event === 'request' && r.listener === 'git' && r.status === 401, 'the challenge\'s line');
  assert.deepEqual([record?.challenge, record?.error], [true, undefined]);
});

test('rough edge: --help prints no empty "(default )"', async () => {
  const r = await runCommandInProcess(['--help']);
  assert.equal(r.code, 0);
  assert.doesNotMatch(r.stdout, /\(default \)/);
  assert.match(r.stdout, /--allow-hosted-tools/);
});

test('rough edge: every command-line mistake exits 2 with a message naming it; an unknown flag or command suggests the one meant', async () => {
  const ids = ['--instance-id', 'a', '--workflow', 'b', '--run-id', 'c'];
  const cases: [string[], RegExp][] = [
    [['mint-token', '--instnce-id', 'a'], /unknown flag --instnce-id \(did you mean --instance-id\?\)/],
    [['mint-token', '--instance-id', 'a', '--run-id', 'c'], /--workflow is required/],
    [['mint-token', ...ids, '--ttl', 'soon'], /--ttl/],
    [['mint-token', ...ids, '--ttl', '48h'], /--ttl must be between/],
    [['mint-token', ...ids, '--git-repo', 'nohost'], /--git-repo "nohost"/],
    [['mint-tokn'], /unknown command "mint-tokn" \(did you mean mint-token\?\)/],
  ];
  for (const [args, message] of cases) {
    const r = await runCommandInProcess(args, { MODEL_PROXY_SIGNING_KEY: GATEWAY_KEY, GIT_PROXY_SIGNING_KEY: GIT_KEY });
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message, args.join(' '));
  }
});

test('rough edge: a providers file with "baseURL" (the SDKs\' spelling) is refused with "did you mean baseUrl?"', async () => {
  const file = join(dir, 'sdk-spelling.json');
  writeFileSync(file, JSON.stringify({ providers: [{ name: 'o', kind: 'openai', baseURL: 'https://api.example/v1', keyEnv: 'K', models: ['m'] }] }));
  const r = await runCommandInProcess(['--providers', file, '--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off'], { K: 'k' });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /providers\[0\]\.baseURL: unknown field \(did you mean baseUrl\?\)/);
});

test('rough edge: mint-token refuses a --git-repo for a host the registry lacks, or written host:443, naming the registered hosts', async () => {
  const ids = ['mint-token', '--instance-id', 'a', '--workflow', 'b', '--run-id', 'c'];
  const e = { GIT_PROXY_SIGNING_KEY: GIT_KEY, GIT_HOST_A: 'git.example.com' };
  const unknown = await runCommandInProcess([...ids, '--git-repo', 'gitlab.example.com/org/x:read'], e);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /"gitlab\.example\.com" is not a registered git host \(registered: git\.example\.com\)/);
  const port = await runCommandInProcess([...ids, '--git-repo', 'git.example.com:443/org/x:read'], e);
  assert.equal(port.code, 2);
  assert.match(port.stderr, /write it as the registry does: git\.example\.com/);
  const ok = await runCommandInProcess([...ids, '--git-repo', 'git.example.com/org/x:read'], e);
  assert.equal(ok.code, 0, ok.stderr);
});

test('rough edge: a basic-auth username holding ":" stops start-up with a message naming the host, instead of a 503 per request', async () => {
  const r = await runCommandInProcess(['--git-auth-listen', '127.0.0.1:0', '--metrics-listen', 'off'], { GIT_HOST_B: 'git.example.com', GIT_HOST_B_TOKEN: 't', GIT_HOST_B_USERNAME: 'bad:name' });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /git host git\.example\.com: the username contains ":"/);
});
