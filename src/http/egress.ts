// The corporate egress proxy: HTTPS_PROXY / NO_PROXY as this proxy reads them (once, at start-up,
// from the environment it is handed) and the bytes of the CONNECT exchange. Pure: text in,
// settings or a verdict out; a setting this file does not understand stops start-up with a
// message naming the variable. The tunnel itself (sockets) is tunnel.ts.
import { BlockList, isIP } from 'node:net';
import type { SecretRead } from './secret-source.ts';
import { Secret } from './secret-value.ts';

/** The egress proxy: where CONNECT goes. `label` (host:port) names it in logs and messages. */
export interface EgressProxy {
  readonly host: string;
  readonly port: number;
  readonly label: string;
}

/** One NO_PROXY entry: everything, a domain (itself and every name under it), or IP addresses; each optionally for one port. */
export type NoProxyEntry =
  | { readonly kind: 'all' }
  | { readonly kind: 'domain'; readonly domain: string; readonly port: number | undefined }
  | { readonly kind: 'ip'; readonly addresses: BlockList; readonly port: number | undefined };

export interface EgressSettings {
  /** Undefined: no HTTPS_PROXY, every upstream is reached directly. */
  readonly proxy: EgressProxy | undefined;
  readonly noProxy: readonly NoProxyEntry[];
}

/**
 * Pure: the one value of a variable that has an upper- and a lower-case name. Both set to
 * different values is a mistake this proxy will not resolve by a precedence rule nobody
 * remembers: start-up stops naming both.
 */
function envVariable(env: NodeJS.ProcessEnv, upper: string, lower: string): { name: string; value: string } | undefined {
  const u = env[upper] || undefined;
  const l = env[lower] || undefined;
  if (u !== undefined && l !== undefined && u !== l) throw new Error(`${upper} and ${lower} are both set, to different values; set one of them`);
  if (u !== undefined) return { name: upper, value: u };
  return l === undefined ? undefined : { name: lower, value: l };
}

/** Pure: the egress settings of an environment (HTTPS_PROXY or https_proxy, NO_PROXY or no_proxy). */
export function parseEgressEnv(env: NodeJS.ProcessEnv): EgressSettings {
  const proxy = envVariable(env, 'HTTPS_PROXY', 'https_proxy');
  const noProxy = envVariable(env, 'NO_PROXY', 'no_proxy');
  return {
    proxy: proxy === undefined ? undefined : parseProxyUrl(proxy.value, proxy.name),
    noProxy: noProxy === undefined ? [] : parseNoProxy(noProxy.value, noProxy.name),
  };
}

const PORT_TEXT = /^[0-9]{1,5}$/;
const DNS_NAME = /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$/;

function portOf(text: string): number | undefined {
  if (!PORT_TEXT.test(text)) return undefined;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : undefined;
}

/** Pure: `host:port` or `[v6]:port` split, the host lower-cased and without brackets; undefined if it is neither. */
function splitHostPort(authority: string): { host: string; port: string | undefined } | undefined {
  if (authority.startsWith('[')) {
    const end = authority.indexOf(']');
    if (end < 0) return undefined;
    const rest = authority.slice(end + 1);
    if (rest !== '' && !rest.startsWith(':')) return undefined;
    return { host: authority.slice(1, end).toLowerCase(), port: rest === '' ? undefined : rest.slice(1) };
  }
  const colon = authority.lastIndexOf(':');
  if (colon >= 0 && authority.indexOf(':') !== colon) return { host: authority.toLowerCase(), port: undefined }; // a bare IPv6 address
  return colon < 0 ? { host: authority.toLowerCase(), port: undefined } : { host: authority.slice(0, colon).toLowerCase(), port: authority.slice(colon + 1) };
}

/**
 * Pure, rule "egress proxy URL http://HOST:PORT only": the scheme http (the leg to the egress
 * proxy carries the CONNECT line and, inside the tunnel, TLS this proxy verifies end to end), an
 * explicit port, no user name or password (a credential in a variable shows in /proc and in
 * every child's environment: it goes in --egress-proxy-auth-file), no path, query or fragment.
 */
