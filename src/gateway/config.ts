// Model gateway configuration: the providers (the UPSTREAM_* environment variables are the
// one-provider shorthand; --providers FILE lists several), and the bot-token signing key. Pure:
// env and file text in, a validated config out; a bad value stops start-up naming the variable
// or the file and field.
import type { SecretRef } from '../config/secret.ts';
import { entryReader, parseConfigJson, type FieldFailure } from '../config/config-file.ts';
import { isObject } from '../json/keys.ts';
import { parseSigningKey } from '../auth/jwt.ts';
import type { ProviderKind } from './protocols/protocol.ts';

/** The scope a Google service account asks for unless the provider names one: what Vertex AI and the other Google Cloud APIs accept. */
const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';
export const DEFAULT_PROVIDER = 'openai';
/**
 * Where each kind's API lives; its routes carry their own /v1 (Anthropic) or expect it in the base
 * (OpenAI SDKs). The clouds' endpoints follow from the region.
 */
function kindDefaultBaseUrl(kind: ProviderKind, region: string | undefined): string {
  switch (kind) {
    case 'openai':
      return DEFAULT_BASE_URL;
    case 'anthropic':
      return 'https://api.anthropic.com';
    case 'anthropic-vertex':
      return region === 'global' ? 'https://aiplatform.googleapis.com' : `https://${region}-aiplatform.googleapis.com`;
    case 'anthropic-bedrock':
      return `https://bedrock-runtime.${region}.amazonaws.com`;
  }
}
const KINDS: readonly ProviderKind[] = ['openai', 'anthropic', 'anthropic-vertex', 'anthropic-bedrock'];

export interface UpstreamBase {
  readonly hostname: string;
  readonly port: number;
  /** Host header value: hostname, plus the port when it is not 443. */
  readonly host: string;
  /** Path prefix without trailing slash, e.g. `/v1` or `/openai/v1`. */
  readonly basePath: string;
  /** http: an in-cluster model server the operator opted in (`allowPlainHttp`); https otherwise. */
  readonly plainHttp: boolean;
}

export interface ProviderConfig {
  /** The provider's name: `provider` in logs and metrics, `owned_by` in the catalog. */
  readonly name: string;
  readonly kind: ProviderKind;
  readonly upstream: UpstreamBase;
  /** Model IDs served by this provider; each belongs to exactly one provider. */
  readonly models: readonly string[];
  /** Where its credential comes from (see ./credentials/): a static key, a Google service account, AWS keys. */
  readonly credential: CredentialConfig;
  /** Sent in the kind's own headers (OpenAI: OpenAI-Organization, OpenAI-Project). */
  readonly organization: string | undefined;
  readonly project: string | undefined;
  readonly caFile: string | undefined;
  /** The cloud region (anthropic-vertex, anthropic-bedrock): requests must name it, and it picks the endpoint. */
  readonly region: string | undefined;
  /** Where it was configured, for start-up messages: `UPSTREAM_*` or `FILE: providers[i]`. */
  readonly origin: string;
  /**
   * It serves the Responses API's WebSocket mode (`GET /v1/responses` upgraded): Codex's WebSocket
   * transport goes through it (responses-socket.ts). One provider at most (withWebSocket).
   */
  readonly websocket: boolean;
}

export type CredentialConfig =
  /**
   * An API key, in the header the kind reads it from (undefined: none configured), or in the
   * named `header` (Azure AI Foundry reads `api-key`).
   */
  | { readonly type: 'key'; readonly key: SecretRef | undefined; readonly header?: string }
  /** A service-account key file; the gateway mints access tokens for `scope`. */
  | { readonly type: 'google-service-account'; readonly keyFile: string; readonly scope: string }
  /** No credential: a model server in the cluster that needs none. */
  | { readonly type: 'none' }
  /** The metadata server's token (GKE workload identity, Compute Engine). */
  | { readonly type: 'google-metadata' }
  /** EKS IRSA: the projected token traded at STS for temporary credentials; calls signed with them. */
  | { readonly type: 'aws-web-identity'; readonly roleArn: string; readonly tokenFile: string; readonly region: string; readonly service: string; readonly stsEndpoint: string }
  /** AWS keys; every call signed with SigV4 for `region` and `service`. */
  | { readonly type: 'aws-sigv4'; readonly accessKeyId: SecretRef; readonly secretAccessKey: SecretRef; readonly sessionToken: SecretRef | undefined; readonly region: string; readonly service: string };

