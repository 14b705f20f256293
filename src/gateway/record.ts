// What one model call did, as one record: the access log line and what the metrics count are
// both made from it, so they agree. Built once, when the call is over (GatewayCall.finish), by
// the pure modelRecord from the call's state.
import type { WorkloadIdentity } from '../auth/identity.ts';
import type { Exchange } from '../http/forward.ts';
import type { Outcome, TracedRequest } from '../http/lifecycle.ts';
import type { SpanContext, TraceContext } from '../http/trace-context.ts';
import { elapsedMs, pathForLog } from '../http/log.ts';
import type { Redactor } from '../http/redactor.ts';
import type { Charge, ChargeBasis } from '../limits/charge.ts';
import type { CredentialSource } from './credentials/source.ts';
import type { ApiName, CallSummary } from './protocols/protocol.ts';
import { microDollars } from '../limits/prices.ts';
import type { Provider } from './providers.ts';

/**
 * The statuses by which a provider refuses the gateway's own credential, and the error a call so
 * refused records (relay.ts answers the bot 502 upstream_auth_failed): what the metrics count as
 * a rejected credential.
 */
export const CREDENTIAL_REJECTED_STATUSES = [401, 403] as const;
export const credentialRejectedError = (status: number): string => `upstream_${status}`;

/** What one model call did: the access log line, and what the metrics count. */
export type ModelRequestRecord = {
  readonly event: 'request';
  readonly listener: 'model';
  readonly request_id: string;
  readonly upstream_request_id: string | null;
  /** The trace (the client's, or with tracing on one the proxy started; null without either) and the client's span (its traceparent's parent-id). */
  readonly trace_id: string | null;
  readonly parent_id: string | null;
  /** With tracing on: the proxy's span for this request (the span built from this record). */
  readonly span_id: string | null;
  /** The provider the model belongs to (null when refused before the model was known). */
  readonly provider: string | null;
  /** The cloud whose credential the provider uses (`aws`, `google`; null for a key or none). */
  readonly cloud: 'aws' | 'google' | null;
  /** The wire protocol (null for the catalog and for paths no protocol serves). */
  readonly api: ApiName | null;
  /** Only ever an allowlisted model ID (null when refused before or by the allowlist). */
  readonly model: string | null;
  /** A model the allowlist refused, bounded: for the operator, never a metric label. */
  readonly refused_model: string | null;
  readonly response_model: string | null;
  readonly method: string;
  /** The request path without its query, bounded. */
  readonly path: string;
  readonly status: number;
  readonly stream: boolean;
  readonly duration_ms: number;
  readonly ttft_ms: number | null;
  readonly input_tokens: number | null;
  readonly output_tokens: number | null;
  readonly reasoning_tokens: number | null;
  readonly cached_tokens: number | null;
  readonly cache_write_tokens: number | null;
  /** The upstream reported the usage whole; null where no usage is expected (catalog, token counts). */
  readonly usage_complete: boolean | null;
  readonly finish_reason: string | null;
  /** Who cut the call: `shutdown` when a forced shutdown did. */
  readonly interrupted: 'client' | 'upstream' | 'idle_timeout' | 'shutdown' | null;
  /** Upstream attempts made (0 when the request never reached the upstream). */
  readonly attempts: number;
  readonly retries: number;
  readonly rate_limited: number;
  readonly instance_id: string | null;
  readonly workflow: string | null;
  readonly run_id: string | null;
  /** Request body bytes received from the client (once, however many attempts). */
  readonly bytes_in: number;
  /** Response body bytes relayed to the client. */
  readonly bytes_out: number;
  readonly error: string | null;
  /** The limit that refused the call (--limits), else null. */
  readonly limit: string | null;
  /** What the call was charged against its limits, in USD (null without --limits or a price). */
  readonly charged_usd: number | null;
  /** The charge was estimated from the bytes relayed: the upstream reported no (complete) usage. */
  readonly charge_estimated: boolean | null;
  /** Which rule set the charge (chargeFor): `not_sent` and `error_answer` charge nothing. Null without --limits, or for a call refused before admission. */
  readonly charge_basis: ChargeBasis | null;
};

/** The record's method for a turn on a Responses WebSocket: a message on a socket, not an HTTP request. */
export const TURN_METHOD = 'WS';

/** What a model call knows about itself when it is over: the call object's state, read only. */
export interface ModelCallState {
  readonly requestId: string;
  readonly method: string;
  readonly target: string;
  readonly startedAt: number;
  readonly trace: TraceContext | undefined;
  readonly span: SpanContext | undefined;
  readonly api: ApiName | null;
  readonly identity: WorkloadIdentity;
  readonly provider: Provider | undefined;
  readonly model: string | null;
  readonly refusedModel: string | null;
  /** The route's answer carries usage (not a token count, not the catalog). */
  readonly usageExpected: boolean;
  readonly stream: boolean;
  /** The upstream's answer began to be relayed (a stream or a JSON body). */
  readonly relaying: boolean;
  readonly summary: CallSummary | undefined;
  readonly attempts: number;
  readonly retries: number;
  readonly rateLimited: number;
  readonly upstreamRequestId: string | undefined;
  readonly bytesIn: number;
  readonly limit: string | null;
  /** The exchange of the last attempt, or the client's when none was made. */
  readonly exchange: Exchange;
}

