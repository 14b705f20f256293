// Step 7 of a model call: the upstream's answer, relayed. What kind of answer it is decides how
// (answerKind, pure): the gateway's own key refused, an error body (read whole and redacted), a
// compressed body (refused: it could not be read on its way), an SSE or AWS event stream (relayed
// chunk by chunk, unbuffered, its usage read on the way), or a JSON body (relayed, a bounded copy
// read for its usage). Every relayed byte passes the call's Redactor (its secrets, opaque here).
// The call is told when the relay begins; the rest (status, usage, error class) is the result.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ERRORS } from '../http/errors.ts';
import { relayResponse, type Exchange } from '../http/forward.ts';
import { relayRedactedBody } from '../http/error-body.ts';
import { mediaType } from '../http/headers.ts';
import { GONE, isRelayableStatus, type Stopped } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import type { GatewayLogEvent } from './log-events.ts';
import { isIdentity } from '../http/redact.ts';
import type { Redactor } from '../http/redactor.ts';
import { EventStreamFramer, EventStreamGuard } from './eventstream.ts';
import type { CallSummary, WireProtocol } from './protocols/protocol.ts';
import type { Provider } from './providers.ts';
import { CREDENTIAL_REJECTED_STATUSES, credentialRejectedError } from './record.ts';
import { SseFramer } from './sse.ts';

/** Non-streamed bodies are copied for usage extraction only up to this size. */
const MAX_SUMMARY_BODY_BYTES = 8 * 1024 * 1024;

export type AnswerKind = 'bad_status' | 'gateway_key_refused' | 'error_body' | 'encoded' | 'sse' | 'eventstream' | 'json';

/** Pure: what kind of answer the upstream gave, from its status and head. */
export function answerKind(status: number, contentEncoding: string | undefined, contentType: string | undefined, protocol: Pick<WireProtocol, 'streamFraming'>): AnswerKind {
  // llhttp reads a status of 000 or 099; Node cannot write one back.
  if (!isRelayableStatus(status)) return 'bad_status';
  // The upstream refused the gateway's own credential: the bot can do nothing about it.
  if ((CREDENTIAL_REJECTED_STATUSES as readonly number[]).includes(status)) return 'gateway_key_refused';
  if (status >= 400) return 'error_body';
  // Asked for identity, answered compressed: neither the usage nor an echoed key could be read.
  if (!isIdentity(contentEncoding)) return 'encoded';
  const type = mediaType(contentType);
  if (protocol.streamFraming === 'aws-eventstream' && type === 'application/vnd.amazon.eventstream') return 'eventstream';
  if (type === 'text/event-stream') return 'sse';
  return 'json';
}

/** Pure: the log's error class of an upstream error status (>= 400). */
export function errorClassForStatus(status: number): string {
  if (status === 429) return 'rate_limited';
  return status < 500 ? 'upstream_4xx' : 'upstream_5xx';
}

/** Pure: the upstream's headers as relayed: credential-bearing ones removed by name and by value, the correlation id ours. */
export function relayedHeaders(rawHeaders: readonly string[], redactor: Redactor): string[] {
  const headers = redactor.headers(rawHeaders);
  const pairs: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() === 'x-client-request-id') continue;
    pairs.push(headers[i]!, headers[i + 1]!);
  }
  return pairs;
}

export interface RelayContext {
  readonly log: LogSink<GatewayLogEvent>;
  /** Told when a stream relay starts and ends (the streams-in-flight gauge). */
  readonly streams?: { opened(provider: string, model: string): void; closed(provider: string, model: string): void };
}

/** What the relay reads of its call, and tells it as the answer begins to be relayed (what the record needs of a relay cut short). */
export interface RelayingCall {
  readonly res: ServerResponse;
  readonly gone: boolean;
  readonly provider: Provider | undefined;
  readonly model: string | null;
  relayStarted(stream: boolean): void;
}

/**
 * What the relay did: the answer relayed, its status and error class, and the usage it read (a
 * stream's as far as it came, also when cut); or why nothing usable was relayed.
 */
export type Relayed = { readonly ok: true; readonly status: number; readonly errorClass?: string; readonly summary?: CallSummary } | Stopped;

