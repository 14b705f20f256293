// Parsing of listen addresses, durations, sizes, counts and amounts given on the command line.
// Pure; errors name the flag and the accepted forms so that a typo is fixed from the message alone.

export interface ListenAddress {
  /** undefined: every interface. */
  readonly host: string | undefined;
  readonly port: number;
}

const PORT = /^\d{1,5}$/;
const HOST_NAME = /^[A-Za-z0-9.-]+$/;
const IPV6 = /^[0-9A-Fa-f:.]+$/;

/** A listener's address, or undefined for `off`: every listener may be switched off, whatever the environment enables. */
export function parseListenAddressOrOff(flag: string, text: string): ListenAddress | undefined {
  return text === 'off' ? undefined : parseListenAddress(flag, text);
}

export function parseListenAddress(flag: string, text: string): ListenAddress {
  const fail = (): never => {
    throw new Error(`--${flag}: "${text}" is not a listen address; use :PORT, HOST:PORT or [IPV6]:PORT (port 0 picks a free port)`);
  };
  let host: string | undefined;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0 || text[close + 1] !== ':') return fail();
    host = text.slice(1, close);
    if (!IPV6.test(host) || !host.includes(':')) return fail();
    portText = text.slice(close + 2);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon < 0) return fail();
    host = colon === 0 ? undefined : text.slice(0, colon);
    if (host !== undefined && !HOST_NAME.test(host)) return fail();
    portText = text.slice(colon + 1);
  }
  if (!PORT.test(portText)) return fail();
  const port = Number(portText);
  if (port > 65535) return fail();
  return { host, port };
}

// A service as clients reach it: a DNS name or IPv4 address, with an optional port. No scheme,
// userinfo, path or brackets: the value is written into URLs of the generated client config.
const SERVICE_HOST = /^[A-Za-z0-9.-]+(?::[1-9]\d{0,4})?$/;

/** `name` or `name:port`, returned as `name:port` (defaultPort when none is given); `source` names where the value came from. */
export function parseServiceHost(source: string, text: string, defaultPort: number): string {
  if (!SERVICE_HOST.test(text) || Number(text.split(':')[1] ?? 0) > 65535) throw new Error(`${source}: "${text}" is not host or host:port`);
  return text.includes(':') ? text : `${text}:${defaultPort}`;
}

export function formatAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

// Node's timers hold at most 2^31-1 ms; a larger delay silently fires after 1 ms.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** "500ms", "30s", "5m", "1h"; "0" disables. Returns milliseconds, 1 to 2^31-1 (about 24 days). */
export function parseDuration(flag: string, text: string): number {
  if (text === '0') return 0;
  const m = DURATION.exec(text);
  if (!m) throw new Error(`--${flag}: "${text}" is not a duration; use a number with ms, s, m or h (e.g. 30s), or 0 to disable`);
  if (Number(m[1]) === 0) return 0;
  const ms = Math.round(Number(m[1]) * UNIT_MS[m[2]!]!);
  if (ms < 1 || ms > MAX_TIMER_MS) throw new Error(`--${flag}: "${text}" is out of range; use 1ms to 596h, or 0 to disable`);
  return ms;
}

const SIZE = /^(\d+)(B|KiB|MiB|GiB)$/;
const MAX_SIZE = 64 * 1024 ** 3;
const UNIT_BYTES: Record<string, number> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/** "512KiB", "32MiB", "1GiB", "4096B". Returns bytes. */
export function parseByteSize(flag: string, text: string): number {
  const m = SIZE.exec(text);
  if (!m || Number(m[1]) === 0) throw new Error(`--${flag}: "${text}" is not a size; use a positive whole number with B, KiB, MiB or GiB (e.g. 32MiB)`);
  const bytes = Number(m[1]) * UNIT_BYTES[m[2]!]!;
  if (bytes > MAX_SIZE) throw new Error(`--${flag}: "${text}" is out of range; at most 64GiB`);
  return bytes;
}

/** A size (as parseByteSize) of at least `minBytes`, another flag's size, which `why` names. */
export function parseByteSizeAtLeast(flag: string, text: string, minBytes: number, why: string): number {
  const bytes = parseByteSize(flag, text);
  if (bytes < minBytes) throw new Error(`--${flag}: "${text}" is too small: ${why}`);
  return bytes;
}

/** An amount of money: a decimal number above 0 (`5`, `0.25`). */
export function parsePositiveAmount(flag: string, text: string): number {
  if (!/^\d+(?:\.\d+)?$/.test(text) || Number(text) <= 0) throw new Error(`--${flag}: "${text}" must be an amount above 0 (e.g. 5 or 0.25)`);
  return Number(text);
}

/** A whole number within [min, max]. */
export function parseCount(flag: string, text: string, min: number, max: number): number {
  return wholeNumberIn(`--${flag}`, text, min, max);
}

/** A whole number within [min, max], or an error naming `label` (a flag, an environment variable). */
export function wholeNumberIn(label: string, text: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) throw new Error(`${label}: "${text}" must be a whole number from ${min} to ${max}`);
  return Number(text);
}

/** One of `choices`, exactly. */
export function parseOneOf<T extends string>(flag: string, text: string, choices: readonly T[]): T {
  if (!(choices as readonly string[]).includes(text)) throw new Error(`--${flag}: "${text}" must be ${choices.join(' or ')}`);
  return text as T;
}
