// The Responses API route and the rules every protocol shares, against the proxy as `serve` starts it and a
// fake HTTPS upstream that answers in OpenAI's Responses format.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { after, before, test } from 'node:test';
import { errorOf, recordFor } from '../support/gateway-replies.ts';
import { send, type Reply } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { assertNoSecrets, type ProxyProcess } from '../support/proxy-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { cutTranscript, encodeSse, jsonBodyOf, streamHandler, textTranscript } from '../support/responses-upstream.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const KEY = `sk-resp-${randomBytes(16).toString('hex')}`;
const MODEL = 'gpt-test';

let pki: TestPki;
let upstream: ModelUpstream;
let gw: ProxyProcess;
let hostedGw: ProxyProcess;
let port: number;

before(async () => {
  pki = makeTestPki();
  upstream = await startModelUpstream(pki);
  const env = { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_ALLOWED_MODELS: MODEL, UPSTREAM_CA_FILE: pki.caFile, UPSTREAM_API_KEY: KEY };
  const args = (extra: string[] = []) => ['--model-gateway-listen', '127.0.0.1:0', '--upstream-idle-timeout', '2s', ...extra];
  [gw, hostedGw] = await Promise.all([
    startServe({ env, args: args(), listeners: ['model'] }),
    startServe({ env, args: args(['--allow-hosted-tools', 'web_search']), listeners: ['model'] }),
  ]);
  port = gw.ports.model!;
});

after(async () => {
  await Promise.all([gw?.stop(), hostedGw?.stop()]);
  await upstream?.close();
  pki?.cleanup();
});

const JSON_HEADERS = { 'content-type': 'application/json' };
const body = (extra: Record<string, unknown> = {}) => JSON.stringify({ model: MODEL, input: [{ role: 'user', content: 'hi' }], store: false, ...extra });
const post = (p: number, path: string, text: string, headers: Record<string, string> = {}): Promise<Reply> => send(p, 'POST', path, { body: text, headers: { ...JSON_HEADERS, ...headers } });
const TEXT = textTranscript('Hello there.', { model: MODEL });
const CUT = cutTranscript('Hello there, this is cut.', { model: MODEL });


test('POST /v1/responses: the key replaces the client credential, the bytes go up unchanged, the stream comes back byte for byte and its usage is recorded', async () => {
  upstream.script(streamHandler(TEXT));
  const text = body({ stream: true, include: ['reasoning.encrypted_content'] });
  const r = await post(port, '/v1/responses', text, { authorization: 'Bearer bot-token', accept: 'text/event-stream' });
  assert.equal(r.status, 200);
  assert.equal(r.headers['x-accel-buffering'], 'no');
  assert.equal(r.body.toString(), encodeSse(TEXT));
  // The fake answers with api.openai.com's headers: rate limits reach the bot, the key's account does not.
  assert.equal(r.headers['x-ratelimit-remaining-tokens'], '29998000');
  assert.equal(r.headers['openai-organization'], undefined);
  assert.equal(r.headers['openai-project'], undefined);
  const up = upstream.requests.at(-1)!;
  assert.equal(up.url, '/v1/responses');
  assert.equal(up.headers.authorization, `Bearer ${KEY}`);
  assert.deepEqual(up.body, Buffer.from(text));
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.equal(rec.api, 'responses');
  assert.equal(rec.path, '/v1/responses');
  assert.match(String(rec.upstream_request_id), /^req_[0-9a-f]+$/);
  assert.equal(rec.upstream_request_id, r.headers['x-request-id'], 'the upstream request id reaches the client too');
  assert.deepEqual([rec.input_tokens, rec.output_tokens, rec.reasoning_tokens, rec.cached_tokens, rec.usage_complete], [1200, 18, 0, 1024, true]);
  assert.deepEqual([rec.finish_reason, rec.stream, rec.interrupted, rec.error], ['completed', true, undefined, undefined]);
  assert.equal(typeof rec.ttft_ms, 'number');
});

test('a non-streamed responses answer is relayed and its usage read from the JSON body', async () => {
  upstream.script((_req, res) => {
    const json = JSON.stringify(jsonBodyOf(TEXT));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
    res.end(json);
  });
  const r = await post(port, '/v1/responses', body());
  assert.equal(r.status, 200);
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.deepEqual([rec.api, rec.stream, rec.input_tokens, rec.output_tokens, rec.finish_reason], ['responses', false, 1200, 18, 'completed']);
});

