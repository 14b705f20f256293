// What comes back from an upstream never hands the workload our credential, in any form a client
// decodes, on both listeners (the BUILT proxy): compressed error bodies are decoded before they
// are redacted (or refused as 502), JSON-escaped echoes and error events inside a 200 stream are
// redacted, headers carrying the key in another case, percent-encoded or in base64 are dropped,
// and a git host's error page is redacted like the gateway's.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { send, type Reply } from '../support/http-client.ts';
import { startModelUpstream, type ModelUpstream } from '../support/model-upstream.ts';
import { startProxy, type ProxyProcess } from '../support/proxy-process.ts';
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

before(async () => {
  pki = makeTestPki();
  [model, gitBearer, gitBasic] = await Promise.all([startModelUpstream(pki), startUpstream(pki), startUpstream(pki)]);
  proxy = await startProxy({
    env: {
      UPSTREAM_BASE_URL: model.baseUrl,
      UPSTREAM_API_KEY: KEY,
      UPSTREAM_ALLOWED_MODELS: 'gpt-test',
      UPSTREAM_CA_FILE: pki.caFile,
      GIT_HOST_A: gitBearer.hostKey,
      GIT_HOST_A_TOKEN: GIT_TOKEN,
      GIT_HOST_B: gitBasic.hostKey,
      GIT_HOST_B_TOKEN: GIT_PASSWORD,
      GIT_HOST_B_USERNAME: GIT_USER,
      NODE_EXTRA_CA_CERTS: pki.caFile,
    },
    args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0'],
    listeners: ['git', 'model'],
  });
});

after(async () => {
  await proxy?.stop();
  await Promise.all([model?.close(), gitBearer?.close(), gitBasic?.close()]);
  pki?.cleanup();
});

const escapeAll = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
const chat = (stream = false) => send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-test', stream, messages: [{ role: 'user', content: 'hi' }] }) });

/** Every form of every secret the test knows, checked in the whole answer (head and body). */
function assertClean(reply: Reply, ...secrets: string[]): void {
  const text = `${JSON.stringify(reply.headers)}\n${reply.body.toString('latin1')}`;
  for (const s of secrets) {
    for (const form of [s, s.toUpperCase(), escapeAll(s), encodeURIComponent(s), Buffer.from(s).toString('base64')]) {
      assert.ok(!text.toLowerCase().includes(form.toLowerCase()), `a form of the secret reached the client: ${form}`);
    }
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
