// Tracing end to end: the proxy (OTEL_EXPORTER_OTLP_ENDPOINT set) in front of an OpenAI-kind
// upstream (chat completions and responses), an Anthropic one (messages) and a git host, exporting
// to a test receiver that checks every request against the OTLP protobuf-JSON shape and the
// attribute names and types of the conventions (test/support/otlp-receiver.ts). Each protocol,
// streamed and not, is one trace: the client's, continued, with the proxy's SERVER span and its
// attempts' CLIENT spans, the upstream getting the attempt's span as its parent; the span ends
// where the stream ends, and a cut stream ends it with error.type. No key reaches a span.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { cutWire, startAnthropicUpstream, streamHandler as messagesStream, type AnthropicUpstream } from '../support/anthropic-upstream.ts';
import { send } from '../support/http-client.ts';
import { defaultCompletion, startModelUpstream, STREAM_WORDS, type ModelRequest, type ModelUpstream } from '../support/model-upstream.ts';
import type { ReceivedSpan } from '../support/otlp-facts.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver.ts';
import type { ProxyProcess } from '../support/proxy-process.ts';
import { defaultResponses } from '../support/responses-upstream.ts';
import { startServe } from '../support/serve-in-process.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';
import { startUpstream, type TestUpstream } from '../support/upstream.ts';

const OPENAI_KEY = `sk-proj-${randomBytes(16).toString('hex')}`;
const ANTHROPIC_KEY = `sk-ant-api03-${randomBytes(16).toString('hex')}`;
const GIT_TOKEN = `ghp_${randomBytes(16).toString('hex')}`;
const GPT = 'gpt-5';
const CLAUDE = 'claude-sonnet-4-5';

let pki: TestPki;
let openai: ModelUpstream;
let anthropic: AnthropicUpstream;
let git: TestUpstream;
let receiver: OtlpReceiver;
let proxy: ProxyProcess;
let dir: string;

/** The OpenAI fake answers both of its protocols by path. */
function openaiByPath(req: IncomingMessage, res: ServerResponse, recorded: ModelRequest): void {
  if (recorded.url.startsWith('/v1/responses')) defaultResponses(req, res, recorded);
  else defaultCompletion(req, res, recorded);
}

before(async () => {
  pki = makeTestPki();
  [openai, anthropic, git, receiver] = await Promise.all([startModelUpstream(pki, '/v1', openaiByPath), startAnthropicUpstream(pki), startUpstream(pki), startOtlpReceiver()]);
  dir = mkdtempSync(join(tmpdir(), 'tracing-'));
  const providers = join(dir, 'providers.json');
  writeFileSync(
    providers,
    JSON.stringify({
      providers: [
        { name: 'openai-main', kind: 'openai', baseUrl: openai.baseUrl, keyEnv: 'OPENAI_KEY', models: [GPT], caFile: pki.caFile },
        { name: 'anthropic-main', kind: 'anthropic', baseUrl: anthropic.baseUrl, keyEnv: 'ANTHROPIC_KEY', models: [CLAUDE], caFile: pki.caFile },
      ],
    }),
  );
  proxy = await startServe({
    env: {
      OPENAI_KEY,
      ANTHROPIC_KEY,
      GIT_HOST_A: git.hostKey,
      GIT_HOST_A_TOKEN: GIT_TOKEN,
      NODE_EXTRA_CA_CERTS: pki.caFile,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-key=collector%2Dsecret',
      OTEL_RESOURCE_ATTRIBUTES: 'k8s.pod.name=proxy-0,k8s.namespace.name=agents',
      OTEL_BSP_SCHEDULE_DELAY: '20',
    },
    args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', '127.0.0.1:0', '--providers', providers, '--upstream-idle-timeout', '2s'],
    listeners: ['git', 'model'],
  });
});

