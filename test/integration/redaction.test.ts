// What comes back from an upstream never hands the workload our credential, in any form a client
// decodes, on both listeners (the proxy as `serve` starts it): compressed error bodies are decoded before they
// are redacted (or refused as 502), JSON-escaped, base64 (once or twice), HTML-escaped and twice
// percent-encoded echoes in error bodies, JSON answers and events inside a 200 stream are
// redacted, headers carrying the key in another case, percent-encoded or in base64 are dropped,
// a Bedrock event stream is cut before a frame carrying the key, and a git host's error page is
// redacted like the gateway's; the key's hex and the key without its public prefix (sk-ant-api03-,
// sk-proj-) never reach the workload on the Messages and chat completions routes.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { startBothListeners, type BothListeners } from '../support/both-listeners.ts';
import { CHUNK_HEADERS, encodeFrame } from '../support/eventstream-frame.ts';
import { errorOf } from '../support/gateway-replies.ts';
import { send, type Reply } from '../support/http-client.ts';
import type { ModelUpstream } from '../support/model-upstream.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { startServe } from '../support/serve-in-process.ts';
import { base64Of, doublePercentOf, htmlReferencesOf, recoverablePiece } from '../support/secret-forms.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

const KEY = `sk-redact-${randomBytes(16).toString('hex')}`;
const GIT_TOKEN = `ghp_${randomBytes(16).toString('hex')}`;
const GIT_USER = 'x-bot';
const GIT_PASSWORD = `glpat-${randomBytes(16).toString('hex')}`;
const BASIC = Buffer.from(`${GIT_USER}:${GIT_PASSWORD}`).toString('base64');
let pki: TestPki;
let model: ModelUpstream;
let gitBearer: TestUpstream;
let gitBasic: TestUpstream;
let proxy: ProxyProcess;
let both: BothListeners<TestUpstream> | undefined;
/** A gateway whose one provider is Bedrock (the same fake upstream), signing with AWS_SECRET. */
let bedrockGateway: ProxyProcess;
const AWS_SECRET = `aws${randomBytes(18).toString('base64url')}`;
const BEDROCK_MODEL = 'us.anthropic.claude-opus-5-5';
/** A gateway with an Anthropic and an OpenAI provider (both the model fake), whose keys carry their vendors' public prefixes. */
let prefixedGateway: ProxyProcess;
// The random part opens with a capital, so the public-prefix rule stops where the vendor's prefix
// ends: one that opened with a lowercase segment (`ab_...`) would lose it too, and that segment
// would stay beside the marker (keyTail; test/unit/redact.test.ts covers it).
const ANT_PREFIX = 'sk-ant-api03-';
const ANT_KEY = `${ANT_PREFIX}X${randomBytes(70).toString('base64url')}AA`;
const PROJ_PREFIX = 'sk-proj-';
const PROJ_KEY = `${PROJ_PREFIX}T${randomBytes(120).toString('base64url')}`;
const CLAUDE_MODEL = 'claude-sonnet-4-5';
let dir: string;

