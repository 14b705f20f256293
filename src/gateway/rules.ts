// Every decision the model gateway makes about a request, as pure functions: which route, is
// the body acceptable, who is asking, which headers go upstream, what an error looks like.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { ERRORS, type ProxyError } from '../http/errors.ts';
import { assertHeaderValue, connectionNamed, HOP_BY_HOP, isCredentialHeaderName } from '../http/headers.ts';

export type GatewayRoute =
  | { readonly ok: true; readonly route: 'chat'; readonly query: string }
  | { readonly ok: true; readonly route: 'models' }
  | { readonly ok: false; readonly error: ProxyError; readonly allow?: string };

// A query is passed on (some OpenAI-compatible hosts want `api-version=`), but only when it is
// plain `key=value&...` text that no server could read as anything else.
const SAFE_QUERY = /^[A-Za-z0-9\-._~=&%+,]*$/;

export function routeGatewayRequest(method: string, target: string): GatewayRoute {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? '' : target.slice(q + 1);
  if (path === '/v1/chat/completions') {
    if (method !== 'POST') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'POST' };
    if (!SAFE_QUERY.test(query)) return { ok: false, error: ERRORS.badQuery };
    return { ok: true, route: 'chat', query };
  }
  if (path === '/v1/models') {
    if (method !== 'GET') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'GET' };
    return { ok: true, route: 'models' };
  }
  return { ok: false, error: ERRORS.notFound };
}

/** Media type, not string comparison: `application/json; charset=utf-8` and `+json` types pass. */
export function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  const type = value.split(';', 1)[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type);
}

export const ALLOWED_ROLES: ReadonlySet<string> = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

export type ChatRequest =
  | { readonly ok: true; readonly model: string; readonly stream: boolean; readonly includeUsage: boolean }
  | { readonly ok: false; readonly error: ProxyError; readonly param: string | null };

/** Validates the fields the gateway relies on; everything else is the upstream's business. */
export function validateChatRequest(body: Buffer, allowedModels: ReadonlySet<string>): ChatRequest {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    return { ok: false, error: ERRORS.invalidJson, param: null };
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return { ok: false, error: ERRORS.invalidJson, param: null };
  const req = doc as Record<string, unknown>;
  if (typeof req.model !== 'string') return { ok: false, error: ERRORS.modelMissing, param: 'model' };
  if (!allowedModels.has(req.model)) return { ok: false, error: ERRORS.modelNotAllowed, param: 'model' };
  if (!Array.isArray(req.messages)) return { ok: false, error: ERRORS.messagesMissing, param: 'messages' };
  for (let i = 0; i < req.messages.length; i++) {
    const m = req.messages[i] as { role?: unknown } | null;
    if (typeof m !== 'object' || m === null || typeof m.role !== 'string' || !ALLOWED_ROLES.has(m.role)) {
      return { ok: false, error: ERRORS.roleNotAllowed, param: `messages[${i}].role` };
    }
  }
  if (req.stream !== undefined && typeof req.stream !== 'boolean') return { ok: false, error: ERRORS.streamNotBoolean, param: 'stream' };
  const options = req.stream_options as { include_usage?: unknown } | undefined;
  return { ok: true, model: req.model, stream: req.stream === true, includeUsage: options?.include_usage === true };
}

export interface Identity {
  readonly instanceId: string | null;
  readonly workflow: string | null;
  readonly runId: string | null;
}

// Identity values become log fields and metric labels: a closed, boring alphabet.
const IDENTITY_VALUE = /^[A-Za-z0-9._:@/-]{1,128}$/;