export function parseProxyUrl(text: string, variable: string): EgressProxy {
  const fix = `; write http://HOST:PORT (the credential, if any, in --egress-proxy-auth-file)`;
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(\/?)$/.exec(text.trim());
  if (m === null) throw new Error(`${variable}: "${text}" is not a proxy URL this proxy understands (no path, query or fragment)${fix}`);
  const scheme = m[1]!.toLowerCase();
  if (scheme !== 'http') throw new Error(`${variable}: the scheme ${scheme}:// is not supported, only http:// (the upstream's TLS runs inside the CONNECT tunnel)${fix}`);
  const authority = m[2]!;
  if (authority.includes('@')) throw new Error(`${variable}: a user name or password in the URL is not accepted${fix}`);
  const parts = splitHostPort(authority);
  const port = parts?.port === undefined ? undefined : portOf(parts.port);
  if (parts === undefined || port === undefined || !(DNS_NAME.test(parts.host) || isIP(parts.host) !== 0)) throw new Error(`${variable}: "${text}" needs a host and an explicit port (1-65535)${fix}`);
  const label = isIP(parts.host) === 6 ? `[${parts.host}]:${port}` : `${parts.host}:${port}`;
  return { host: parts.host, port, label };
}

/**
 * Pure, rule "NO_PROXY entries this proxy understands, or start-up stops": a comma-separated
 * list of `*` (no upstream uses the egress proxy), a host name (it and every name under it, as
 * curl matches), `.domain` or `*.domain` (the same: curl ignores the leading dot), an IPv4 or
 * IPv6 address (IPv6 with or without brackets) or a CIDR block, each name or address optionally
 * with `:PORT` (then only that port). Names and addresses match the upstream host as the
 * configuration gives it, never a DNS answer. An entry of another form (a `*` inside a name, an
 * address range) is refused rather than guessed at.
 */
export function parseNoProxy(text: string, variable: string): NoProxyEntry[] {
  const entries: NoProxyEntry[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    const parsed = noProxyEntry(entry);
    if (parsed === undefined) throw new Error(`${variable}: "${raw.trim()}" is not an entry this proxy understands; use *, a host name, .domain, an IP address or a CIDR block, each optionally with :PORT (a port number)`);
    entries.push(parsed);
  }
  return entries;
}

function noProxyEntry(entry: string): NoProxyEntry | undefined {
  if (entry === '*') return { kind: 'all' };
  const slash = entry.indexOf('/');
  if (slash >= 0) {
    const address = entry.slice(0, slash);
    const blockVersion = isIP(address);
    const bits = entry.slice(slash + 1);
    const prefix = /^[0-9]{1,3}$/.test(bits) ? Number(bits) : -1;
    if (blockVersion === 0 || prefix < 0 || prefix > (blockVersion === 4 ? 32 : 128)) return undefined;
    const addresses = new BlockList();
    addresses.addSubnet(address, prefix, blockVersion === 4 ? 'ipv4' : 'ipv6');
    return { kind: 'ip', addresses, port: undefined };
  }
  const parts = splitHostPort(entry);
  if (parts === undefined) return undefined;
  const port = parts.port === undefined ? undefined : portOf(parts.port);
  if (parts.port !== undefined && port === undefined) return undefined;
  const entryVersion = isIP(parts.host);
  if (entryVersion !== 0) {
    const addresses = new BlockList();
    addresses.addAddress(parts.host, entryVersion === 4 ? 'ipv4' : 'ipv6');
    return { kind: 'ip', addresses, port };
  }
  const domain = parts.host.replace(/^\*?\./, '').replace(/\.$/, '');
  // A name whose last label is a number is no name: an address range or a mistyped address.
  return DNS_NAME.test(domain) && !/(?:^|\.)[0-9]+$/.test(domain) ? { kind: 'domain', domain, port } : undefined;
}

/** Pure: whether NO_PROXY sends this upstream (host as configured, port) around the egress proxy. */
export function bypassesEgress(noProxy: readonly NoProxyEntry[], host: string, port: number): boolean {
  const name = host.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  const hostVersion = isIP(name);
  return noProxy.some((e) => {
    if (e.kind === 'all') return true;
    if (e.port !== undefined && e.port !== port) return false;
    if (e.kind === 'ip') return hostVersion !== 0 && e.addresses.check(name, hostVersion === 4 ? 'ipv4' : 'ipv6');
    return hostVersion === 0 && (name === e.domain || name.endsWith(`.${e.domain}`));
  });
}

/** Pure: the egress proxy this upstream is reached through, or undefined (direct). */
export function egressProxyFor(settings: EgressSettings, host: string, port: number): EgressProxy | undefined {
  if (settings.proxy === undefined || bypassesEgress(settings.noProxy, host, port)) return undefined;
  return settings.proxy;
}