before(async () => {
  pki = makeTestPki();
  gitBasic = await startUpstream(pki);
  both = await startBothListeners({
    pki,
    env: { UPSTREAM_API_KEY: KEY, GIT_HOST_A_TOKEN: GIT_TOKEN, GIT_HOST_B: gitBasic.hostKey, GIT_HOST_B_TOKEN: GIT_PASSWORD, GIT_HOST_B_USERNAME: GIT_USER },
  });
  ({ modelUpstream: model, gitUpstream: gitBearer, proxy } = both);
  dir = mkdtempSync(join(tmpdir(), 'redaction-'));
  writeFileSync(join(dir, 'providers.json'), JSON.stringify({ providers: [{ name: 'bedrock', kind: 'anthropic-bedrock', baseUrl: model.baseUrl.replace(/\/v1$/, ''), region: 'us-east-1', credential: { type: 'aws-sigv4', accessKeyIdEnv: 'AWS_ID', secretAccessKeyEnv: 'AWS_SECRET', region: 'us-east-1' }, models: [BEDROCK_MODEL], caFile: pki.caFile }] }));
  bedrockGateway = await startServe({ env: { AWS_ID: 'AKIDREDACTION', AWS_SECRET, NODE_EXTRA_CA_CERTS: pki.caFile }, args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'providers.json')], listeners: ['model'] });
  writeFileSync(
    join(dir, 'prefixed.json'),
    JSON.stringify({
      providers: [
        { name: 'anthropic', kind: 'anthropic', baseUrl: model.baseUrl.replace(/\/v1$/, ''), keyEnv: 'ANT_KEY', models: [CLAUDE_MODEL], caFile: pki.caFile },
        { name: 'openai', kind: 'openai', baseUrl: model.baseUrl, keyEnv: 'PROJ_KEY', models: ['gpt-test'], caFile: pki.caFile },
      ],
    }),
  );
  prefixedGateway = await startServe({ env: { ANT_KEY, PROJ_KEY }, args: ['--model-gateway-listen', '127.0.0.1:0', '--providers', join(dir, 'prefixed.json')], listeners: ['model'] });
});

after(async () => {
  await Promise.all([bedrockGateway?.stop(), prefixedGateway?.stop()]); // before their upstream, the model fake, which both.close() stops
  if (dir) rmSync(dir, { recursive: true, force: true });
  await Promise.all([both?.close(), gitBasic?.close()]);
  pki?.cleanup();
});

const escapeAll = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
const chat = (stream = false) => send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-test', stream, messages: [{ role: 'user', content: 'hi' }] }) });

/** Every form of every secret the test knows, checked in the whole answer (head and body), and no piece of one a client could decode back. */
function assertClean(reply: Reply, ...secrets: string[]): void {
  const text = `${JSON.stringify(reply.headers)}\n${reply.body.toString('latin1')}`;
  for (const s of secrets) {
    for (const form of [s, s.toUpperCase(), escapeAll(s), encodeURIComponent(s), Buffer.from(s).toString('base64')]) {
      assert.ok(!text.toLowerCase().includes(form.toLowerCase()), `a form of the secret reached the client: ${form}`);
    }
    assert.equal(recoverablePiece(text, s), undefined, 'a piece of the secret can be decoded from what reached the client');
  }
}

const incorrectKey = Buffer.from(JSON.stringify({ error: { message: `Incorrect API key provided: ${KEY}`, type: 'invalid_request_error' } }));
for (const [encoding, encode] of [['gzip', gzipSync], ['deflate', deflateSync], ['br', brotliCompressSync]] as const) {
  test(`redaction, gateway: a 400 with Content-Encoding ${encoding} echoing the key is decoded, redacted and relayed without the encoding`, async () => {
    model.script((_req, res) => res.writeHead(400, { 'content-type': 'application/json', 'content-encoding': encoding }).end(encode(incorrectKey)));
    const reply = await chat();
    assert.equal(reply.status, 400);
    assert.equal(reply.headers['content-encoding'], undefined);
    assert.match(reply.body.toString(), /Incorrect API key provided: \[REDACTED\]/);
    assertClean(reply, KEY);
  });
}

test('redaction, gateway: an error body in an encoding the gateway cannot undo, or corrupt, is refused as 502, never relayed', async () => {
  for (const [encoding, body] of [['zstd', incorrectKey], ['gzip', Buffer.from(`not gzip ${KEY}`)]] as const) {
    model.script((_req, res) => res.writeHead(400, { 'content-type': 'application/json', 'content-encoding': encoding }).end(body));
    const reply = await chat();
    assert.equal(reply.status, 502, encoding);
    assertClean(reply, KEY);
  }
});