/** Network-policy mode: identity from headers, which are informational and unauthenticated. */
export function identityFromHeaders(headers: IncomingHttpHeaders): Identity | { error: ProxyError; param: string } {
  const read = (name: string): string | null | false => {
    const v = headers[name];
    if (v === undefined) return null;
    return typeof v === 'string' && IDENTITY_VALUE.test(v) ? v : false;
  };
  const instanceId = read('x-instance-id');
  const workflow = read('x-workflow');
  const runId = read('x-run-id');
  if (instanceId === false) return { error: ERRORS.badIdentityHeader, param: 'X-Instance-Id' };
  if (workflow === false) return { error: ERRORS.badIdentityHeader, param: 'X-Workflow' };
  if (runId === false) return { error: ERRORS.badIdentityHeader, param: 'X-Run-Id' };
  return { instanceId, workflow, runId };
}

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's correlation id when it is sane, else undefined (the caller generates one). */
export function clientRequestId(headers: IncomingHttpHeaders): string | undefined {
  const v = headers['x-client-request-id'];
  return typeof v === 'string' && CLIENT_REQUEST_ID.test(v) ? v : undefined;
}

// Client headers that never go upstream: credentials of any kind (the bot's token, keys a
// workload may have found), account selectors that would let a workload bill another
// organisation with our key, our own identity headers, and framing we set ourselves.
const GATEWAY_DROPPED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'api-key',
  'cookie',
  'host',
  'content-length',
  'accept-encoding',
  'openai-organization',
  'openai-project',
  'upstream-organization',
  'upstream-project',
  'x-instance-id',
  'x-workflow',
  'x-run-id',
  'x-client-request-id',
  'forwarded',
  'x-real-ip',
  'x-original-forwarded-for',
  // Node answers `Expect: 100-continue` itself; the upstream leg has its own framing.
  'expect',
]);

/** Dropped by name pattern: proxy metadata about our network, and anything credential-like. */
function droppedByPattern(name: string): boolean {
  return name.startsWith('x-forwarded-') || isCredentialHeaderName(name);
}

export interface GatewayUpstreamHeaderInput {
  readonly host: string;
  readonly apiKey: string;
  readonly clientRequestId: string;
  readonly contentLength: number;
  readonly organization: string | undefined;
  readonly project: string | undefined;
}

export function gatewayUpstreamHeaders(incoming: IncomingHttpHeaders, set: GatewayUpstreamHeaderInput): OutgoingHttpHeaders {
  const dropped = connectionNamed(incoming.connection);
  const out: OutgoingHttpHeaders = {};
  for (const name of Object.keys(incoming)) {
    if (HOP_BY_HOP.has(name) || GATEWAY_DROPPED_REQUEST_HEADERS.has(name) || dropped.has(name) || droppedByPattern(name)) continue;
    out[name] = incoming[name];
  }
  out.host = assertHeaderValue('host', set.host);
  out.authorization = assertHeaderValue('authorization', `Bearer ${set.apiKey}`);
  out['content-length'] = set.contentLength;
  // Only what the usage inspector can read: identity, so usage is never lost to an encoding.
  out['accept-encoding'] = 'identity';
  out['x-client-request-id'] = assertHeaderValue('x-client-request-id', set.clientRequestId);
  if (set.organization) out['upstream-organization'] = assertHeaderValue('upstream-organization', set.organization);
  if (set.project) out['upstream-project'] = assertHeaderValue('upstream-project', set.project);
  return out;
}

/** `/v1/chat/completions` under an SDK-style base path: `/v1` + `/chat/completions`, never `/v1/v1`. */
export function upstreamChatPath(basePath: string, query: string): string {
  return `${basePath}/chat/completions${query ? `?${query}` : ''}`;
}

/** OpenAI's error `type` for a status, so SDKs classify gateway errors as they do upstream ones. */
export function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

export function openAiErrorBody(error: ProxyError, param: string | null, message = error.message): string {
  return JSON.stringify({ error: { message, type: openAiErrorType(error.status), code: error.code, param } });
}

/** The catalog: exactly the allowlist, in OpenAI's list format. */
export function modelsListBody(models: readonly string[], provider: string): string {
  return JSON.stringify({ object: 'list', data: models.map((id) => ({ id, object: 'model', created: 0, owned_by: provider })) });
}
