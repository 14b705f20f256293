// Model gateway configuration from the environment. Pure: env in, a validated config out; a bad
// value stops start-up with the variable's name.
import type { SecretRef } from '../config/secret.ts';
import { parseSigningKey } from '../auth/jwt.ts';

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';
export const DEFAULT_PROVIDER = 'openai';

export interface UpstreamBase {
  readonly hostname: string;
  readonly port: number;
  /** Host header value: hostname, plus the port when it is not 443. */
  readonly host: string;
  /** Path prefix without trailing slash, e.g. `/v1` or `/openai/v1`. */
  readonly basePath: string;
}

export interface GatewayConfig {
  readonly provider: string;
  readonly upstream: UpstreamBase;
  readonly allowedModels: readonly string[];
  readonly key: SecretRef | undefined;
  readonly organization: string | undefined;
  readonly project: string | undefined;
  readonly caFile: string | undefined;
  /** HS256 key for bot tokens; undefined: network-policy mode. */
  readonly signingKey: Buffer | undefined;
  /** Whether the listener is switched on (a key is configured, or MODEL_GATEWAY_ENABLED=true). */
  readonly enabled: boolean;
}

const PROVIDER = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$/;
const HEADER_VALUE = /^[\x20-\x7e]{1,256}$/;

/** Like an OpenAI SDK baseURL: https only, no credentials, query or fragment. */
export function parseBaseUrl(text: string): UpstreamBase {
  // The value is echoed to help with typos, but never a userinfo part: it may hold a password.
  const shown = text.replace(/\/\/[^/]*@/, '//***@');
  const fail = (why: string): never => {
    throw new Error(`UPSTREAM_BASE_URL: "${shown}" ${why}`);
  };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return fail('is not a URL');
  }
  if (url.protocol !== 'https:') fail('must use https');
  if (url.username || url.password) fail('must not carry credentials');
  if (url.search || url.hash || text.includes('?') || text.includes('#')) fail('must not have a query or fragment');
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port ? Number(url.port) : 443;
  return {
    hostname,
    port,
    host: url.port ? `${url.hostname}:${url.port}` : url.hostname,
    basePath: url.pathname.replace(/\/+$/, ''),
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

function optionalHeaderValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name];
  if (!v) return undefined;
  if (!HEADER_VALUE.test(v)) throw new Error(`${name}: must be printable ASCII without line breaks`);
  return v;
}

export function parseGatewayEnv(env: NodeJS.ProcessEnv): GatewayConfig {
  if (env.UPSTREAM_API_KEY && env.UPSTREAM_API_KEY_FILE) {
    throw new Error('UPSTREAM_API_KEY and UPSTREAM_API_KEY_FILE are both set: keep one, so that it is clear which key is used');
  }
  const key: SecretRef | undefined = env.UPSTREAM_API_KEY_FILE
    ? { file: env.UPSTREAM_API_KEY_FILE }
    : env.UPSTREAM_API_KEY
      ? { env: 'UPSTREAM_API_KEY' }
      : undefined;
  const provider = env.UPSTREAM_PROVIDER || DEFAULT_PROVIDER;
  if (!PROVIDER.test(provider)) throw new Error(`UPSTREAM_PROVIDER: "${provider}" must be lower-case letters, digits, - or _`);
  const signingKey = parseSigningKey('MODEL_PROXY_SIGNING_KEY', env.MODEL_PROXY_SIGNING_KEY);
  return {
    provider,
    upstream: parseBaseUrl(env.UPSTREAM_BASE_URL || DEFAULT_BASE_URL),
    allowedModels: parseAllowedModels(env.UPSTREAM_ALLOWED_MODELS),
    key,
    organization: optionalHeaderValue(env, 'UPSTREAM_ORGANIZATION'),
    project: optionalHeaderValue(env, 'UPSTREAM_PROJECT'),
    caFile: env.UPSTREAM_CA_FILE || undefined,
    signingKey,
    enabled: key !== undefined || env.MODEL_GATEWAY_ENABLED === 'true',
  };
}