export interface GatewayConfig {
  readonly providers: readonly ProviderConfig[];
  /** HS256 key for bot tokens; undefined: network-policy mode. */
  readonly signingKey: Buffer | undefined;
  /** Whether the listener is switched on: a provider with a key, a providers file, or MODEL_GATEWAY_ENABLED=true. */
  readonly enabled: boolean;
}

const PROVIDER = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$/;
const HEADER_VALUE = /^[\x20-\x7e]{1,256}$/;

/** Like an OpenAI SDK baseURL: https only, no credentials, query or fragment. `where` names the setting in errors. */
export function parseBaseUrl(text: string, where = 'UPSTREAM_BASE_URL', allowPlainHttp = false): UpstreamBase {
  // The value is echoed to help with typos, but never a userinfo part: it may hold a password.
  const shown = text.replace(/\/\/[^/]*@/, '//***@');
  const fail = (why: string): never => {
    throw new Error(`${where}: "${shown}" ${why}`);
  };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return fail('is not a URL');
  }
  const plainHttp = url.protocol === 'http:' && allowPlainHttp;
  if (url.protocol !== 'https:' && !plainHttp) fail(url.protocol === 'http:' ? 'must use https (a provider in the cluster that speaks only http needs "allowPlainHttp": true)' : 'must use https');
  if (url.username || url.password) fail('must not carry credentials');
  if (url.search || url.hash || text.includes('?') || text.includes('#')) fail('must not have a query or fragment');
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port ? Number(url.port) : plainHttp ? 80 : 443;
  return {
    hostname,
    port,
    host: url.port ? `${url.hostname}:${url.port}` : url.hostname,
    basePath: url.pathname.replace(/\/+$/, ''),
    plainHttp,
  };
}

export function parseAllowedModels(text: string | undefined): string[] {
  if (!text) return [];
  const models = text.split(',').map((m) => m.trim()).filter((m) => m !== '');
  for (const m of models) {
    if (!MODEL_ID.test(m)) throw new Error(`UPSTREAM_ALLOWED_MODELS: "${m}" is not a model ID`);
  }
  return [...new Set(models)];
}

/**
 * Whether a provider speaks WebSocket mode when its configuration does not say: OpenAI's own API
 * does (wss://api.openai.com/v1/responses); another host is not assumed to.
 */
function speaksWebSocketByDefault(kind: ProviderKind, upstream: UpstreamBase): boolean {
  return kind === 'openai' && !upstream.plainHttp && upstream.hostname === 'api.openai.com' && upstream.port === 443;
}

/** The `websocket` setting read: a boolean, true only for the openai kind (the Responses API's); undefined: not said. */
function websocketSetting(value: unknown, kind: ProviderKind, where: string, fail: (where: string, why: string) => never): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') return fail(where, 'must be true or false');
  if (value && kind !== 'openai') return fail(where, `the ${kind} kind has no WebSocket mode (only the openai kind's Responses API does)`);
  return value;
}

/** A provider as read, before withWebSocket decides which one serves the WebSocket mode. */
type ReadProvider = Omit<ProviderConfig, 'websocket'> & { readonly websocket: boolean | undefined };

/**
 * Which provider serves the WebSocket mode (the upgrade names no model, so one at most): the one
 * whose configuration says so (two that say so stop start-up); else the one provider at OpenAI's
 * own API that says nothing; several of those: none, since nothing decides between them (and the
 * clients fall back to HTTP until one is named).
 */
