// One git request's state: the route, the verified identity, the workload's concurrency slot.
// finish() (in the handler's `finally`) gives the slot back and writes the record (settle),
// exactly once.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { WorkloadIdentity } from '../auth/identity.ts';
import type { KeyedCounts } from '../http/connection-caps.ts';
import { ERRORS, type ProxyError } from '../http/errors.ts';
import { RequestLifecycle, type Outcome, type Refusal, type SpanSink } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import type { HttpLogEvent } from '../http/log-events.ts';
import { NO_SECRETS, type Redactor } from '../http/redactor.ts';
import { writeProxyError } from '../http/respond.ts';
import { gitRecord, type GitCallState, type GitRequestRecord, type GitSpanFacts, type PushState } from './record.ts';
import type { GitRouteName } from './route.ts';
import type { GitAccess } from './scope.ts';

/**
 * Proxy-made errors are one text/plain line: git shows it, and it never holds a credential.
 * Requests from git-lfs get the same line in the JSON error body that git-lfs prints (501:
 * git-lfs prints its message as is, without blaming access rights or suggesting to switch off
 * its lock verification).
 */
function sendGitError(req: IncomingMessage, res: ServerResponse, refusal: Refusal): void {
  const error = refusal.error;
  const line = `git-auth-proxy: ${refusal.message ?? error.message}`;
  if (error.code === ERRORS.lfsNotSupported.code) {
    writeProxyError(req, res, error.status, 'application/vnd.git-lfs+json', JSON.stringify({ message: line }));
    return;
  }
  writeProxyError(req, res, error.status, 'text/plain; charset=utf-8', `${line}\n`, refusal.allow);
}

export class GitCall extends RequestLifecycle implements GitCallState, GitSpanFacts {
  readonly requestId = randomUUID();
  host: string | undefined;
  route: GitRouteName | undefined;
  identity: WorkloadIdentity | undefined;
  tokenError: string | undefined;
  /** The 401 that asks for credentials, answered to a request that sent none: not an error. */
  challenge = false;
  /** A push's ref updates, once its command list was read (or found unreadable). */
  push: PushState | undefined;
  repo: readonly string[] | undefined;
  access: GitAccess | undefined;
  redactor: Redactor = NO_SECRETS;
  #slot: { readonly counts: KeyedCounts; readonly key: string } | undefined;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    log: LogSink<HttpLogEvent>,
    private readonly record: (rec: GitRequestRecord) => void,
    private readonly spans?: SpanSink<GitRequestRecord, GitSpanFacts>,
  ) {
    super(req, res, log, 'git', spans?.tracing);
  }

  /** Takes one of the workload's concurrency slots (0: no cap); held until settle(). */
  holdSlot(counts: KeyedCounts, key: string, max: number): boolean {
    if (!counts.tryAcquire(key, max)) return false;
    this.#slot = { counts, key };
    return true;
  }

  /**
   * Ends a refused push the way receive-pack answers one a hook declined: 200 with its report
   * (push-report.ts), which git shows as each ref's `[remote rejected]` line. Recorded with the
   * error's code. The rest of the body is the caller's to read: git reads the answer only once
   * it has sent its whole pack.
   */
  endRefusedPush(report: Buffer, error: ProxyError): void {
    if (!this.res.headersSent && !this.res.destroyed) {
      this.res.writeHead(200, { 'content-type': 'application/x-git-receive-pack-result', 'content-length': report.length, 'cache-control': 'no-store' });
      this.res.end(report);
    }
    this.endAnswered(200, error.code);
  }

  protected writeError(refusal: Refusal): void {
    sendGitError(this.req, this.res, refusal);
  }

  protected settle(outcome: Outcome): void {
    try {
      this.#slot?.counts.release(this.#slot.key);
    } finally {
      const rec = gitRecord(this, outcome, performance.now());
      this.record(rec);
      if (this.span?.sampled) this.spans?.span(rec, this);
    }
  }
}
