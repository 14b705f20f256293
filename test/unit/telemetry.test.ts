// Tracing's pure parts and its exporter, without sockets: the OTEL_* settings, the sampler, the
// OTLP JSON encoding (checked by the test receiver's validator against the schema facts), what a
// collector's answer means, the exporter's queue, retries and shutdown flush (a fake send), and the
// redaction of every span attribute in every form the redaction tests cover.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newExchange } from '../../src/http/forward.ts';
import type { AttemptSpan } from '../../src/http/lifecycle.ts';
import { NO_SECRETS } from '../../src/http/redactor.ts';
import type { SpanContext, TraceContext } from '../../src/http/trace-context.ts';
import type { ModelSpanFacts } from '../../src/gateway/record.ts';
import type { Provider } from '../../src/gateway/providers.ts';
import { SpanExporter, type ExporterEvent, type SendBatch } from '../../src/telemetry/exporter.ts';
import { attributes, exportOutcome, exportRequestBody, unixNano, type OtlpSpan } from '../../src/telemetry/otlp.ts';
import { parseTracingEnv } from '../../src/telemetry/settings.ts';
import { gitSpans, modelSpans } from '../../src/telemetry/spans.ts';
import { tracer } from '../../src/telemetry/tracer.ts';
import { gitRecord } from '../../src/git/record.ts';
import { eventually } from '../support/eventually.ts';
import { validateExport } from '../support/otlp-facts.ts';
import { modelRecord } from '../support/records.ts';
import { redactorOf, revealed } from '../support/secrets.ts';
import { base64Of, doublePercentOf, htmlReferencesOf, recoverablePiece } from '../support/secret-forms.ts';

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector.observability:4318' };