test('redaction, gateway: a JSON-escaped echo of the key in an error body is redacted', async () => {
  model.script((_req, res) => res.writeHead(422, { 'content-type': 'application/json' }).end(`{"error":{"message":"key ${escapeAll(KEY)} refused"}}`));
  const reply = await chat();
  assert.equal(reply.status, 422);
  assert.match(reply.body.toString(), /key \[REDACTED\] refused/);
  assertClean(reply, KEY);
});

test('redaction, gateway: an error event inside a 200 stream that echoes the key (split across writes) is redacted, and the events around it pass', async () => {
  model.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n');
    const error = `event: error\ndata: {"error":{"message":"upstream saw ${KEY} and ${escapeAll(KEY)}"}}\n\n`;
    const cut = error.indexOf(KEY) + 5;
    res.write(error.slice(0, cut));
    setImmediate(() => res.end(`${error.slice(cut)}data: [DONE]\n\n`));
  });
  const reply = await chat(true);
  assert.equal(reply.status, 200);
  const body = reply.body.toString();
  assert.match(body, /"content":"Hi"/);
  assert.match(body, /upstream saw \[REDACTED\] and \[REDACTED\]/);
  assert.match(body, /data: \[DONE\]/);
  assertClean(reply, KEY);
});

test('redaction, gateway: response headers carrying the key in another case, percent-encoded or in base64 are dropped', async () => {
  model.script((_req, res) => {
    res.setHeader('x-debug-upper', KEY.toUpperCase());
    res.setHeader('x-debug-pct', encodeURIComponent(KEY).replace(/-/g, '%2D'));
    res.setHeader('x-debug-b64', Buffer.from(`Bearer ${KEY}`).toString('base64'));
    res.setHeader('x-fine', 'kept');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'c', object: 'chat.completion', model: 'gpt-test', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
  });
  const reply = await chat();
  assert.equal(reply.status, 200);
  assert.equal(reply.headers['x-fine'], 'kept');
  for (const h of ['x-debug-upper', 'x-debug-pct', 'x-debug-b64']) assert.equal(reply.headers[h], undefined, h);
  assertClean(reply, KEY);
});

test('redaction, gateway: a successful answer compressed though the gateway asked for none is refused as 502 (it could not be checked)', async () => {
  model.script((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(gzipSync(Buffer.from(`{"echo":"${KEY}"}`))));
  const reply = await chat();
  assert.equal(reply.status, 502);
  assert.equal((JSON.parse(reply.body.toString()) as { error: { code: string } }).error.code, 'upstream_encoding');
});

test('redaction, git: a git host 500 whose body echoes the bearer token (plain or gzip) is redacted', async () => {
  for (const encode of [(b: Buffer) => b, gzipSync]) {
    gitBearer.handle((_req, res) => {
      const body = encode(Buffer.from(`internal error: authorization was Bearer ${GIT_TOKEN}\n`));
      res.writeHead(500, { 'content-type': 'text/plain', ...(encode === gzipSync ? { 'content-encoding': 'gzip' } : {}) }).end(body);
    });
    const reply = await send(proxy.ports.git!, 'GET', `/${gitBearer.hostKey}/org/repo.git/info/refs?service=git-upload-pack`);
    assert.equal(reply.status, 500);
    assert.equal(reply.body.toString(), 'internal error: authorization was Bearer [REDACTED]\n');
    assertClean(reply, GIT_TOKEN);
  }
  gitBearer.handle(undefined);
});

test('redaction, git: a git host 403 echoing the basic credential (base64, or the password JSON-escaped) is redacted, and a header carrying it dropped', async () => {
  gitBasic.handle((_req, res) => {
    res.setHeader('x-echo', `Basic ${BASIC}`);
    res.writeHead(403, { 'content-type': 'application/json' }).end(`{"message":"denied for Basic ${BASIC}","password":"${escapeAll(GIT_PASSWORD)}"}`);
  });
  const reply = await send(proxy.ports.git!, 'GET', `/${gitBasic.hostKey}/org/repo.git/info/refs?service=git-upload-pack`);
  gitBasic.handle(undefined);
  assert.equal(reply.status, 403);
  assert.equal(reply.body.toString(), '{"message":"denied for Basic [REDACTED]","password":"[REDACTED]"}');
  assert.equal(reply.headers['x-echo'], undefined);
  assertClean(reply, GIT_PASSWORD, BASIC);
});

test('redaction, gateway: an error body echoing the key base64- and base64url-encoded at each byte offset, and base64-encoded twice, is redacted and stays JSON', async () => {
  const forms = [base64Of(KEY), base64Of(KEY, 'k'), base64Of(KEY, 'Bearer '), base64Of(KEY, 'x', '', 'base64url'), base64Of(KEY, 'xy', '', 'base64url'), base64Of(base64Of(KEY, 'u:'), 'a')];
  model.script((_req, res) => res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'invalid credential', seen: forms } })));
  const relayed = await chat();
  assert.equal(relayed.status, 400);
  const seen = (JSON.parse(relayed.body.toString()) as { error: { seen: string[] } }).error.seen;
  assert.equal(seen.length, forms.length);
  for (const s of seen) assert.match(s, /\[REDACTED\]/);
  assertClean(relayed, KEY);
});

