// Limits per workload through the gateway (--limits): a spent run budget is answered the way
// each agent stops on (OpenAI routes: 429 insufficient_quota; the Messages route: 402
// billing_error), naming the budget, the spend and the limit; a concurrency limit is a 429 with
// Retry-After; a call's slot comes back however the call ends, a client that leaves included.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startAnthropicUpstream, type AnthropicUpstream } from '../support/anthropic-upstream.ts';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { parseExposition } from '../support/prometheus.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
let pki: TestPki;
let openai: ModelUpstream;
let anthropic: AnthropicUpstream;
let gw: ProxyProcess;
let dir: string;

before(async () => {
  pki = makeTestPki();
  [openai, anthropic] = await Promise.all([startModelUpstream(pki), startAnthropicUpstream(pki)]);
  dir = mkdtempSync(join(tmpdir(), 'limits-'));
  writeFileSync(join(dir, 'providers.json'), JSON.stringify({ providers: [
    { name: 'openai', kind: 'openai', baseUrl: openai.baseUrl, keyEnv: 'K1', models: ['gpt-test', 'gpt-unpriced'], caFile: pki.caFile },
    { name: 'anthropic', kind: 'anthropic', baseUrl: anthropic.baseUrl, keyEnv: 'K2', models: ['claude-test'], caFile: pki.caFile },
  ] }));
  // A dollar a thousand tokens: one call spends the run's budget.
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ providers: { openai: { 'gpt-test': { input: 1000, output: 1000 } }, anthropic: { 'claude-test': { input: 1000, output: 1000 } } } }));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perInstance: { concurrent: 2 }, perRun: { budgetUsd: 0.01 } }));
  gw = await startServe({
    env: { K1: 'sk-1', K2: 'sk-2', MODEL_PROXY_SIGNING_KEY: SIGNING_KEY, MODEL_PRICES_FILE: join(dir, 'prices.json') },
    // gpt-unpriced has no price: the concurrency test uses it so that no call spends money, which a
    // money budget allows only with --allow-unpriced-models (test/integration/price-changers.test.ts).
    args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'providers.json'), '--limits', join(dir, 'limits.json'), '--allow-unpriced-models'],
    listeners: ['model'],
  });
});

after(async () => {
  await gw?.stop();
  await Promise.all([openai?.close(), anthropic?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const mint = async (instance: string, run: string, extra: string[] = []) => {
  const r = await runCommandInProcess(['mint-token', '--instance-id', instance, '--workflow', 'w', '--run-id', run, ...extra], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
};
const chat = (token: string, model = 'gpt-test') => send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }) });
const messages = (token: string) => send(gw.ports.model!, 'POST', '/v1/messages', { headers: { 'content-type': 'application/json', 'x-api-key': token, 'anthropic-version': '2023-06-01' }, body: JSON.stringify({ model: 'claude-test', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }) });

test('limits: once a run has spent its budget, the next call is refused as final: 429 insufficient_quota on the OpenAI routes, 402 billing_error on the Messages route, naming the budget, the spend and the limit; another run goes on', async (t) => {
  const token = await mint('bot-budget', 'run-spent');
  assert.equal((await chat(token)).status, 200, 'the first call is admitted and charged');
  const before = openai.requests.length + anthropic.requests.length;
  const openaiRefusal = await chat(token);
  assert.equal(openaiRefusal.status, 429);
  const e = (JSON.parse(openaiRefusal.body.toString()) as { error: { type: string; code: string; message: string } }).error;
  assert.deepEqual([e.type, e.code], ['insufficient_quota', 'insufficient_quota']);
  assert.match(e.message, /this run's budget is spent: \$\d+\.\d\d of \$0\.01/);
  assert.equal(openaiRefusal.headers['retry-after'], undefined, 'final: no Retry-After');
  const anthropicRefusal = await messages(token);
  assert.equal(anthropicRefusal.status, 402);
  assert.equal((JSON.parse(anthropicRefusal.body.toString()) as { error: { type: string } }).error.type, 'billing_error');
  assert.equal(openai.requests.length + anthropic.requests.length, before, 'nothing was forwarded');
  assert.equal((await chat(await mint('bot-other', 'run-fresh'))).status, 200, 'another run is not held');
  // A call's log line is written after its answer: wait for the three lines, then check them.
  const chargedRecord = () => gw.records().find((r) => r.event === 'request' && r.instance_id === 'bot-budget' && r.status === 200);
  await eventually('the charged call and both refusals in the log', () => chargedRecord() !== undefined && gw.records().filter((r) => r.event === 'request' && r.limit === 'run_budget').length >= 2, t.signal);
  const charged = chargedRecord();
  assert.ok(Number(charged?.charged_usd) > 0.01 && charged?.charge_estimated === false, JSON.stringify(charged));
  const refused = gw.records().filter((r) => r.event === 'request' && r.limit === 'run_budget');
  assert.equal(refused.length, 2);
  const metrics = parseExposition((await send(gw.ports.metrics!, 'GET', '/metrics')).body.toString());
  assert.equal(metrics.filter((s) => s.name === 'model_gateway_limit_refusals_total' && s.labels.kind === 'run_budget').reduce((n, s) => n + s.value, 0), 2);
});

test('limits: a call over the concurrency limit gets 429 with Retry-After; the slot of a call whose client left comes back (an unpriced model: no money is charged)', async () => {
  // The file allows 2 in progress; this run's token lowers it to 1 (mint-token --max-concurrent).
  const token = await mint('bot-busy', 'run-busy', ['--max-concurrent', '1']);
  let arrived!: () => void;
  const held = new Promise<void>((r) => (arrived = r));
  openai.script(() => arrived()); // never answered: the first call stays in progress
  const first = request({ host: '127.0.0.1', port: gw.ports.model!, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } });
  first.on('error', () => {});
  first.end(JSON.stringify({ model: 'gpt-unpriced', messages: [{ role: 'user', content: 'hi' }] }));
  await held;
  const second = await chat(token, 'gpt-unpriced');
  assert.equal(second.status, 429);
  assert.equal(second.headers['retry-after'], '1');
  assert.equal((JSON.parse(second.body.toString()) as { error: { code: string } }).error.code, 'rate_limit_exceeded');
  first.destroy(); // the client leaves
  await gw.waitForRecord((r) => r.event === 'request' && r.instance_id === 'bot-busy' && r.status === 0);
  assert.equal((await chat(token, 'gpt-unpriced')).status, 200, 'its slot came back');
  const aborted = gw.records().find((r) => r.event === 'request' && r.instance_id === 'bot-busy' && r.status === 0);
  assert.deepEqual([aborted?.charge_estimated, aborted?.charged_usd], [true, undefined], 'charged by estimate (tokens), no price (a null field is left out of the line)');
});

test('limits: --limits without MODEL_PROXY_SIGNING_KEY stops start-up (identities would be the callers\' own headers)', async () => {
  const r = await runCommandInProcess(['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--providers', join(dir, 'providers.json'), '--limits', join(dir, 'limits.json')], { K1: 'sk-1', K2: 'sk-2' });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /--limits: limits apply per verified identity, which needs MODEL_PROXY_SIGNING_KEY .*, service-account tokens \(--sa-issuer\) or client certificates \(--tls-client-ca\)/);
});