test('a responses stream that ends without a terminal event reaches the client as a broken connection, recorded as interrupted with usage incomplete', async () => {
  upstream.script(streamHandler(CUT)); // the upstream ends its body cleanly, but response.completed never came
  const outcome = await new Promise<{ text: string; ending: string; requestId: string }>((resolve) => {
    let text = '';
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/responses', headers: JSON_HEADERS, agent: false }, (res) => {
      const requestId = String(res.headers['x-client-request-id']);
      res.setEncoding('utf8');
      res.on('data', (s: string) => (text += s));
      res.on('end', () => resolve({ text, ending: 'clean end', requestId }));
      res.on('error', () => resolve({ text, ending: 'broken', requestId }));
    });
    req.end(body({ stream: true }));
  });
  assert.equal(outcome.ending, 'broken');
  assert.equal(outcome.text, encodeSse(CUT), 'every byte the upstream sent was relayed first');
  const rec = await recordFor(gw, outcome.requestId);
  assert.deepEqual([rec.status, rec.interrupted, rec.error, rec.usage_complete], [200, 'upstream', 'truncated', false]);
});

test('hosted tools are refused with 400 tool_not_allowed naming the flag, and nothing is forwarded', async () => {
  const before = upstream.requests.length;
  for (const tool of [{ type: 'web_search' }, { type: 'mcp', server_label: 'x', server_url: 'https://attacker.example/mcp', headers: { authorization: 'x' } }, { type: 'code_interpreter', container: { type: 'auto' } }]) {
    const r = await post(port, '/v1/responses', body({ tools: [tool] }));
    assert.equal(r.status, 400, tool.type);
    assert.equal(errorOf(r).code, 'tool_not_allowed');
    assert.equal(errorOf(r).param, 'tools[0].type');
    assert.match(errorOf(r).message, /--allow-hosted-tools/);
  }
  assert.equal(upstream.requests.length, before);
});

test('with --allow-hosted-tools web_search, web search is forwarded and other hosted tools still refused', async () => {
  upstream.script(streamHandler(TEXT));
  const ok = await post(hostedGw.ports.model!, '/v1/responses', body({ tools: [{ type: 'web_search' }], stream: true }));
  assert.equal(ok.status, 200);
  const refused = await post(hostedGw.ports.model!, '/v1/responses', body({ tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }));
  assert.equal(refused.status, 400);
  await hostedGw.waitForRecord((r) => r.event === 'warning' && String(r.message).includes('web_search'), 'the hosted-tools warning');
});

test('requests that reach stored state are refused and never forwarded: previous_response_id, conversation, item_reference, items by id', async () => {
  const before = upstream.requests.length;
  for (const extra of [
    { previous_response_id: 'resp_other_bot' },
    { conversation: 'conv_other_bot' },
    { input: [{ type: 'item_reference', id: 'msg_other_bot' }] },
    { input: [{ type: 'reasoning', id: 'rs_other_bot', summary: [] }] },
  ]) {
    const r = await post(port, '/v1/responses', body(extra));
    assert.equal(r.status, 400, JSON.stringify(extra));
    assert.equal(errorOf(r).code, 'stored_state_not_allowed');
  }
  assert.equal(upstream.requests.length, before);
});

test('the stored-response routes are not routed: 404 stored_state_not_routed, never forwarded', async () => {
  const before = upstream.requests.length;
  for (const [method, path] of [
    ['GET', '/v1/responses/resp_123'],
    ['DELETE', '/v1/responses/resp_123'],
    ['GET', '/v1/responses/resp_123/input_items'],
    ['POST', '/v1/responses/resp_123/cancel'],
    ['POST', '/v1/conversations'],
    ['GET', '/v1/conversations/conv_1/items'],
  ] as const) {
    const r = await send(port, method, path);
    assert.equal(r.status, 404, `${method} ${path}`);
    assert.equal(errorOf(r).code, 'stored_state_not_routed');
    const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
    assert.equal(rec.path, path, 'the operator sees which path was asked for');
  }
  assert.equal(upstream.requests.length, before);
});

test('a duplicate key in the body is 400 duplicate_key and nothing is forwarded: {"model":"secret","model":"allowed"}', async () => {
  const before = upstream.requests.length;
  for (const [path, text] of [
    ['/v1/chat/completions', `{"model":"gpt-secret","model":"${MODEL}","messages":[]}`],
    ['/v1/responses', `{"model":"gpt-secret","input":"x","mod\\u0065l":"${MODEL}"}`],
  ] as const) {
    const r = await post(port, path, text);
    assert.equal(r.status, 400, path);
    assert.equal(errorOf(r).code, 'duplicate_key');
    assert.match(errorOf(r).message, /"model" twice/);
  }
  assert.equal(upstream.requests.length, before);
});

