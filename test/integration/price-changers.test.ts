// Prices that cannot be dodged, through the gateway under a money budget (--limits): the
// values that bill at other rates than the price table's are refused in every form on every route
// (the security review's finding 5: `anthropic_beta` in the body of a Bedrock or Vertex call
// passed while the header form was refused), a model without a price is refused unless the
// operator allows unpriced models (finding 6, operator friction 7), and a bot token asking more
// than the file's ceiling is refused by mint-token and told the ceiling by the gateway.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { anthropicHeaders, jsonBodyOf, startAnthropicUpstream, textTranscript, type AnthropicUpstream } from '../support/anthropic-upstream.ts';
import { startTokenEndpoint, type TokenEndpoint } from '../support/cloud-fakes.ts';
import { eventually } from '../support/eventually.ts';
import { send } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { rsaKeyPair } from '../support/test-keys.ts';

const SIGNING_KEY = randomBytes(32).toString('hex');
const VERTEX_MODEL = 'claude-opus-5-5';
const BEDROCK_MODEL = 'us.anthropic.claude-opus-5-5';
const { privateKey, publicKey } = rsaKeyPair(2048);
let pki: TestPki;
let tokens: TokenEndpoint;
let openai: ModelUpstream;
let cloud: AnthropicUpstream;
let gw: ProxyProcess;
let allowing: ProxyProcess;
let dir: string;