test('tracing settings: off without an endpoint, with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none; the base endpoint gains /v1/traces, the traces endpoint is used as is', () => {
  assert.equal(parseTracingEnv({}, '0.1.0'), undefined);
  assert.equal(parseTracingEnv({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }, '0.1.0'), undefined);
  assert.equal(parseTracingEnv({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }, '0.1.0'), undefined);
  assert.equal(parseTracingEnv(ENDPOINT, '0.1.0')!.url.href, 'http://collector.observability:4318/v1/traces');
  assert.equal(parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example/base/' }, '0.1.0')!.url.href, 'https://otlp.example/base/v1/traces');
  assert.equal(parseTracingEnv({ ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/custom' }, '0.1.0')!.url.href, 'https://traces.example/custom');
  const s = parseTracingEnv({ ...ENDPOINT, OTEL_SERVICE_NAME: 'proxy-a', OTEL_RESOURCE_ATTRIBUTES: 'service.name=ignored,k8s.pod.name=proxy-0,team=a%2Cb' }, '0.1.0')!;
  assert.deepEqual(s.resource, { 'service.name': 'proxy-a', 'service.version': '0.1.0', 'k8s.pod.name': 'proxy-0', team: 'a,b' });
  assert.deepEqual([s.sampler, s.exportTimeoutMs, s.batch], [{ parentBased: true, ratio: 1 }, 10_000, { maxQueue: 2048, maxBatch: 512, delayMs: 5000 }]);
});

test('tracing settings: what this proxy cannot honour stops start-up, naming the variable: another protocol or exporter, a URL with a password, a header with CR/LF (its value never in the message), an unknown sampler or a ratio out of range', () => {
  const refused = (env: NodeJS.ProcessEnv, message: RegExp) => assert.throws(() => parseTracingEnv({ ...ENDPOINT, ...env }, '0.1.0'), message);
  refused({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^Error: OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported: .*http\/json/);
  refused({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }, /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http\/protobuf"/);
  refused({ OTEL_TRACES_EXPORTER: 'zipkin' }, /OTEL_TRACES_EXPORTER: "zipkin" is not supported/);
  refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://user:pw@collector:4318' }, /a user name or password in the URL is not accepted; put the collector's credential in OTEL_EXPORTER_OTLP_HEADERS/);
  refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://collector:4317' }, /only OTLP over HTTP/);
  refused({ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, /OTEL_TRACES_SAMPLER: "jaeger_remote" is not supported/);
  refused({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, /OTEL_TRACES_SAMPLER_ARG: "1.5" must be a ratio from 0 to 1/);
  assert.throws(
    () => parseTracingEnv({ ...ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS: 'api-key=s3cr3t-value%0D%0AX-Injected: 1' }, '0.1.0'),
    (err: Error) => /OTEL_EXPORTER_OTLP_HEADERS: "api-key" is not a key=value entry/.test(err.message) && !err.message.includes('s3cr3t'),
  );
  assert.deepEqual(revealed(parseTracingEnv({ ...ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS: 'api-key=a%3Db, x-team = core ' }, '0.1.0')!.headers), { 'api-key': 'a=b', 'x-team': 'core' });
});

const CLIENT = (sampled: boolean): TraceContext => ({ traceparent: '', tracestate: 'congo=1', traceId: 'ab'.repeat(16), parentId: 'cd'.repeat(8), sampled });

test('sampling: a parent-based sampler follows the client\'s sampled flag; a trace the proxy starts, and every trace under traceidratio, is sampled by its id below ratio x 2^52, deterministic and monotonic', () => {
  let n = 0;
  const ids = (bytes: 8 | 16) => (++n).toString(16).padStart(bytes * 2, '0');
  for (const ratio of [0, 0.5, 1]) {
    const t = tracer({ parentBased: true, ratio }, ids);
    assert.deepEqual([t.start(CLIENT(true)).sampled, t.start(CLIENT(false)).sampled], [true, false], `ratio ${ratio}`);
  }
  const span = tracer({ parentBased: true, ratio: 1 }, ids).start(CLIENT(true));
  assert.deepEqual([span.traceId, span.parentId, span.tracestate], [CLIENT(true).traceId, CLIENT(true).parentId, 'congo=1'], "the client's trace, its span the parent");
  const ratioOf = (r: number) => tracer({ parentBased: false, ratio: r });
  const decide = (r: number, traceId: string) => ratioOf(r).start({ ...CLIENT(true), traceId }).sampled;
  assert.equal(decide(0.25, `${'f'.repeat(19)}${'0'.repeat(12)}1`), true, 'a small random part is sampled');
  assert.equal(decide(0.25, `${'0'.repeat(19)}8${'0'.repeat(12)}`), false, 'half of 2^52 is above a quarter');
  assert.equal(decide(0, 'ab'.repeat(16)), false);
  // A proportion of random traces near the ratio, and a trace sampled at 0.1 sampled at every larger ratio.
  const started = Array.from({ length: 4000 }, () => ratioOf(0.1).start(undefined));
  const share = started.filter((s) => s.sampled).length / started.length;
  assert.ok(share > 0.07 && share < 0.13, `share sampled at 0.1: ${share}`);
  for (const s of started.filter((x) => x.sampled)) for (const r of [0.2, 0.5, 1]) assert.equal(decide(r, s.traceId), true);
  assert.ok(started.every((s) => /^[0-9a-f]{32}$/.test(s.traceId) && /^[0-9a-f]{16}$/.test(s.spanId) && s.parentId === undefined));
  assert.equal(new Set(started.map((s) => s.spanId)).size, started.length);
});

test('OTLP JSON: times are Unix nanoseconds as decimal strings, exact to the nanosecond the clock gives; whole numbers are intValue strings, others doubleValue; a body the receiver\'s schema check passes', () => {
  assert.equal(unixNano(0.000001, 1_764_400_000_000.5), '1764400000000500001');
  assert.equal(unixNano(12.25, 1_764_400_000_000), '1764400000012250000');
  assert.deepEqual(attributes({ a: 'x', b: 42, c: 0.5, d: true, e: ['stop'], f: { double: 2 }, g: null, h: undefined }), [
    { key: 'a', value: { stringValue: 'x' } },
    { key: 'b', value: { intValue: '42' } },
    { key: 'c', value: { doubleValue: 0.5 } },
    { key: 'd', value: { boolValue: true } },
    { key: 'e', value: { arrayValue: { values: [{ stringValue: 'stop' }] } } },
    { key: 'f', value: { doubleValue: 2 } },
  ]);
  const spans = modelSpans(modelRecord({ duration_ms: 20, ttft_ms: 5, input_tokens: 10, output_tokens: 3, finish_reason: 'stop', stream: true }), facts());
  const { problems, spans: read } = validateExport(exportRequestBody(attributes({ 'service.name': 'credential-proxy' }), { name: 'credential-proxy', version: '0.1.0' }, spans));
  assert.deepEqual(problems, []);
  assert.equal(read.length, 2);
  const { problems: bad } = validateExport(JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ ...spans[0], kind: 'SPAN_KIND_SERVER', startTimeUnixNano: 5, traceId: 'AB'.repeat(16) }] }] }] }));
  assert.equal(bad.length, 3, bad.join('\n'));
});