test('Codex and SDK headers go upstream; headers nobody listed do not', async () => {
  upstream.script(streamHandler(TEXT));
  await post(port, '/v1/responses', body({ stream: true }), {
    originator: 'codex_exec',
    'session-id': 'sess-1',
    'x-codex-turn-metadata': '{"turn_id":"t1"}',
    'x-stainless-lang': 'js',
    'openai-beta': 'responses=v1',
    'x-goog-user-project': 'other-billing',
    'helicone-auth': 'Bearer sk-other',
    'chatgpt-account-id': 'acct-1',
  });
  const h = upstream.requests.at(-1)!.headers;
  assert.deepEqual([h.originator, h['session-id'], h['x-codex-turn-metadata'], h['x-stainless-lang'], h['openai-beta']], ['codex_exec', 'sess-1', '{"turn_id":"t1"}', 'js', 'responses=v1']);
  for (const name of ['x-goog-user-project', 'helicone-auth', 'chatgpt-account-id']) assert.equal(h[name], undefined, name);
});

test('an upgrade is never served: Codex\'s recorded WebSocket upgrade on /v1/responses gets 404 upgrade_not_served in the Responses error format (so that Codex falls back to POST), recorded, the connection closed, nothing sent upstream (upgradeRequested)', async () => {
  const recorded = JSON.parse(readFileSync('test/fixtures/upgrades/codex-0.169.0.json', 'utf8')) as { method: string; url: string; headers: Record<string, string> };
  const before = upstream.requests.length;
  // CODEX_API_KEY, unlike OPENAI_API_KEY, makes Codex send the bot token at the upgrade.
  const r = await send(port, recorded.method, recorded.url, { headers: { ...recorded.headers, authorization: 'Bearer bot-token' } });
  assert.equal(r.status, 404);
  assert.equal(r.headers.connection, 'close');
  assert.match(String(r.headers['content-type']), /^application\/json/);
  const error = errorOf(r);
  assert.equal(error.code, 'upgrade_not_served');
  assert.equal(error.type, 'not_found_error');
  assert.match(error.message, /plain HTTP/);
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.deepEqual([rec.status, rec.error, rec.api, rec.path, rec.attempts], [404, 'upgrade_not_served', 'responses', '/v1/responses', 0]);
  assert.equal(upstream.requests.length, before, 'nothing reached the upstream');
  // The same on the Messages route, in Anthropic's error format.
  const m = await send(port, 'GET', '/v1/messages', { headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } });
  assert.equal(m.status, 404);
  assert.deepEqual(JSON.parse(m.body.toString()).error.type, 'not_found_error');
});

test('GET /v1/models/{id} answers an allowlisted model and 404 model_not_found for any other', async () => {
  const ok = await send(port, 'GET', `/v1/models/${MODEL}`);
  assert.equal(ok.status, 200);
  assert.deepEqual(JSON.parse(ok.body.toString()), { id: MODEL, object: 'model', created: 0, owned_by: 'openai' });
  const missing = await send(port, 'GET', '/v1/models/gpt-secret');
  assert.equal(missing.status, 404);
  assert.equal(errorOf(missing).code, 'model_not_found');
});

test('every gateway-made error carries a request id, the log names the path asked for and the refused model', async () => {
  const unknown = await send(port, 'POST', '/v1/embeddings', { body: '{}', headers: JSON_HEADERS });
  assert.equal(unknown.status, 404);
  const id = String(unknown.headers['x-request-id']);
  assert.match(id, /^[0-9a-f-]{36}$/);
  assert.equal((await recordFor(gw, id)).path, '/v1/embeddings');

  const refused = await post(port, '/v1/responses', body({ model: 'gpt-secret-model' }));
  assert.equal(refused.status, 400);
  const rec = await recordFor(gw, String(refused.headers['x-request-id']));
  assert.deepEqual([rec.model, rec.refused_model, rec.api], [undefined, 'gpt-secret-model', 'responses']);
});

test('an unknown --allow-hosted-tools name stops start-up with exit 2, naming the flag', async () => {
  const r = await runCommandInProcess(['--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0', '--allow-hosted-tools', 'web_search,teleport'], { UPSTREAM_API_KEY: KEY });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--allow-hosted-tools: "teleport" is not a hosted tool/);
});

test('no upstream key appears in any response or log line of this suite', () => {
  assertNoSecrets(gw.output() + hostedGw.output(), [KEY], 'the proxy output');
});
