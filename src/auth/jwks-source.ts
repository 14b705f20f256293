// Where the service-account verifier gets the issuer's keys, and how it keeps them current:
//
// - a file (--sa-jwks-file): a mounted copy of the cluster's /openid/v1/jwks, checked with one
//   stat() when a token is verified and read again when it changed;
// - a URL (--sa-jwks-url), or the `jwks_uri` of the issuer's OIDC discovery document
//   (--sa-jwks-discovery: `<issuer>/.well-known/openid-configuration`, whose `issuer` must be the
//   configured one and whose `jwks_uri` must be https on the issuer's own origin; a key set
//   elsewhere is named with --sa-jwks-url instead, so that a discovery document cannot send the
//   proxy to a host the operator never named). Fetched over HTTPS with verification (the system's
//   CAs, or --sa-ca-file's), through the egress proxy as every other HTTPS connection the proxy
//   opens, each fetch within a total deadline, each document within a size cap.
//   Fetched at start-up, every KEY_SET_REFRESH_MS, and when a token names a key id the set lacks (a
//   rotation), but not twice within KEY_SET_FLOOR_MS: a client sending made-up key ids costs the
//   issuer one fetch per floor, whatever its rate. Concurrent requests for an unknown key id share
//   one fetch.
//
// Every failure keeps the last good set (a broken file or an unreachable issuer does not turn a
// running proxy into one that refuses everyone) and is reported once per distinct reason; before
// any set loaded, every token is refused (unknown key id). One exception, as for the proxy's own
// key files (src/auth/key-files.ts): a key-set file that is gone empties the set, so that removing
// it stops trusting the issuer from the next request (fail closed) until a file is back. The refresh decisions are pure
// (`fetchDue`); the clock and the fetch are passed in, so that tests drive them.
import { readFileSync } from 'node:fs';
import { fileStamp } from '../config/file-stamp.ts';
import { request as httpsRequest } from 'node:https';
import { tunnelAgentFor } from '../http/forward.ts';
import type { Egress } from '../http/tunnel.ts';
import { isObject } from '../json/keys.ts';
import { parseStrictJson } from '../json/strict.ts';
import { MAX_JWKS_BYTES, parseJwks, type JwkKey, type JwkSet } from './jwks.ts';

/** The keys a verifier reads now, and a way to ask for the set again when a token names a key id it lacks. */
export interface KeySetSource {
  current(): ReadonlyMap<string, JwkKey>;
  /** Fetches or re-reads the set unless that happened within the floor; resolves to the keys then. */
  refresh(): Promise<ReadonlyMap<string, JwkKey>>;
  /** Stops the periodic refresh. */
  close(): void;
}

/** What the sources report: a set loaded (its key ids, and those left out), or a failure (the last good set kept; none when the file is gone). */
export type KeySetEvent = { readonly kind: 'loaded'; readonly from: string; readonly kids: readonly string[]; readonly skipped: readonly string[] } | { readonly kind: 'failed'; readonly from: string; readonly reason: string };

/** The least time between two fetches of the key set: a flood of unknown key ids costs the issuer one fetch per floor. */
const KEY_SET_FLOOR_MS = 30_000;
/** The set is fetched again this often, so that a removed key stops verifying without a token asking. */
const KEY_SET_REFRESH_MS = 10 * 60_000;
/** The longest one refresh (discovery document and key set together) may take. */
const KEY_SET_DEADLINE_MS = 10_000;
/** A discovery document is a few hundred bytes; this is generous. */
const MAX_DISCOVERY_BYTES = 64 * 1024;

const NO_KEYS: ReadonlyMap<string, JwkKey> = new Map();

/** Pure: whether a fetch may start now, given when the last one started (undefined: never). */
function fetchDue(lastStartMs: number | undefined, nowMs: number, floorMs: number): boolean {
  return lastStartMs === undefined || nowMs - lastStartMs >= floorMs;
}

/** Pure: whether a file system error says the file is not there (removed, or its directory gone). */
function isGoneError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/**
 * The key set in a mounted file, read again when its stamp (file-stamp.ts) changed.
 * A file that no longer reads or parses keeps the last good set; a file that is gone empties it.
 */