test('a collector\'s answer: 2xx taken (a partial success\'s rejected spans counted, never retried); 429, 502, 503, 504 and no answer retried, with Retry-After in seconds or as a date; 400 and other statuses dropped', () => {
  const now = Date.parse('2026-11-29T00:00:00Z');
  assert.deepEqual(exportOutcome({ status: 200, body: '{}' }, now, 30_000), { kind: 'ok', rejected: 0 });
  assert.deepEqual(exportOutcome({ status: 200, body: '{"partialSuccess":{"rejectedSpans":"3","errorMessage":"x"}}' }, now, 30_000), { kind: 'ok', rejected: 3 });
  assert.deepEqual(exportOutcome({ status: 429, retryAfter: '2' }, now, 30_000), { kind: 'retry', afterMs: 2000, reason: 'HTTP 429' });
  assert.deepEqual(exportOutcome({ status: 503, retryAfter: 'Sun, 29 Nov 2026 00:00:05 GMT' }, now, 30_000), { kind: 'retry', afterMs: 5000, reason: 'HTTP 503' });
  assert.deepEqual(exportOutcome({ status: 503, retryAfter: '3600' }, now, 30_000), { kind: 'retry', afterMs: 30_000, reason: 'HTTP 503' }, 'a long Retry-After is capped');
  for (const status of [502, 504]) assert.equal(exportOutcome({ status }, now, 30_000).kind, 'retry');
  assert.deepEqual(exportOutcome({ status: 0, error: 'ECONNREFUSED' }, now, 30_000), { kind: 'retry', afterMs: undefined, reason: 'ECONNREFUSED' });
  for (const status of [400, 401, 404, 413, 500]) assert.equal(exportOutcome({ status }, now, 30_000).kind, 'drop', String(status));
});

/** A span to queue: only its identity matters to the exporter. */
const span = (i: number): OtlpSpan => ({ traceId: 'ab'.repeat(16), spanId: i.toString(16).padStart(16, '0'), flags: 0x101, name: `s${i}`, kind: 2, startTimeUnixNano: '1', endTimeUnixNano: '2', attributes: [], status: { code: 0 } });

/** A send the test answers by hand: each call waits until the test settles it. */
function manualSend() {
  const calls: { body: string; answer: (a: Awaited<ReturnType<SendBatch>>) => void }[] = [];
  const send: SendBatch = (body) => new Promise((resolve) => calls.push({ body, answer: resolve }));
  return { calls, send };
}

const encode = (spans: readonly OtlpSpan[]) => spans.map((s) => s.name).join(',');

test('tracing never delays a request: the exporter\'s add never waits; past the bounded queue spans are dropped and counted (queue_full) while the collector holds an export', async (t) => {
  const { calls, send } = manualSend();
  const exporter = new SpanExporter(encode, send, { maxQueue: 3, maxBatch: 2, delayMs: 0, exportTimeoutMs: 1000 });
  exporter.add([span(1), span(2)]);
  await eventually('the first export', () => calls.length === 1, t.signal);
  assert.equal(calls[0]!.body, 's1,s2');
  exporter.add([span(3), span(4), span(5), span(6), span(7)]);
  assert.deepEqual(exporter.counts(), { exported: 0, dropped: { queue_full: 2, export_failed: 0, shutdown: 0 } }, 'counted at once: add returned without waiting for the collector');
  calls[0]!.answer({ status: 200, body: '{}' });
  await eventually('the next batch, once the first is answered (one export at a time)', () => calls.length === 2, t.signal);
  calls[1]!.answer({ status: 200, body: '{}' });
  await eventually('the last', () => calls.length === 3, t.signal);
  calls[2]!.answer({ status: 200, body: '{}' });
  assert.deepEqual([calls[1]!.body, calls[2]!.body], ['s3,s4', 's5']);
  await eventually('all counted', () => exporter.counts().exported === 5, t.signal);
  exporter.stop();
});

