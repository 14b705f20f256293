// The model gateway's rules, exercised against the proxy as `serve` starts it and a fake HTTPS upstream.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { errorOf, recordFor } from '../support/gateway-replies.ts';
import { seenResponses, send, type Reply } from '../support/http-client.ts';
import { chunk, completionJson, sseEvent, startModelUpstream, streamEvents, type ModelUpstream } from '../support/model-upstream.ts';
import { assertNoSecrets, type ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const KEY_1 = `sk-test1-${randomBytes(16).toString('hex')}`;
const KEY_2 = `sk-test2-${randomBytes(16).toString('hex')}`;
const KEY_JWT_MODE = `sk-test3-${randomBytes(16).toString('hex')}`;
const SIGNING_KEY = randomBytes(32).toString('hex');
const MODEL = 'gpt-test';
const botTokens: string[] = [];

let pki: TestPki;
let upstream: ModelUpstream;
let dir: string;
let keyFile: string;
let gw: ProxyProcess;
let jwtGw: ProxyProcess;
let port: number;
let jwtPort: number;

before(async () => {
  pki = makeTestPki();
  upstream = await startModelUpstream(pki);
  dir = mkdtempSync(join(tmpdir(), 'gateway-test-'));
  keyFile = join(dir, 'api-key');
  writeFileSync(keyFile, `${KEY_1}\n`);
  const common = { UPSTREAM_BASE_URL: upstream.baseUrl, UPSTREAM_ALLOWED_MODELS: `${MODEL},gpt-small`, UPSTREAM_CA_FILE: pki.caFile };
  const args = (extra: string[] = []) => ['--model-gateway-listen', '127.0.0.1:0', '--upstream-connect-timeout', '300ms', ...extra];
  [gw, jwtGw] = await Promise.all([
    startServe({
      env: { ...common, UPSTREAM_API_KEY_FILE: keyFile, UPSTREAM_ORGANIZATION: 'org-test', UPSTREAM_PROJECT: 'proj-test', UPSTREAM_PROVIDER: 'fakeai' },
      args: args(['--max-request-body', '64KiB', '--upstream-idle-timeout', '1s', '--upstream-retry-budget', '5s']),
      listeners: ['model'],
    }),
    startServe({ env: { ...common, UPSTREAM_API_KEY: KEY_JWT_MODE, MODEL_PROXY_SIGNING_KEY: SIGNING_KEY }, args: args(), listeners: ['model'] }),
  ]);
  port = gw.ports.model!;
  jwtPort = jwtGw.ports.model!;
});

after(async () => {
  await Promise.all([gw?.stop(), jwtGw?.stop()]);
  await upstream?.close();
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const chatBody = (extra: Record<string, unknown> = {}) => JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], ...extra });
const JSON_HEADERS = { 'content-type': 'application/json' };

function chat(p: number, body: string, headers: Record<string, string> = {}): Promise<Reply> {
  return send(p, 'POST', '/v1/chat/completions', { body, headers: { ...JSON_HEADERS, ...headers } });
}

const last = () => upstream.requests[upstream.requests.length - 1]!;

test('rule 3: the upstream gets Authorization: Bearer <key>, never the client Authorization', async () => {
  const r = await chat(port, chatBody(), { authorization: 'Bearer not-the-key' });
  assert.equal(r.status, 200);
  assert.equal(last().headers.authorization, `Bearer ${KEY_1}`);
});

test('rule 4: the path is kept under the base path without doubling /v1, the query is kept, Host is the upstream', async () => {
  await send(port, 'POST', '/v1/chat/completions?api-version=2024-10-21', { body: chatBody(), headers: JSON_HEADERS });
  assert.equal(last().url, '/v1/chat/completions?api-version=2024-10-21');
  assert.equal(last().headers.host, `127.0.0.1:${upstream.port}`);
});

