// A request's spans, built from its record (the access log line) and what its call object knows
// of times and attempts, at the same point as the record: the two cannot disagree. Pure.
//
// A model call is one SERVER span, from the request's arrival to the stream's real end (its last
// event, or its cut), named and attributed by the OpenTelemetry GenAI conventions, with the first
// token as an event; each upstream attempt is a CLIENT span under it (retries included), the
// upstream's parent. A git request is a SERVER span with the HTTP server conventions, the
// repository and the git service, and a CLIENT span for its upstream request.
//
// What is never exported: a prompt, a completion, a tool's arguments, a header's value, a query
// string, a credential. The attributes are the record's fields and names from configuration;
// every string (attribute values, the name, the status message) is checked for the call's
// credential in every form the redactor knows (src/http/redact.ts), and one that carries it is
// replaced whole.
import type { ModelRequestRecord, ModelSpanFacts } from '../gateway/record.ts';
import type { GitRequestRecord, GitSpanFacts } from '../git/record.ts';
import type { AttemptSpan, TracedRequest } from '../http/lifecycle.ts';
import type { Redactor } from '../http/redactor.ts';
import type { SpanContext } from '../http/trace-context.ts';
import type { ProviderKind } from '../gateway/protocols/protocol.ts';
import { attributes, SPAN_KIND, STATUS_CODE, unixNano, type AttributePairs, type OtlpSpan, type OtlpValue } from './otlp.ts';

/** What replaces an attribute value that carries a credential. */
const REDACTED_VALUE = '[REDACTED]';

/** gen_ai.provider.name by the provider's kind: the conventions' well-known values. */
const GENAI_PROVIDER: Readonly<Record<ProviderKind, string>> = { openai: 'openai', anthropic: 'anthropic', 'anthropic-vertex': 'gcp.vertex_ai', 'anthropic-bedrock': 'aws.bedrock' };

/** Errors that are the client's doing, or the shutdown's: the proxy's SERVER span is not in error. */
const NOT_OURS: ReadonlySet<string> = new Set(['client_aborted', 'shutdown']);

/**
 * Pure: the spans with every string that carries one of the call's secrets (its `redactor`'s)
 * replaced whole: each attribute's value (a list's items too), the name and the status message.
 */
function redacted(spans: readonly OtlpSpan[], redactor: Redactor): OtlpSpan[] {
  const holds = redactor.textCheck();
  const clean = (s: string): string => (holds(s) ? REDACTED_VALUE : s);
  const value = (v: OtlpValue): OtlpValue => ('stringValue' in v ? { stringValue: clean(v.stringValue) } : 'arrayValue' in v ? { arrayValue: { values: v.arrayValue.values.map(value) } } : v);
  return spans.map((span) => ({
    ...span,
    name: clean(span.name),
    attributes: span.attributes.map((a) => ({ key: a.key, value: value(a.value) })),
    status: span.status.message === undefined ? span.status : { ...span.status, message: clean(span.status.message) },
  }));
}

/** W3C trace flags in the low byte; bit 8 says bit 9 is known, bit 9 that the parent is remote (the client's). */
function flagsOf(span: SpanContext, remoteParent: boolean): number {
  return (span.sampled ? 1 : 0) | 0x100 | (remoteParent ? 0x200 : 0);
}

/** The SERVER span of a request: times from its call, the status an error only when the failure is the proxy's or the upstream's. */
function serverSpan(call: TracedRequest, span: SpanContext, name: string, durationMs: number, error: string | null | undefined, status: number, values: AttributePairs): OtlpSpan {
  const failed = error != null && !NOT_OURS.has(error) && (status >= 500 || status < 400);
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    ...(span.parentId === undefined ? {} : { parentSpanId: span.parentId }),
    ...(span.tracestate === undefined ? {} : { traceState: span.tracestate }),
    flags: flagsOf(span, span.parentId !== undefined),
    name,
    kind: SPAN_KIND.server,
    startTimeUnixNano: unixNano(call.startedAt),
    endTimeUnixNano: unixNano(call.startedAt + durationMs),
    attributes: attributes([...values, ['error.type', error]]),
    status: failed ? { code: STATUS_CODE.error, message: error } : { code: STATUS_CODE.unset },
  };
}

