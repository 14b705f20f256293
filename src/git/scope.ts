// Which repositories a workload may reach, and how: scope patterns and their matching. Pure.
//
// A pattern is a repository path of whole segments (`acme/widgets`, `group/sub/repo`); `*` may
// only be the whole last segment and stands for one or more segments below the prefix
// (`acme/*`: every repository of acme, nested groups included; `*`: every repository on the
// host). Matching is on the path as the git host reads it:
// - percent-escapes are decoded first (`%61cme` is `acme`); a path that does not decode as
//   UTF-8 matches no pattern;
// - one trailing `.git` is ignored (`acme/widgets.git` is `acme/widgets`, as on the hosts);
// - ASCII letters compare case-insensitively, as GitHub, GitLab, Bitbucket and Gitea treat
//   owner and repository names. Only ASCII: Unicode case folding would let `K` (the Kelvin
//   sign) stand for `k`. On a host that tells `Acme` from `acme` apart, a pattern also opens
//   the names that differ from it only in ASCII case (SECURITY.md, known gaps).
import { parseHostKey } from './host-key.ts';
import { formatRefRules, parseRefRules, type RefLayer, type RefRules } from './ref-rules.ts';

export type GitAccess = 'read' | 'write';

export interface RepoPattern {
  /** Canonical segments of the fixed prefix (the whole path when there is no `*`). */
  readonly segments: readonly string[];
  /** The last segment was `*`: one or more further segments of any name. */
  readonly wildcard: boolean;
}

export interface ScopeEntry {
  /** A registry key: `host` or `host:port`, lower case. */
  readonly host: string;
  readonly pattern: RepoPattern;
  readonly access: GitAccess;
  /** The refs a push may change (after `:write`, ref-rules.ts); absent: every ref. */
  readonly refs?: RefRules;
}

/** A hosts file `repos` entry: a repository pattern, and the refs a push there may change (absent: every ref). */
export interface RepoRule extends RepoPattern {
  readonly refs?: RefRules;
}

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: string };

// What repository names are made of on the hosts we serve; anything else can only match `*`.
const PATTERN_SEGMENT = /^[A-Za-z0-9._~+-]+$/;
const MAX_PATTERN_SEGMENTS = 32;

/** ASCII letters only; see the file comment for why not toLowerCase(). */
function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
}

function canonicalSegment(segment: string, last: boolean): string {
  const lower = asciiLower(segment);
  return last && lower.length > 4 && lower.endsWith('.git') ? lower.slice(0, -4) : lower;
}

/** `acme/widgets`, `acme/*`, `group/sub/repo.git`, `*` (host-relative, as in the hosts file). */
export function parseRepoPattern(text: string): Parsed<RepoPattern> {
  const segments = text.split('/');
  if (segments.length > MAX_PATTERN_SEGMENTS) return { ok: false, reason: `more than ${MAX_PATTERN_SEGMENTS} segments` };
  const wildcard = segments[segments.length - 1] === '*';
  const fixed = wildcard ? segments.slice(0, -1) : segments;
  if (!wildcard && fixed.length === 0) return { ok: false, reason: 'empty repository path' };
  for (const seg of fixed) {
    if (seg === '*') return { ok: false, reason: '"*" may only be the whole last segment' };
    if (seg === '' || seg === '.' || seg === '..' || !PATTERN_SEGMENT.test(seg)) {
      return { ok: false, reason: `segment "${seg}" is not a repository name (letters, digits, . _ ~ + -; no empty, . or .. segments)` };
    }
  }
  return { ok: true, value: { segments: fixed.map((seg, i) => canonicalSegment(seg, !wildcard && i === fixed.length - 1)), wildcard } };
}

/**
 * `github.com/acme/widgets:write`, `git.corp:8443/group/*:read`, and with ref rules
 * `github.com/acme/widgets:write:refs/heads/agent/run-42/*:delete`. A path and a ref name cannot
 * hold `:`, so the parts after the host are split on it.
 */
export function parseScopeEntry(text: string): Parsed<ScopeEntry> {
  const slash = text.indexOf('/');
  const parts = slash < 0 ? [] : text.slice(slash + 1).split(':');
  const access = parts[1];
  if (access !== 'read' && access !== 'write') {
    return { ok: false, reason: slash < 0 && /:(read|write)$/.test(text) ? 'must be host/path:read|write' : 'must end in :read or :write, or :write and ref rules (:refs/heads/agent/*)' };
  }
  const host = parseHostKey(text.slice(0, slash));
  if (!host) return { ok: false, reason: `"${text.slice(0, slash)}" is not a host (host or host:port)` };
  const pattern = parseRepoPattern(parts[0]!);
  if (!pattern.ok) return pattern;
  if (access === 'read' && parts.length > 2) return { ok: false, reason: 'ref rules narrow a push: they follow :write' };
  const refs = parseRefRules(parts.slice(2));
  if (!refs.ok) return refs;
  return { ok: true, value: { host: host.key, pattern: pattern.value, access, ...(refs.value ? { refs: refs.value } : {}) } };
}