test('the original request bytes are forwarded unchanged', async () => {
  const body = `{ "messages":[{"content":"caf\\u00e9 ☕","role":"user"}],\n  "model" : "${MODEL}", "temperature": 0.10, "extra": {"z":1,"a":2} }`;
  await chat(port, body);
  assert.deepEqual(last().body, Buffer.from(body));
});

test("the provider's organization and project go up as OpenAI-Organization and OpenAI-Project; the client's account and key headers never do", async () => {
  await chat(port, chatBody(), { 'openai-organization': 'org-other', 'openai-project': 'proj-other', 'x-api-key': 'sk-found-it', cookie: 'a=b', 'user-agent': 'OpenAI/JS 4.0' });
  const h = last().headers;
  assert.equal(h['openai-organization'], 'org-test');
  assert.equal(h['openai-project'], 'proj-test');
  assert.equal(h['upstream-organization'], undefined);
  assert.equal(h['x-api-key'], undefined);
  assert.equal(h.cookie, undefined);
  assert.equal(h['user-agent'], 'OpenAI/JS 4.0');
});

test('usage is recorded whatever encoding the client accepts: the upstream is asked for identity', async () => {
  await chat(port, chatBody(), { 'accept-encoding': 'gzip, br' });
  assert.equal(last().headers['accept-encoding'], 'identity');
});

test('X-Client-Request-Id is forwarded when present and returned to the client', async () => {
  const r = await chat(port, chatBody(), { 'x-client-request-id': 'corr-123' });
  assert.equal(r.headers['x-client-request-id'], 'corr-123');
  assert.equal(last().headers['x-client-request-id'], 'corr-123');
});

test('X-Client-Request-Id is generated when absent', async () => {
  const r = await chat(port, chatBody());
  const id = r.headers['x-client-request-id'];
  assert.match(String(id), /^[0-9a-f-]{36}$/);
  assert.equal(last().headers['x-client-request-id'], id);
});

test('a non-streamed response is relayed byte for byte and its usage recorded with the upstream request id', async () => {
  const r = await chat(port, chatBody(), { 'x-instance-id': 'bot-7', 'x-workflow': 'triage', 'x-run-id': 'run-42' });
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), completionJson(MODEL));
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.equal(rec.provider, 'fakeai');
  assert.equal(rec.model, MODEL);
  assert.equal(rec.response_model, MODEL);
  assert.equal(rec.upstream_request_id, 'req_upstream_1');
  assert.equal(rec.stream, false);
  assert.deepEqual([rec.input_tokens, rec.output_tokens, rec.reasoning_tokens, rec.cached_tokens], [42, 7, 3, 10]);
  assert.equal(rec.usage_complete, true);
  assert.equal(rec.finish_reason, 'stop');
  assert.deepEqual([rec.instance_id, rec.workflow, rec.run_id], ['bot-7', 'triage', 'run-42']);
});

test('a stream is relayed byte for byte with X-Accel-Buffering: no, and its final usage chunk recorded', async () => {
  const r = await chat(port, chatBody({ stream: true, stream_options: { include_usage: true } }));
  assert.equal(r.status, 200);
  assert.equal(r.headers['x-accel-buffering'], 'no');
  assert.equal(r.headers['content-type'], 'text/event-stream');
  assert.equal(r.body.toString(), streamEvents(MODEL, true).join(''));
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.equal(rec.stream, true);
  assert.deepEqual([rec.input_tokens, rec.output_tokens, rec.reasoning_tokens, rec.cached_tokens], [42, 7, 3, 10]);
  assert.equal(rec.usage_complete, true);
  assert.equal(rec.interrupted, undefined, 'a field without a value is left out of the line');
  assert.equal(typeof rec.ttft_ms, 'number');
});

test('a stream without include_usage is recorded as usage-incomplete', async () => {
  const r = await chat(port, chatBody({ stream: true }));
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.equal(rec.usage_complete, false);
  assert.equal(rec.input_tokens, undefined);
});