test('redaction, gateway: a 200 stream echoing the key base64-encoded, as HTML references and percent-encoded twice, each split across writes, is redacted', async () => {
  const forms = [base64Of(KEY, 'ke'), htmlReferencesOf(KEY), doublePercentOf(KEY), base64Of(base64Of(KEY))];
  model.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const events = forms.map((f) => `data: {"choices":[{"delta":{"content":"echo ${f} end"}}]}\n\n`).join('') + 'data: [DONE]\n\n';
    const cuts = forms.map((f) => events.indexOf(f) + Math.floor(f.length / 2));
    let from = 0;
    const next = (i: number): void => {
      if (i === cuts.length) return void res.end(events.slice(from));
      res.write(events.slice(from, cuts[i]));
      from = cuts[i]!;
      setImmediate(() => next(i + 1));
    };
    next(0);
  });
  const reply = await chat(true);
  assert.equal(reply.status, 200);
  const body = reply.body.toString();
  assert.equal(body.match(/echo [\w-]*\[REDACTED\][\w=-]* end/g)?.length, forms.length, body);
  assert.match(body, /data: \[DONE\]/);
  assertClean(reply, KEY);
});

test('redaction, gateway: a 200 JSON answer echoing the key base64-encoded is redacted', async () => {
  model.script((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'c', object: 'chat.completion', model: 'gpt-test', choices: [{ index: 0, message: { role: 'assistant', content: `debug ${base64Of(KEY, 'k')}` } }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })));
  const reply = await chat();
  assert.equal(reply.status, 200);
  assert.match((JSON.parse(reply.body.toString()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content, /^debug [\w-]*\[REDACTED\]/);
  assertClean(reply, KEY);
});

/** A request whose answer may be cut: what arrived before the end or the cut, and whether it ended cleanly. */
function sendUntilCut(port: number, path: string, body: string): Promise<{ status: number; body: Buffer; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path, headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', authorization: 'Bearer bot' }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', () => {}); // a cut stream: 'close' says so
      res.on('close', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), complete: res.complete }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('redaction, gateway (Bedrock event stream): an exception frame whose message holds the key base64-encoded is never relayed; the stream is cut after the frames before it', async () => {
  const CHUNK = CHUNK_HEADERS;
  const chunkOf = (event: unknown) => encodeFrame(CHUNK, Buffer.from(JSON.stringify({ bytes: Buffer.from(JSON.stringify(event)).toString('base64') })));
  const first = chunkOf({ type: 'message_start', message: { id: 'msg_r', type: 'message', role: 'assistant', model: BEDROCK_MODEL, content: [], usage: { input_tokens: 3, output_tokens: 1 } } });
  const leak = encodeFrame({ ':message-type': 'exception', ':exception-type': 'validationException', ':content-type': 'application/json' }, Buffer.from(JSON.stringify({ message: `The request signature we calculated does not match; secret ${base64Of(AWS_SECRET, 'k')}` })));
  const last = chunkOf({ type: 'message_stop' });
  model.script((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream' });
    res.write(first);
    setImmediate(() => res.end(Buffer.concat([leak, last])));
  });
  const reply = await sendUntilCut(bedrockGateway.ports.model!, `/model/${BEDROCK_MODEL}/invoke-with-response-stream`, JSON.stringify({ anthropic_version: 'bedrock-2023-05-31', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }));
  assert.equal(reply.status, 200);
  assert.equal(reply.complete, false, 'the stream is cut, not ended');
  assert.deepEqual(reply.body, first, 'the frame before it arrived whole, nothing after');
  assert.equal(recoverablePiece(reply.body, AWS_SECRET), undefined);
});