const AUTHORITY_HOST = /^[A-Za-z0-9._-]+$/;

/**
 * Pure, rule "CONNECT carries only the target and the proxy credential": the request head sent to
 * the egress proxy: the CONNECT line and Host for the upstream the registry names (never
 * anything from a request), and Proxy-Authorization when the operator gave one. No upstream
 * header ever goes here: the upstream's request (and its credential) is sent inside the TLS
 * session the tunnel carries.
 */
export function connectRequestHead(host: string, port: number, proxyAuthorization: string | undefined): string {
  const targetVersion = isIP(host);
  if (targetVersion === 0 && !AUTHORITY_HOST.test(host)) throw new Error('refusing to CONNECT: the upstream host is not a host name');
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error('refusing to CONNECT: the upstream port is out of range');
  const authority = targetVersion === 6 ? `[${host}]:${port}` : `${host}:${port}`;
  let head = `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n`;
  if (proxyAuthorization !== undefined) {
    if (!isProxyAuthorization(proxyAuthorization)) throw new Error('refusing to CONNECT: the egress proxy credential is not a valid header value');
    head += `Proxy-Authorization: ${proxyAuthorization}\r\n`;
  }
  return `${head}\r\n`;
}

// A header value an auth scheme gives: printable ASCII with single inner spaces ("Basic dXNlcg=="),
// no CR, LF, NUL, tab or control character, nothing beyond 0x7e.
const PROXY_AUTHORIZATION = /^[\x21-\x7e]+(?: [\x21-\x7e]+)*$/;

function isProxyAuthorization(value: string): boolean {
  return PROXY_AUTHORIZATION.test(value);
}

/**
 * Pure, rule "egress proxy credential checked for CR/LF": the --egress-proxy-auth-file text as
 * the Proxy-Authorization value (`Basic <base64>`, `Bearer <token>`, ...): the trailing newline a
 * file ends with is dropped; anything else a header cannot carry (CR or LF inside, control
 * characters, non-ASCII) makes it invalid, never sent.
 */
export function judgeProxyAuthorization(raw: string): SecretRead {
  const value = raw.replace(/[\r\n]+$/, '');
  if (value === '') return { ok: false, reason: 'missing' };
  return isProxyAuthorization(value) ? { ok: true, value: new Secret(value) } : { ok: false, reason: 'invalid' };
}

/** The most of an answer's head this proxy reads before it calls the answer malformed. */
const CONNECT_ANSWER_MAX_BYTES = 8 * 1024;

export type ConnectAnswer =
  | { readonly kind: 'incomplete' }
  | { readonly kind: 'malformed'; readonly why: string }
  /** `extraBytes`: bytes after the head's blank line (a body, or anything else). */
  | { readonly kind: 'answer'; readonly status: number; readonly extraBytes: number };

const STATUS_LINE = /^HTTP\/1\.[01] ([1-9][0-9]{2})(?: [^\r\n]*)?$/;

/**
 * Pure, rule "a CONNECT answer is framed before the tunnel is used": the egress proxy's answer
 * from the bytes received so far: its status once the head is complete (up to the blank line),
 * and how many bytes followed the head. Those bytes are never passed on as TLS data: after a 2xx
 * the upstream has not spoken yet (TLS waits for our ClientHello), so any are the egress proxy's,
 * and the tunnel is refused (tunnel.ts).
 */
export function readConnectAnswer(received: Buffer): ConnectAnswer {
  const end = received.indexOf('\r\n\r\n');
  if (end < 0) return received.length > CONNECT_ANSWER_MAX_BYTES ? { kind: 'malformed', why: `a head longer than ${CONNECT_ANSWER_MAX_BYTES} bytes` } : { kind: 'incomplete' };
  if (end > CONNECT_ANSWER_MAX_BYTES) return { kind: 'malformed', why: `a head longer than ${CONNECT_ANSWER_MAX_BYTES} bytes` };
  const statusLine = received.toString('latin1', 0, received.indexOf('\r\n'));
  const m = STATUS_LINE.exec(statusLine);
  if (m === null) return { kind: 'malformed', why: 'no HTTP/1.x status line' };
  return { kind: 'answer', status: Number(m[1]), extraBytes: received.length - (end + 4) };
}