test('chunks leave the gateway as they arrive: each paced upstream chunk reaches the client before the next is sent', { timeout: 20_000 }, async () => {
  // Lockstep: the upstream sends chunk N+1 only once the client holds all of chunk N. A gateway
  // that held back any byte until more came would stall the exchange (and time out), so the
  // stream completing proves that every chunk was relayed on its own, with no timer involved.
  const events = streamEvents(MODEL, true);
  let sent = 0;
  let sendNext!: () => void;
  upstream.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    sendNext = () => {
      if (sent < events.length) res.write(events[sent++]);
      else res.end();
    };
    sendNext();
  });
  const received: string[] = [];
  let partial = '';
  await new Promise<void>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: JSON_HEADERS, agent: false }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        // TCP may split a chunk; it cannot merge two, since the next is not sent yet.
        partial += text;
        const expected = events[sent - 1]!;
        try {
          assert.ok(expected.startsWith(partial), `only chunk ${sent - 1} can have arrived, got ${JSON.stringify(partial)}`);
        } catch (failure) {
          // Thrown from an event handler it would be an uncaught exception: fail the test's promise.
          req.destroy();
          reject(failure as Error);
          return;
        }
        if (partial === expected) {
          received.push(partial);
          partial = '';
          sendNext();
        }
      });
      res.on('end', resolve);
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(chatBody({ stream: true, stream_options: { include_usage: true } }));
  });
  assert.deepEqual(received, events, 'every chunk arrived whole, in order, before the next was sent');
});

test('rule 2: a model outside the allowlist is refused with 400 model_not_allowed and not forwarded', async () => {
  const before = upstream.requests.length;
  const r = await chat(port, chatBody({ model: 'gpt-expensive' }));
  assert.equal(r.status, 400);
  const e = errorOf(r);
  assert.equal(e.code, 'model_not_allowed');
  assert.equal(e.type, 'invalid_request_error');
  assert.equal(e.param, 'model');
  assert.doesNotMatch(e.message, /gpt-small|gpt-test/, 'the allowlist is not leaked');
  assert.equal(upstream.requests.length, before);
});

test('bad bodies get precise statuses: invalid JSON 400, non-JSON 415, bad role 400, over the cap 413', async () => {
  const before = upstream.requests.length;
  assert.equal(errorOf(await chat(port, '{"model":')).code, 'invalid_json');
  const notJson = await send(port, 'POST', '/v1/chat/completions', { body: chatBody(), headers: { 'content-type': 'text/plain' } });
  assert.equal(notJson.status, 415);
  const role = await chat(port, JSON.stringify({ model: MODEL, messages: [{ role: 'function', content: 'x' }] }));
  assert.equal(role.status, 400);
  assert.equal(errorOf(role).param, 'messages[0].role');
  const big = await chat(port, chatBody({ pad: 'x'.repeat(70 * 1024) }));
  assert.equal(big.status, 413);
  assert.equal(errorOf(big).code, 'request_too_large');
  assert.equal(upstream.requests.length, before);
});

test('GET /v1/models is answered from the allowlist and never forwarded', async () => {
  const before = upstream.requests.length;
  const r = await send(port, 'GET', '/v1/models');
  assert.equal(r.status, 200);
  assert.deepEqual(JSON.parse(r.body.toString()), {
    object: 'list',
    data: [
      { id: MODEL, object: 'model', created: 0, owned_by: 'fakeai' },
      { id: 'gpt-small', object: 'model', created: 0, owned_by: 'fakeai' },
    ],
  });
  assert.equal(upstream.requests.length, before);
});

test('unknown paths get 404 and wrong methods 405, as OpenAI-style JSON errors', async () => {
  const notFound = await send(port, 'POST', '/v1/embeddings', { body: '{}', headers: JSON_HEADERS });
  assert.equal(notFound.status, 404);
  assert.deepEqual(Object.keys(errorOf(notFound)).sort(), ['code', 'message', 'param', 'type']);
  const wrong = await send(port, 'GET', '/v1/chat/completions');
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.allow, 'POST');
});