/** One CLIENT span per upstream attempt: the last one ends with the request, failing as it failed. */
function attemptSpans(call: TracedRequest, span: SpanContext, endMs: number, lastError: string | null | undefined, extra: AttributePairs): OtlpSpan[] {
  return call.attemptSpans.map((a: AttemptSpan, i) => {
    const last = i === call.attemptSpans.length - 1 && a.endedAt === undefined;
    const error = a.failure ?? (last ? (lastError ?? undefined) : undefined) ?? (a.status !== undefined && a.status >= 400 ? String(a.status) : undefined);
    return {
      traceId: span.traceId,
      spanId: a.spanId,
      parentSpanId: span.spanId,
      flags: flagsOf(span, false),
      name: a.method,
      kind: SPAN_KIND.client,
      startTimeUnixNano: unixNano(a.startedAt),
      endTimeUnixNano: unixNano(a.endedAt ?? endMs),
      attributes: attributes([['http.request.method', a.method], ['server.address', a.host], ['server.port', a.port], ['http.response.status_code', a.status], ['http.request.resend_count', i > 0 ? i : undefined], ['error.type', error], ...extra]),
      status: error === undefined ? { code: STATUS_CODE.unset } : { code: STATUS_CODE.error, message: error },
    };
  });
}

/** Pure: gen_ai.operation.name: `chat` for every protocol's generation; a token count is its own operation. */
function operationOf(rec: ModelRequestRecord, call: ModelSpanFacts): string | undefined {
  if (rec.api === null) return undefined;
  return call.usageExpected || rec.method !== 'POST' ? 'chat' : 'count_tokens';
}

/** Pure: a finished model call's spans (its own, then its attempts'), or none when it is not sampled. */
export function modelSpans(rec: ModelRequestRecord, call: ModelSpanFacts): OtlpSpan[] {
  const span = call.span;
  if (span === undefined || !span.sampled) return [];
  const operation = operationOf(rec, call);
  const summary = call.summary;
  const last = call.attemptSpans[call.attemptSpans.length - 1];
  const name = operation === undefined ? `${rec.method} ${rec.path}` : rec.model === null ? operation : `${operation} ${rec.model}`;
  const genAi: AttributePairs = [
    ['gen_ai.operation.name', operation],
    ['gen_ai.provider.name', call.provider === undefined ? undefined : GENAI_PROVIDER[call.provider.config.kind]],
    ['gen_ai.request.model', rec.model],
    ['gen_ai.request.max_tokens', call.maxOutputTokens],
    ['gen_ai.request.stream', rec.stream || undefined],
    ['gen_ai.response.model', rec.response_model],
    ['gen_ai.response.id', summary?.responseId],
    ['gen_ai.response.finish_reasons', rec.finish_reason === null ? undefined : [rec.finish_reason]],
    ['gen_ai.response.time_to_first_chunk', rec.ttft_ms === null ? undefined : { double: rec.ttft_ms / 1000 }],
    ['gen_ai.usage.input_tokens', rec.input_tokens],
    ['gen_ai.usage.output_tokens', rec.output_tokens],
    ['gen_ai.usage.cache_read.input_tokens', rec.cached_tokens],
    ['gen_ai.usage.cache_creation.input_tokens', rec.cache_write_tokens],
    ['gen_ai.usage.reasoning.output_tokens', rec.reasoning_tokens],
    ['openai.api.type', rec.api === 'chat_completions' || rec.api === 'responses' ? rec.api : undefined],
    ['server.address', last?.host],
    ['server.port', last?.port],
  ];
  const own: AttributePairs = [
    ['http.request.method', rec.method],
    ['http.response.status_code', rec.status === 0 ? undefined : rec.status],
    ['url.path', rec.path],
    ['credential_proxy.request_id', rec.request_id],
    ['credential_proxy.upstream_request_id', rec.upstream_request_id],
    ['credential_proxy.provider', rec.provider],
    ['credential_proxy.api', rec.api],
    ['credential_proxy.instance_id', rec.instance_id],
    ['credential_proxy.workflow', rec.workflow],
    ['credential_proxy.run_id', rec.run_id],
    ['credential_proxy.attempts', rec.attempts],
    ['credential_proxy.retries', rec.retries],
    ['credential_proxy.rate_limited', rec.rate_limited],
    ['credential_proxy.interrupted', rec.interrupted],
    ['credential_proxy.usage_complete', rec.usage_complete],
    ['credential_proxy.limit', rec.limit],
    ['credential_proxy.charged_usd', rec.charged_usd === null ? undefined : { double: rec.charged_usd }],
    ['credential_proxy.bytes_in', rec.bytes_in],
    ['credential_proxy.bytes_out', rec.bytes_out],
  ];
  const server = serverSpan(call, span, name, rec.duration_ms, rec.error, rec.status, [...genAi, ...own]);
  const firstToken = rec.ttft_ms === null ? undefined : [{ timeUnixNano: unixNano(call.startedAt + rec.ttft_ms), name: 'credential_proxy.first_token' }];
  const attemptValues: AttributePairs = [genAi[0]!, genAi[1]!, genAi[2]!];
  return redacted([{ ...server, ...(firstToken ? { events: firstToken } : {}) }, ...attemptSpans(call, span, call.startedAt + rec.duration_ms, rec.error, attemptValues)], call.redactor);
}