function withWebSocket(providers: readonly ReadProvider[]): ProviderConfig[] {
  const said = providers.filter((p) => p.websocket === true);
  if (said.length > 1) throw new Error(`providers ${said.map((p) => `"${p.name}" (${p.origin})`).join(' and ')} both set "websocket": true: a WebSocket upgrade names no model, so one provider serves them all; keep it on one`);
  const byDefault = providers.filter((p) => p.websocket === undefined && speaksWebSocketByDefault(p.kind, p.upstream));
  const serving = said[0] ?? (byDefault.length === 1 ? byDefault[0] : undefined);
  return providers.map((p) => ({ ...p, websocket: p === serving }));
}

/** The UPSTREAM_* shorthand: one OpenAI-kind provider, or none when no UPSTREAM_* variable is set. */
function providerFromEnv(env: NodeJS.ProcessEnv, required: boolean): ReadProvider | undefined {
  if (env.UPSTREAM_API_KEY && env.UPSTREAM_API_KEY_FILE) {
    throw new Error('UPSTREAM_API_KEY and UPSTREAM_API_KEY_FILE are both set: keep one, so that it is clear which key is used');
  }
  const names = ['UPSTREAM_API_KEY', 'UPSTREAM_API_KEY_FILE', 'UPSTREAM_ALLOWED_MODELS', 'UPSTREAM_BASE_URL', 'UPSTREAM_PROVIDER', 'UPSTREAM_ORGANIZATION', 'UPSTREAM_PROJECT', 'UPSTREAM_CA_FILE', 'UPSTREAM_WEBSOCKET'];
  if (!required && !names.some((n) => env[n])) return undefined;
  const key: SecretRef | undefined = env.UPSTREAM_API_KEY_FILE ? { file: env.UPSTREAM_API_KEY_FILE } : env.UPSTREAM_API_KEY ? { env: 'UPSTREAM_API_KEY' } : undefined;
  const name = env.UPSTREAM_PROVIDER || DEFAULT_PROVIDER;
  if (!PROVIDER.test(name)) throw new Error(`UPSTREAM_PROVIDER: "${name}" must be lower-case letters, digits, - or _`);
  const upstream = parseBaseUrl(env.UPSTREAM_BASE_URL || DEFAULT_BASE_URL);
  const websocket = env.UPSTREAM_WEBSOCKET === 'true' ? true : env.UPSTREAM_WEBSOCKET === 'false' ? false : undefined;
  if (env.UPSTREAM_WEBSOCKET && websocket === undefined) throw new Error(`UPSTREAM_WEBSOCKET: "${env.UPSTREAM_WEBSOCKET}" must be true or false`);
  return {
    name,
    kind: 'openai',
    upstream,
    websocket,
    models: parseAllowedModels(env.UPSTREAM_ALLOWED_MODELS),
    credential: { type: 'key', key },
    organization: optionalHeaderValue(env, 'UPSTREAM_ORGANIZATION'),
    project: optionalHeaderValue(env, 'UPSTREAM_PROJECT'),
    caFile: env.UPSTREAM_CA_FILE || undefined,
    region: undefined,
    origin: 'UPSTREAM_*',
  };
}

export const PROVIDER_FIELDS = new Set(['name', 'kind', 'baseUrl', 'allowPlainHttp', 'allowCredentialOverPlainHttp', 'keyEnv', 'keyFile', 'keyHeader', 'credential', 'models', 'organization', 'project', 'region', 'caFile', 'websocket']);
/** The fields of a provider's `credential` object, by its `type`. */
export const CREDENTIAL_FIELDS: Readonly<Record<Exclude<CredentialConfig['type'], 'key'>, ReadonlySet<string>>> = {
  'google-service-account': new Set(['type', 'keyFile', 'scope']),
  'aws-sigv4': new Set(['type', 'accessKeyIdEnv', 'accessKeyIdFile', 'secretAccessKeyEnv', 'secretAccessKeyFile', 'sessionTokenEnv', 'sessionTokenFile', 'region', 'service']),
  'google-metadata': new Set(['type']),
  none: new Set(['type']),
  'aws-web-identity': new Set(['type', 'roleArn', 'tokenFile', 'region', 'service', 'stsEndpoint']),
};
const AWS_REGION = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;
const SCOPE_URL = /^https:\/\/www\.googleapis\.com\/auth\/[a-z0-9._-]+$/;