/** The step: relays the answer, and returns how it went. */
export async function relayAnswer(call: RelayingCall, upstream: IncomingMessage, exchange: Exchange, redactor: Redactor, protocol: WireProtocol, ctx: RelayContext): Promise<Relayed> {
  const status = upstream.statusCode ?? 502;
  const kind = answerKind(status, upstream.headers['content-encoding'], upstream.headers['content-type'], protocol);
  const provider = call.provider!.config;
  switch (kind) {
    case 'bad_status':
      upstream.destroy();
      return { ok: false, refusal: { error: ERRORS.upstreamProtocol }, errorClass: 'upstream_bad_status' };
    case 'gateway_key_refused':
      // Relayed, the 401/403 would look like the bot's own token was refused; the body is
      // dropped unread (it may echo the key).
      upstream.resume();
      ctx.log({ event: 'config_error', listener: 'model', provider: provider.name, status, message: `the upstream refused the gateway API key of provider ${provider.name} (${provider.origin}): check the key and its permissions` });
      return { ok: false, refusal: { error: ERRORS.upstreamAuthFailed }, errorClass: credentialRejectedError(status) };
    case 'encoded':
      upstream.resume();
      return { ok: false, refusal: { error: ERRORS.upstreamEncoding }, errorClass: 'upstream_encoded_body' };
    case 'error_body':
      return relayError(call, upstream, exchange, status, redactor);
    case 'sse':
    case 'eventstream':
      return relayStream(call, upstream, exchange, status, redactor, protocol, kind === 'eventstream', ctx);
    case 'json':
      return relayJson(call, upstream, exchange, status, redactor, protocol);
  }
}

/** An error answer: upstreams echo keys in error messages, so it is read whole, decoded and redacted in every form first. */
async function relayError(call: RelayingCall, upstream: IncomingMessage, exchange: Exchange, status: number, redactor: Redactor): Promise<Relayed> {
  call.relayStarted(false);
  const relayed = await relayRedactedBody(call.res, upstream, relayedHeaders(upstream.rawHeaders, redactor), redactor, exchange);
  if (relayed.ok) return { ok: true, status, errorClass: errorClassForStatus(status) };
  if (call.gone) return GONE;
  return { ok: false, refusal: { error: ERRORS.upstreamProtocol }, errorClass: relayed.reason };
}

/**
 * A stream: every chunk written as it arrives, a copy to the protocol's reader.
 * A binary event-stream frame cannot be redacted inside: one carrying a secret cuts the stream.
 */
async function relayStream(call: RelayingCall, upstream: IncomingMessage, exchange: Exchange, status: number, redactor: Redactor, protocol: WireProtocol, eventStream: boolean, ctx: RelayContext): Promise<Relayed> {
  call.relayStarted(true);
  const headers = relayedHeaders(upstream.rawHeaders, redactor);
  headers.push('X-Accel-Buffering', 'no');
  const reader = protocol.newStreamReader(() => performance.now());
  const framer = eventStream ? new EventStreamFramer(reader) : new SseFramer(reader);
  const provider = call.provider!.config.name;
  const model = call.model!;
  ctx.streams?.opened(provider, model);
  try {
    await relayResponse(call.res, upstream, headers, exchange, {
      onChunk: (chunk) => framer.push(chunk),
      rewrite: eventStream ? new EventStreamGuard(redactor) : redactor.stream(true),
      flushHead: true,
      endIsClean: protocol.streamNeedsEndEvent ? () => reader.summary().terminated && !(framer instanceof EventStreamFramer && framer.corrupt) : undefined,
    });
  } finally {
    ctx.streams?.closed(provider, model);
  }
  // Cut or whole, the usage as far as the stream came (what a cut stream is charged).
  return { ok: true, status, summary: reader.summary() };
}

/** A JSON answer: relayed as it comes (redacted), a copy of up to 8 MiB read for its usage once complete. */
async function relayJson(call: RelayingCall, upstream: IncomingMessage, exchange: Exchange, status: number, redactor: Redactor, protocol: WireProtocol): Promise<Relayed> {
  call.relayStarted(false);
  const copy: Buffer[] = [];
  let copied = 0;
  await relayResponse(call.res, upstream, relayedHeaders(upstream.rawHeaders, redactor), exchange, {
    rewrite: redactor.stream(false),
    onChunk: (chunk) => {
      copied += chunk.length;
      if (copied <= MAX_SUMMARY_BODY_BYTES) copy.push(chunk);
    },
  });
  // The upstream's answer arrived whole: its usage is read even when the client left before the
  // last bytes reached it (the provider billed the whole answer).
  if (copied <= MAX_SUMMARY_BODY_BYTES && upstream.complete) return { ok: true, status, summary: protocol.summarizeJson(Buffer.concat(copy)) };
  return { ok: true, status };
}