after(async () => {
  await proxy?.stop();
  await Promise.all([openai?.close(), anthropic?.close(), git?.close(), receiver?.close()]);
  pki?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const traceparentFor = () => ({ traceId: randomBytes(16).toString('hex'), parentId: randomBytes(8).toString('hex') });

/** The spans of one trace, once `n` of them have arrived. */
async function traceOf(traceId: string, n: number): Promise<ReceivedSpan[]> {
  for (;;) {
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    if (spans.length >= n) return spans;
    await receiver.waitForSpans(receiver.spans.length + 1);
  }
}

async function call(path: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  const { traceId, parentId } = traceparentFor();
  const r = await send(proxy.ports.model!, 'POST', path, { headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${parentId}-01`, ...headers }, body: JSON.stringify(body) });
  return { r, traceId, parentId };
}

const CASES = [
  { name: 'chat completions', path: '/v1/chat/completions', body: (stream: boolean) => ({ model: GPT, messages: [{ role: 'user', content: 'hi' }], stream, ...(stream ? { stream_options: { include_usage: true } } : {}) }), provider: 'openai', api: 'chat_completions' },
  { name: 'responses', path: '/v1/responses', body: (stream: boolean) => ({ model: GPT, input: 'hi', stream }), provider: 'openai', api: 'responses' },
  { name: 'messages', path: '/v1/messages', body: (stream: boolean) => ({ model: CLAUDE, max_tokens: 256, messages: [{ role: 'user', content: 'hi' }], stream }), provider: 'anthropic', api: undefined, headers: { 'anthropic-version': '2023-06-01' } },
] as const;

for (const c of CASES) {
  for (const stream of [false, true]) {
    test(`tracing, ${c.name}${stream ? ', streamed' : ''}: one trace continuing the client's, the proxy's span by the GenAI conventions and its attempt's under it, the upstream its child`, async () => {
      const { r, traceId, parentId } = await call(c.path, c.body(stream), 'headers' in c ? c.headers : {});
      assert.equal(r.status, 200, r.body.toString());
      const [server, attempt] = await traceOf(traceId, 2).then((spans) => [spans.find((s) => s.kind === 2)!, spans.find((s) => s.kind === 3)!]);
      assert.equal(server.parentSpanId, parentId, "the client's span is the proxy's parent");
      assert.equal(attempt.parentSpanId, server.spanId);
      const upstream = (c.provider === 'anthropic' ? anthropic : openai).requests.at(-1)!;
      assert.equal(upstream.headers.traceparent, `00-${traceId}-${attempt.spanId}-01`, "the upstream's parent is the proxy's attempt span");
      const a = server.attributes;
      assert.equal(server.name, `chat ${c.provider === 'anthropic' ? CLAUDE : GPT}`);
      assert.deepEqual([a['gen_ai.operation.name'], a['gen_ai.provider.name'], a['gen_ai.request.model'], a['openai.api.type']], ['chat', c.provider, c.provider === 'anthropic' ? CLAUDE : GPT, c.api]);
      assert.equal(typeof a['gen_ai.response.model'], 'string');
      assert.equal(typeof a['gen_ai.response.id'], 'string');
      assert.ok(Array.isArray(a['gen_ai.response.finish_reasons']));
      assert.ok(Number(a['gen_ai.usage.input_tokens']) > 0 && Number(a['gen_ai.usage.output_tokens']) > 0, JSON.stringify(a));
      assert.equal(a['gen_ai.request.stream'], stream ? true : undefined);
      if (c.provider === 'anthropic') assert.equal(a['gen_ai.request.max_tokens'], 256);
      assert.equal(a['server.address'], '127.0.0.1');
      assert.equal(a['http.response.status_code'], 200);
      assert.equal(a['error.type'], undefined);
      assert.equal(server.resource['k8s.pod.name'], 'proxy-0');
      assert.equal(server.resource['service.name'], 'credential-proxy');
      if (stream) {
        const first = server.events.find((e) => e.name === 'credential_proxy.first_token');
        assert.ok(first !== undefined && first.time >= server.start && first.time <= server.end, 'the first token is an event inside the span');
        assert.equal(typeof a['gen_ai.response.time_to_first_chunk'], 'number');
      }
      const rec = await proxy.waitForRecord((x) => x.event === 'request' && x.trace_id === traceId);
      assert.equal(rec.span_id, server.spanId, 'the record names the span: one record, one span');
      assert.ok(Math.abs(Number(server.end - server.start) / 1e6 - Number(rec.duration_ms)) < 0.002, "the span lasts the record's duration, to the stream's end");
      assert.deepEqual(receiver.problems, []);
    });
  }
}

test('tracing: a stream the upstream cuts ends its span there, with error.type, the status an error', async () => {
  anthropic.script(messagesStream(cutWire('a story cut short', { model: CLAUDE }), { gapMs: 5, cut: true }));
  const { traceId, parentId } = traceparentFor();
  // The client sees a broken connection (the cut is relayed as one).
  await send(proxy.ports.model!, 'POST', '/v1/messages', { headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', traceparent: `00-${traceId}-${parentId}-01` }, body: JSON.stringify({ model: CLAUDE, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }], stream: true }) }).catch(() => undefined);
  const spans = await traceOf(traceId, 2);
  const server = spans.find((s) => s.kind === 2)!;
  const rec = await proxy.waitForRecord((x) => x.event === 'request' && x.trace_id === traceId);
  assert.ok(typeof rec.error === 'string' && rec.error !== '', JSON.stringify(rec));
  assert.equal(server.attributes['error.type'], rec.error);
  assert.equal(server.attributes['credential_proxy.interrupted'], 'upstream');
  assert.deepEqual(server.status, { code: 2, message: rec.error });
  assert.equal(spans.find((s) => s.kind === 3)!.attributes['error.type'], rec.error, 'the attempt that was cut fails the same way');
  assert.deepEqual(receiver.problems, []);
});

test('tracing: a retried 429 is two attempt spans under the call, the first ending at its 429 and the second with http.request.resend_count 1', async () => {
  openai.script((_req, res) => {
    res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '10' });
    res.end(JSON.stringify({ error: { message: 'slow down', type: 'rate_limit', code: null } }));
  });
  const { r, traceId } = await call('/v1/chat/completions', { model: GPT, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.status, 200);
  const spans = await traceOf(traceId, 3);
  const attempts = spans.filter((s) => s.kind === 3).sort((x, y) => Number(x.start - y.start));
  assert.equal(attempts.length, 2);
  assert.deepEqual([attempts[0]!.attributes['http.response.status_code'], attempts[0]!.attributes['error.type'], attempts[0]!.attributes['http.request.resend_count']], [429, '429', undefined]);
  assert.deepEqual([attempts[1]!.attributes['http.response.status_code'], attempts[1]!.attributes['http.request.resend_count']], [200, 1]);
  assert.ok(attempts[0]!.end <= attempts[1]!.start, 'the first attempt ended before the retry began');
  assert.equal(spans.find((s) => s.kind === 2)!.attributes['credential_proxy.retries'], 1);
});

test('the upstream\'s parent is the proxy\'s span: a call without a traceparent starts a trace, and the upstream is its child all the same', async () => {
  const r = await send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', 'x-client-request-id': 'no-parent' }, body: JSON.stringify({ model: GPT, messages: [{ role: 'user', content: 'hi' }] }) });
  assert.equal(r.status, 200);
  const rec = await proxy.waitForRecord((x) => x.event === 'request' && x.request_id === 'no-parent');
  assert.equal(rec.parent_id, undefined);
  const spans = await traceOf(String(rec.trace_id), 2);
  const server = spans.find((s) => s.kind === 2)!;
  assert.equal(server.parentSpanId, undefined);
  assert.match(String(openai.requests.at(-1)!.headers.traceparent), new RegExp(`^00-${rec.trace_id}-[0-9a-f]{16}-01$`));
});

test('tracing, git: a request is a SERVER span with the HTTP server conventions, the repository and the git service, its upstream request a CLIENT span', async () => {
  const { traceId, parentId } = traceparentFor();
  const r = await send(proxy.ports.git!, 'GET', `/${git.hostKey}/org/repo.git/info/refs?service=git-upload-pack`, { headers: { traceparent: `00-${traceId}-${parentId}-01` } });
  assert.equal(r.status, 200);
  const spans = await traceOf(traceId, 2);
  const server = spans.find((s) => s.kind === 2)!;
  const client = spans.find((s) => s.kind === 3)!;
  assert.equal(server.name, 'GET /{host}/{repository}/info/refs');
  assert.deepEqual([server.attributes['http.route'], server.attributes['vcs.repository.url.full'], server.attributes['vcs.repository.name'], server.attributes['credential_proxy.git.service']], ['/{host}/{repository}/info/refs', `https://${git.hostKey}/org/repo.git`, 'repo', 'git-upload-pack']);
  assert.equal(client.parentSpanId, server.spanId);
  assert.equal(git.requests.at(-1)!.headers.traceparent, `00-${traceId}-${client.spanId}-01`);
  assert.deepEqual(receiver.problems, []);
});

test('no request content in a span: no prompt, completion, tool argument, header value or query string reaches one', async () => {
  const marker = (what: string) => `${what}-${randomBytes(6).toString('hex')}`;
  const [prompt, toolArgs, header, query, agent] = ['PROMPT', 'TOOLARGS', 'HEADERVALUE', 'QUERY', 'AGENT'].map(marker);
  const body = { model: GPT, messages: [{ role: 'user', content: prompt }, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'run', arguments: JSON.stringify({ cmd: toolArgs }) } }] }, { role: 'tool', tool_call_id: 'c1', content: 'ok' }], tools: [{ type: 'function', function: { name: 'run', parameters: { type: 'object' } } }], stream: true };
  const { traceId, parentId } = traceparentFor();
  const r = await send(proxy.ports.model!, 'POST', `/v1/chat/completions?${query}=1`, { headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${parentId}-01`, 'x-custom': header, 'user-agent': agent }, body: JSON.stringify(body) });
  assert.equal(r.status, 200, 'served: a refused call would export nothing to look into');
  // Both of the call's spans exported (the server span and the attempt's), whichever batch each went in.
  await traceOf(traceId, 2);
  const exported = receiver.requests.map((x) => x.body).join('\n');
  for (const m of [prompt, toolArgs, header, query, agent, STREAM_WORDS.join(''), 'fake']) assert.ok(!exported.includes(m!), m);
});

test('no credential in a span, end to end: no key, token or collector header reaches a span, and the collector got its header on every export', async () => {
  const exported = receiver.requests.map((r) => r.body).join('\n');
  for (const secret of [OPENAI_KEY, ANTHROPIC_KEY, GIT_TOKEN, 'collector-secret']) assert.ok(!exported.includes(secret) && !exported.includes(secret.slice(-20)), secret.slice(0, 8));
  assert.ok(receiver.requests.length > 0 && receiver.requests.every((r) => r.headers['x-collector-key'] === 'collector-secret'));
  assert.ok(!proxy.output().includes('collector-secret'), 'the header value is never logged');
});

test('the upstream\'s parent is the proxy\'s span, unsampled too: a client trace with flags 00 is followed, nothing exported, the upstream still gets the proxy as its parent', async () => {
  const { traceId, parentId } = traceparentFor();
  const r = await send(proxy.ports.model!, 'POST', '/v1/chat/completions', { headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${parentId}-00` }, body: JSON.stringify({ model: GPT, messages: [{ role: 'user', content: 'hi' }] }) });
  assert.equal(r.status, 200);
  const sent = String(openai.requests.at(-1)!.headers.traceparent);
  assert.match(sent, new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
  assert.notEqual(sent.split('-')[2], parentId);
  await proxy.waitForRecord((x) => x.event === 'request' && x.trace_id === traceId);
  // A later sampled call's spans arrive after this one's would have: none of this trace came.
  const later = await call('/v1/chat/completions', { model: GPT, messages: [{ role: 'user', content: 'hi' }] });
  await traceOf(later.traceId, 2);
  assert.equal(receiver.spans.filter((s) => s.traceId === traceId).length, 0);
});
