// What a wire protocol is to the gateway. The handler (../handler.ts) authenticates, checks the
// model, injects the key, retries, relays and records once for every protocol; a protocol module
// says only what differs: its routes, how its request body is checked, how usage and the end of
// a call are read from its stream and JSON bodies, and how the gateway's own errors look there.
// A module is data plus pure functions, testable by feeding it bytes.
import type { ProxyError } from '../../http/errors.ts';
import type { EventReader } from '../sse.ts';
import type { PriceChange } from '../../limits/policy.ts';
import type { TokenUsage } from '../../limits/prices.ts';

/** The bounded `api` label of logs and metrics. */
export type ApiName = 'chat_completions' | 'responses' | 'messages';

/**
 * The kind of provider that serves a protocol: it decides the upstream auth header, and for the
 * clouds' Anthropic routes the path (the model, and Vertex's project and region, are in it).
 */
export type ProviderKind = 'openai' | 'anthropic' | 'anthropic-vertex' | 'anthropic-bedrock';

/** What a route whose path names the model read from it (Vertex, Bedrock). */
export interface PathModel {
  readonly model: string;
  /** What is asked of the model: `rawPredict`, `streamRawPredict`, `invoke`, `invoke-with-response-stream`. */
  readonly action: string;
  /** Vertex: the project and region the path names; they must be the provider's. */
  readonly project?: string;
  readonly region?: string;
  /** Vertex's token count (`models/count-tokens:rawPredict`): the model is the body's, and there is no usage. */
  readonly countTokens?: true;
}

/** Where a cloud provider is: the project and region of its configuration. */
export interface CloudScope {
  readonly project: string | undefined;
  readonly region: string | undefined;
}

/** What the gateway learns about a call from the upstream's answer. */
export interface CallSummary {
  /** What is known of the usage: a stream's input tokens may be known before it is cut. */
  readonly usage: TokenUsage | null;
  /** The usage is final (the upstream reported it whole). */
  readonly usageComplete: boolean;
  /** The response's own model field (may name a dated snapshot of the requested model). */
  readonly model: string | null;
  /** How the model stopped: chat's finish_reason, a response's status or incomplete reason. */
  readonly finishReason: string | null;
  /** (streams) Clock value when the first output-bearing event arrived. */
  readonly firstTokenAt: number | null;
  /** (streams) The protocol's end-of-stream event was seen. */
  readonly terminated: boolean;
  /** An error the upstream reported inside a successful answer (a failed response, an error event). */
  readonly streamError: string | null;
  /** The answer's own id (chatcmpl-..., resp_..., msg_...), when it named one: the span's gen_ai.response.id. */
  readonly responseId?: string;
}

/** Pure: `{ responseId }` when `id` is a string, else nothing (a summary without an id has no such field). */
export function responseIdOf(id: unknown): { readonly responseId?: string } {
  return typeof id === 'string' ? { responseId: id.slice(0, 128) } : {};
}

export interface StreamReader extends EventReader {
  summary(): CallSummary;
}

export type CheckedRequest = {
  readonly ok: true;
  readonly model: string;
  readonly stream: boolean;
  /** The first value of the body that changes the price of a call beyond the price table's rates (../../gateway/protocols/pricing.ts). */
  readonly priceChange?: PriceChange;
  /** The most output the body allows (max_tokens, max_completion_tokens, max_output_tokens), when it names a limit. */
  readonly maxOutputTokens?: number;
  /** How many times over the provider generates that output (`n` choices; ../../gateway/protocols/pricing.ts OUTPUT_MULTIPLIERS), when more than once. */
  readonly outputFactor?: number;
};
export type RequestRefusal = {
  readonly ok: false;
  readonly error: ProxyError;
  readonly param: string | null;
  /** Replaces the error's fixed message when the refusal can say more (request data only bounded: a field name, a model name). */
  readonly message?: string;
  /** A refused model name, bounded, for the log line only (never a metric label). */
  readonly refusedModel?: string;
  /** The allowed model the refused request named (refused for another reason): its record says what it targeted. */
  readonly model?: string;
};

/** Deployment policy the request checks apply. */
export interface RequestPolicy {
  readonly allowedModels: ReadonlySet<string>;
  /** Provider-executed tool types the operator allows (--allow-hosted-tools). */
  readonly hostedTools: ReadonlySet<string>;
  /** A message on a WebSocket connection (the Responses API's WebSocket mode): the responses its own turns produced. */
  readonly socket?: { readonly responses: ReadonlySet<string> };
}

export interface ProtocolRoute {
  /** The gateway path, exact, served by POST. */
  readonly path: string;
  /** Appended to the upstream base path (`/v1` + `/chat/completions`). */
  readonly upstreamPath: string;
  /** The answer carries no usage by design (a token count): none is expected or recorded. */
  readonly noUsage?: true;
  /**
   * For a route whose path names the model: the parse of a path (undefined: not this route; an
   * error: this route, in a form the gateway does not accept). `path` is then a description.
   */
  readonly modelInPath?: (path: string) => PathModel | { readonly error: string } | undefined;
  /** The upstream path for such a route, built from the provider's configuration and the parsed model, never from the raw path. */
  readonly upstreamPathFor?: (scope: CloudScope, m: PathModel) => string;
}

export interface WireProtocol {
  readonly api: ApiName;
  readonly kind: ProviderKind;
  readonly routes: readonly ProtocolRoute[];
  /**
   * Checks the fields the gateway decides on, `stream` (a boolean if present) among them; the
   * model is checked before, the same for every protocol (../check-call.ts). Everything else is the
   * upstream's business.
   */
  checkRequest(body: Record<string, unknown>, policy: RequestPolicy): RequestRefusal | undefined;
  /** Client request headers that may go upstream: exact lower-case names and name prefixes. */
  readonly requestHeaders: ReadonlySet<string>;
  readonly requestHeaderPrefixes: readonly string[];
  /** The response header that names the upstream's request id (also set on the gateway's own answers). */
  readonly upstreamRequestIdHeader: string;
  /** Upstream statuses worth another attempt while nothing reached the client. */
  readonly retryStatuses: ReadonlySet<number>;
  newStreamReader(now: () => number): StreamReader;
  summarizeJson(body: Buffer): CallSummary;
  /**
   * Whether a stream is complete only once its end event arrived. When true, an upstream body
   * that ends without it reaches the client as a broken connection, never as a clean end.
   */
  readonly streamNeedsEndEvent: boolean;
  /** How a stream is framed when it is not SSE: Bedrock's binary AWS event stream. */
  readonly streamFraming?: 'aws-eventstream';
  /** The body of an error the gateway makes itself on this protocol's routes. */
  errorBody(error: ProxyError, param: string | null, message: string): string;
}

/** Refusal helper for the protocol modules. */
export function refuse(error: ProxyError, param: string | null, message?: string): RequestRefusal {
  return message === undefined ? { ok: false, error, param } : { ok: false, error, param, message };
}

/** An upstream error class for the log: a short identifier, else `other`. */
export function errorClass(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  return typeof value === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(value) ? value : 'other';
}
