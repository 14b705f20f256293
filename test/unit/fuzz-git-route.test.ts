// Fuzzes parseGitRoute with random and mutated request targets. Whatever it accepts must be
// safe to send upstream: the upstream URL, built the way the proxy builds it, stays on the
// registered origin, is not changed by WHATWG URL normalisation, and hides no separator or dot
// segment behind one round of percent-decoding. Deterministic: the seed is in the test name.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseGitRoute } from '../../src/git/route.ts';
import { fuzzSeed, mulberry32, type Rng } from '../support/prng.ts';

const SEED = fuzzSeed(0x6172_6f75);
const ITERATIONS = 120_000;

const REGISTERED = ['github.com', 'git.example.com:8443', '127.0.0.1:9443'] as const;
const isRegistered = (key: string) => (REGISTERED as readonly string[]).includes(key);

const ROUTES = [
  { method: 'GET', suffix: 'info/refs?service=git-upload-pack', route: 'info-refs' },
  { method: 'GET', suffix: 'info/refs?service=git-receive-pack', route: 'info-refs' },
  { method: 'POST', suffix: 'git-upload-pack', route: 'upload-pack' },
  { method: 'POST', suffix: 'git-receive-pack', route: 'receive-pack' },
] as const;
const METHOD_OF_ROUTE: Record<string, string> = { 'info-refs': 'GET', 'upload-pack': 'POST', 'receive-pack': 'POST' };
const OTHER_METHODS = ['GET', 'POST', 'PUT', 'HEAD', 'DELETE', 'OPTIONS', 'PATCH', 'CONNECT', 'get', 'post', ''];

// Characters and pieces that change how paths are split, decoded or normalised somewhere, plus
// look-alikes: fullwidth solidus, ideographic full stop, one-dot leader, Kelvin sign and dotless
// i (which lower-case to ASCII), right-to-left override.
const HOSTILE_CHARS = [
  '%', '.', '/', '\\', ';', '?', '#', '@', ':', '[', ']', ' ', '\t', '\r', '\n', '\0', '"', '<', '>', '`', '{', '}', '|', '^', '&', '=', '+', ',', '!', '$', "'", '(', ')', '*', '~', '-', '_',
  'é', '🌍', '\uff0f', '\u3002', '\u2024', '\u212a', '\u0131', '\u0130', '\u202e', '\u00a0', '\ufeff',
];
const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const HEX = '0123456789abcdefABCDEF';
const TOKENS = [
  '/', '//', '.', '..', '../', './', '/..', '/.', '%2e', '%2E', '%2e%2e', '%2f', '%2F', '%5c', '%5C', '%25', '%252e', '%252f', '%00', '%0d%0a',
  '%3b', '%3f', '%23', '%20', '%41', '%c3%a9', '%u002e', '%zz', '%', ';', '?', '#', '\\', '@', ':',
  'github.com', 'GitHub.COM', 'git.example.com:8443', '127.0.0.1:9443', 'evil.example', 'user@', '[::1]',
  'org', 'repo', 'repo.git', 'info', 'refs', 'info/refs', '?service=', 'service=git-upload-pack', 'git-upload-pack', 'git-receive-pack',
];
// Repository path pieces a real git host could have; every one of them is allowed.
const SAFE_SEGMENTS = ['o', 'org', 'r', 'repo', 'repo.git', 'My%20Project', '_git', 'group', 'sub-group', 'a.b.c', 'x~y', 'v1.2.3', 'caf%C3%A9', "it's", 'a(b)', 'k=v', 'a+b', 'a,b', 'u@x', 'p:q', '...', '.hidden', 'trailing.', '!$&*'];

function randomChar(rng: Rng): string {
  return rng.chance(0.5) ? ALNUM[rng.int(ALNUM.length)]! : rng.pick(HOSTILE_CHARS);
}

function flipCase(host: string, rng: Rng): string {
  let flipped = '';
  for (const c of host) flipped += rng.chance(0.3) ? (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) : c;
  return flipped;
}

/** A target the proxy must accept, with the method that goes with it. */
function validTarget(rng: Rng): { method: string; target: string } {
  const route = rng.pick(ROUTES);
  const host = flipCase(rng.pick(REGISTERED), rng);
  const segments: string[] = [];
  for (let n = rng.between(1, 4); n > 0; n--) segments.push(rng.pick(SAFE_SEGMENTS));
  return { method: route.method, target: `/${host}/${segments.join('/')}/${route.suffix}` };
}