test('rule 8: cookies, auth challenges and headers carrying the key are removed; rate-limit headers kept', async () => {
  upstream.script((req, res) => {
    const text = completionJson(MODEL);
    res.writeHead(200, [
      ['Content-Type', 'application/json'],
      ['Set-Cookie', '__cf_bm=abc'],
      ['WWW-Authenticate', 'Bearer'],
      ['X-Echo', String(req.headers.authorization)],
      ['X-Api-Key', 'sk-other'],
      ['x-ratelimit-remaining-tokens', '999'],
      ['x-ratelimit-limit-requests', '10'],
      ['retry-after', '1'],
      ['openai-processing-ms', '12'],
      ['Content-Length', String(Buffer.byteLength(text))],
    ].flat());
    res.end(text);
  });
  const r = await chat(port, chatBody());
  for (const h of ['set-cookie', 'www-authenticate', 'x-echo', 'x-api-key']) assert.equal(r.headers[h], undefined, h);
  assert.equal(r.headers['x-ratelimit-remaining-tokens'], '999');
  assert.equal(r.headers['x-ratelimit-limit-requests'], '10');
  assert.equal(r.headers['retry-after'], '1');
  assert.equal(r.headers['openai-processing-ms'], '12');
});

test('the key is redacted from upstream error bodies', async () => {
  upstream.script((req, res) => {
    const key = String(req.headers.authorization).slice('Bearer '.length);
    const body = JSON.stringify({ error: { message: `The server had an error processing request with key ${key}. Retry later.`, type: 'server_error', code: null, param: null } });
    res.writeHead(500, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  const r = await chat(port, chatBody());
  assert.equal(r.status, 500);
  assert.match(errorOf(r).message, /with key \[REDACTED\]\. Retry later\./);
  assert.equal(errorOf(r).type, 'server_error');
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.equal(rec.error, 'upstream_5xx');
});

test('an upstream 401 or 403 (the gateway key refused) reaches the bot as 502 upstream_auth_failed, never as its own 401, and is logged as a configuration error', async () => {
  for (const status of [401, 403]) {
    upstream.script((req, res) => {
      const key = String(req.headers.authorization).slice('Bearer '.length);
      const body = JSON.stringify({ error: { message: `Incorrect API key provided: ${key}.`, type: 'invalid_request_error', code: 'invalid_api_key', param: null } });
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'www-authenticate': 'Bearer realm="OpenAI"' });
      res.end(body);
    });
    const r = await chat(port, chatBody());
    assert.equal(r.status, 502, String(status));
    assert.equal(errorOf(r).code, 'upstream_auth_failed');
    assert.equal(errorOf(r).type, 'server_error');
    assert.match(errorOf(r).message, /not your bot token/);
    assert.equal(r.headers['www-authenticate'], undefined);
    assert.ok(!r.body.toString().includes('Incorrect API key'), 'the upstream body is not relayed');
    const requestId = String(r.headers['x-client-request-id']);
    assert.equal(r.headers['x-request-id'], requestId, 'the answer names the request, as the SDKs report it');
    const rec = await recordFor(gw, requestId);
    assert.equal(rec.error, `upstream_${status}`);
    await gw.waitForRecord((l) => l.event === 'config_error' && l.status === status);
  }
});

test('a 429 is retried after the upstream retry-after-ms and the retry answers the client', async () => {
  upstream.script((_req, res) => {
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '20' });
    res.end('{"error":{"message":"slow down","type":"rate_limit_error","code":null,"param":null}}');
  });
  const before = upstream.requests.length;
  const r = await chat(port, chatBody());
  assert.equal(r.status, 200);
  assert.equal(upstream.requests.length, before + 2);
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.equal(rec.retries, 1);
  assert.equal(rec.rate_limited, 1);
});

