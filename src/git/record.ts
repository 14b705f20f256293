// What one git request did, as one record: the access log line and what the metrics count are
// both made from it. Built once, when the request is over (GitCall.finish), by the pure gitRecord.
import type { WorkloadIdentity } from '../auth/identity.ts';
import type { Exchange } from '../http/forward.ts';
import type { Outcome, TracedRequest } from '../http/lifecycle.ts';
import type { SpanContext, TraceContext } from '../http/trace-context.ts';
import { elapsedMs, pathForLog } from '../http/log.ts';
import type { Redactor } from '../http/redactor.ts';
import type { PushHead } from './push-commands.ts';
import type { HostReport } from './push-report.ts';
import { refText } from './ref-rules.ts';
import type { GitRouteName } from './route.ts';
import type { GitAccess } from './scope.ts';

/** A push's ref updates in the record: what it asked, what the proxy decided, what the host reported. */
export type PushRecord = {
  /**
   * Each ref update the push asked for, in its order: `refused` says why the proxy refused it
   * (null: it did not), `result` is the host's report on it (`ok`, `ng <reason>`; null: none).
   */
  readonly refs: readonly { readonly ref: string; readonly old: string; readonly new: string; readonly refused: string | null; readonly result: string | null }[];
  /** The updates came from a push certificate. */
  readonly certified?: true;
  /** Why the command list could not be read: refused under ref rules; without any, the push went on unread. */
  readonly unread?: string;
  /** The host's unpack status, when it reported. */
  readonly unpack?: string;
};

/** What a push call knows of its ref updates. */
export interface PushState {
  readonly head?: PushHead;
  /** Per command: why it was refused, or undefined. */
  readonly refusals?: readonly (string | undefined)[];
  readonly unread?: string;
  /** The host's report, read from its answer (its value when the request is over). */
  hostReport?: () => HostReport;
}

/** Pure: the record of a push's ref updates. */
export function pushRecord(push: PushState): PushRecord {
  const report = push.hostReport?.();
  const reported = [...(report?.refs ?? [])];
  const refs = (push.head?.commands ?? []).map((c, i) => {
    const name = refText(c.ref);
    const at = reported.findIndex((r) => r.ref === name);
    const result = at < 0 ? null : reported.splice(at, 1)[0]!.status;
    return { ref: name, old: c.old, new: c.new, refused: push.refusals?.[i] ?? null, result };
  });
  return {
    refs,
    ...(push.head?.certified ? { certified: true as const } : {}),
    ...(push.unread !== undefined ? { unread: push.unread } : {}),
    ...(report?.unpack !== undefined ? { unpack: report.unpack } : {}),
  };
}

/** What one git request did: the access log line, and what the metrics count. */
export type GitRequestRecord = {
  readonly event: 'request';
  readonly listener: 'git';
  readonly request_id: string;
  /** The trace (the client's, or with tracing on one the proxy started; null without either) and the client's span (its traceparent's parent-id). */
  readonly trace_id: string | null;
  readonly parent_id: string | null;
  /** With tracing on: the proxy's span for this request (the span built from this record). */
  readonly span_id: string | null;
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
  /** A push (git-receive-pack): its ref updates; undefined for every other request. */
  readonly push?: PushRecord;
};

/** What a git request knows about itself when it is over: the call object's state, read only. */
export interface GitCallState {
  readonly requestId: string;
  readonly method: string;
  readonly target: string;
  readonly startedAt: number;
  readonly trace: TraceContext | undefined;
  readonly span: SpanContext | undefined;
  readonly host: string | undefined;
  readonly route: GitRouteName | undefined;
  readonly identity: WorkloadIdentity | undefined;
  readonly tokenError: string | undefined;
  readonly challenge: boolean;
  readonly exchange: Exchange;
  readonly push?: PushState;
}

/** What a git request's spans are built from besides its record (src/telemetry/spans.ts). */
export interface GitSpanFacts extends TracedRequest {
  /** The repository path's validated segments (undefined when refused before routing). */
  readonly repo: readonly string[] | undefined;
  /** What the request does: read (git-upload-pack, and its ref discovery) or write (git-receive-pack). */
  readonly access: GitAccess | undefined;
  /** The host credential sent upstream: no attribute may carry it in any form. */
  readonly redactor: Redactor;
}

/** Pure: the record of a git request that is over. */
export function gitRecord(call: GitCallState, outcome: Outcome, nowMs: number): GitRequestRecord {
  return {
    event: 'request',
    listener: 'git',
    request_id: call.requestId,
    trace_id: call.span?.traceId ?? call.trace?.traceId ?? null,
    parent_id: call.trace?.parentId ?? null,
    span_id: call.span?.spanId ?? null,
    method: call.method,
    host: call.host,
    route: call.route,
    path: pathForLog(call.target),
    status: outcome.status,
    duration_ms: elapsedMs(call.startedAt, nowMs),
    bytes_in: call.exchange.bytesIn,
    bytes_out: call.exchange.bytesOut,
    // The challenge every git command begins with is not an error.
    error: call.challenge ? undefined : (outcome.error ?? call.exchange.failure),
    instance_id: call.identity?.instanceId ?? null,
    workflow: call.identity?.workflow ?? null,
    run_id: call.identity?.runId ?? null,
    token_error: call.tokenError,
    challenge: call.challenge || undefined,
    ...(call.push ? { push: pushRecord(call.push) } : {}),
  };
}
