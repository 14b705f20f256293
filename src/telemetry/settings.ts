// Tracing's settings, from the standard OpenTelemetry variables (read once, at start-up). Pure:
// an environment in, settings out, or undefined when tracing is off; a value this proxy does not
// understand stops start-up with a message naming the variable. Only OTLP over HTTP with JSON
// bodies is spoken (no dependency: the exporter is written here), so another protocol is refused
// rather than sent the wrong bytes. The headers sent with every export (a collector's key) are
// held as Secrets from here on: only the collector's connection reads them (http/otlp-client.ts).
import { wholeNumberIn } from '../http/address.ts';
import { Secret } from '../http/secret-value.ts';

export type Sampler = { readonly parentBased: boolean; readonly ratio: number };

export interface TracingSettings {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  readonly url: URL;
  /** Sent with every export (a collector's API key): values opaque, never logged. */
  readonly headers: Readonly<Record<string, Secret>>;
  /** The resource: service.name, service.version and OTEL_RESOURCE_ATTRIBUTES. */
  readonly resource: Readonly<Record<string, string>>;
  readonly sampler: Sampler;
  readonly exportTimeoutMs: number;
  readonly batch: { readonly maxQueue: number; readonly maxBatch: number; readonly delayMs: number };
}

const SAMPLERS: Readonly<Record<string, (ratio: number) => Sampler>> = {
  always_on: () => ({ parentBased: false, ratio: 1 }),
  always_off: () => ({ parentBased: false, ratio: 0 }),
  traceidratio: (ratio) => ({ parentBased: false, ratio }),
  parentbased_always_on: () => ({ parentBased: true, ratio: 1 }),
  parentbased_always_off: () => ({ parentBased: true, ratio: 0 }),
  parentbased_traceidratio: (ratio) => ({ parentBased: true, ratio }),
};

// A header name is an RFC 9110 token; a value printable ASCII (no CR, LF, NUL or other control).
const OTLP_HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const OTLP_HEADER_VALUE = /^[\x20-\x7e]*$/;

/** Pure: `key=value,key=value` (the W3C Baggage form the OTEL_* lists use), values percent-decoded. */
function keyValues(text: string, variable: string, check?: (key: string, value: string) => boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of text.split(',')) {
    if (item.trim() === '') continue;
    const eq = item.indexOf('=');
    const key = item.slice(0, eq).trim();
    let value: string;
    try {
      value = decodeURIComponent(item.slice(eq + 1).trim());
    } catch {
      value = '\0';
    }
    if (eq <= 0 || (check !== undefined && !check(key, value))) throw new Error(`${variable}: "${key || item.trim().slice(0, 40)}" is not a key=value entry this proxy accepts (a header name and a printable value; write a comma as %2C)`);
    out[key] = value;
  }
  return out;
}

/** Pure: a whole number in [min, max] (milliseconds, or spans), or the default. */
function wholeNumber(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const text = env[name]?.trim();
  return text === undefined || text === '' ? fallback : wholeNumberIn(name, text, min, max);
}

/** Pure: the collector's URL: http(s), no user name or password (a collector's key goes in the headers variable). */
function collectorUrl(text: string, variable: string, appendPath: boolean): URL {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    throw new Error(`${variable}: "${text}" is not a URL (write http://HOST:4318 or https://HOST:4318)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`${variable}: the scheme ${url.protocol}// is not supported: only OTLP over HTTP (http:// or https://)`);
  if (url.username !== '' || url.password !== '') throw new Error(`${variable}: a user name or password in the URL is not accepted; put the collector's credential in OTEL_EXPORTER_OTLP_HEADERS`);
  if (url.hash !== '') throw new Error(`${variable}: a fragment (#...) is not accepted`);
  if (appendPath) url.pathname = `${url.pathname.replace(/\/$/, '')}/v1/traces`;
  return url;
}

/**
 * Pure: the tracing settings of an environment, or undefined when tracing is off: no endpoint
 * variable, OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
 */
export function parseTracingEnv(env: NodeJS.ProcessEnv, version: string): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim() || 'otlp';
  if (exporter === 'none') return undefined;
  if (exporter !== 'otlp') throw new Error(`OTEL_TRACES_EXPORTER: "${exporter}" is not supported: otlp (OTLP over HTTP, JSON) or none`);
  const tracesEndpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || undefined;
  const baseEndpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || undefined;
  if (tracesEndpoint === undefined && baseEndpoint === undefined) return undefined;
  const protocolVariable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = env[protocolVariable]?.trim() || 'http/json';
  if (protocol !== 'http/json') throw new Error(`${protocolVariable}: "${protocol}" is not supported: this proxy exports OTLP over HTTP with JSON bodies (http/json), which every OpenTelemetry Collector's otlp receiver takes on its HTTP port (4318)`);
  const url = tracesEndpoint !== undefined ? collectorUrl(tracesEndpoint, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', false) : collectorUrl(baseEndpoint!, 'OTEL_EXPORTER_OTLP_ENDPOINT', true);
  const headerCheck = (k: string, v: string) => OTLP_HEADER_NAME.test(k) && OTLP_HEADER_VALUE.test(v);
  const given = { ...keyValues(env.OTEL_EXPORTER_OTLP_HEADERS ?? '', 'OTEL_EXPORTER_OTLP_HEADERS', headerCheck), ...keyValues(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS ?? '', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', headerCheck) };
  const headers = Object.fromEntries(Object.entries(given).map(([name, value]) => [name, new Secret(value)]));
  const samplerName = env.OTEL_TRACES_SAMPLER?.trim() || 'parentbased_always_on';
  const sampler = SAMPLERS[samplerName];
  if (sampler === undefined) throw new Error(`OTEL_TRACES_SAMPLER: "${samplerName}" is not supported: ${Object.keys(SAMPLERS).join(', ')}`);
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim() || '1';
  const ratio = Number(arg);
  if (!/^(?:0|1|0?\.\d+|1\.0*)$/.test(arg) || ratio < 0 || ratio > 1) throw new Error(`OTEL_TRACES_SAMPLER_ARG: "${arg}" must be a ratio from 0 to 1 (e.g. 0.25)`);
  const timeoutVariable = env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT';
  return {
    url,
    headers,
    resource: { 'service.name': 'credential-proxy', 'service.version': version, ...keyValues(env.OTEL_RESOURCE_ATTRIBUTES ?? '', 'OTEL_RESOURCE_ATTRIBUTES'), ...(env.OTEL_SERVICE_NAME?.trim() ? { 'service.name': env.OTEL_SERVICE_NAME.trim() } : {}) },
    sampler: sampler(ratio),
    exportTimeoutMs: wholeNumber(env, timeoutVariable, 10_000, 1, 600_000),
    batch: {
      maxQueue: wholeNumber(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1, 1_000_000),
      maxBatch: wholeNumber(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1, 100_000),
      delayMs: wholeNumber(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 0, 600_000),
    },
  };
}