export function fileKeySet(path: string, report: (event: KeySetEvent) => void): KeySetSource {
  let stamp = '';
  let keys = NO_KEYS;
  let lastProblem = '';
  const from = `--sa-jwks-file ${path}`;
  const check = (): ReadonlyMap<string, JwkKey> => {
    let problem: string;
    try {
      const next = fileStamp(path);
      if (next === stamp) return keys;
      const parsed = parseJwks(readFileSync(path));
      stamp = next;
      if (parsed.ok) {
        keys = parsed.set.keys;
        lastProblem = '';
        report(loaded(from, parsed.set));
        return keys;
      }
      problem = `${parsed.reason}; the last good key set stays in use`;
    } catch (err) {
      if (isGoneError(err)) {
        // Removed: the operator stopped trusting these keys, so none stays (read again once a file is back).
        keys = NO_KEYS;
        stamp = '';
        problem = 'the file is gone: every service-account token is refused until it is back';
      } else {
        problem = `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); the last good key set stays in use`;
      }
    }
    if (problem !== lastProblem) report({ kind: 'failed', from, reason: problem });
    lastProblem = problem;
    return keys;
  };
  return { current: check, refresh: async () => check(), close: () => undefined };
}

/** A bounded HTTPS GET: the status and body, or an Error saying what went wrong (never a credential: none is sent). */
export type HttpsGet = (url: string, maxBytes: number, signal: AbortSignal) => Promise<{ status: number; body: Buffer }>;

export interface RemoteKeySetOptions {
  /** The configured issuer (`iss`); with `discovery`, where the discovery document is. */
  readonly issuer: string;
  /** The key set's URL, or 'discovery' to take it from the issuer's discovery document. */
  readonly jwks: string | 'discovery';
  readonly get: HttpsGet;
  readonly nowMs: () => number;
  readonly report: (event: KeySetEvent) => void;
  readonly floorMs?: number;
  readonly refreshMs?: number;
  readonly deadlineMs?: number;
}

/** The key set fetched over HTTPS: at start (await `ready`), periodically, and on an unknown key id past the floor. */
export function remoteKeySet(opts: RemoteKeySetOptions): KeySetSource & { readonly ready: Promise<void> } {
  const floorMs = opts.floorMs ?? KEY_SET_FLOOR_MS;
  const deadlineMs = opts.deadlineMs ?? KEY_SET_DEADLINE_MS;
  const from = opts.jwks === 'discovery' ? `the discovery document of ${opts.issuer}` : opts.jwks;
  let keys = NO_KEYS;
  let lastStartMs: number | undefined;
  let inflight: Promise<ReadonlyMap<string, JwkKey>> | undefined;
  let lastProblem = '';
  const fetchOnce = (): Promise<ReadonlyMap<string, JwkKey>> => {
    lastStartMs = opts.nowMs();
    const controller = new AbortController();
    const deadline = setTimeout(() => controller.abort(new Error(`no answer within ${deadlineMs / 1000} s`)), deadlineMs);
    // The deadline settles the refresh even if an aborted request never reports back.
    const timedOut = new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(controller.signal.reason as Error), { once: true }));
    inflight = Promise.race([fetchKeySet(opts, controller.signal), timedOut])
      .then((set) => {
        keys = set.keys;
        lastProblem = '';
        opts.report(loaded(from, set));
      })
      .catch((err: Error) => {
        const reason = `${err.message}; the last good key set stays in use`;
        if (reason !== lastProblem) opts.report({ kind: 'failed', from, reason });
        lastProblem = reason;
      })
      .then(() => {
        clearTimeout(deadline);
        inflight = undefined;
        return keys;
      });
    return inflight;
  };
  const refresh = (): Promise<ReadonlyMap<string, JwkKey>> => inflight ?? (fetchDue(lastStartMs, opts.nowMs(), floorMs) ? fetchOnce() : Promise.resolve(keys));
  const ready = fetchOnce().then(() => undefined);
  const timer = setInterval(() => void refresh(), opts.refreshMs ?? KEY_SET_REFRESH_MS);
  timer.unref();
  return { current: () => keys, refresh, close: () => clearInterval(timer), ready };
}

