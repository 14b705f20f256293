// Who may do what through the git listener, decided after the route check: the workload token
// (when GIT_PROXY_SIGNING_KEY or git keys are set) and the hosts file's static limits. The
// token is verified first (proveWorkload: the verifier may have to wait for keys); the decision
// on its result is pure.
//
// How git presents the token: its first request carries no credentials and gets a 401 with
// WWW-Authenticate: Basic; git then asks its credential helper (the one `git-config
// --workload-token-env` writes) and retries with Basic auth whose password is the token. A
// Bearer Authorization (e.g. from http.extraHeader) is accepted too. The workload token only
// ever opens the proxy: it is never forwarded (the upstream Authorization is the host's).
import type { WorkloadIdentity } from '../auth/identity.ts';
import type { PresentedPeer, TokenVerifier, Verification } from '../auth/verifier.ts';
import { ERRORS, withMessage, type ProxyError } from '../http/errors.ts';
import type { PushPolicy, RefLayer, RefPattern } from './ref-rules.ts';
import { canonicalRepoPath, formatRepoRule, grantedAccess, parseScopeEntry, patternMatches, scopeRefLayer, type GitAccess, type RepoRule, type ScopeEntry } from './scope.ts';

/** Sent with every 401 of the git listener; git answers it from its credential helper. */
export const WORKLOAD_CHALLENGE = 'Basic realm="git-proxy"';

export type PresentedToken =
  | { readonly kind: 'none' }
  | { readonly kind: 'token'; readonly token: string }
  | { readonly kind: 'unreadable' };

const AUTHORIZATION = /^([A-Za-z]+) +(\S+)$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The token in an Authorization header: the password of Basic, or the Bearer token. */
export function presentedToken(authorization: string | undefined): PresentedToken {
  if (authorization === undefined || authorization === '') return { kind: 'none' };
  const m = AUTHORIZATION.exec(authorization);
  if (!m) return { kind: 'unreadable' };
  const scheme = m[1]!.toLowerCase();
  if (scheme === 'bearer') return { kind: 'token', token: m[2]! };
  if (scheme !== 'basic' || !BASE64.test(m[2]!)) return { kind: 'unreadable' };
  const bytes = Buffer.from(m[2]!, 'base64');
  // Node skips what it cannot decode: only the canonical spelling of its bytes is read.
  if (bytes.toString('base64') !== m[2]) return { kind: 'unreadable' };
  const userPass = bytes.toString('utf8');
  const colon = userPass.indexOf(':');
  if (colon < 0) return { kind: 'unreadable' };
  // RFC 7617: the user-id ends at the first colon; the username is not ours to check.
  const password = userPass.slice(colon + 1);
  return password === '' ? { kind: 'none' } : { kind: 'token', token: password };
}


/**
 * The step before the decision: what the request's Authorization header (and its peer) prove,
 * by the verifier. A value when the verifier answered at once, a promise when it had to wait.
 */
export function proveWorkload(verifier: TokenVerifier, authorization: string | undefined, peer: PresentedPeer | undefined, nowSec: number): Verification | Promise<Verification> {
  const presented = presentedToken(authorization);
  if (presented.kind === 'unreadable') return { ok: false, reason: 'unreadable authorization header' };
  return verifier.verify('git', { token: presented.kind === 'token' ? presented.token : undefined, peer }, nowSec);
}

export interface AccessRequest {
  readonly hostKey: string;
  /** The route's raw repository segments. */
  readonly repo: readonly string[];
  readonly access: GitAccess;
}

export interface AccessPolicy {
  /** The host's `repos` from the hosts file; undefined: every repository. */
  readonly repos: readonly RepoRule[] | undefined;
  /** The host's `readOnly` from the hosts file. */
  readonly readOnly: boolean;
  /** The host's `protectedRefs` from the hosts file (none when absent). */
  readonly protectedRefs?: readonly RefPattern[];
  /** What the workload proved (proveWorkload); undefined: network-policy mode, no token asked for. */
  readonly workload: Verification | undefined;
}

export type AccessDecision =
  | {
      readonly ok: true;
      readonly identity: WorkloadIdentity | undefined;
      /** A push's ref rules (ref-rules.ts), when any apply; absent: a push may change every ref, as before. */
      readonly push?: PushPolicy;
    }
  | {
      readonly ok: false;
      readonly error: ProxyError;
      /** Answer with WWW-Authenticate (every 401). */
      readonly challenge: boolean;
      /** Who was refused, once the token was verified. */
      readonly identity: WorkloadIdentity | undefined;
      /** Why a presented token was refused: a fixed phrase for the log. */
      readonly tokenError: string | undefined;
    };

function refused(error: ProxyError, identity?: WorkloadIdentity, tokenError?: string): AccessDecision {
  return { ok: false, error, challenge: error.status === 401, identity, tokenError };
}

function tokenRefused(reason: string): AccessDecision {
  return refused(withMessage(ERRORS.workloadTokenInvalid, `the workload token was refused: ${reason}`), undefined, reason);
}

