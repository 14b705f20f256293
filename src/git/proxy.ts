// The git credential-injecting reverse proxy: one request handler over the shared forwarding
// code. Every decision is made by a pure function (route, credential, headers); this file only
// puts them in order and writes the access log line.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Agent } from 'node:https';
import { randomUUID } from 'node:crypto';
import { injectCredential } from './credentials.ts';
import { errorForUpstreamFailure, type ProxyError, type UpstreamError } from '../http/errors.ts';
import { abortUpstreamOnClientClose, newExchange, openUpstream, relayResponse, type UpstreamTimeouts } from '../http/forward.ts';
import { gitUpstreamHeaders, scrubResponseHeaders } from '../http/headers.ts';
import type { HostConfig } from './hosts.ts';
import { parseGitRoute, type GitRouteName } from './route.ts';
import { elapsedMs, pathForLog } from '../http/log.ts';
import type { SecretSource } from '../config/secret.ts';
import { writeProxyError } from '../http/server.ts';

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
};

export interface GitProxyDeps {
  readonly hosts: ReadonlyMap<string, GitUpstream>;
  readonly timeouts: UpstreamTimeouts;
  /** Called once per request, when it is over. */
  readonly record: (rec: GitRequestRecord) => void;
}

/** Proxy-made errors are one text/plain line: git shows it, and it never holds a credential. */
export function sendGitError(req: IncomingMessage, res: ServerResponse, error: ProxyError, allow?: string): void {
  writeProxyError(req, res, error.status, 'text/plain; charset=utf-8', `git-auth-proxy: ${error.message}\n`, allow);
}

export function createGitHandler(deps: GitProxyDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const startedAt = performance.now();
    const method = req.method ?? '';
    const target = req.url ?? '';
    const exchange = newExchange();
    const requestId = randomUUID();
    let host: string | undefined;
    let route: GitRouteName | undefined;

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

    const credential = injectCredential(upstream.config.authType, upstream.token.read(), upstream.username?.read());
    if (!credential.ok) return reject(credential.error);

    const call = openUpstream(
      {
        agent: upstream.agent,
        hostname: upstream.config.hostname,
        port: upstream.config.port,
        method,
        path: parsed.upstreamPath,
        headers: gitUpstreamHeaders(req.headers, upstream.config.key, credential.authorization),
      },
      deps.timeouts,
      method === 'POST' ? req : null,
      exchange,
    );
    abortUpstreamOnClientClose(res, () => ({ request: call.request, exchange }));

    call.response.then(
      async (upstreamRes) => {
        const status = upstreamRes.statusCode ?? 502;
        await relayResponse(res, upstreamRes, scrubResponseHeaders(upstreamRes.rawHeaders, credential.secrets), exchange);
        // 401 from the upstream means our credential was refused: an operator problem.
        logDone(status, exchange.failure ?? (status === 401 ? 'upstream_rejected_credential' : undefined));
      },
      (err: UpstreamError) => {
        const error = errorForUpstreamFailure(err.kind);
        if (res.headersSent || res.destroyed) return logDone(0, exchange.failure);
        sendGitError(req, res, error);
        logDone(error.status, exchange.failure);
      },
    );
  };
}
