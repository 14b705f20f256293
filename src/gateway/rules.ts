// The model gateway's pure decisions: which route a request takes, what its body must be,
// who is asking, which headers go upstream, and the model catalog. The wire protocols
// (./protocols/) say what differs per API; these rules are the same for all of them.
import { bounded } from '../http/log.ts';
import type { WorkloadIdentity } from '../auth/identity.ts';
import { maxOutputTokens } from '../limits/worst-case.ts';
import { outputMultiple, priceChange } from './protocols/pricing.ts';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { IDENTITY_VALUE } from '../auth/jwt.ts';
import { ERRORS, withMessage, type ProxyError } from '../http/errors.ts';
import { allowedRequestHeaders, assertHeaderValue, mediaType } from '../http/headers.ts';
import { policyKeySet } from '../json/keys.ts';
import type { JsonLimits } from '../json/scan.ts';
import { parseStrictJson, type StrictJson } from '../json/strict.ts';
import type { ProviderConfig } from './config.ts';
import { providerHeaders } from './providers.ts';
import { refuse, type CheckedRequest, type PathModel, type ProtocolRoute, type RequestPolicy, type RequestRefusal, type WireProtocol } from './protocols/protocol.ts';

export type GatewayRoute =
  | { readonly ok: true; readonly kind: 'protocol'; readonly protocol: WireProtocol; readonly route: ProtocolRoute; readonly query: string; readonly pathModel?: PathModel }
  | { readonly ok: true; readonly kind: 'models' }
  | { readonly ok: true; readonly kind: 'model'; readonly id: string }
  | { readonly ok: false; readonly error: ProxyError; readonly allow?: string; readonly protocol?: WireProtocol };

// A query is passed on (some OpenAI-compatible hosts want `api-version=`), but only when it is
// plain `key=value&...` text that no server could read as anything else.
const SAFE_QUERY = /^[A-Za-z0-9\-._~=&%+,]*$/;

/** Paths of state stored at the provider: never routed, whatever the method. */
const STORED_STATE_PATH = /^\/v1\/(?:responses\/|conversations(?:\/|$))/;

/**
 * The route of a request: a protocol's POST path, the model catalog, or an error. `protocols`
 * is the gateway's table; a path served by none of them is 404.
 */
export function routeGatewayRequest(method: string, target: string, protocols: readonly WireProtocol[]): GatewayRoute {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? '' : target.slice(q + 1);
  for (const protocol of protocols) {
    for (const route of protocol.routes) {
      if (route.modelInPath) {
        const m = route.modelInPath(path);
        if (m === undefined) continue;
        if ('error' in m) return { ok: false, error: withMessage(ERRORS.pathRejected, m.error), protocol };
        if (method !== 'POST') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'POST', protocol };
        // The clouds' routes take no query: nothing to pass on, nothing to misread.
        if (query !== '') return { ok: false, error: ERRORS.badQuery, protocol };
        return { ok: true, kind: 'protocol', protocol, route, query, pathModel: m };
      }
      if (path !== route.path) continue;
      if (method !== 'POST') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'POST', protocol };
      if (!SAFE_QUERY.test(query)) return { ok: false, error: ERRORS.badQuery, protocol };
      return { ok: true, kind: 'protocol', protocol, route, query };
    }
  }
  if (path === '/v1/models' || path.startsWith('/v1/models/')) {
    if (method !== 'GET') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'GET' };
    if (path === '/v1/models') return { ok: true, kind: 'models' };
    let id: string;
    try {
      id = decodeURIComponent(path.slice('/v1/models/'.length));
    } catch {
      return { ok: false, error: ERRORS.modelNotFound };
    }
    return { ok: true, kind: 'model', id };
  }
  if (STORED_STATE_PATH.test(path)) return { ok: false, error: ERRORS.storedStateNotRouted };
  return { ok: false, error: ERRORS.notFound };
}

/** Media type, not string comparison: `application/json; charset=utf-8` and `+json` types pass. */
export function isJsonContentType(value: string | undefined): boolean {
  const type = mediaType(value);
  return type !== undefined && (type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type));
}

/**
 * Every key a request check reads, in any protocol and at any depth (and a few more that decide
 * what a call costs or reaches): a body key that folds to one of them without being it is
 * refused (parseStrictJson), since an upstream that matches keys case-insensitively would read
 * it as the key the gateway checked, or did not see. A test feeds every protocol's checks bodies
 * whose objects record each key read, and fails on a key missing here.
 */