test('when retries are exhausted the client gets the upstream 429 with its Retry-After', async () => {
  const limited = (_req: unknown, res: import('node:http').ServerResponse) => {
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0', 'x-ratelimit-reset-requests': '1s' });
    res.end('{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded","param":null}}');
  };
  upstream.script(limited, limited, limited);
  const before = upstream.requests.length;
  const r = await chat(port, chatBody());
  assert.equal(r.status, 429);
  assert.equal(r.headers['retry-after'], '0');
  assert.equal(errorOf(r).code, 'rate_limit_exceeded');
  assert.equal(upstream.requests.length, before + 3, 'first attempt plus the 2 configured retries');
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.equal(rec.rate_limited, 3);
  assert.equal(rec.error, 'rate_limited');
});

test('a 429 whose Retry-After exceeds the retry budget is returned at once', async () => {
  upstream.script((_req, res) => {
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '3600' });
    res.end('{"error":{"message":"quota","type":"insufficient_quota","code":null,"param":null}}');
  });
  const before = upstream.requests.length;
  const r = await chat(port, chatBody());
  assert.equal(r.status, 429);
  assert.equal(r.headers['retry-after'], '3600');
  assert.equal(upstream.requests.length, before + 1);
});

test('no POST is sent twice: an upstream that reads the whole call on a pooled connection and then resets it saw it exactly once (502)', async () => {
  await chat(port, chatBody()); // leaves a pooled connection for the next request
  let reused: boolean | undefined;
  upstream.script((req) => {
    // The fake calls this once the whole body has arrived.
    reused = upstream.isReusedConnection(req);
    req.socket.destroy();
  });
  const before = upstream.requests.length;
  const r = await chat(port, chatBody());
  assert.equal(reused, true, 'the reset request came over a pooled connection');
  assert.equal(r.status, 502);
  assert.equal(errorOf(r).code, 'upstream_unreachable');
  assert.equal(upstream.requests.length, before + 1, 'the upstream saw the call once');
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.deepEqual([rec.retries, rec.attempts, rec.error], [0, 1, 'reset']);
});

test('a reset on a new connection after the request was sent is not replayed: the upstream may already be generating (and billing)', async () => {
  upstream.closeIdleConnections();
  let reused: boolean | undefined;
  upstream.script((req) => {
    reused = upstream.isReusedConnection(req);
    req.socket.destroy();
  });
  const before = upstream.requests.length;
  const r = await chat(port, chatBody());
  assert.equal(reused, false, 'the request came over a new connection');
  assert.equal(r.status, 502);
  assert.equal(errorOf(r).code, 'upstream_unreachable');
  assert.equal(upstream.requests.length, before + 1, 'sent once, never replayed');
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.deepEqual([rec.retries, rec.attempts, rec.error], [0, 1, 'reset']);
});

test('after retried 429s the record counts the body once and the attempts apart', async () => {
  const limited = (_req: unknown, res: import('node:http').ServerResponse) => {
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '5' });
    res.end('{"error":{"message":"slow down","type":"rate_limit_error","code":null,"param":null}}');
  };
  upstream.script(limited, limited);
  const body = chatBody();
  const r = await chat(port, body);
  assert.equal(r.status, 200);
  const rec = await recordFor(gw, String(r.headers['x-client-request-id']));
  assert.deepEqual([rec.bytes_in, rec.attempts, rec.retries, rec.rate_limited, rec.error], [Buffer.byteLength(body), 3, 2, 2, undefined]);
  assert.equal(rec.bytes_out, r.body.length);
});

function streamOutcome(p: number, body: string, onFirstData?: (destroy: () => void) => void): Promise<{ text: string; outcome: string; requestId: string }> {
  return new Promise((resolve) => {
    let text = '';
    let requestId = '';
    const req = request({ host: '127.0.0.1', port: p, method: 'POST', path: '/v1/chat/completions', headers: JSON_HEADERS, agent: false }, (res) => {
      requestId = String(res.headers['x-client-request-id']);
      res.setEncoding('utf8');
      res.once('data', () => onFirstData?.(() => {
        req.destroy();
        resolve({ text, outcome: 'client closed', requestId });
      }));
      res.on('data', (s: string) => (text += s));
      res.on('end', () => resolve({ text, outcome: 'clean end', requestId }));
      res.on('error', () => resolve({ text, outcome: 'broken', requestId }));
    });
    req.on('error', () => resolve({ text, outcome: 'broken', requestId }));
    req.end(body);
  });
}