function percentEncode(ch: string, rng: Rng): string {
  const hex = [...Buffer.from(ch, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  return rng.chance(0.5) ? hex.toUpperCase() : hex;
}

/** Index of a random character of s, or 0 for an empty string. */
const at = (s: string, rng: Rng) => (s.length === 0 ? 0 : rng.int(s.length));

const MUTATIONS: readonly ((s: string, rng: Rng) => string)[] = [
  // insert, delete, replace a character
  (s, rng) => { const i = rng.int(s.length + 1); return s.slice(0, i) + randomChar(rng) + s.slice(i); },
  (s, rng) => { const i = at(s, rng); return s.slice(0, i) + s.slice(i + 1); },
  (s, rng) => { const i = at(s, rng); return s.slice(0, i) + randomChar(rng) + s.slice(i + 1); },
  // percent-encode a character, once or twice
  (s, rng) => { const i = at(s, rng); return s.slice(0, i) + percentEncode(s[i] ?? '.', rng) + s.slice(i + 1); },
  (s, rng) => { const i = at(s, rng); return s.slice(0, i) + percentEncode(s[i] ?? '.', rng).replaceAll('%', '%25') + s.slice(i + 1); },
  // double-encode an escape that is already there
  (s, rng) => { const i = s.indexOf('%', at(s, rng)); return i < 0 ? s : `${s.slice(0, i)}%25${s.slice(i + 1)}`; },
  // a stray or malformed escape
  (s, rng) => { const i = rng.int(s.length + 1); return `${s.slice(0, i)}%${HEX[rng.int(HEX.length)]}${rng.chance(0.5) ? HEX[rng.int(HEX.length)] : 'g'}${s.slice(i)}`; },
  // flip the case of a character (hex digits of escapes included)
  (s, rng) => { const i = at(s, rng); const c = s[i] ?? ''; return s.slice(0, i) + (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) + s.slice(i + 1); },
  // dot segments, plain and encoded, after a slash
  (s, rng) => {
    const slashes = [...s.matchAll(/\//g)].map((m) => m.index!);
    const i = slashes.length === 0 ? 0 : rng.pick(slashes) + 1;
    return s.slice(0, i) + rng.pick(['../', './', '..', '.', '%2e%2e/', '%2e/', '.%2e/', '..%2f', '..;/', '..\\', '%252e%252e/']) + s.slice(i);
  },
  // duplicate a slash
  (s, rng) => { const i = s.indexOf('/', at(s, rng)); return i < 0 ? `/${s}` : `${s.slice(0, i)}/${s.slice(i)}`; },
  // splice in a token
  (s, rng) => { const i = rng.int(s.length + 1); return s.slice(0, i) + rng.pick(TOKENS) + s.slice(i); },
  // tamper with the query
  (s, rng) => `${s.split('?')[0]}${rng.pick(['', '?', '?service=git-upload-pack', '?service=git-receive-pack&x=1', '?Service=git-upload-pack', '?service=git-upload-pack#x', '?service=git-upload-pack%00', '?service=../../x'])}`,
];

function mutate(target: string, rng: Rng): string {
  let s = target;
  for (let n = rng.between(1, 4); n > 0; n--) s = rng.pick(MUTATIONS)(s, rng);
  return s;
}

function randomString(rng: Rng): string {
  let s = rng.chance(0.8) ? '/' : '';
  for (let n = rng.between(0, 40); n > 0; n--) s += randomChar(rng);
  return s;
}

function randomFromTokens(rng: Rng): string {
  let s = '/';
  for (let n = rng.between(1, 12); n > 0; n--) s += rng.pick(TOKENS) + (rng.chance(0.5) ? '/' : '');
  return s;
}

/** One round of percent-decoding, byte by byte, so a lone or non-UTF-8 escape decodes too. */
function decodeOnceBytes(segment: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < segment.length; i++) {
    const hex = segment.slice(i + 1, i + 3);
    if (segment[i] === '%' && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else {
      const code = segment.charCodeAt(i);
      if (code < 0x80) bytes.push(code);
      else bytes.push(...Buffer.from(segment[i]!, 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('latin1');
}

/** Everything that must hold for an accepted target; returns the first violation. */
function violation(method: string, target: string, r: Extract<ReturnType<typeof parseGitRoute>, { ok: true }>): string | undefined {
  if (!['info-refs', 'upload-pack', 'receive-pack'].includes(r.route)) return `unknown route ${r.route}`;
  if (METHOD_OF_ROUTE[r.route] !== method) return `route ${r.route} accepted with method ${method}`;
  if (!isRegistered(r.hostKey)) return `unregistered host key ${r.hostKey}`;
  if (r.hostKey !== target.split('/')[1]!.toLowerCase()) return `host key ${r.hostKey} is not the first segment`;
  // Node refuses to send a path with characters outside \x21-\xff; ours are visible ASCII.
  if (!/^\/[\x21-\x7e]*$/.test(r.upstreamPath)) return 'upstream path is not visible ASCII starting with /';

  const registeredOrigin = new URL(`https://${r.hostKey}`).origin;
  const url = new URL(r.upstreamPath, `https://${r.hostKey}`);
  if (url.origin !== registeredOrigin) return `upstream origin ${url.origin}`;
  if (url.username !== '' || url.password !== '' || url.hash !== '') return 'upstream URL has userinfo or a fragment';
  const q = r.upstreamPath.indexOf('?');
  const path = q < 0 ? r.upstreamPath : r.upstreamPath.slice(0, q);
  if (url.pathname !== path) return `WHATWG URL normalised the path to ${url.pathname}`;
  if (r.route === 'info-refs') {
    if (url.search !== '?service=git-upload-pack' && url.search !== '?service=git-receive-pack') return `info/refs query ${url.search}`;
    if (!url.pathname.endsWith('/info/refs')) return 'info-refs route without /info/refs';
  } else {
    if (q >= 0) return 'POST route with a query';
    if (!url.pathname.endsWith(r.route === 'upload-pack' ? '/git-upload-pack' : '/git-receive-pack')) return 'route does not match the path';
  }

  for (const segment of url.pathname.split('/').slice(1)) {
    if (segment === '' || segment === '.' || segment === '..') return `segment ${JSON.stringify(segment)} in ${url.pathname}`;
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      decoded = decodeOnceBytes(segment); // not UTF-8 (e.g. %80): decode bytes, which is stricter
    }
    for (const d of [decoded, decodeOnceBytes(segment)]) {
      if (d === '.' || d === '..') return `segment ${segment} decodes to a dot segment`;
      if (/[/\\]/.test(d)) return `segment ${segment} decodes to a separator`;
      if (/[%;?#\x00-\x1f\x7f]/.test(d)) return `segment ${segment} decodes to a character that needs no escape to be dangerous`;
    }
  }
  return undefined;
}

test(`fuzz: ${ITERATIONS} random and mutated targets, every accepted one is safe upstream (seed ${SEED})`, (t) => {
  const startedAt = performance.now();
  const rng = mulberry32(SEED);
  const failures: string[] = [];
  let accepted = 0;
  let acceptedMutants = 0;
  let rejected = 0;
  for (let i = 0; i < ITERATIONS; i++) {
    let method: string;
    let target: string;
    let mutated = true;
    const kind = rng.next();
    if (kind < 0.15) {
      method = rng.pick(OTHER_METHODS);
      target = randomString(rng);
    } else if (kind < 0.3) {
      method = rng.pick(OTHER_METHODS);
      target = randomFromTokens(rng) + (rng.chance(0.5) ? rng.pick(ROUTES).suffix : '');
    } else {
      const valid = validTarget(rng);
      mutated = kind >= 0.4;
      method = rng.chance(0.9) ? valid.method : rng.pick(OTHER_METHODS);
      target = mutated ? mutate(valid.target, rng) : valid.target;
    }

    const r = parseGitRoute(method, target, isRegistered);
    if (!r.ok) {
      rejected++;
      if (![400, 403, 405, 501].includes(r.error.status) || (r.error.status === 405) !== (r.allow !== undefined)) {
        failures.push(`#${i} ${method} ${JSON.stringify(target)}: rejected with ${r.error.status}, allow ${r.allow}`);
      }
      continue;
    }
    accepted++;
    if (mutated) acceptedMutants++;
    const why = violation(method, target, r);
    if (why !== undefined && failures.length < 20) failures.push(`#${i} ${method} ${JSON.stringify(target)} -> ${JSON.stringify(r.upstreamPath)}: ${why}`);
  }

  t.diagnostic(`seed ${SEED}: ${accepted} accepted (${acceptedMutants} of them mutated), ${rejected} rejected, ${Math.round(performance.now() - startedAt)} ms`);
  assert.deepEqual(failures, [], `seed ${SEED}: reproduce with FUZZ_SEED=${SEED}`);
  assert.equal(accepted + rejected, ITERATIONS);
  assert.ok(accepted >= ITERATIONS * 0.1, `accepted ${accepted} of ${ITERATIONS}: the generator must reach the accepting paths`);
  assert.ok(rejected >= ITERATIONS * 0.3, `rejected ${rejected} of ${ITERATIONS}: the generator must produce hostile targets`);
  assert.ok(acceptedMutants >= 1000, `only ${acceptedMutants} mutated targets were accepted: mutations must also land on allowed shapes`);
});