test('exporter: a 429 or 503 is sent again after its Retry-After or a backoff, the same batch; failing and recovered are each told once; a 400 is dropped at once; after maxSends the batch is dropped (export_failed)', async (t) => {
  const { calls, send } = manualSend();
  const events: ExporterEvent[] = [];
  const exporter = new SpanExporter(encode, send, { maxQueue: 10, maxBatch: 10, delayMs: 0, exportTimeoutMs: 1000, backoffMs: 1, maxSends: 3, random: () => 0 }, (e) => events.push(e));
  exporter.add([span(1)]);
  await eventually('an export', () => calls.length === 1, t.signal);
  calls[0]!.answer({ status: 429, retryAfter: '0' });
  await eventually('the retry', () => calls.length === 2, t.signal);
  calls[1]!.answer({ status: 503 });
  await eventually('the second retry', () => calls.length === 3, t.signal);
  assert.deepEqual(calls.map((c) => c.body), ['s1', 's1', 's1']);
  calls[2]!.answer({ status: 200, body: '{}' });
  await eventually('exported', () => exporter.counts().exported === 1, t.signal);
  assert.deepEqual(events, [{ state: 'failing', reason: 'HTTP 429' }, { state: 'recovered' }]);
  exporter.add([span(2)]);
  await eventually('the next export', () => calls.length === 4, t.signal);
  calls[3]!.answer({ status: 400, body: '{"message":"bad"}' });
  await eventually('dropped', () => exporter.counts().dropped.export_failed === 1, t.signal);
  exporter.add([span(3)]);
  for (let i = 4; i < 7; i++) {
    await eventually(`send ${i}`, () => calls.length === i + 1, t.signal);
    calls[i]!.answer({ status: 0, error: 'ECONNREFUSED' });
  }
  await eventually('dropped after 3 sends', () => exporter.counts().dropped.export_failed === 2, t.signal);
  assert.equal(calls.length, 7, 'no fourth send');
  exporter.stop();
});

test('exporter: at shutdown what is queued is sent within the time given, a batch the collector asks to retry sent again at once; what cannot be sent in time is dropped and counted (shutdown), and later spans too', async (t) => {
  const { calls, send } = manualSend();
  const exporter = new SpanExporter(encode, send, { maxQueue: 10, maxBatch: 2, delayMs: 60_000, exportTimeoutMs: 1000, backoffMs: 60_000, maxSends: 5 });
  exporter.add([span(1)]);
  const flushed = exporter.flush(5000);
  await eventually('the flush sends the queue', () => calls.length === 1, t.signal);
  calls[0]!.answer({ status: 503 });
  // The 60 s backoff is not waited during the flush: the next send comes now.
  await eventually('the retry within the flush', () => calls.length === 2, t.signal);
  calls[1]!.answer({ status: 200, body: '{}' });
  await flushed;
  assert.equal(exporter.counts().exported, 1);
  exporter.add([span(2)]);
  const stopped = new SpanExporter(encode, send, { maxQueue: 10, maxBatch: 2, delayMs: 60_000, exportTimeoutMs: 1000 });
  stopped.add([span(3), span(4), span(5)]);
  await stopped.flush(0);
  assert.deepEqual([exporter.counts().dropped.shutdown, stopped.counts().dropped.shutdown], [1, 3]);
});

/** The facts of a traced model call: sampled, one attempt to an upstream. */
function facts(over: Partial<ModelSpanFacts> = {}): ModelSpanFacts {
  const span: SpanContext = { traceId: 'ab'.repeat(16), spanId: 'cd'.repeat(8), parentId: 'ef'.repeat(8), sampled: true, tracestate: undefined };
  const attempt: AttemptSpan = { spanId: '12'.repeat(8), startedAt: 1, method: 'POST', host: 'api.openai.com', port: 443, endedAt: undefined, status: 200, failure: undefined };
  return { startedAt: 0, span, attemptSpans: [attempt], provider: { config: { kind: 'openai' } } as Provider, summary: undefined, usageExpected: true, maxOutputTokens: 1024, redactor: NO_SECRETS, ...over };
}