test('an upstream cut mid-stream reaches the client as a broken connection and is recorded as interrupted', async () => {
  upstream.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(sseEvent(chunk(MODEL, { content: 'partial' })), () => res.destroy());
  });
  const r = await streamOutcome(port, chatBody({ stream: true, stream_options: { include_usage: true } }));
  assert.equal(r.outcome, 'broken');
  const rec = await recordFor(gw, r.requestId);
  assert.equal(rec.interrupted, 'upstream');
  assert.equal(rec.usage_complete, false);
});

test('a client disconnect mid-stream aborts the upstream request at once', async () => {
  let upstreamClosed!: () => void;
  const closed = new Promise<void>((r) => (upstreamClosed = r));
  upstream.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(sseEvent(chunk(MODEL, { content: 'first' })));
    res.on('close', upstreamClosed); // never ends by itself
  });
  const r = await streamOutcome(port, chatBody({ stream: true }), (destroy) => destroy());
  assert.equal(r.outcome, 'client closed');
  await closed;
  const rec = await recordFor(gw, r.requestId);
  assert.equal(rec.interrupted, 'client');
  assert.equal(rec.usage_complete, false);
});

test('a stream that stalls past the idle timeout is cut and recorded as an idle-timeout interruption', async () => {
  upstream.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(sseEvent(chunk(MODEL, { content: 'then silence' })));
  });
  const r = await streamOutcome(port, chatBody({ stream: true }));
  assert.equal(r.outcome, 'broken');
  const rec = await recordFor(gw, r.requestId);
  assert.equal(rec.interrupted, 'idle_timeout');
});

test('rewriting the key file while the gateway runs rotates the key for the next request', async () => {
  await chat(port, chatBody());
  assert.equal(last().headers.authorization, `Bearer ${KEY_1}`);
  writeFileSync(`${keyFile}.new`, KEY_2);
  renameSync(`${keyFile}.new`, keyFile);
  await chat(port, chatBody());
  assert.equal(last().headers.authorization, `Bearer ${KEY_2}`);
});

test('with MODEL_GATEWAY_ENABLED=true and no key, requests get a clear 503', async () => {
  const p = await startServe({ env: { MODEL_GATEWAY_ENABLED: 'true', UPSTREAM_ALLOWED_MODELS: MODEL }, args: ['--model-gateway-listen', '127.0.0.1:0'], listeners: ['model'] });
  try {
    const r = await chat(p.ports.model!, chatBody());
    assert.equal(r.status, 503);
    assert.equal(errorOf(r).code, 'upstream_key_missing');
    assert.match(errorOf(r).message, /UPSTREAM_API_KEY/);
    const start = p.records().find((l) => l.event === 'listening')!;
    assert.equal((start.providers as { key: string }[])[0]!.key, 'missing');
  } finally {
    await p.stop();
  }
});

async function mint(args: string[]): Promise<string> {
  const r = await runCommandInProcess(['mint-token', ...args], { MODEL_PROXY_SIGNING_KEY: SIGNING_KEY });
  assert.equal(r.code, 0, r.stderr);
  const token = r.stdout.trim();
  botTokens.push(token);
  return token;
}

test('without a signing key the gateway warns at start-up that it runs in network-policy mode', () => {
  assert.ok(gw.records().some((l) => l.event === 'warning' && String(l.message).includes('network-policy mode')));
  assert.equal(gw.records().find((l) => l.event === 'listening')!.bot_auth, 'network-policy');
});