/** A hosts file `repos` entry: `acme/widgets`, `acme/*`, `acme/widgets:refs/heads/agent/*:delete`. */
export function parseRepoRule(text: string): Parsed<RepoRule> {
  const parts = text.split(':');
  const pattern = parseRepoPattern(parts[0]!);
  if (!pattern.ok) return pattern;
  const refs = parseRefRules(parts.slice(1));
  if (!refs.ok) return refs;
  return { ok: true, value: { ...pattern.value, ...(refs.value ? { refs: refs.value } : {}) } };
}

function formatRepoPattern(pattern: RepoPattern): string {
  return [...pattern.segments, ...(pattern.wildcard ? ['*'] : [])].join('/');
}

export function formatRepoRule(rule: RepoRule): string {
  return formatRepoPattern(rule) + formatRefRules(rule.refs);
}

/** Pure: a scope entry's canonical form, or why the text is not one (the workload policy's grammar: src/auth/workload-policy.ts). */
export function canonicalScope(text: string): { readonly ok: true; readonly value: string } | { readonly ok: false; readonly reason: string } {
  const entry = parseScopeEntry(text);
  return entry.ok ? { ok: true, value: formatScopeEntry(entry.value) } : { ok: false, reason: entry.reason };
}

export function formatScopeEntry(entry: ScopeEntry): string {
  return `${entry.host}/${formatRepoPattern(entry.pattern)}:${entry.access}${formatRefRules(entry.refs)}`;
}

/**
 * The `--git-repo` values of `mint-token` as the token's git claim: each checked, written in
 * canonical form. A mistake names the value, so the orchestrator's command is fixed at once.
 */
export function gitScopeClaim(values: readonly string[]): string[] {
  return values.map((value) => {
    const entry = parseScopeEntry(value);
    if (!entry.ok) throw new Error(`mint-token: --git-repo "${value}": ${entry.reason}`);
    return formatScopeEntry(entry.value);
  });
}

/**
 * Pure: the check of a git claim's hosts against the hosts the proxy registers (their keys):
 * a scope for a host the registry lacks, or written another way (`host:443` for `host`), can
 * never match a request, so it is an error naming the host and the registered ones. With no
 * registered host in view (the orchestrator's environment lacks the proxy's), 'unchecked'.
 */
export function unregisteredScopeHost(claim: readonly string[], registered: readonly string[]): 'ok' | 'unchecked' {
  if (registered.length === 0) return 'unchecked';
  for (const entry of claim) {
    const host = entry.slice(0, entry.indexOf('/'));
    if (registered.includes(host)) continue;
    const sameHost = registered.find((r) => r === host.replace(/:443$/, '') || r.replace(/:443$/, '') === host);
    const hint = sameHost === undefined ? `registered: ${registered.join(', ')}` : `write it as the registry does: ${sameHost}`;
    throw new Error(`mint-token: --git-repo "${entry}": "${host}" is not a registered git host (${hint})`);
  }
  return 'ok';
}

/**
 * The repository path of a request in canonical form, from the route's raw (already validated)
 * segments; undefined when a segment does not decode, so that it matches nothing.
 */
export function canonicalRepoPath(rawSegments: readonly string[]): string[] | undefined {
  const out: string[] = [];
  for (const [i, raw] of rawSegments.entries()) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(raw);
    } catch {
      return undefined;
    }
    out.push(canonicalSegment(decoded, i === rawSegments.length - 1));
  }
  return out;
}

export function patternMatches(pattern: RepoPattern, repo: readonly string[]): boolean {
  const n = pattern.segments.length;
  if (pattern.wildcard ? repo.length <= n : repo.length !== n) return false;
  return pattern.segments.every((seg, i) => seg === repo[i]);
}

/**
 * The ref rules of a push the scope allows on this host's repository: its matching write entries
 * as a layer of rules, or `every ref` (with the entry that allows it) when one of them has none.
 */
export function scopeRefLayer(scope: readonly ScopeEntry[], hostKey: string, repo: readonly string[]): RefLayer | { readonly everyRef: string } {
  const writes = scope.filter((e) => e.access === 'write' && e.host === hostKey && patternMatches(e.pattern, repo));
  const open = writes.find((e) => e.refs === undefined);
  if (open) return { everyRef: formatScopeEntry(open) };
  return { source: "this workload's scope", entries: writes.map(formatScopeEntry), rules: writes.map((e) => e.refs!) };
}

/** The most the scope grants on this host's repository: write, read, or nothing. */
export function grantedAccess(scope: readonly ScopeEntry[], hostKey: string, repo: readonly string[]): GitAccess | undefined {
  let granted: GitAccess | undefined;
  for (const entry of scope) {
    if (entry.host !== hostKey || !patternMatches(entry.pattern, repo)) continue;
    if (entry.access === 'write') return 'write';
    granted = 'read';
  }
  return granted;
}