test('redaction refuses, fail closed, an error body written to make the search for a key with overlapping forms take exponential time: a 502 that relays nothing of it, recorded with the reason, and the gateway serves the next call', async () => {
  // A key with a run of `;` (each `&#59;` reads as one `;` or two): no real key has one, but an
  // operator's secret may, and the upstream that issued it can answer with text built against it.
  const key = `${';'.repeat(16)}Zq7-${randomBytes(8).toString('hex')}`;
  const gateway = await startServe({ env: { UPSTREAM_API_KEY: key, UPSTREAM_BASE_URL: model.baseUrl, UPSTREAM_ALLOWED_MODELS: 'gpt-test', UPSTREAM_CA_FILE: pki.caFile }, args: ['--model-gateway-listen', '127.0.0.1:0'], listeners: ['model'] });
  try {
    const call = () => send(gateway.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }) });
    model.script((_req, res) => res.writeHead(400, { 'content-type': 'application/json' }).end(`{"error":{"message":"${'&#59;'.repeat(13_000)}x"}}`));
    const refused = await call();
    assert.equal(refused.status, 502, refused.body.toString());
    assert.equal(errorOf(refused).code, 'upstream_protocol');
    assert.doesNotMatch(refused.body.toString(), /&#59;/, 'nothing of the upstream body is relayed');
    const record = await gateway.waitForRecord((r) => r.event === 'request' && r.status === 502, 'the refused call\'s line');
    assert.equal(record?.error, 'upstream_error_body_unreadable');
    assertClean(refused, key);
    const next = await call();
    assert.equal(next.status, 200, 'the next call is served');
  } finally {
    await gateway.stop();
  }
});

// ---- the last key forms (security review 2026-11-29, finding 2) ----

const hexOf = (s: string) => Buffer.from(s).toString('hex');
const mixedCase = (s: string) => [...s].map((c, i) => (i % 2 ? c.toUpperCase() : c.toLowerCase())).join('');

/** The key's hex in each case, the key without its prefix, and that part's hex. */
function lastForms(key: string, prefix: string): string[] {
  const tail = key.slice(prefix.length);
  return [hexOf(key), hexOf(key).toUpperCase(), mixedCase(hexOf(key)), tail, hexOf(tail), hexOf(tail).toUpperCase()];
}

/** Nothing of the key's secret part reaches the workload, in the head or the body: no piece a client can decode, and no piece of its hex in any case. */
function assertNoLastForms(reply: Reply, key: string, prefix: string): void {
  const text = `${JSON.stringify(reply.headers)}\n${reply.body.toString('latin1')}`.toLowerCase();
  const tail = key.slice(prefix.length);
  assert.equal(recoverablePiece(text, tail), undefined, `a piece of the key reached the workload: ${text}`);
  const hex = hexOf(tail);
  for (let i = 0; i + 16 <= hex.length; i += 2) assert.ok(!text.includes(hex.slice(i, i + 16)), `a piece of the key's hex reached the workload: ${text}`);
}