test('bot auth: a minted token is accepted and identity comes from its claims, not from headers', async () => {
  const token = await mint(['--instance-id', 'bot-1', '--workflow', 'review', '--run-id', 'run-9', '--ttl', '10m']);
  const r = await chat(jwtPort, chatBody(), { authorization: `Bearer ${token}`, 'x-instance-id': 'spoofed' });
  assert.equal(r.status, 200);
  assert.equal(last().headers.authorization, `Bearer ${KEY_JWT_MODE}`, 'the bot token is replaced, never forwarded');
  const rec = await recordFor(jwtGw, String(r.headers['x-client-request-id']));
  assert.deepEqual([rec.instance_id, rec.workflow, rec.run_id], ['bot-1', 'review', 'run-9']);
});

test('bot auth: missing, malformed, alg none, tampered and wrongly signed tokens get 401', async () => {
  const good = await mint(['--instance-id', 'bot-2', '--workflow', 'w', '--run-id', 'r']);
  const [h, p] = good.split('.');
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const payload = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
  const cases: [string, Record<string, string>][] = [
    ['missing', {}],
    ['not bearer', { authorization: `Basic ${good}` }],
    ['malformed', { authorization: 'Bearer abc.def' }],
    ['alg none', { authorization: `Bearer ${b64({ alg: 'none', typ: 'JWT' })}.${p}.` }],
    ['tampered payload', { authorization: `Bearer ${h}.${b64({ ...payload, sub: 'admin' })}.${good.split('.')[2]}` }],
    ['expired', { authorization: `Bearer ${h}.${b64({ ...payload, iat: 1000, exp: 2000 })}.${good.split('.')[2]}` }],
    ['upstream key as token', { authorization: `Bearer ${KEY_JWT_MODE}` }],
  ];
  const before = upstream.requests.length;
  for (const [why, headers] of cases) {
    const r = await chat(jwtPort, chatBody(), headers);
    assert.equal(r.status, 401, why);
    assert.equal(errorOf(r).type, 'authentication_error', why);
  }
  const models = await send(jwtPort, 'GET', '/v1/models');
  assert.equal(models.status, 401, '/v1/models needs the bot token too');
  assert.equal(upstream.requests.length, before);
});

test('a refused bot token says why in plain words', async () => {
  const r = await chat(jwtPort, chatBody(), { authorization: 'Bearer abc.def' });
  assert.equal(errorOf(r).message, "the bot token was refused (malformed token): send a valid one, from mint-token, as Authorization: Bearer $MODEL_PROXY_TOKEN (the OpenAI SDKs' api key; x-api-key works too)");
});

test('an empty model allowlist is warned about at start-up', async () => {
  const p = await startServe({ env: { MODEL_GATEWAY_ENABLED: 'true' }, args: ['--model-gateway-listen', '127.0.0.1:0'], listeners: ['model'] });
  try {
    const warning = p.records().find((r) => r.event === 'warning' && r.listener === 'model' && String(r.message).startsWith('no model is allowed'));
    assert.ok(warning, p.output());
  } finally {
    await p.stop();
  }
});

test('bot auth: a token signed with another key gets 401', async () => {
  const r = await runCommandInProcess(['mint-token', '--instance-id', 'x', '--workflow', 'w', '--run-id', 'r'], { MODEL_PROXY_SIGNING_KEY: randomBytes(32).toString('hex') });
  botTokens.push(r.stdout.trim());
  assert.equal((await chat(jwtPort, chatBody(), { authorization: `Bearer ${r.stdout.trim()}` })).status, 401);
});

test('no upstream key or bot token appears in any response or log line of this suite', () => {
  assert.ok(botTokens.length >= 3);
  const secrets = [KEY_1, KEY_2, KEY_JWT_MODE, SIGNING_KEY, ...botTokens];
  assertNoSecrets(seenResponses.join('\n'), secrets, 'a response');
  assertNoSecrets(gw.output() + jwtGw.output(), secrets, 'the gateway output');
});