/** What a call's spans are built from besides its record (src/telemetry/spans.ts): read only. */
export interface ModelSpanFacts extends TracedRequest {
  readonly provider: Provider | undefined;
  readonly summary: CallSummary | undefined;
  /** The route's answer carries usage: false for a token count and the catalog. */
  readonly usageExpected: boolean;
  /** The most output the body allows (max_tokens and its kin), when it names one. */
  readonly maxOutputTokens: number | undefined;
  /** The credential the call sent upstream: no attribute may carry it in any form. */
  readonly redactor: Redactor;
}

/** Pure: the cloud a credential source belongs to, for the record. */
export function cloudOf(type: CredentialSource['type']): 'aws' | 'google' | null {
  if (type === 'aws-sigv4' || type === 'aws-web-identity') return 'aws';
  if (type === 'google-service-account' || type === 'google-metadata') return 'google';
  return null;
}

/**
 * Pure: the failure that counts for the record. A client that hangs up after the protocol's end
 * event (`[DONE]`, `message_stop`, `response.completed`) left a complete call: not a failure.
 */
export function callFailure(failure: Exchange['failure'], summary: CallSummary | undefined): Exchange['failure'] {
  return failure === 'client_aborted' && summary?.terminated === true ? undefined : failure;
}

/**
 * Pure: who cut a call, the same for streamed and non-streamed calls. The client, once the call
 * was sent upstream (the provider may bill the work it was doing); the upstream or its stall, once
 * its answer had begun to be relayed (before that, an upstream failure is an error answer: 502 or
 * 504). Null for a call that was not cut.
 */
export function interruption(failure: Exchange['failure'], sent: boolean, relaying: boolean): ModelRequestRecord['interrupted'] {
  if (failure === undefined) return null;
  if (failure === 'client_aborted') return sent ? 'client' : null;
  if (failure === 'shutdown') return sent ? 'shutdown' : null;
  if (!relaying) return null;
  return failure === 'idle_timeout' ? 'idle_timeout' : 'upstream';
}

/** Pure: the record of a model call that is over. */
export function modelRecord(call: ModelCallState, outcome: Outcome, charge: Charge | undefined, nowMs: number): ModelRequestRecord {
  const summary = call.summary;
  const usage = summary?.usage ?? null;
  const failure = callFailure(call.exchange.failure, summary);
  const status = outcome.status;
  return {
    event: 'request',
    listener: 'model',
    request_id: call.requestId,
    upstream_request_id: call.upstreamRequestId ?? null,
    trace_id: call.span?.traceId ?? call.trace?.traceId ?? null,
    parent_id: call.trace?.parentId ?? null,
    span_id: call.span?.spanId ?? null,
    provider: call.provider?.config.name ?? null,
    cloud: call.provider ? cloudOf(call.provider.credential.type) : null,
    api: call.api,
    model: call.model,
    refused_model: call.refusedModel,
    response_model: summary?.model?.slice(0, 128) ?? null,
    method: call.method,
    path: pathForLog(call.target),
    status,
    stream: call.stream,
    duration_ms: elapsedMs(call.startedAt, nowMs),
    ttft_ms: summary?.firstTokenAt != null ? elapsedMs(call.startedAt, summary.firstTokenAt) : null,
    input_tokens: usage?.inputTokens ?? null,
    output_tokens: usage?.outputTokens ?? null,
    reasoning_tokens: usage?.reasoningTokens ?? null,
    cached_tokens: usage?.cachedTokens ?? null,
    cache_write_tokens: usage?.cacheWriteTokens ?? null,
    // Usage is expected only of a call the upstream answered with success.
    usage_complete: call.usageExpected && call.attempts > 0 && status >= 200 && status < 300 ? (summary?.usageComplete ?? false) : null,
    finish_reason: summary?.finishReason ?? null,
    interrupted: interruption(failure, call.attempts > 0, call.relaying),
    attempts: call.attempts,
    retries: call.retries,
    rate_limited: call.rateLimited,
    instance_id: call.identity.instanceId,
    workflow: call.identity.workflow,
    run_id: call.identity.runId,
    bytes_in: call.bytesIn,
    bytes_out: call.exchange.bytesOut,
    error: outcome.error ?? failure ?? summary?.streamError ?? null,
    limit: call.limit,
    // To the micro-dollar, the unit the budgets are charged in: no float noise in the log.
    charged_usd: charge?.usd == null ? null : microDollars(charge.usd),
    charge_estimated: charge ? charge.estimated : null,
    charge_basis: charge?.basis ?? null,
  };
}
