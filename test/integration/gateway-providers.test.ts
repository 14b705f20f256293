// Several providers behind one gateway (a providers file), and Anthropic's Messages API, against
// the proxy as `serve` starts it, an HTTPS fake of the Messages API and an OpenAI-compatible one.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { cutWire, encodeSse, errorHandler, overloaded, startAnthropicUpstream, streamHandler, textTranscript, type AnthropicUpstream } from '../support/anthropic-upstream.ts';
import { recordFor } from '../support/gateway-replies.ts';
import { send, type Reply } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { assertNoSecrets, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const OPENAI_KEY = `sk-openai-${randomBytes(12).toString('hex')}`;
const ANTHROPIC_KEY = `sk-ant-${randomBytes(12).toString('hex')}`;
const LOCAL_KEY = `local-${randomBytes(12).toString('hex')}`;
const SIGNING_KEY = randomBytes(32).toString('hex');
const CLAUDE = 'claude-sonnet-4-5';
const GPT = 'gpt-5';
const LOCAL = 'qwen3-coder';

let pki: TestPki;
let anthropic: AnthropicUpstream;
let openai: ModelUpstream;
let local: ModelUpstream;
let gw: ProxyProcess;
let port: number;
let dir: string;
let token: string;
/** A second valid bot token, minted by the token-conflict test. */
let secondToken: string | undefined;

before(async () => {
  pki = makeTestPki();
  [anthropic, openai, local] = await Promise.all([startAnthropicUpstream(pki), startModelUpstream(pki), startModelUpstream(pki, '/selfhosted/v1')]);
  dir = mkdtempSync(join(tmpdir(), 'gateway-providers-'));
  const file = join(dir, 'providers.json');
  writeFileSync(
    file,
    JSON.stringify({
      providers: [
        { name: 'openai', kind: 'openai', baseUrl: openai.baseUrl, keyEnv: 'OPENAI_KEY', models: [GPT], organization: 'org-acme', project: 'proj_bots', caFile: pki.caFile },
        { name: 'anthropic', kind: 'anthropic', baseUrl: anthropic.baseUrl, keyEnv: 'ANTHROPIC_KEY', models: [CLAUDE], caFile: pki.caFile },
        { name: 'local', kind: 'openai', baseUrl: local.baseUrl, keyEnv: 'LOCAL_KEY', models: [LOCAL], caFile: pki.caFile },
      ],
    }),
  );
  const env = { OPENAI_KEY, ANTHROPIC_KEY, LOCAL_KEY, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY };
  gw = await startServe({ env, args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', file, '--upstream-idle-timeout', '2s'], listeners: ['model'] });
  port = gw.ports.model!;
  const minted = await runCommandInProcess(['mint-token', '--instance-id', 'bot-1', '--workflow', 'review', '--run-id', 'run-1'], env);
  assert.equal(minted.code, 0, minted.stderr);
  token = minted.stdout.trim();
});

after(async () => {
  await gw?.stop();
  await Promise.all([anthropic?.close(), openai?.close(), local?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** What Claude Code sends (recorded): the token as both Authorization and x-api-key, the Anthropic headers, ?beta=true. */
const claudeHeaders = (): Record<string, string> => ({
  'content-type': 'application/json',
  authorization: `Bearer ${token}`,
  'x-api-key': token,
  'anthropic-version': '2023-06-01',
  'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14',
  'anthropic-dangerous-direct-browser-access': 'true',
  'x-app': 'cli',
});
const messagesBody = (extra: Record<string, unknown> = {}) => JSON.stringify({ model: CLAUDE, max_tokens: 1024, messages: [{ role: 'user', content: 'hi' }], ...extra });
const idOf = (r: Reply) => String(r.headers['x-client-request-id']);

test('POST /v1/messages?beta=true: the anthropic provider gets x-api-key with its key, the Anthropic headers and the query; the stream and its usage come back', async () => {
  const events = textTranscript('Hello from Claude.', { model: CLAUDE });
  anthropic.script(streamHandler(events, { requestId: 'req_011ant' }));
  const r = await send(port, 'POST', '/v1/messages?beta=true', { body: messagesBody({ stream: true }), headers: claudeHeaders() });
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), encodeSse(events));
  assert.equal(r.headers['request-id'], 'req_011ant', "Anthropic's request id reaches Claude Code");
  assert.equal(r.headers['anthropic-ratelimit-tokens-remaining'], '1999999');
  assert.equal(r.headers['anthropic-organization-id'], undefined, "the key owner's account stays at the gateway");
  const up = anthropic.requests.at(-1)!;
  assert.equal(up.url, '/v1/messages?beta=true');
  assert.equal(up.headers['x-api-key'], ANTHROPIC_KEY);
  assert.equal(up.headers.authorization, undefined, 'the bot token never goes upstream');
  assert.deepEqual([up.headers['anthropic-version'], up.headers['anthropic-beta'], up.headers['x-app']], ['2023-06-01', 'claude-code-20250219,interleaved-thinking-2025-05-14', 'cli']);
  assert.equal(up.headers['anthropic-dangerous-direct-browser-access'], undefined);
  const rec = await recordFor(gw, idOf(r));
  assert.deepEqual([rec.provider, rec.api, rec.model, rec.upstream_request_id, rec.instance_id], ['anthropic', 'messages', CLAUDE, 'req_011ant', 'bot-1']);
  assert.deepEqual([rec.input_tokens, rec.cached_tokens, rec.cache_write_tokens, rec.output_tokens, rec.usage_complete, rec.finish_reason], [12 + 14336 + 2048, 14336, 2048, 15, true, 'end_turn']);
});

test('a token count is forwarded and recorded without usage', async () => {
  const r = await send(port, 'POST', '/v1/messages/count_tokens?beta=true', { body: messagesBody(), headers: claudeHeaders() });
  assert.equal(r.status, 200);
  assert.equal(anthropic.requests.at(-1)!.url, '/v1/messages/count_tokens?beta=true');
  const rec = await recordFor(gw, idOf(r));
  assert.deepEqual([rec.api, rec.usage_complete, rec.input_tokens], ['messages', undefined, undefined]);
});

test('each model reaches its own provider with its own key and account headers', async () => {
  const chat = (model: string) => send(port, 'POST', '/v1/chat/completions', { body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }), headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } });
  assert.equal((await chat(GPT)).status, 200);
  const up = openai.requests.at(-1)!;
  assert.deepEqual([up.url, up.headers.authorization, up.headers['openai-organization'], up.headers['openai-project']], ['/v1/chat/completions', `Bearer ${OPENAI_KEY}`, 'org-acme', 'proj_bots']);
  const r = await chat(LOCAL);
  assert.equal(r.status, 200);
  assert.deepEqual([local.requests.at(-1)!.url, local.requests.at(-1)!.headers.authorization], ['/selfhosted/v1/chat/completions', `Bearer ${LOCAL_KEY}`]);
  assert.equal((await recordFor(gw, idOf(r))).provider, 'local');
});

test('a model on a route its provider does not serve is a 400 naming the route that serves it, and nothing is forwarded', async () => {
  const before = [anthropic.requests.length, openai.requests.length];
  const onChat = await send(port, 'POST', '/v1/chat/completions', { body: JSON.stringify({ model: CLAUDE, messages: [{ role: 'user', content: 'hi' }] }), headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } });
  assert.equal(onChat.status, 400);
  const chatError = JSON.parse(onChat.body.toString()).error;
  assert.equal(chatError.code, 'model_not_on_route');
  assert.match(chatError.message, /model "claude-sonnet-4-5" is served by POST \/v1\/messages \(provider anthropic\)/);
  const onMessages = await send(port, 'POST', '/v1/messages', { body: messagesBody({ model: GPT }), headers: claudeHeaders() });
  assert.equal(onMessages.status, 400);
  // Anthropic's error format on its route, so Claude Code shows it.
  const body = JSON.parse(onMessages.body.toString());
  assert.equal(body.type, 'error');
  assert.equal(body.error.type, 'invalid_request_error');
  assert.match(body.error.message, /served by POST \/v1\/chat\/completions or POST \/v1\/responses \(provider openai\)/);
  assert.equal(onMessages.headers['request-id'], onMessages.headers['x-request-id'], "the gateway's own answer names the request the way Anthropic's SDK reads it");
  assert.deepEqual([anthropic.requests.length, openai.requests.length], before);
});

test('an overloaded upstream (529) is retried before the first byte, like a 429', async () => {
  anthropic.script(overloaded);
  const before = anthropic.requests.length;
  const r = await send(port, 'POST', '/v1/messages', { body: messagesBody(), headers: claudeHeaders() });
  assert.equal(r.status, 200);
  assert.equal(anthropic.requests.length, before + 2);
  const rec = await recordFor(gw, idOf(r));
  assert.deepEqual([rec.retries, rec.rate_limited, rec.attempts], [1, 0, 2]);
});

test('upstream errors on the Messages route reach Claude Code in the upstream format, the key redacted', async () => {
  anthropic.script(errorHandler(400, 'invalid_request_error', `prompt is too long (key ${ANTHROPIC_KEY})`));
  const r = await send(port, 'POST', '/v1/messages', { body: messagesBody(), headers: claudeHeaders() });
  assert.equal(r.status, 400);
  assert.ok(!r.body.toString().includes(ANTHROPIC_KEY));
  assert.match(JSON.parse(r.body.toString()).error.message, /\[REDACTED\]/);
});

test('a Messages stream cut before message_stop reaches the client broken; the input tokens are recorded with usage incomplete', async () => {
  anthropic.script(streamHandler(cutWire('A long answer that will be cut.', { model: CLAUDE }), { cut: true }));
  const outcome = await new Promise<{ ending: string; requestId: string }>((resolve) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/messages', headers: claudeHeaders(), agent: false }, (res) => {
      const requestId = String(res.headers['x-client-request-id']);
      res.resume();
      res.on('end', () => resolve({ ending: 'clean end', requestId }));
      res.on('error', () => resolve({ ending: 'broken', requestId }));
    });
    req.end(messagesBody({ stream: true }));
  });
  assert.equal(outcome.ending, 'broken');
  const rec = await recordFor(gw, outcome.requestId);
  assert.deepEqual([rec.interrupted, rec.usage_complete, rec.input_tokens, rec.cached_tokens], ['upstream', false, 12 + 14336 + 2048, 14336]);
});

