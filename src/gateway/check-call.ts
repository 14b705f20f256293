// Step 3 of a model call: what it asks for. The body is read as strict JSON and checked by the
// protocol's rules; the model picks its provider, whose kind must be the route's. Pure.
import { ERRORS } from '../http/errors.ts';
import type { Refusal } from '../http/lifecycle.ts';
import { bounded } from '../http/log.ts';
import { policyKeySet } from '../json/keys.ts';
import type { JsonLimits } from '../json/scan.ts';
import { parseStrictJson, type StrictJson } from '../json/strict.ts';
import type { PriceChange } from '../limits/policy.ts';
import type { ModelPrice, PriceTable } from '../limits/prices.ts';
import { maxOutputTokens } from '../limits/worst-case.ts';
import { outputMultiple, priceChange } from './protocols/pricing.ts';
import { refuse, type CheckedRequest, type PathModel, type RequestPolicy, type RequestRefusal, type WireProtocol } from './protocols/protocol.ts';
import { routesOfKind, type Provider } from './providers.ts';

/** What the call checks against: the allowlist and hosted tools, the providers by model, the protocol table, the prices. */
export interface CallPolicy {
  readonly request: RequestPolicy;
  readonly byModel: ReadonlyMap<string, Provider>;
  readonly protocols: readonly WireProtocol[];
  readonly prices?: PriceTable;
}

export type CheckedCall =
  | {
      readonly ok: true;
      readonly model: string;
      readonly provider: Provider;
      readonly stream: boolean;
      /** The model's price (absent: the price table has none, which a money budget refuses). */
      readonly price?: ModelPrice;
      /** The first value of the body that changes the price (the limits refuse what they cannot count). */
      readonly priceChange?: PriceChange;
      /** The most output the body allows, when it names a limit (the call's worst case). */
      readonly maxOutputTokens?: number;
      /** How many times over the provider generates that output (`n` choices), when more than once. */
      readonly outputFactor?: number;
    }
  | {
      readonly ok: false;
      readonly refusal: Refusal;
      /** The allowed model a refused request named: its record says what it targeted. */
      readonly model?: string;
      readonly provider?: Provider;
      /** A model the allowlist refused, bounded, for the log line only. */
      readonly refusedModel?: string;
    };

/** A flat copy: a model id V8 sliced out of the body's text would keep all of that text alive. */
function flat(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

/** Pure: the call the body asks for, or why it is refused. */
export function checkCall(bytes: Buffer, protocol: WireProtocol, pathModel: PathModel | undefined, policy: CallPolicy): CheckedCall {
  const checked = checkRequestBody(bytes, protocol, policy.request, pathModel);
  if (!checked.ok) {
    const refusal = { error: checked.error, param: checked.param, ...(checked.message === undefined ? {} : { message: checked.message }) };
    // Refused for what it asked besides the model: its record names the model and provider.
    const known = checked.model === undefined ? {} : { model: flat(checked.model), provider: policy.byModel.get(checked.model) };
    return { ok: false, refusal, ...known, ...(checked.refusedModel === undefined ? {} : { refusedModel: checked.refusedModel }) };
  }
  const model = flat(checked.model);
  const provider = policy.byModel.get(checked.model)!;
  if (provider.config.kind !== protocol.kind) {
    const message = `model "${checked.model}" is served by ${routesOfKind(provider.config.kind, policy.protocols)} (provider ${provider.config.name}), not by this route`;
    return { ok: false, refusal: { error: ERRORS.modelNotOnRoute, param: 'model', message }, model, provider };
  }
  const price = policy.prices?.get(provider.config.name, checked.model);
  return { ok: true, model, provider, stream: checked.stream, ...(checked.outputFactor === undefined ? {} : { outputFactor: checked.outputFactor }), ...(price === undefined ? {} : { price }), ...(checked.priceChange === undefined ? {} : { priceChange: checked.priceChange }), ...(checked.maxOutputTokens === undefined ? {} : { maxOutputTokens: checked.maxOutputTokens }) };
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