/** http.route by git route: the template every request of the route matches. */
const GIT_ROUTES = { 'info-refs': '/{host}/{repository}/info/refs', 'upload-pack': '/{host}/{repository}/git-upload-pack', 'receive-pack': '/{host}/{repository}/git-receive-pack' } as const;

/** Pure: a finished git request's spans (its own, then its upstream request's), or none when it is not sampled. */
export function gitSpans(rec: GitRequestRecord, call: GitSpanFacts): OtlpSpan[] {
  const span = call.span;
  if (span === undefined || !span.sampled) return [];
  const route = rec.route === undefined ? undefined : GIT_ROUTES[rec.route];
  const repo = call.repo?.join('/');
  const values: AttributePairs = [
    ['http.request.method', rec.method],
    ['http.route', route],
    ['http.response.status_code', rec.status === 0 ? undefined : rec.status],
    ['url.path', rec.path],
    ['vcs.repository.url.full', rec.host === undefined || repo === undefined ? undefined : `https://${rec.host}/${repo}`],
    ['vcs.repository.name', call.repo?.[call.repo.length - 1]?.replace(/\.git$/, '')],
    ['credential_proxy.git.service', call.access === undefined ? undefined : call.access === 'read' ? 'git-upload-pack' : 'git-receive-pack'],
    ['credential_proxy.git.host', rec.host],
    ['credential_proxy.request_id', rec.request_id],
    ['credential_proxy.instance_id', rec.instance_id],
    ['credential_proxy.workflow', rec.workflow],
    ['credential_proxy.run_id', rec.run_id],
    ['credential_proxy.token_error', rec.token_error],
    ['credential_proxy.bytes_in', rec.bytes_in],
    ['credential_proxy.bytes_out', rec.bytes_out],
  ];
  const server = serverSpan(call, span, route === undefined ? rec.method : `${rec.method} ${route}`, rec.duration_ms, rec.error, rec.status, values);
  return redacted([server, ...attemptSpans(call, span, call.startedAt + rec.duration_ms, rec.error, [])], call.redactor);
}
