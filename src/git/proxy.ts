// The git credential-injecting reverse proxy: one request handler over the shared forwarding
// code. Every decision is made by a pure function (route, access, credential, headers); this
// file only puts them in order and writes the access log line.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Agent } from 'node:http';
import { randomUUID } from 'node:crypto';
import { injectCredential } from './credentials.ts';
import { ERRORS, errorForUpstreamFailure, withMessage, type ProxyError, type UpstreamError } from '../http/errors.ts';
import { abortUpstreamOnClientClose, newExchange, openUpstream, relayRedactedBody, relayResponse, staleSocketReset, type UpstreamTimeouts } from '../http/forward.ts';
import { assertHeaderValue, gitUpstreamHeaders, headerCount, scrubResponseHeaders } from '../http/headers.ts';
import { decideGitAccess, WORKLOAD_CHALLENGE, type GitIdentity } from './access.ts';
import type { HostConfig } from './hosts.ts';
import { parseGitRoute, type GitRouteName } from './route.ts';
import { elapsedMs, pathForLog } from '../http/log.ts';
import type { SecretSource } from '../config/secret.ts';
import { writeProxyError } from '../http/respond.ts';
import { KeyedCounts } from '../http/connection-caps.ts';
import type { RevocationCheck } from '../auth/revocations.ts';
import { STORE_UNREACHABLE } from '../auth/redis-revocations.ts';

export interface GitUpstream {
  readonly config: HostConfig;
  readonly agent: Agent;
  readonly token: SecretSource;
  readonly username: SecretSource | undefined;
}

/** What one git request did: the access log line, and what the metrics count. */
export type GitRequestRecord = {
  readonly event: 'request';
  readonly listener: 'git';
  readonly request_id: string;
  readonly method: string;
  /** A registered host key, or undefined when the request was refused before routing. */
  readonly host: string | undefined;
  readonly route: GitRouteName | undefined;
  readonly path: string;
  readonly status: number;
  readonly duration_ms: number;
  readonly bytes_in: number;
  readonly bytes_out: number;
  readonly error: string | undefined;
  /** From the verified workload token; null without one (network-policy mode, or refused before). */
  readonly instance_id: string | null;
  readonly workflow: string | null;
  readonly run_id: string | null;
  /** Why a presented workload token was refused (a fixed phrase, never token content). */
  readonly token_error: string | undefined;
  /**
   * The 401 that asks for credentials, answered to a request that sent none: every git command
   * begins so, and its credential helper then sends the token. Not an error: counted apart.
   */
  readonly challenge: true | undefined;
};

export interface GitProxyDeps {
  readonly hosts: ReadonlyMap<string, GitUpstream>;
  /** GIT_PROXY_SIGNING_KEY and the longest token lifetime; undefined: network-policy mode. */
  readonly workloadAuth: { readonly key: Buffer; readonly maxLifetimeSec: number } | undefined;
  readonly timeouts: UpstreamTimeouts;
  /** The deny list (--revocations): why a verified token is refused anyway, or undefined. */
  readonly revoked?: RevocationCheck;
  /** Requests one workload instance (by its token) may have in progress at once; 0: no cap. */
  readonly maxConcurrentPerWorkload: number;
  /** Called once per request, when it is over. */
  readonly record: (rec: GitRequestRecord) => void;
}

/**
 * Proxy-made errors are one text/plain line: git shows it, and it never holds a credential.
 * Requests from git-lfs get the same line in the JSON error body that git-lfs prints (501:
 * git-lfs prints its message as is, without blaming access rights or suggesting to switch off
 * its lock verification).
 */
export function sendGitError(req: IncomingMessage, res: ServerResponse, error: ProxyError, allow?: string): void {
  const line = `git-auth-proxy: ${error.message}`;
  if (error.code === ERRORS.lfsNotSupported.code) {
    writeProxyError(req, res, error.status, 'application/vnd.git-lfs+json', JSON.stringify({ message: line }));
    return;
  }
  writeProxyError(req, res, error.status, 'text/plain; charset=utf-8', `${line}\n`, allow);
}

/**
 * An upstream 401 becomes a 502: git prompts for credentials on any 401, but prints the
 * text/plain body of a 502 as `remote: ...`. (A 403 is relayed: git does not prompt on it and
 * prints the host's own explanation.)
 */
function upstreamCredentialRefused(hostKey: string): ProxyError {
  return withMessage(ERRORS.upstreamRejectedCredential, `the git host refused the proxy's credential for ${hostKey}; the operator must check its token`);
}

/** Seconds a workload over its concurrency cap is told to wait (git's own requests are short). */
const WORKLOAD_BUSY_RETRY_AFTER_S = 1;