const KEY = 'sk-proj-Zq3xT9vB0123456789abcdefGHIJKLMN';
const KEY_FORMS: Readonly<Record<string, string>> = {
  literal: KEY,
  'another case': KEY.toUpperCase(),
  'JSON-escaped': [...KEY].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join(''),
  'percent-encoded': [...KEY].map((c) => `%${c.charCodeAt(0).toString(16)}`).join(''),
  'percent-encoded twice': doublePercentOf(KEY),
  'HTML references': htmlReferencesOf(KEY),
  'base64 at offset 0': base64Of(KEY),
  'base64 at offset 1': base64Of(KEY, 'x'),
  'base64 at offset 2': base64Of(KEY, 'xy'),
  base64url: base64Of(KEY, 'user:', '', 'base64url'),
  'base64 twice': Buffer.from(base64Of(KEY)).toString('base64'),
  'hex, lower case': Buffer.from(KEY).toString('hex'),
  'hex, upper case': Buffer.from(KEY).toString('hex').toUpperCase(),
  'without its public prefix': KEY.slice('sk-proj-'.length),
};

test('no credential in a span: a response model, response id, finish reason, error or identity that carries the call\'s credential, in every form the redactor looks for, is exported as [REDACTED]; nothing of the key can be read back from the span', () => {
  for (const [name, form] of Object.entries(KEY_FORMS)) {
    const rec = modelRecord({ response_model: `gpt-${form}`, finish_reason: form, error: `e-${form}`, status: 200, upstream_request_id: form, workflow: form });
    const spans = modelSpans(rec, facts({ redactor: redactorOf(KEY), summary: { usage: null, usageComplete: false, model: null, finishReason: null, firstTokenAt: null, terminated: true, streamError: null, responseId: form } }));
    const json = JSON.stringify(spans);
    assert.equal(recoverablePiece(json, KEY), undefined, `${name}: a piece of the key can be read back`);
    const a = Object.fromEntries(spans[0]!.attributes.map((x) => [x.key, x.value]));
    for (const key of ['gen_ai.response.model', 'gen_ai.response.id', 'error.type', 'credential_proxy.upstream_request_id', 'credential_proxy.workflow']) assert.deepEqual(a[key], { stringValue: '[REDACTED]' }, `${name}: ${key}`);
    assert.deepEqual(a['gen_ai.response.finish_reasons'], { arrayValue: { values: [{ stringValue: '[REDACTED]' }] } }, name);
  }
  // Without the key in them, the same values are exported as they are.
  const plain = modelSpans(modelRecord({ response_model: 'gpt-5-2026', finish_reason: 'stop' }), facts({ redactor: redactorOf(KEY) }));
  assert.ok(JSON.stringify(plain).includes('"gpt-5-2026"'));
});

test('spans: none for a call that is not sampled or not traced; a git request\'s repository and service come from the route, its path never with a query', () => {
  const unsampled = facts();
  assert.deepEqual(modelSpans(modelRecord(), { ...unsampled, span: { ...unsampled.span!, sampled: false } }), []);
  assert.deepEqual(modelSpans(modelRecord(), { ...unsampled, span: undefined }), []);
  const state = { requestId: 'r', method: 'POST', target: '/github.com/org/repo.git/git-receive-pack?x=1', startedAt: 0, trace: undefined, span: unsampled.span, host: 'github.com', route: 'receive-pack' as const, identity: undefined, tokenError: undefined, challenge: false, exchange: newExchange() };
  const [server, client] = gitSpans(gitRecord(state, { status: 200, error: undefined }, 3), { startedAt: 0, span: unsampled.span, attemptSpans: unsampled.attemptSpans, repo: ['org', 'repo.git'], access: 'write', redactor: NO_SECRETS });
  const a = Object.fromEntries(server!.attributes.map((x) => [x.key, Object.values(x.value)[0]]));
  assert.deepEqual([server!.name, a['url.path'], a['vcs.repository.url.full'], a['vcs.repository.name'], a['credential_proxy.git.service']], ['POST /{host}/{repository}/git-receive-pack', '/github.com/org/repo.git/git-receive-pack', 'https://github.com/org/repo.git', 'repo', 'git-receive-pack']);
  assert.equal(client!.parentSpanId, server!.spanId);
});