/**
 * Authentication first (401), then the hosts file's limits, then the token's scope (403). Every
 * question without a clear yes is a no: an unreadable header, a token whose scope does not
 * parse, a path that does not decode.
 */
export function decideGitAccess(req: AccessRequest, policy: AccessPolicy): AccessDecision {
  let identity: WorkloadIdentity | undefined;
  let scope: ScopeEntry[] | undefined;
  const verified = policy.workload;
  if (verified) {
    if (!verified.ok) {
      if (verified.forbidden) return refused(withMessage(ERRORS.clientCertificateRefused, `the client certificate was refused: ${verified.reason}`), undefined, verified.reason);
      return verified.absent ? refused(ERRORS.workloadTokenMissing) : tokenRefused(verified.reason);
    }
    // A source that proves no git scope proves no git access (keyRingSource refuses such a token already).
    if (verified.claims.git === undefined) return tokenRefused('no git scope');
    scope = [];
    for (const text of verified.claims.git) {
      const entry = parseScopeEntry(text);
      if (!entry.ok) return tokenRefused('invalid claim git');
      scope.push(entry.value);
    }
    identity = { instanceId: verified.claims.sub, workflow: verified.claims.workflow, runId: verified.claims.run_id, ...(verified.claims.jti === undefined ? {} : { tokenId: verified.claims.jti }) };
  }
  const protectedRefs = policy.protectedRefs ?? [];
  if (policy.repos === undefined && !policy.readOnly && scope === undefined) return withPushPolicy({ ok: true, identity }, req, protectedRefs, NO_REF_RULES);

  // Matched as the host reads the path; one that does not decode matches nothing.
  const repo = canonicalRepoPath(req.repo);
  const where = `${req.hostKey}/${req.repo.join('/')}`;
  if (policy.repos !== undefined && !(repo && policy.repos.some((p) => patternMatches(p, repo)))) {
    return refused(withMessage(ERRORS.repoNotInHostRepos, `the proxy serves no repository ${where}: the hosts file limits ${req.hostKey} to other repositories`), identity);
  }
  if (policy.readOnly && req.access === 'write') {
    return refused(withMessage(ERRORS.hostReadOnly, `the proxy allows no pushes to ${req.hostKey}: it is read-only in the hosts file`), identity);
  }
  if (scope !== undefined) {
    const granted = repo && grantedAccess(scope, req.hostKey, repo);
    const verb = req.access === 'write' ? 'push to' : 'read';
    if (!granted) return refused(withMessage(ERRORS.repoNotInScope, `this workload may not ${verb} ${where}`), identity);
    if (granted === 'read' && req.access === 'write') {
      return refused(withMessage(ERRORS.pushNotInScope, `this workload may not push to ${where} (its token allows reading only)`), identity);
    }
  }
  return withPushPolicy({ ok: true, identity }, req, protectedRefs, repo === undefined || req.access !== 'write' ? NO_REF_RULES : refRules(req.hostKey, policy.repos, scope, repo));
}

/** The ref rules on a push: the layers that have rules, and the scope entry that allows every ref, if one does. */
interface RefRules {
  readonly layers: readonly RefLayer[];
  readonly everyRef?: string;
}

const NO_REF_RULES: RefRules = { layers: [] };

/**
 * The ref rules on a push to this repository: the hosts file's matching `repos` entries (a layer
 * only when every one of them has rules: an entry without is every ref), and the workload's
 * matching write entries (scopeRefLayer: a layer, or the entry that allows every ref).
 */
function refRules(hostKey: string, repos: readonly RepoRule[] | undefined, scope: readonly ScopeEntry[] | undefined, repo: readonly string[]): RefRules {
  const layers: RefLayer[] = [];
  const hostRepos = repos?.filter((p) => patternMatches(p, repo)) ?? [];
  const hostRules = hostRepos.flatMap((p) => (p.refs ? [p.refs] : []));
  if (hostRepos.length > 0 && hostRules.length === hostRepos.length) layers.push({ source: `the hosts file's repos for ${hostKey}`, entries: hostRepos.map(formatRepoRule), rules: hostRules });
  if (scope === undefined) return { layers };
  const fromScope = scopeRefLayer(scope, hostKey, repo);
  if ('everyRef' in fromScope) return { layers, everyRef: fromScope.everyRef };
  layers.push(fromScope);
  return { layers };
}

/** A push's policy on an allowed write: the host's protected refs and the ref rules, when there is any of them. */
function withPushPolicy(decision: AccessDecision & { ok: true }, req: AccessRequest, protectedRefs: readonly RefPattern[], rules: RefRules): AccessDecision {
  if (req.access !== 'write') return decision;
  const { layers, everyRef } = rules;
  if (protectedRefs.length === 0 && layers.length === 0 && everyRef === undefined) return decision;
  return { ...decision, push: { host: req.hostKey, protectedRefs, layers, ...(everyRef ? { everyRef } : {}) } };
}