/** Writes `text` in pieces, each cut in the middle of one of `forms`, a turn of the event loop apart. */
function writeCutInForms(res: ServerResponse, text: string, forms: readonly string[]): void {
  const cuts = forms.map((f) => text.indexOf(f) + Math.floor(f.length / 2)).sort((a, b) => a - b);
  let from = 0;
  const next = (i: number): void => {
    if (i === cuts.length) return void res.end(text.slice(from));
    res.write(text.slice(from, cuts[i]));
    from = cuts[i]!;
    setImmediate(() => next(i + 1));
  };
  next(0);
}

const ROUTES = [
  {
    name: 'the Messages route',
    key: ANT_KEY,
    prefix: ANT_PREFIX,
    call: (stream: boolean) => send(prefixedGateway.ports.model!, 'POST', '/v1/messages', { headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: JSON.stringify({ model: CLAUDE_MODEL, max_tokens: 16, stream, messages: [{ role: 'user', content: 'hi' }] }) }),
    error: (forms: string[]) => JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: `debug: ${forms.join(' ')}` } }),
    stream: (forms: string[]) =>
      `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: CLAUDE_MODEL, content: [], usage: { input_tokens: 3, output_tokens: 1 } } })}\n\n` +
      forms.map((f) => `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `echo ${f} end` } })}\n\n`).join('') +
      'event: message_stop\ndata: {"type":"message_stop"}\n\n',
  },
  {
    name: 'the chat completions route',
    key: PROJ_KEY,
    prefix: PROJ_PREFIX,
    call: (stream: boolean) => send(prefixedGateway.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-test', stream, messages: [{ role: 'user', content: 'hi' }] }) }),
    error: (forms: string[]) => JSON.stringify({ error: { message: `Incorrect API key provided: ${forms.join(' ')}`, type: 'invalid_request_error', code: 'invalid_api_key' } }),
    stream: (forms: string[]) => forms.map((f) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: `echo ${f} end` } }] })}\n\n`).join('') + 'data: [DONE]\n\n',
  },
] as const;

for (const route of ROUTES) {
  test(`redaction, hex and key without its prefix, gateway, ${route.name}: an error body and headers echoing the key's hex (lower, upper, mixed case) or the key without its ${route.prefix} prefix never reach the workload`, async () => {
    const forms = lastForms(route.key, route.prefix);
    model.script((req, res) => {
      const sent = String(req.headers['x-api-key'] ?? req.headers.authorization?.replace(/^Bearer /, ''));
      assert.equal(sent, route.key, 'the upstream is sent the key');
      res.setHeader('x-debug-hex', hexOf(sent).toUpperCase());
      res.setHeader('x-debug-tail', sent.slice(route.prefix.length));
      res.setHeader('x-fine', 'kept');
      res.writeHead(400, { 'content-type': 'application/json' }).end(route.error(forms));
    });
    const reply = await route.call(false);
    assert.equal(reply.status, 400);
    assert.equal(reply.headers['x-fine'], 'kept');
    for (const h of ['x-debug-hex', 'x-debug-tail']) assert.equal(reply.headers[h], undefined, h);
    assert.equal(reply.body.toString().match(/\[REDACTED\]/g)?.length, forms.length, reply.body.toString());
    assert.doesNotThrow(() => JSON.parse(reply.body.toString()));
    assertNoLastForms(reply, route.key, route.prefix);
  });

  test(`redaction, hex and key without its prefix, gateway, ${route.name}: a 200 stream echoing the key's hex or the key without its ${route.prefix} prefix, each form split across writes, never hands them to the workload`, async () => {
    const forms = lastForms(route.key, route.prefix);
    const events = route.stream(forms);
    model.script((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      writeCutInForms(res, events, forms);
    });
    const reply = await route.call(true);
    assert.equal(reply.status, 200);
    const body = reply.body.toString();
    assert.equal(body.match(/echo \[REDACTED\] end/g)?.length, forms.length, body);
    assertNoLastForms(reply, route.key, route.prefix);
  });
}