/** The clouds' answer: one Messages JSON body, whatever was asked (the model is in the path). */
const cloudAnswer = (_req: unknown, res: ServerResponse) => {
  const text = JSON.stringify(jsonBodyOf(textTranscript('ok', { model: VERTEX_MODEL })));
  res.writeHead(200, { ...anthropicHeaders('application/json', 'req_price_changers'), 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

before(async () => {
  pki = makeTestPki();
  tokens = await startTokenEndpoint(pki, publicKey);
  [openai, cloud] = await Promise.all([startModelUpstream(pki), startAnthropicUpstream(pki, cloudAnswer)]);
  dir = mkdtempSync(join(tmpdir(), 'price-changers-'));
  writeFileSync(join(dir, 'sa.json'), JSON.stringify({ type: 'service_account', private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), client_email: 'gw@proj-1.iam.gserviceaccount.com', token_uri: tokens.uri }));
  writeFileSync(join(dir, 'providers.json'), JSON.stringify({ providers: [
    { name: 'openai', kind: 'openai', baseUrl: openai.baseUrl, keyEnv: 'K1', models: ['gpt-test', 'gpt-unpriced'], caFile: pki.caFile },
    { name: 'vertex', kind: 'anthropic-vertex', baseUrl: cloud.baseUrl, project: 'proj-1', region: 'us-east5', credential: { type: 'google-service-account', keyFile: join(dir, 'sa.json') }, models: [VERTEX_MODEL], caFile: pki.caFile },
    { name: 'bedrock', kind: 'anthropic-bedrock', baseUrl: cloud.baseUrl, region: 'us-east-1', credential: { type: 'aws-sigv4', accessKeyIdEnv: 'AWS_ID', secretAccessKeyEnv: 'AWS_SECRET', region: 'us-east-1' }, models: [BEDROCK_MODEL], caFile: pki.caFile },
  ] }));
  // A dollar a thousand tokens: one chat call spends a run's budget of a cent; the clouds' models
  // cost next to nothing, so that a run's calls there go on.
  writeFileSync(join(dir, 'prices.json'), JSON.stringify({ providers: { openai: { 'gpt-test': { input: 1000, output: 1000 } }, vertex: { [VERTEX_MODEL]: { input: 0.01, output: 0.01 } }, bedrock: { [BEDROCK_MODEL]: { input: 0.01, output: 0.01 } } } }));
  writeFileSync(join(dir, 'limits.json'), JSON.stringify({ perRun: { budgetUsd: 0.01 } }));
  // The token endpoint of the Vertex credential is reached over TLS with the test CA.
  const env = { NODE_EXTRA_CA_CERTS: pki.caFile, K1: 'sk-1', AWS_ID: 'AKIDPRICECHANGERS', AWS_SECRET: `secret-${randomBytes(12).toString('hex')}`, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY, MODEL_PRICES_FILE: join(dir, 'prices.json') };
  const args = ['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off', '--providers', join(dir, 'providers.json'), '--limits', join(dir, 'limits.json')];
  [gw, allowing] = await Promise.all([
    startServe({ env, args, listeners: ['model'] }),
    startServe({ env, args: [...args, '--allow-unpriced-models'], listeners: ['model'] }),
  ]);
});

after(async () => {
  await Promise.all([gw?.stop(), allowing?.stop()]);
  await Promise.all([openai?.close(), cloud?.close(), tokens?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const mint = async (run: string, extra: string[] = []) => {
  const r = await runCommandInProcess(['mint-token', '--instance-id', `bot-${run}`, '--workflow', 'w', '--run-id', run, ...extra], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim();
};
const chat = (proxy: ProxyProcess, token: string, model: string) => send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }) });
const BEDROCK = `/model/${BEDROCK_MODEL}/invoke`;
const VERTEX = `/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/${VERTEX_MODEL}:rawPredict`;
const cloudBody = (version: string, extra: Record<string, unknown> = {}) => ({ anthropic_version: version, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], ...extra });
const messageOf = (body: Buffer) => (JSON.parse(body.toString()) as { error: { type: string; message: string } }).error.message;
const post = (token: string, path: string, body: unknown, headers: Record<string, string> = {}) => send(gw.ports.model!, 'POST', path, { headers: { 'content-type': 'application/json', 'x-api-key': token, 'anthropic-version': '2023-06-01', ...headers }, body: JSON.stringify(body) });

test('price changers: under a money budget, the context-1m beta in the body of a Bedrock or Vertex call (an array or a string) is refused 400 price_not_counted and never forwarded, like the header form; other betas go through', async (t) => {
  const token = await mint('run-betas');
  const before = cloud.requests.length;
  for (const [path, version] of [[BEDROCK, 'bedrock-2023-05-31'], [VERTEX, 'vertex-2023-10-16']] as const) {
    for (const beta of [['context-1m-2025-08-07'], 'interleaved-thinking-2025-05-14,context-1m-2025-08-07']) {
      const r = await post(token, path, cloudBody(version, { anthropic_beta: beta }));
      assert.equal(r.status, 400, `${path} ${JSON.stringify(beta)}: ${r.body.toString()}`);
      const error = (JSON.parse(r.body.toString()) as { error: { type: string; message: string } }).error;
      assert.equal(error.type, 'invalid_request_error');
      assert.match(error.message, /"anthropic_beta": "context-1m-2025-08-07" bills long prompts at other rates than the budget counts/);
    }
    const header = await post(token, path, cloudBody(version), { 'anthropic-beta': 'context-1m-2025-08-07' });
    assert.equal(header.status, 400);
    assert.match(messageOf(header.body), /^the anthropic-beta header's "context-1m-2025-08-07" bills long prompts/);
  }
  assert.equal(cloud.requests.length, before, 'nothing was forwarded');
  assert.equal((await post(token, BEDROCK, cloudBody('bedrock-2023-05-31', { anthropic_beta: ['interleaved-thinking-2025-05-14'] }))).status, 200);
  assert.equal((await post(token, VERTEX, cloudBody('vertex-2023-10-16', { anthropic_beta: ['interleaved-thinking-2025-05-14'] }))).status, 200);
  // A refusal's line is written after its answer: wait for the six.
  const refusedLines = () => gw.records().filter((r) => r.event === 'request' && r.instance_id === 'bot-run-betas' && r.limit === 'unpriced_call');
  await eventually('the six refusals\' lines', () => refusedLines().length >= 6, t.signal);
  const refused = refusedLines();
  assert.equal(refused.length, 6);
});

test('price changers: under a money budget, the review\'s other price-changing forms on the Bedrock route are refused and never forwarded: fast mode, a priority tier, US-only inference, a 1-hour cache in a system block, a case variant of anthropic_beta', async () => {
  const token = await mint('run-forms');
  const before = cloud.requests.length;
  const forms: [Record<string, unknown>, RegExp][] = [
    [{ speed: 'fast' }, /^"speed": "fast" \(fast mode\)/],
    [{ service_tier: 'priority' }, /^"service_tier": "priority"/],
    [{ inference_geo: 'us' }, /^"inference_geo": "us"/],
    [{ system: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral', ttl: '1h' } }] }, /^"cache_control\.ttl": "1h"/],
    [{ Anthropic_Beta: ['context-1m-2025-08-07'] }, /spell it "anthropic_beta"$/],
  ];
  for (const [extra, shows] of forms) {
    const r = await post(token, BEDROCK, cloudBody('bedrock-2023-05-31', extra));
    assert.equal(r.status, 400, JSON.stringify(extra));
    assert.match(messageOf(r.body), shows);
  }
  assert.equal(cloud.requests.length, before, 'nothing was forwarded');
});

test('unpriced models: under a money budget, a call to a model without a price is refused 400 price_not_counted naming the model and MODEL_PRICES_FILE, never forwarded, and start-up said it would be', async () => {
  const warning = await gw.waitForRecord((r) => r.event === 'warning' && /no price in MODEL_PRICES_FILE/.test(String(r.message)));
  assert.match(String(warning.message), /their calls are refused \(400 price_not_counted\) .*: openai\/gpt-unpriced$/);
  const before = openai.requests.length;
  const r = await chat(gw, await mint('run-unpriced'), 'gpt-unpriced');
  assert.equal(r.status, 400);
  const error = (JSON.parse(r.body.toString()) as { error: { code: string; message: string } }).error;
  assert.equal(error.code, 'price_not_counted');
  assert.match(error.message, /^the model "gpt-unpriced" has no price in the gateway's price table \(MODEL_PRICES_FILE\), so the budget cannot count its calls/);
  assert.equal(openai.requests.length, before, 'not forwarded');
  const record = await gw.waitForRecord((rec) => rec.event === 'request' && rec.instance_id === 'bot-run-unpriced');
  assert.deepEqual([record.status, record.limit, record.model], [400, 'unpriced_call', 'gpt-unpriced']);
  assert.equal((await chat(gw, await mint('run-priced'), 'gpt-test')).status, 200, 'a priced model goes through');
});

test('unpriced models: with --allow-unpriced-models, a call to a model without a price goes through, counting tokens only, and start-up said it would', async () => {
  const warning = await allowing.waitForRecord((r) => r.event === 'warning' && /no price in MODEL_PRICES_FILE/.test(String(r.message)));
  assert.match(String(warning.message), /--allow-unpriced-models lets their calls through, counting tokens only and spending no budget: openai\/gpt-unpriced$/);
  const token = await mint('run-allowed');
  for (let i = 0; i < 3; i++) assert.equal((await chat(allowing, token, 'gpt-unpriced')).status, 200, `call ${i + 1}: no budget is spent`);
  const record = await allowing.waitForRecord((rec) => rec.event === 'request' && rec.instance_id === 'bot-run-allowed' && rec.status === 200);
  assert.equal(record.charged_usd, undefined, 'no price, no money: the field is left out');
});

test('mint-token --limits: a --budget-usd (or another limit) above the file\'s ceiling is an error naming the flag, the ceiling and the field, and nothing is minted; within it a token is minted', async () => {
  const above = await runCommandInProcess(['mint-token', '--instance-id', 'i', '--workflow', 'w', '--run-id', 'r', '--budget-usd', '20', '--limits', join(dir, 'limits.json')], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(above.code, 1);
  assert.match(above.stderr, /mint-token: --budget-usd 20 is above the ceiling 0\.01 of .*limits\.json \(perRun\.budgetUsd\); the gateway would apply the ceiling/);
  assert.equal(above.stdout, '', 'no token');
  assert.doesNotMatch(above.stderr, /token id/, 'no id of a token never issued');
  const within = await runCommandInProcess(['mint-token', '--instance-id', 'i', '--workflow', 'w', '--run-id', 'r', '--budget-usd', '0.005', '--limits', join(dir, 'limits.json')], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(within.code, 0, within.stderr);
  assert.match(within.stdout, /^ey/);
  const unreadable = await runCommandInProcess(['mint-token', '--instance-id', 'i', '--workflow', 'w', '--run-id', 'r', '--limits', join(dir, 'missing.json')], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(unreadable.code, 1);
  assert.match(unreadable.stderr, /--limits: .*missing\.json cannot be read \(ENOENT\)/);
});

test('limits: a run whose token asked more than the file\'s ceiling (minted without --limits) is refused, once spent, naming the ask and the ceiling that applied', async () => {
  const token = await mint('run-asked-more', ['--budget-usd', '5']);
  assert.equal((await chat(gw, token, 'gpt-test')).status, 200, 'the first call spends the cent');
  const r = await chat(gw, token, 'gpt-test');
  assert.equal(r.status, 429);
  const error = (JSON.parse(r.body.toString()) as { error: { code: string; message: string } }).error;
  assert.equal(error.code, 'insufficient_quota');
  assert.match(error.message, /^this run's budget is spent: \$\d+\.\d\d of \$0\.01 \(the token asked \$5\.00; the file's ceiling \$0\.01 applies\); the run must stop/);
});