export const POLICY_KEYS = policyKeySet([
  'model', 'stream', 'stream_options', 'include_usage', 'messages', 'input', 'instructions', 'role', 'content', 'type', 'name', 'id',
  'tools', 'tool_choice', 'mcp_servers', 'web_search_options', 'arguments', 'output', 'execution', 'encrypted_content',
  'store', 'background', 'previous_response_id', 'conversation', 'prompt', 'container', 'skills',
  'system', 'source', 'file_id', 'file_ids', 'file', 'file_data', 'file_url', 'image_url', 'url', 'data', 'audio', 'input_audio',
  'service_tier', 'speed', 'n', 'max_tokens', 'max_output_tokens', 'max_completion_tokens',
  'anthropic_beta', 'inference_geo', 'cache_control', 'ttl', 'modalities',
]);

/**
 * What a request body may cost before it is parsed: a scan refuses deeper or larger documents,
 * so that no body holds the event loop (JSON.parse of 11 million empty objects took 10-16 s).
 * Nodes are objects, arrays, keys and array elements. The recorded agent requests reach depth 12
 * and about 500 nodes per 90 KB; a whole conversation resent near a 400k-token context is about
 * 1.6 MB, some 10,000-16,000 nodes at that density. Margins: 5x the depth, 3x that conversation.
 * The worst accepted body costs about 40 ms to check and parse (npm run bench:parse).
 */
export const BODY_LIMITS: JsonLimits = { maxDepth: 64, maxNodes: 50_000 };

/** The refusal for a body that is not strict JSON, naming the key or the limit. */
function strictJsonRefusal(parsed: Exclude<StrictJson, { ok: true }>): RequestRefusal {
  switch (parsed.reason) {
    case 'invalid':
      return refuse(ERRORS.invalidJson, null);
    case 'duplicate_key':
      return refuse(ERRORS.duplicateKey, null, `the request body has the key "${bounded(parsed.key)}" twice in one object; parsers disagree on which one counts, so send each key once`);
    case 'case_variant_key':
      return refuse(ERRORS.caseVariantKey, null, `the request body has the keys "${bounded(parsed.other)}" and "${bounded(parsed.key)}" in one object, which differ only in case; case-insensitive readers take them for one key, so send it once, spelled as the API documents it`);
    case 'policy_key_variant':
      return refuse(ERRORS.caseVariantKey, null, `the request body has the key "${bounded(parsed.key)}", which case-insensitive readers take for "${parsed.policyKey}"; spell it "${parsed.policyKey}"`);
    case 'too_deep':
      return refuse(ERRORS.bodyTooComplex, null, `the request body nests objects and arrays more than ${parsed.limit} deep, the gateway's limit; no agent request comes near it`);
    case 'too_many_nodes':
      return refuse(ERRORS.bodyTooComplex, null, `the request body holds more than ${parsed.limit} objects, arrays, keys and array elements, the gateway's limit; no agent request comes near it`);
  }
}

/**
 * A request body as the gateway judges it: bounded and strict JSON (a duplicate key, or two keys
 * equal under case folding, anywhere is refused, so that no parser upstream can read another
 * model than the one checked), an object, a model on the allowlist (here, so that no protocol
 * can leave it out), and then the protocol's own checks.
 */
export function checkRequestBody(body: Buffer, protocol: WireProtocol, policy: RequestPolicy, pathModel?: PathModel): CheckedRequest | RequestRefusal {
  const parsed = parseStrictJson(body, { limits: BODY_LIMITS, policyKeys: POLICY_KEYS });
  if (!parsed.ok) return strictJsonRefusal(parsed);
  const doc = parsed.value;
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return refuse(ERRORS.invalidJson, null);
  const req = doc as Record<string, unknown>;
  // On the clouds' routes the model is in the path; one in the body too would be a second model
  // for some reader to prefer.
  const fromPath = pathModel !== undefined && pathModel.countTokens !== true;
  if (fromPath && req.model !== undefined) return refuse(ERRORS.modelInBody, 'model');
  const model = fromPath ? pathModel.model : req.model;
  if (typeof model !== 'string') return refuse(ERRORS.modelMissing, 'model');
  if (!policy.allowedModels.has(model)) {
    return { ...refuse(ERRORS.modelNotAllowed, 'model', `the model "${bounded(model)}" is not available through this gateway; GET /v1/models lists the models it serves`), refusedModel: bounded(model) };
  }
  const refusal = protocol.checkRequest(req, policy);
  // Streamed when the body says so, or (Bedrock, Vertex) the path asks for a stream.
  const stream = req.stream === true || pathModel?.action === 'invoke-with-response-stream' || pathModel?.action === 'streamRawPredict';
  if (refusal) return { ...refusal, model };
  // The first value that changes the price of a call, read by the protocol's table (the limits
  // refuse what they cannot count).
  const multiple = outputMultiple(protocol.api, req);
  const change = priceChange(protocol.api, 'body', req) ?? multiple.change;
  const maxOutput = maxOutputTokens(req);
  return { ok: true, model, stream, ...(multiple.factor === 1 ? {} : { outputFactor: multiple.factor }), ...(change === undefined ? {} : { priceChange: change }), ...(maxOutput === undefined ? {} : { maxOutputTokens: maxOutput }) };
}