export function createGitHandler(deps: GitProxyDeps): (req: IncomingMessage, res: ServerResponse) => void {
  // Requests in progress per workload instance: the pushes of one workload cannot take every
  // connection the listener has (network-policy mode has no identity: the per-client
  // connection cap bounds it, one request at a time per connection).
  const inProgress = new KeyedCounts();
  return (req, res) => {
    const startedAt = performance.now();
    const method = req.method ?? '';
    const target = req.url ?? '';
    const exchange = newExchange();
    const requestId = randomUUID();
    let host: string | undefined;
    let route: GitRouteName | undefined;
    let identity: GitIdentity | undefined;
    let tokenError: string | undefined;
    let challenge = false;

    const logDone = (status: number, error?: string) =>
      deps.record({
        event: 'request',
        listener: 'git',
        request_id: requestId,
        method,
        host,
        route,
        path: pathForLog(target),
        status,
        duration_ms: elapsedMs(startedAt, performance.now()),
        bytes_in: exchange.bytesIn,
        bytes_out: exchange.bytesOut,
        error: error ?? exchange.failure,
        instance_id: identity?.instanceId ?? null,
        workflow: identity?.workflow ?? null,
        run_id: identity?.runId ?? null,
        token_error: tokenError,
        challenge: challenge || undefined,
      });
    const reject = (error: ProxyError, allow?: string) => {
      sendGitError(req, res, error, allow);
      logDone(error.status, error.code);
    };

    const parsed = parseGitRoute(method, target, (key) => deps.hosts.has(key));
    if (!parsed.ok) return reject(parsed.error, parsed.allow);
    host = parsed.hostKey;
    route = parsed.route;
    const upstream = deps.hosts.get(parsed.hostKey)!;

    if (headerCount(req.rawHeaders, 'authorization') > 1) return reject(ERRORS.twoAuthorizations);
    const access = decideGitAccess(
      { hostKey: parsed.hostKey, repo: parsed.repo, access: parsed.access, authorization: req.headers.authorization },
      {
        repos: upstream.config.repos,
        readOnly: upstream.config.readOnly,
        workloadAuth: deps.workloadAuth && { ...deps.workloadAuth, nowSec: Math.floor(Date.now() / 1000) },
      },
    );
    identity = access.identity;
    if (!access.ok) {
      tokenError = access.tokenError;
      if (access.challenge) res.setHeader('www-authenticate', assertHeaderValue('www-authenticate', WORKLOAD_CHALLENGE));
      if (access.error.code === ERRORS.workloadTokenMissing.code) {
        challenge = true;
        sendGitError(req, res, access.error);
        return logDone(access.error.status, undefined);
      }
      return reject(access.error);
    }

    const upstreamPath = parsed.upstreamPath;
    if (identity === undefined) return forward();
    const who = identity;
    const verdict = deps.revoked?.({ sub: who.instanceId, run_id: who.runId, jti: who.tokenId }, Math.floor(Date.now() / 1000));
    // The deny list in the shared store answers later: the request (its body unread, waiting in
    // the socket) goes on when it has.
    if (verdict instanceof Promise) void verdict.then((why) => admit(who, why), () => admit(who, 'the revocation list cannot be read'));
    else admit(who, verdict);

    /** The token is not revoked: a slot of the workload's concurrency, then the upstream. */
    function admit(who: GitIdentity, why: string | undefined): void {
      if (res.destroyed) return logDone(0, 'client_aborted');
      if (why === STORE_UNREACHABLE) {
        res.setHeader('retry-after', assertHeaderValue('retry-after', '1'));
        return reject(ERRORS.revocationStoreUnavailable);
      }
      if (why !== undefined) {
        tokenError = why;
        res.setHeader('www-authenticate', assertHeaderValue('www-authenticate', WORKLOAD_CHALLENGE));
        return reject(withMessage(ERRORS.workloadTokenInvalid, `the workload token was refused: ${why}`));
      }
      const instance = who.instanceId;
      if (!inProgress.tryAcquire(instance, deps.maxConcurrentPerWorkload)) {
        res.setHeader('retry-after', assertHeaderValue('retry-after', String(WORKLOAD_BUSY_RETRY_AFTER_S)));
        return reject(ERRORS.workloadBusy);
      }
      res.once('close', () => inProgress.release(instance));
      forward();
    }

    /** The credential added, the request sent upstream and its answer relayed. */
    function forward(): void {
      const credential = injectCredential(upstream.config.authType, upstream.token.read(), upstream.username?.read());
      if (!credential.ok) return reject(credential.error);

      const upstreamTarget = {
        agent: upstream.agent,
        hostname: upstream.config.hostname,
        port: upstream.config.port,
        method,
        path: upstreamPath,
        headers: gitUpstreamHeaders(req.headers, upstream.config.key, credential.authorization),
      };
      let call = openUpstream(upstreamTarget, deps.timeouts, method === 'POST' ? req : null, exchange);
      let resent = false;
      abortUpstreamOnClientClose(res, () => ({ request: call.request, exchange }));

      const onResponse = async (upstreamRes: IncomingMessage): Promise<void> => {
        const status = upstreamRes.statusCode ?? 502;
        if (status === 401) {
          // Our credential was refused: an operator problem the workload cannot fix. Relayed,
          // the 401 would make git ask for a username; our own line says whose problem it is.
          upstreamRes.resume();
          return reject(upstreamCredentialRefused(upstream.config.key));
        }
        const headers = scrubResponseHeaders(upstreamRes.rawHeaders, credential.secrets);
        if (status >= 200 && status < 300) {
          await relayResponse(res, upstreamRes, headers, exchange);
          return logDone(status, exchange.failure);
        }
        // Any other answer is an error page or a redirect: read whole and redacted, since a git
        // host may echo the credential it was sent ("authorization was Bearer ...").
        const relayed = await relayRedactedBody(res, upstreamRes, headers, credential.secrets, exchange);
        if (!relayed.ok) return reject(ERRORS.upstreamProtocol);
        logDone(status, exchange.failure);
      };
      const onFailure = (err: UpstreamError): void => {
        // A ref discovery has no body and changes nothing: reset on a pooled connection (the host
        // closed it as we reused it), it is sent once more. A POST never is: a push may already be
        // applied, and the body it streamed is gone.
        if (method === 'GET' && staleSocketReset(err.kind, call.request) && !resent && !res.destroyed) {
          resent = true;
          exchange.failure = undefined;
          call = openUpstream(upstreamTarget, deps.timeouts, null, exchange);
          call.response.then(onResponse, onFailure);
          return;
        }
        const error = errorForUpstreamFailure(err.kind);
        if (res.headersSent || res.destroyed) return logDone(0, exchange.failure);
        sendGitError(req, res, error);
        logDone(error.status, exchange.failure);
      };
      call.response.then(onResponse, onFailure);
    }
  };
}
