// Decides whether a request target may be forwarded to a git host, and to which upstream path.
// Pure. The upstream path is rebuilt from validated pieces; the raw target is never forwarded.
import { ERRORS, type ProxyError } from '../http/errors.ts';
import type { GitAccess } from './scope.ts';

export type GitRouteName = 'info-refs' | 'upload-pack' | 'receive-pack';
type GitService = 'git-upload-pack' | 'git-receive-pack';

export type GitRoute =
  | {
      readonly ok: true;
      readonly hostKey: string;
      readonly route: GitRouteName;
      /** e.g. `/org/repo.git/info/refs?service=git-upload-pack` */
      readonly upstreamPath: string;
      /** The repository path's raw (validated) segments, e.g. `['org', 'repo.git']`. */
      readonly repo: readonly string[];
      /** What the request does: ref discovery and fetch read; push (and its ref discovery) writes. */
      readonly access: GitAccess;
    }
  | { readonly ok: false; readonly error: ProxyError; readonly allow?: string };

// A host segment may only hold what a registry key can hold. Anything else (percent signs,
// userinfo, brackets, backslashes) can never match a key, so it is refused before lookup.
const HOST_SEGMENT = /^[a-z0-9.:-]+$/i;

// RFC 3986 pchar minus ';' (path parameters are a classic normalisation trick between
// proxies and servers). Percent-escapes are checked separately below.
const PATH_SEGMENT = /^[A-Za-z0-9\-._~!$&'()*+,=:@%]+$/;

// Decoded bytes an escape may not stand for: controls, and every character that changes how
// a path is split or normalised somewhere downstream ('.', '/', '\', '%', ';', '?', '#').
function forbiddenEscape(byte: number): boolean {
  return byte < 0x20 || byte === 0x7f || byte === 0x2e || byte === 0x2f || byte === 0x5c || byte === 0x25 || byte === 0x3b || byte === 0x3f || byte === 0x23;
}

function segmentAllowed(seg: string): boolean {
  if (!PATH_SEGMENT.test(seg) || seg === '.' || seg === '..') return false;
  for (let i = seg.indexOf('%'); i >= 0; i = seg.indexOf('%', i + 1)) {
    const hex = seg.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex) || forbiddenEscape(parseInt(hex, 16))) return false;
  }
  return true;
}

const SERVICES: ReadonlySet<string> = new Set<GitService>(['git-upload-pack', 'git-receive-pack']);

/**
 * `isRegistered` receives the lower-cased host segment. Checks run in the order of the
 * design's error table: target form (400), host (403), path (403), route (403/405).
 */
export function parseGitRoute(method: string, target: string, isRegistered: (hostKey: string) => boolean): GitRoute {
  if (!target.startsWith('/')) return { ok: false, error: ERRORS.absoluteForm };
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? undefined : target.slice(q + 1);

  const hostEnd = path.indexOf('/', 1);
  const hostSegment = hostEnd < 0 ? path.slice(1) : path.slice(1, hostEnd);
  if (hostSegment === '') return { ok: false, error: ERRORS.barePath };
  const hostKey = hostSegment.toLowerCase();
  if (!HOST_SEGMENT.test(hostSegment) || !isRegistered(hostKey)) return { ok: false, error: ERRORS.hostNotRegistered };

  if (hostEnd < 0) return { ok: false, error: ERRORS.notGitRoute };
  const segments = path.slice(hostEnd + 1).split('/');
  if (!segments.every(segmentAllowed)) return { ok: false, error: ERRORS.pathRejected };

  const n = segments.length;
  // Git LFS (`<repo>/info/lfs/...`) is never forwarded. It gets an answer of its own, because
  // git-lfs reads only its JSON error bodies and would otherwise blame the workload's access.
  for (let i = 2; i < n; i++) if (segments[i - 1] === 'info' && segments[i] === 'lfs') return { ok: false, error: ERRORS.lfsNotSupported };
  const last = segments[n - 1];
  if (n >= 3 && segments[n - 2] === 'info' && last === 'refs') {
    if (method !== 'GET') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'GET' };
    const service = query?.startsWith('service=') ? query.slice('service='.length) : undefined;
    if (service === undefined || !SERVICES.has(service)) return { ok: false, error: ERRORS.notGitRoute };
    return {
      ok: true,
      hostKey,
      route: 'info-refs',
      upstreamPath: `/${segments.join('/')}?service=${service}`,
      repo: segments.slice(0, n - 2),
      access: service === 'git-receive-pack' ? 'write' : 'read',
    };
  }
  if (n >= 2 && SERVICES.has(last!)) {
    if (method !== 'POST') return { ok: false, error: ERRORS.methodNotAllowed, allow: 'POST' };
    if (query !== undefined) return { ok: false, error: ERRORS.notGitRoute };
    return {
      ok: true,
      hostKey,
      route: last === 'git-upload-pack' ? 'upload-pack' : 'receive-pack',
      upstreamPath: `/${segments.join('/')}`,
      repo: segments.slice(0, n - 1),
      access: last === 'git-receive-pack' ? 'write' : 'read',
    };
  }
  return { ok: false, error: ERRORS.notGitRoute };
}