/** Network-policy mode: identity from headers, which are informational and unauthenticated. */
export function identityFromHeaders(headers: IncomingHttpHeaders): WorkloadIdentity | { error: ProxyError; param: string } {
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

/** The bot token a request presents (undefined: none), or two different ones. */
export type PresentedToken = { readonly kind: 'token'; readonly token: string | undefined } | { readonly kind: 'conflict' };

/**
 * The bot token: `Authorization: Bearer`, or `x-api-key` (what Claude Code's apiKeyHelper and the
 * Anthropic SDKs send; Claude Code sends both). Two different values are refused, not chosen from.
 */
export function botToken(headers: IncomingHttpHeaders): PresentedToken {
  const bearer = /^Bearer +([^ ]+)$/.exec(headers.authorization ?? '')?.[1];
  const apiKey = typeof headers['x-api-key'] === 'string' && headers['x-api-key'] !== '' ? headers['x-api-key'] : undefined;
  if (bearer !== undefined && apiKey !== undefined && bearer !== apiKey) return { kind: 'conflict' };
  return { kind: 'token', token: bearer ?? apiKey };
}

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's correlation id when it is sane, else undefined (the caller generates one). */
export function clientRequestId(headers: IncomingHttpHeaders): string | undefined {
  const v = headers['x-client-request-id'];
  return typeof v === 'string' && CLIENT_REQUEST_ID.test(v) ? v : undefined;
}

export interface GatewayUpstreamHeaderInput {
  readonly host: string;
  /** The provider's kind decides where the key and the account headers go. */
  readonly provider: Pick<ProviderConfig, 'kind' | 'organization' | 'project'>;
  /** The headers the provider's credential source produced for this call. */
  readonly credential: Readonly<Record<string, string>>;
  readonly clientRequestId: string;
}

/**
 * Upstream headers for a model call: the client headers the protocol allows
 * (allowedRequestHeaders), then Host, identity encoding, the correlation id,
 * and the provider's key and account headers where its kind reads them. Everything else stays
 * here: credentials of any kind, account selectors, forwarding metadata, our identity headers,
 * headers nobody thought of.
 */
export function gatewayUpstreamHeaders(incoming: IncomingHttpHeaders, protocol: Pick<WireProtocol, 'requestHeaders' | 'requestHeaderPrefixes'>, set: GatewayUpstreamHeaderInput): OutgoingHttpHeaders {
  const out = allowedRequestHeaders(incoming, (name) => protocol.requestHeaders.has(name) || protocol.requestHeaderPrefixes.some((p) => name.startsWith(p)));
  out.host = assertHeaderValue('host', set.host);
  // Only what the usage inspector can read: identity, so usage is never lost to an encoding.
  out['accept-encoding'] = 'identity';
  out['x-client-request-id'] = assertHeaderValue('x-client-request-id', set.clientRequestId);
  return Object.assign(out, providerHeaders(set.provider, set.credential));
}

/** A protocol path under an SDK-style base path: `/v1` + `/chat/completions`, never `/v1/v1`. */
export function upstreamPath(basePath: string, route: ProtocolRoute, query: string): string {
  return `${basePath}${route.upstreamPath}${query ? `?${query}` : ''}`;
}

function modelObject(id: string, provider: string): Record<string, unknown> {
  return { id, object: 'model', created: 0, owned_by: provider };
}

/** The catalog: exactly the allowlist of every provider, in OpenAI's list format, owned_by the provider. */
export function modelsListBody(providers: readonly Pick<ProviderConfig, 'name' | 'models'>[]): string {
  return JSON.stringify({ object: 'list', data: providers.flatMap((p) => p.models.map((id) => modelObject(id, p.name))) });
}

/** One model of the catalog (`GET /v1/models/{id}`, the SDKs' models.retrieve), or undefined. */
export function modelBody(id: string, providers: readonly Pick<ProviderConfig, 'name' | 'models'>[]): string | undefined {
  const owner = providers.find((p) => p.models.includes(id));
  return owner ? JSON.stringify(modelObject(id, owner.name)) : undefined;
}