/** The key set: from the configured URL, or from the discovery document's `jwks_uri`; throws an Error naming the problem. */
async function fetchKeySet(opts: RemoteKeySetOptions, signal: AbortSignal): Promise<JwkSet> {
  const url = opts.jwks === 'discovery' ? jwksUriOf(await fetchDocument(opts.get, discoveryUrl(opts.issuer), MAX_DISCOVERY_BYTES, signal), opts.issuer) : opts.jwks;
  const parsed = parseJwks(await fetchDocument(opts.get, url, MAX_JWKS_BYTES, signal));
  if (!parsed.ok) throw new Error(`${url}: ${parsed.reason}`);
  return parsed.set;
}

async function fetchDocument(get: HttpsGet, url: string, maxBytes: number, signal: AbortSignal): Promise<Buffer> {
  const answer = await get(url, maxBytes, signal);
  if (answer.status !== 200) throw new Error(`${url} answered ${answer.status}`);
  return answer.body;
}

/** Pure: where an issuer's discovery document is (OpenID Connect Discovery 1.0, section 4). */
function discoveryUrl(issuer: string): string {
  return `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

/** Pure: the discovery document's `jwks_uri`, once its `issuer` is the configured one and the URI is https on the issuer's origin; throws why not. */
export function jwksUriOf(document: Buffer, issuer: string): string {
  const where = discoveryUrl(issuer);
  const parsed = parseStrictJson(document);
  if (!parsed.ok || !isObject(parsed.value)) throw new Error(`${where}: not a JSON object`);
  const { issuer: stated, jwks_uri: uri } = parsed.value;
  // OpenID Connect Discovery 1.0, 4.3: the document's issuer must be the one it was fetched for.
  if (stated !== issuer) throw new Error(`${where}: its issuer is not ${issuer}`);
  if (typeof uri !== 'string') throw new Error(`${where}: no jwks_uri`);
  let target: URL;
  try {
    target = new URL(uri);
  } catch {
    throw new Error(`${where}: jwks_uri is not a URL`);
  }
  if (target.protocol !== 'https:') throw new Error(`${where}: jwks_uri is not https`);
  if (target.origin !== new URL(issuer).origin) throw new Error(`${where}: jwks_uri is on another origin than the issuer (${target.origin}); name the key set with --sa-jwks-url to trust it`);
  return target.href;
}

/**
 * The HTTPS GET the remote key set uses: TLS verified against the system's CAs, or `ca` alone
 * (--sa-ca-file); through the egress proxy (HTTPS_PROXY, unless NO_PROXY names the host), in a
 * CONNECT tunnel with the same verification inside it; no redirect followed; the body capped at
 * `maxBytes`; aborted by `signal`.
 */
export function httpsGetter(ca: string | undefined, egress?: Egress): HttpsGet {
  return (url, maxBytes, signal) =>
    new Promise((resolve, reject) => {
      const target = new URL(url);
      // Tunnelled: an agent of this fetch's own (its trust store the same), closed with the fetch.
      const agent = tunnelAgentFor(target, egress, ca);
      const settle = (outcome: () => void) => {
        agent?.destroy();
        outcome();
      };
      const via = agent === undefined ? (ca === undefined ? {} : { ca }) : { agent };
      const req = httpsRequest(url, { method: 'GET', headers: { accept: 'application/json' }, ...via, signal }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > maxBytes) res.destroy(new Error(`${url}: the answer is larger than ${maxBytes / 1024} KiB`));
          else chunks.push(c);
        });
        res.on('error', (err) => settle(() => reject(err)));
        res.on('end', () => settle(() => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) })));
      });
      req.on('error', (err) => settle(() => reject(err)));
      req.end();
    });
}

function loaded(from: string, set: JwkSet): KeySetEvent {
  return { kind: 'loaded', from, kids: [...set.keys.keys()], skipped: set.skipped };
}