test('the catalog lists every provider\'s models, owned_by the provider', async () => {
  const r = await send(port, 'GET', '/v1/models', { headers: { 'x-api-key': token } });
  assert.equal(r.status, 200);
  const data = (JSON.parse(r.body.toString()) as { data: { id: string; owned_by: string }[] }).data;
  assert.deepEqual(data.map((m) => [m.id, m.owned_by]), [[GPT, 'openai'], [CLAUDE, 'anthropic'], [LOCAL, 'local']]);
});

test('two different bot tokens in Authorization and x-api-key are refused, not chosen from', async () => {
  // Both tokens valid on their own: only the conflict can be the reason for the refusal.
  const env = { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY };
  const minted = await runCommandInProcess(['mint-token', '--instance-id', 'bot-2', '--workflow', 'review', '--run-id', 'run-2'], env);
  assert.equal(minted.code, 0, minted.stderr);
  const other = minted.stdout.trim();
  assert.notEqual(other, token);
  for (const headers of [{ authorization: `Bearer ${other}` }, { 'x-api-key': other }]) {
    assert.equal((await send(port, 'GET', '/v1/models', { headers })).status, 200, `the second token alone is valid (${Object.keys(headers)[0]})`);
  }
  const before = anthropic.requests.length;
  const r = await send(port, 'POST', '/v1/messages', { body: messagesBody(), headers: { ...claudeHeaders(), 'x-api-key': other } });
  assert.equal(r.status, 401);
  const error = (JSON.parse(r.body.toString()) as { error: { type: string; message: string } }).error;
  assert.equal(error.type, 'authentication_error');
  assert.match(error.message, /two different bot tokens/);
  assert.equal(anthropic.requests.length, before, 'nothing went upstream');
  const rec = await recordFor(gw, idOf(r));
  assert.deepEqual([rec.status, rec.instance_id], [401, undefined], 'no identity was taken from either token');
  secondToken = other;
});

