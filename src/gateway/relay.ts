// Step 7 of a model call: the upstream's answer, relayed. What kind of answer it is decides how
// (answerKind, pure): the gateway's own key refused, an error body (read whole and redacted), a
// compressed body (refused: it could not be read on its way), an SSE or AWS event stream (relayed
// chunk by chunk, unbuffered, its usage read on the way), or a JSON body (relayed, a bounded copy
// read for its usage). Every relayed byte passes the call's Redactor (its secrets, opaque here).
import type { IncomingMessage } from 'node:http';
import { ERRORS } from '../http/errors.ts';
import { relayResponse, type Exchange } from '../http/forward.ts';
import { relayRedactedBody } from '../http/error-body.ts';
import { mediaType } from '../http/headers.ts';
import { isRelayableStatus } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import type { GatewayLogEvent } from './log-events.ts';
import { isIdentity } from '../http/redact.ts';
import type { Redactor } from '../http/redactor.ts';
import type { GatewayCall } from './call.ts';
import { EventStreamFramer, EventStreamGuard } from './eventstream.ts';
import type { WireProtocol } from './protocols/protocol.ts';
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

/** The step: relays the answer and ends the call with its status. */
export async function relayAnswer(call: GatewayCall, upstream: IncomingMessage, exchange: Exchange, redactor: Redactor, protocol: WireProtocol, ctx: RelayContext): Promise<void> {
  const status = upstream.statusCode ?? 502;
  const kind = answerKind(status, upstream.headers['content-encoding'], upstream.headers['content-type'], protocol);
  const provider = call.provider!.config;
  switch (kind) {
    case 'bad_status':
      upstream.destroy();
      call.endRefused({ error: ERRORS.upstreamProtocol }, 'upstream_bad_status');
      return;
    case 'gateway_key_refused':
      // Relayed, the 401/403 would look like the bot's own token was refused; the body is
      // dropped unread (it may echo the key).
      upstream.resume();
      ctx.log({ event: 'config_error', listener: 'model', provider: provider.name, status, message: `the upstream refused the gateway API key of provider ${provider.name} (${provider.origin}): check the key and its permissions` });
      call.endRefused({ error: ERRORS.upstreamAuthFailed }, credentialRejectedError(status));
      return;
    case 'encoded':
      upstream.resume();
      call.endRefused({ error: ERRORS.upstreamEncoding }, 'upstream_encoded_body');
      return;
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
async function relayError(call: GatewayCall, upstream: IncomingMessage, exchange: Exchange, status: number, redactor: Redactor): Promise<void> {
  call.relaying = true;
  const relayed = await relayRedactedBody(call.res, upstream, relayedHeaders(upstream.rawHeaders, redactor), redactor, exchange);
  if (relayed.ok) return call.endAnswered(status, errorClassForStatus(status));
  if (call.gone) return call.endAbandoned();
  call.endRefused({ error: ERRORS.upstreamProtocol }, relayed.reason);
}

/**
 * A stream: every chunk written as it arrives, a copy to the protocol's reader.
 * A binary event-stream frame cannot be redacted inside: one carrying a secret cuts the stream.
 */
async function relayStream(call: GatewayCall, upstream: IncomingMessage, exchange: Exchange, status: number, redactor: Redactor, protocol: WireProtocol, eventStream: boolean, ctx: RelayContext): Promise<void> {
  call.stream = true;
  call.relaying = true;
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
    call.summary = reader.summary();
  }
  call.endAnswered(status);
}

/** A JSON answer: relayed as it comes (redacted), a copy of up to 8 MiB read for its usage once complete. */
async function relayJson(call: GatewayCall, upstream: IncomingMessage, exchange: Exchange, status: number, redactor: Redactor, protocol: WireProtocol): Promise<void> {
  call.relaying = true;
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
  if (copied <= MAX_SUMMARY_BODY_BYTES && upstream.complete) call.summary = protocol.summarizeJson(Buffer.concat(copy));
  call.endAnswered(status);
}