test('limits: a limit that is written is enforced: a token minted with limits (--budget-usd, --max-concurrent) sent to a gateway without --limits is refused 503 limits_not_enforced naming the fix, and never forwarded; a token without limits is served (carriesLimits)', async () => {
  const plain = await startServe({
    env: { K1: 'sk-1', K2: 'sk-2', MODEL_PROXY_SIGNING_KEY: SIGNING_KEY },
    args: ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--providers', join(dir, 'providers.json')],
    listeners: ['model'],
  });
  try {
    const call = (token: string) => send(plain.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
    const before = openai.requests.length;
    for (const extra of [['--budget-usd', '5'], ['--max-concurrent', '1']]) {
      const r = await call(await mint('bot-unenforced', 'run-unenforced', extra));
      assert.equal(r.status, 503, extra.join(' '));
      const error = (JSON.parse(r.body.toString()) as { error: { code: string; message: string } }).error;
      assert.equal(error.code, 'limits_not_enforced');
      assert.match(error.message, /carries limits .* it runs without --limits; the operator must start it with --limits FILE \(an empty JSON object sets no ceiling of its own/);
    }
    assert.equal(openai.requests.length, before, 'never forwarded');
    const rec = await plain.waitForRecord((x) => x.event === 'request' && x.instance_id === 'bot-unenforced', 'the refusal\'s record');
    assert.deepEqual([rec.status, rec.error, rec.limit], [503, 'limits_not_enforced', 'limits_not_enforced']);
    assert.equal((await call(await mint('bot-free', 'run-free'))).status, 200);
  } finally {
    await plain.stop();
  }
});

test('limits: under a money budget, "service_tier": "priority" (billed at other rates) is refused with 400 and never forwarded', async () => {
  const before = openai.requests.length;
  const token = await mint('bot-tier', 'run-tier');
  const r = await send(gw.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model: 'gpt-test', service_tier: 'priority', messages: [{ role: 'user', content: 'hi' }] }) });
  assert.equal(r.status, 400);
  assert.match(r.body.toString(), /price_not_counted/);
  assert.equal(openai.requests.length, before);
});

test('limits: under a money budget, Anthropic\'s fast mode ("speed": "fast", billed at a multiple of the rates) is refused with 400 on the Messages route and never forwarded', async () => {
  const before = anthropic.requests.length;
  const token = await mint('bot-speed', 'run-speed');
  const r = await send(gw.ports.model!, 'POST', '/v1/messages', { headers: { 'content-type': 'application/json', 'x-api-key': token, 'anthropic-version': '2023-06-01', 'anthropic-beta': 'fast-mode-2026-02-01' }, body: JSON.stringify({ model: 'claude-test', max_tokens: 8, speed: 'fast', messages: [{ role: 'user', content: 'hi' }] }) });
  assert.equal(r.status, 400);
  const error = (JSON.parse(r.body.toString()) as { error: { type: string; message: string } }).error;
  assert.equal(error.type, 'invalid_request_error');
  assert.match(error.message, /"speed": "fast" \(fast mode\) is billed at a multiple of the rates/);
  assert.equal(anthropic.requests.length, before);
  assert.equal((await messages(token)).status, 200, 'the same call at standard speed goes through');
});