test('agent-config writes each agent for its own providers from the same file', async () => {
  const file = join(dir, 'providers.json');
  const claude = await runCommandInProcess(['agent-config', '--agent', 'claude-code', '--proxy-host', 'gw.ns.svc', '--providers', file], { OPENAI_KEY, ANTHROPIC_KEY, LOCAL_KEY });
  assert.equal(claude.code, 0, claude.stderr);
  assert.deepEqual(JSON.parse(claude.stdout), { apiKeyHelper: 'printf %s "$MODEL_PROXY_TOKEN"', model: CLAUDE, env: { ANTHROPIC_BASE_URL: 'http://gw.ns.svc:8450', ANTHROPIC_DEFAULT_HAIKU_MODEL: CLAUDE, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' } });
  const opencode = await runCommandInProcess(['agent-config', '--proxy-host', 'gw.ns.svc', '--providers', file]);
  assert.deepEqual(Object.keys((JSON.parse(opencode.stdout) as { provider: { openai: { models: object } } }).provider.openai.models), [GPT, LOCAL]);
});

test('no upstream key or bot token appears in any response or log line of this suite', () => {
  assertNoSecrets(gw.output(), [OPENAI_KEY, ANTHROPIC_KEY, LOCAL_KEY, token, ...(secondToken ? [secondToken] : [])], 'the proxy output');
});