/** Headers a key may never be sent in: framing, routing, hop-by-hop, the client's identity. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'proxy-authorization', 'content-type', 'accept-encoding', 'x-client-request-id', 'cookie']);

/** A provider's credential: `keyEnv`/`keyFile` (a static key), or a `credential` object naming its type. */
function parseCredential(entry: Record<string, unknown>, at: (f: string) => string, secretRef: (e: string, f: string) => SecretRef, fail: FieldFailure): CredentialConfig {
  if (entry.credential === undefined) {
    const header = entry.keyHeader;
    if (header === undefined) return { type: 'key', key: secretRef('keyEnv', 'keyFile') };
    if (typeof header !== 'string' || !/^[a-z][a-z0-9-]{0,63}$/.test(header) || RESERVED_HEADERS.has(header)) return fail(at('keyHeader'), 'must be a lower-case header name the key can go in (e.g. "api-key"), not a framing or routing header');
    return { type: 'key', key: secretRef('keyEnv', 'keyFile'), header };
  }
  if (entry.keyHeader !== undefined) return fail(at('keyHeader'), 'names where a static key goes: it has no meaning with credential');
  if (entry.keyEnv !== undefined || entry.keyFile !== undefined) return fail(at('credential'), 'give either keyEnv/keyFile (a static key) or credential, not both');
  const c = isObject(entry.credential) ? entry.credential : {};
  const type = c.type;
  const types = Object.keys(CREDENTIAL_FIELDS) as (keyof typeof CREDENTIAL_FIELDS)[];
  if (typeof type !== 'string' || !(types as string[]).includes(type)) return fail(`${at('credential')}.type`, `must be one of ${types.map((t) => `"${t}"`).join(', ')}`);
  const reader = entryReader(c, at('credential'), CREDENTIAL_FIELDS[type as keyof typeof CREDENTIAL_FIELDS], fail);
  if (type === 'google-metadata' || type === 'none') return { type };
  if (type === 'google-service-account') {
    const scope = reader.str('scope') ?? CLOUD_PLATFORM_SCOPE;
    if (!SCOPE_URL.test(scope)) fail(reader.at('scope'), 'must be a https://www.googleapis.com/auth/... scope');
    return { type, keyFile: reader.str('keyFile') ?? fail(reader.at('keyFile'), 'is required (the mounted service-account JSON key)'), scope };
  }
  const region = reader.str('region') ?? fail(reader.at('region'), 'is required (e.g. us-east-1)');
  if (!AWS_REGION.test(region)) fail(reader.at('region'), `"${region}" is not an AWS region`);
  const service = reader.str('service') ?? 'bedrock';
  if (!/^[a-z0-9-]{1,32}$/.test(service)) fail(reader.at('service'), `"${service}" is not an AWS service name`);
  if (type === 'aws-web-identity') {
    // The EKS pod identity webhook puts both in the pod's environment (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE): the file names them.
    const roleArn = reader.str('roleArn') ?? fail(reader.at('roleArn'), 'is required (the role the pod may assume; EKS puts it in AWS_ROLE_ARN)');
    if (!/^arn:aws[a-z-]*:iam::\d{12}:role\/[\w+=,.@\/-]{1,512}$/.test(roleArn)) fail(reader.at('roleArn'), `"${roleArn}" is not an IAM role ARN`);
    const stsEndpoint = reader.str('stsEndpoint') ?? `https://sts.${region}.amazonaws.com/`;
    if (!/^https:\/\/[^/?#@]+\/$/.test(stsEndpoint)) fail(reader.at('stsEndpoint'), 'must be an https URL ending in /');
    return { type: 'aws-web-identity', roleArn, tokenFile: reader.str('tokenFile') ?? fail(reader.at('tokenFile'), 'is required (EKS puts its path in AWS_WEB_IDENTITY_TOKEN_FILE)'), region, service, stsEndpoint };
  }
  const hasToken = c.sessionTokenEnv !== undefined || c.sessionTokenFile !== undefined;
  return {
    type: 'aws-sigv4',
    accessKeyId: reader.secretRef('accessKeyIdEnv', 'accessKeyIdFile'),
    secretAccessKey: reader.secretRef('secretAccessKeyEnv', 'secretAccessKeyFile'),
    sessionToken: hasToken ? reader.secretRef('sessionTokenEnv', 'sessionTokenFile') : undefined,
    region,
    service,
  };
}

/**
 * The --providers file: `{"providers": [{"name", "kind", "baseUrl", "keyEnv" | "keyFile",
 * "models", "organization", "project", "caFile"}]}`. Strict: an unknown field or a wrong value
 * stops start-up naming the file and the field.
 */
function parseProvidersFile(text: string, fileName: string): ReadProvider[] {
  const { doc, fail } = parseConfigJson(text, fileName);
  if (!isObject(doc)) return fail('(file)', 'must be a JSON object with a "providers" array');
  for (const k of Object.keys(doc)) if (k !== 'providers') fail(k, 'unknown field (expected only "providers")');
  if (!Array.isArray(doc.providers) || doc.providers.length === 0) return fail('providers', 'must be a non-empty array');
  return doc.providers.map((raw: unknown, i: number): ReadProvider => {
    const { entry, at, str, secretRef } = entryReader(raw, `providers[${i}]`, PROVIDER_FIELDS, fail);
    const name = str('name') ?? fail(at('name'), 'is required');
    if (!PROVIDER.test(name)) fail(at('name'), `"${name}" must be lower-case letters, digits, - or _ (at most 64)`);
    const kind = str('kind') ?? fail(at('kind'), `is required (${KINDS.map((k) => `"${k}"`).join(', ')})`);
    if (!(KINDS as readonly string[]).includes(kind)) fail(at('kind'), `"${kind}" must be one of ${KINDS.map((k) => `"${k}"`).join(', ')}`);
    const credential = parseCredential(entry, at, secretRef, fail);
    const models = entry.models;
    if (!Array.isArray(models) || models.length === 0) return fail(at('models'), 'must be a non-empty array of model IDs');
    for (const [j, m] of models.entries()) {
      if (typeof m !== 'string' || !MODEL_ID.test(m)) fail(`${at('models')}[${j}]`, `${JSON.stringify(m)} is not a model ID`);
    }
    if (new Set(models).size !== models.length) fail(at('models'), 'lists a model twice');
    const header = (f: string): string | undefined => {
      const v = str(f);
      if (v !== undefined && !HEADER_VALUE.test(v)) fail(at(f), 'must be printable ASCII without line breaks');
      // Vertex's project is the Google Cloud project its paths name.
      if (v !== undefined && kind !== 'openai' && !(kind === 'anthropic-vertex' && f === 'project')) fail(at(f), `the ${kind} kind has no ${f} header (an Anthropic key belongs to one workspace)`);
      return v;
    };
    const providerKind = kind as ProviderKind;
    const flag = (f: string): boolean => {
      const v = entry[f];
      if (v !== undefined && typeof v !== 'boolean') fail(at(f), 'must be true or false');
      return v === true;
    };
    const region = str('region');
    const cloud = kind === 'anthropic-vertex' || kind === 'anthropic-bedrock';
    if (cloud && region === undefined) fail(at('region'), `is required for the ${kind} kind: requests must name it, and it picks the endpoint`);
    if (!cloud && region !== undefined) fail(at('region'), `the ${kind} kind has no region`);
    if (region !== undefined && !/^(?:[a-z]{2,}(?:-[a-z]+)+-?\d{0,2}|global)$/.test(region)) fail(at('region'), `"${region}" is not a cloud region`);
    if (kind === 'anthropic-vertex' && str('project') === undefined) fail(at('project'), 'is required for the anthropic-vertex kind (the Google Cloud project)');
    const upstream = plainHttpChecked(parseBaseUrl(str('baseUrl') ?? kindDefaultBaseUrl(providerKind, region), `${fileName}: ${at('baseUrl')}`, flag('allowPlainHttp')), credential, flag('allowCredentialOverPlainHttp'), at, fail);
    return {
      name,
      kind: providerKind,
      upstream,
      websocket: websocketSetting(entry.websocket, providerKind, at('websocket'), fail),
      models: models as string[],
      credential,
      organization: header('organization'),
      project: header('project'),
      caFile: str('caFile'),
      region,
      origin: `${fileName}: providers[${i}]`,
    };
  });
}

/**
 * A plain-http provider carries no credential in clear unless the operator said so twice: the
 * `allowPlainHttp` opt-in lets a model server in the cluster be reached without TLS, and only a
 * second, separate `allowCredentialOverPlainHttp` lets a credential travel that way.
 */
function plainHttpChecked(upstream: UpstreamBase, credential: CredentialConfig, credentialAllowed: boolean, at: (f: string) => string, fail: FieldFailure): UpstreamBase {
  if (!upstream.plainHttp && credentialAllowed) fail(at('allowCredentialOverPlainHttp'), 'has no meaning for an https provider');
  if (upstream.plainHttp && credential.type !== 'none' && !credentialAllowed) {
    fail(at('credential'), 'would travel in clear over plain http: give the provider "credential": {"type": "none"} (a server that needs none), or say so with "allowCredentialOverPlainHttp": true');
  }
  return upstream;
}

/** Every provider once by name, every model in exactly one provider; the clash is named. */
function checkProviders(providers: readonly ReadProvider[]): void {
  const byName = new Map<string, ReadProvider>();
  const byModel = new Map<string, ReadProvider>();
  for (const p of providers) {
    const other = byName.get(p.name);
    if (other) throw new Error(`provider "${p.name}" is defined twice (${other.origin} and ${p.origin})`);
    byName.set(p.name, p);
    for (const m of p.models) {
      const owner = byModel.get(m);
      if (owner) throw new Error(`model "${m}" belongs to two providers (${owner.name} and ${p.name}): a model ID picks its provider, so it may belong to one only`);
      byModel.set(m, p);
    }
  }
}

function optionalHeaderValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  if (!v) return undefined;
  if (!HEADER_VALUE.test(v)) throw new Error(`${name}: must be printable ASCII without line breaks`);
  return v;
}

/**
 * The gateway's configuration from the environment and, when given, the --providers file's
 * text. The UPSTREAM_* shorthand adds its provider beside the file's when any UPSTREAM_*
 * variable is set (and stands alone otherwise, as before).
 */
export function parseGatewayEnv(env: NodeJS.ProcessEnv, providersFile?: { readonly text: string; readonly name: string }): GatewayConfig {
  const fromFile = providersFile ? parseProvidersFile(providersFile.text, providersFile.name) : [];
  const enabledByFlag = env.MODEL_GATEWAY_ENABLED === 'true';
  const fromEnv = providerFromEnv(env, fromFile.length === 0 && enabledByFlag);
  const providers = fromEnv ? [fromEnv, ...fromFile] : fromFile;
  checkProviders(providers);
  return {
    providers: withWebSocket(providers),
    signingKey: parseSigningKey('MODEL_PROXY_SIGNING_KEY', env.MODEL_PROXY_SIGNING_KEY),
    enabled: fromFile.length > 0 || (fromEnv?.credential.type === 'key' && fromEnv.credential.key !== undefined) || enabledByFlag,
  };
}
