// The git credential-injecting reverse proxy: one request handler over the shared forwarding
// code. A request reads as its steps: route, access (the workload token and the hosts file),
// the deny list, the workload's concurrency slot, a push's command list read and decided, the
// credential, the upstream (one re-send of a ref discovery on a stale pooled connection), the
// answer relayed. Every decision is a pure function (route, access, ref rules, credential,
// headers); the per-request state is one GitCall, finished (slot given back, record written)
// exactly once in the `finally`.
import type { Agent, IncomingMessage, ServerResponse } from 'node:http';
import type { RevocationCheck, RevocationVerdict, WorkloadIdentity } from '../auth/identity.ts';
import { peerOf, type TokenVerifier } from '../auth/verifier.ts';
import type { SecretSource } from '../config/secret.ts';
import { KeyedCounts } from '../http/connection-caps.ts';
import { ERRORS, errorForUpstream, withMessage, type ProxyError, type UpstreamError } from '../http/errors.ts';
import { watchBodyIdle } from '../http/body-idle.ts';
import { openUpstream, relayResponse, staleSocketReset, type ForwardBody, type UpstreamTarget, type UpstreamTimeouts } from '../http/forward.ts';
import { relayRedactedBody } from '../http/error-body.ts';
import { gitUpstreamHeaders, headerCount } from '../http/headers.ts';
import { isRelayableStatus, type Refusal, type SpanSink } from '../http/lifecycle.ts';
import type { LogSink } from '../http/log.ts';
import type { HttpLogEvent } from '../http/log-events.ts';
import { Redactor } from '../http/redactor.ts';
import { decideGitAccess, proveWorkload, WORKLOAD_CHALLENGE, type AccessDecision } from './access.ts';
import { GitCall } from './call.ts';
import { hostCredential } from './credentials.ts';
import type { InstallationTokens } from './github-app.ts';
import type { HostConfig } from './hosts.ts';
import { PushHeadReader, type PushHeadVerdict } from './push-commands.ts';
import { HostReportReader, refusalExplanation, refusalReport } from './push-report.ts';
import type { GitRequestRecord, GitSpanFacts } from './record.ts';
import { hasRefRules, refusalOf, type PushPolicy } from './ref-rules.ts';
import { parseGitRoute } from './route.ts';

export interface GitUpstream {
  readonly config: HostConfig;
  readonly agent: Agent;
  /** A bearer or basic host's token, read at each request; undefined for a GitHub App host. */
  readonly token: SecretSource | undefined;
  readonly username: SecretSource | undefined;
  /** A GitHub App host's installation tokens (run/git.ts opens them); undefined otherwise. */
  readonly installation?: InstallationTokens;
}

export interface GitProxyDeps {
  readonly hosts: ReadonlyMap<string, GitUpstream>;
  /** Verifies workload tokens (src/auth/verifier.ts); undefined: network-policy mode. */
  readonly verifier: TokenVerifier | undefined;
  readonly timeouts: UpstreamTimeouts;
  /** The deny list (--revocations): why a verified token is refused anyway, or undefined. */
  readonly revoked?: RevocationCheck;
  /** Requests one workload instance (by its token) may have in progress at once; 0: no cap. */
  readonly maxConcurrentPerWorkload: number;
  /** Called once per request, when it is over. */
  readonly record: (rec: GitRequestRecord) => void;
  /** A push went on under a workload scope without ref rules (the entry): start-up says so once. */
  readonly onEveryRefPush?: (entry: string) => void;
  readonly log: LogSink<HttpLogEvent>;
  /** Tracing (OTEL_EXPORTER_OTLP_*): each request's span and its upstream's, from its record. */
  readonly trace?: SpanSink<GitRequestRecord, GitSpanFacts>;
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

/** Pure: the refusal of an access decision that said no (every 401 carries the challenge). */
export function accessRefusal(access: Extract<AccessDecision, { ok: false }>): Refusal {
  return { error: access.error, ...(access.challenge ? { headers: { 'www-authenticate': WORKLOAD_CHALLENGE } } : {}) };
}

/** Pure: the refusal of a revoked or uncheckable workload token, or undefined to let it through. */
export function gitRevocationRefusal(verdict: RevocationVerdict): Refusal | undefined {
  if (verdict.kind === 'ok') return undefined;
  if (verdict.kind === 'unavailable') return { error: ERRORS.revocationStoreUnavailable, headers: { 'retry-after': '1' } };
  if (verdict.kind === 'state_lost') return { error: ERRORS.revocationStoreStateLost, headers: { 'retry-after': '1' } };
  return { error: withMessage(ERRORS.workloadTokenInvalid, `the workload token was refused: ${verdict.reason}`), headers: { 'www-authenticate': WORKLOAD_CHALLENGE } };
}

export function createGitHandler(deps: GitProxyDeps): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  // Requests in progress per workload instance: the pushes of one workload cannot take every
  // connection the listener has (network-policy mode has no identity: the connection caps
  // bound it, one request at a time per connection).
  const inProgress = new KeyedCounts();
  return async (req, res) => {
    const call = new GitCall(req, res, deps.log, deps.record, deps.trace);
    try {
      await runGitRequest(deps, inProgress, call);
    } catch (err) {
      call.endFailed(err);
    } finally {
      call.finish();
    }
  };
}

/** A request the listener refuses before any handler runs: answered as git shows it, and recorded. */
export function refuseAtGit(deps: Pick<GitProxyDeps, 'record' | 'log' | 'trace'>): (req: IncomingMessage, res: ServerResponse, refusal: Refusal) => void {
  return (req, res, refusal) => {
    const call = new GitCall(req, res, deps.log, deps.record, deps.trace);
    call.endRefused(refusal);
    call.finish();
  };
}

async function runGitRequest(deps: GitProxyDeps, inProgress: KeyedCounts, call: GitCall): Promise<void> {
  const parsed = parseGitRoute(call.method, call.target, (key) => deps.hosts.has(key));
  if (!parsed.ok) return call.endRefused({ error: parsed.error, ...(parsed.allow ? { allow: parsed.allow } : {}) });
  call.host = parsed.hostKey;
  call.route = parsed.route;
  call.repo = parsed.repo;
  call.access = parsed.access;
  const upstream = deps.hosts.get(parsed.hostKey)!;

  if (headerCount(call.req.rawHeaders, 'authorization') > 1) return call.endRefused({ error: ERRORS.twoAuthorizations });
  let workload = deps.verifier && proveWorkload(deps.verifier, call.req.headers.authorization, peerOf(call.req.socket), Math.floor(Date.now() / 1000));
  if (workload instanceof Promise) {
    workload = await workload;
    if (call.gone) return call.endAbandoned();
  }
  const access = decideGitAccess({ hostKey: parsed.hostKey, repo: parsed.repo, access: parsed.access }, { repos: upstream.config.repos, readOnly: upstream.config.readOnly, protectedRefs: upstream.config.protectedRefs, workload });
  call.identity = access.identity;
  if (!access.ok) {
    call.tokenError = access.tokenError;
    call.challenge = access.error.code === ERRORS.workloadTokenMissing.code;
    return call.endRefused(accessRefusal(access));
  }

  if (access.identity) {
    const refused = await admitWorkload(deps, inProgress, call, access.identity);
    if (refused) return;
  }

  let body: ForwardBody = call.method === 'POST' ? call.req : null;
  if (parsed.route === 'receive-pack') {
    const decided = await decidePush(deps, call, access.push ?? { host: parsed.hostKey, protectedRefs: [], layers: [] });
    if (decided === undefined) return;
    body = decided;
  }

  const credential = await hostCredential(upstream.config.key, { authType: upstream.config.authType, token: upstream.token, username: upstream.username, installation: upstream.installation }, Date.now());
  if (call.gone) return call.endAbandoned();
  if (!credential.ok) return call.endRefused({ error: credential.error });
  call.redactor = new Redactor(credential.secrets);
  if (!(await parserDoneWithRead(call))) return call.endAbandoned();
  const target: UpstreamTarget = {
    agent: upstream.agent,
    hostname: upstream.config.hostname,
    port: upstream.config.port,
    method: call.method,
    path: parsed.upstreamPath,
    headers: gitUpstreamHeaders(call.req.headers, upstream.config.key),
    credential: { authorization: credential.authorization },
  };
  const answer = await sendGit(call, target, deps.timeouts, body);
  if (answer === undefined) return;
  await relayGitAnswer(call, answer, call.redactor, upstream.config.key);
}

/**
 * Waits until Node's parser is done with the read that carried the request head; false when the
 * client is gone by then. The parser hands the head, then each piece of body in that read, to
 * JavaScript one callback at a time, and after a body callback Node runs the queued promise
 * continuations and ticks: this handler resumed there, took a free pooled connection and streamed
 * the first body bytes upstream before the parser reached a malformed chunk later in the same
 * read (whose 400 then closed the client). setImmediate runs only once every read of this loop
 * turn is parsed, so a parse error in that read has destroyed the client socket (`gone`) before
 * anything is sent. A later read that is malformed cuts the body like a client leaving mid-push:
 * the upstream request and its connection are destroyed (lifecycle.ts, pipeline), never pooled.
 */
async function parserDoneWithRead(call: GitCall): Promise<boolean> {
  await new Promise<void>((resolve) => setImmediate(resolve));
  return !call.gone;
}

/**
 * A verified workload: not revoked (the deny list in the shared store answers later: the request,
 * its body unread, waits in the socket), and within its concurrency. True when the call was ended.
 */
async function admitWorkload(deps: GitProxyDeps, inProgress: KeyedCounts, call: GitCall, who: WorkloadIdentity): Promise<boolean> {
  if (deps.revoked) {
    const verdict = await Promise.resolve(deps.revoked(who, Math.floor(Date.now() / 1000))).catch((): RevocationVerdict => ({ kind: 'revoked', reason: 'the revocation list cannot be read' }));
    if (call.gone) return (call.endAbandoned(), true);
    const refusal = gitRevocationRefusal(verdict);
    if (refusal) {
      if (verdict.kind === 'revoked') call.tokenError = verdict.reason;
      return (call.endRefused(refusal), true);
    }
  }
  if (call.gone) return (call.endAbandoned(), true);
  if (!call.holdSlot(inProgress, who.instanceId ?? 'none', deps.maxConcurrentPerWorkload)) {
    return (call.endRefused({ error: ERRORS.workloadBusy, headers: { 'retry-after': String(WORKLOAD_BUSY_RETRY_AFTER_S) } }), true);
  }
  return false;
}

/**
 * Sends the request upstream, the push body streamed through. A ref discovery has no body and
 * changes nothing: reset on a pooled connection (the host closed it as we reused it), it is sent
 * once more. A POST never is: a push may already be applied, and the body it streamed is gone.
 * Undefined when the request was ended here.
 */
async function sendGit(call: GitCall, target: UpstreamTarget, timeouts: GitProxyDeps['timeouts'], body: ForwardBody): Promise<IncomingMessage | undefined> {
  const exchange = call.client;
  let resent = false;
  for (;;) {
    const sent = openUpstream(call.traced(target), timeouts, resent ? null : body, exchange);
    call.attach(sent.request);
    try {
      const res = await sent.response;
      call.attemptAnswered(res.statusCode ?? 502);
      return res;
    } catch (err) {
      const failed = err as UpstreamError;
      const kind = failed.kind;
      call.attemptEnded(kind);
      if (call.method === 'GET' && staleSocketReset(kind, sent.request) && !resent && !call.gone) {
        resent = true;
        exchange.failure = undefined;
        continue;
      }
      if (call.gone || call.res.headersSent) return void call.endAbandoned();
      call.endRefused({ error: errorForUpstream(failed) }, kind);
      return undefined;
    }
  }
}

/** Relays the host's answer: a success as it streams, anything else read whole and redacted (a host may echo the credential it was sent). */
async function relayGitAnswer(call: GitCall, upstream: IncomingMessage, redactor: Redactor, hostKey: string): Promise<void> {
  const status = upstream.statusCode ?? 502;
  const exchange = call.client;
  if (!isRelayableStatus(status)) {
    upstream.destroy();
    return call.endRefused({ error: ERRORS.upstreamProtocol }, 'upstream_bad_status');
  }
  if (status === 401) {
    // Our credential was refused: an operator problem the workload cannot fix. Relayed, the 401
    // would make git ask for a username; our own line says whose problem it is.
    upstream.resume();
    return call.endRefused({ error: upstreamCredentialRefused(hostKey) });
  }
  const headers = redactor.headers(upstream.rawHeaders);
  if (status >= 200 && status < 300) {
    // The host's report on a push, read for the record as it goes by, unchanged.
    const caps = call.push?.head?.capabilities;
    const reader = caps && (caps.reportStatus || caps.reportStatusV2) ? new HostReportReader(caps.sideBand) : undefined;
    if (reader) call.push!.hostReport = () => reader.report;
    await relayResponse(call.res, upstream, headers, exchange, reader && { onChunk: (chunk) => reader.push(chunk) });
    return call.endAnswered(status, exchange.failure);
  }
  const relayed = await relayRedactedBody(call.res, upstream, headers, redactor, exchange);
  if (relayed.ok) return call.endAnswered(status, exchange.failure);
  if (call.gone) return call.endAbandoned();
  call.endRefused({ error: ERRORS.upstreamProtocol });
}

/** A push's head as read off the client's body, before anything was sent anywhere: the bytes taken, and whether the body ended. */
type ReadHead = { readonly verdict: Exclude<PushHeadVerdict, { kind: 'more' }>; readonly held: Buffer; readonly ended: boolean } | 'stalled' | 'gone';

/**
 * Reads a push's command list off the client's body (PushHeadReader: bounded, as git reads it),
 * taking whole chunks as they come and pausing the body once the reader has decided. Nothing is
 * sent upstream while it reads: the connection to the host is not even open.
 */
function readPushHead(call: GitCall, bodyIdleMs: number): Promise<ReadHead> {
  const req = call.req;
  const reader = new PushHeadReader();
  const held: Buffer[] = [];
  return new Promise((resolve) => {
    let settled = false;
    const done = (result: ReadHead) => {
      if (settled) return;
      settled = true;
      req.pause();
      req.off('data', onData).off('end', onEnd).off('close', onClose);
      stopIdle();
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      held.push(chunk);
      const verdict = reader.push(chunk);
      if (verdict.kind !== 'more') done({ verdict, held: Buffer.concat(held), ended: false });
    };
    const onEnd = () => done({ verdict: reader.end(), held: Buffer.concat(held), ended: true });
    const onClose = () => done('gone');
    const stopIdle = watchBodyIdle(req, bodyIdleMs, () => done('stalled'));
    req.on('data', onData).once('end', onEnd).once('close', onClose);
  });
}

/**
 * The step of a push: its command list read and decided before anything reaches the host. One
 * command outside the rules refuses the whole push; a list that cannot be read as git reads it
 * is refused too, when any rule applies (without one the push goes on as it always did, its
 * record saying why its refs are not listed). Returns the body to send upstream (the bytes
 * read, then the rest streamed), or undefined when the call was ended here.
 */
async function decidePush(deps: GitProxyDeps, call: GitCall, policy: PushPolicy): Promise<ForwardBody | undefined> {
  const ruled = hasRefRules(policy);
  if (call.req.headers['content-encoding'] !== undefined) {
    // http-backend inflates a gzip body itself: the commands would be read one way here and another there.
    if (ruled) return void call.endRefused({ error: ERRORS.pushUnreadable, message: 'the push body has a Content-Encoding, so its ref updates cannot be checked; push without one', closeAfter: true });
    call.push = { unread: 'the body has a Content-Encoding' };
    return call.req;
  }
  const read = await readPushHead(call, deps.timeouts.bodyIdleMs);
  if (read === 'gone') return void call.endAbandoned();
  if (read === 'stalled') return void call.endRefused({ error: ERRORS.bodyTimeout, closeAfter: true });
  const { verdict } = read;
  if (verdict.kind === 'unreadable') {
    call.push = { unread: verdict.reason };
    if (!ruled) return pushBody(call, read);
    const why = `the push's command list cannot be checked: ${verdict.reason}`;
    return refusePush(deps, call, refusalReport(verdict.capabilities, [], [], `git-auth-proxy: ${why}`, refusalExplanation(policy.host, [why])), ERRORS.pushUnreadable, why);
  }
  const { commands, capabilities } = verdict.head;
  const refusals = ruled ? commands.map((c) => refusalOf(policy, c)) : [];
  call.push = { head: verdict.head, refusals };
  const refused = refusals.filter((r) => r !== undefined);
  if (refused.length === 0) {
    if (policy.everyRef !== undefined && commands.length > 0) deps.onEveryRefPush?.(policy.everyRef);
    return pushBody(call, read);
  }
  const whole = `the push is refused as a whole: ${refused.length} of its ${commands.length} ref updates are outside the rules`;
  const declined = refusalReport(capabilities, commands, refusals.map((r) => r && `git-auth-proxy: ${r}`), `git-auth-proxy: ${whole}`, refusalExplanation(policy.host, refusals));
  return refusePush(deps, call, declined, ERRORS.refNotAllowed, `${whole}; the first: ${refused[0]}`);
}

/** What goes upstream for a push let through: the bytes read, then (unless the body has ended) the rest as it streams. */
function pushBody(call: GitCall, read: Exclude<ReadHead, string>): ForwardBody {
  if (read.ended) return read.held;
  if (read.held.length > 0) call.req.unshift(read.held);
  return call.req;
}

/**
 * Answers a refused push: with git's report when the client asked for one (git shows it, then
 * reads our answer only once its pack is sent: the rest of the body is read and dropped, the
 * body timeout still applying), else with the proxy's line (the connection closes after it).
 */
async function refusePush(deps: GitProxyDeps, call: GitCall, declined: Buffer | undefined, error: ProxyError, message: string): Promise<undefined> {
  if (declined === undefined) return void call.endRefused({ error, message, closeAfter: true });
  call.endRefusedPush(declined, error);
  const req = call.req;
  if (req.readableEnded || req.destroyed) return undefined;
  await new Promise<void>((resolve) => {
    req.once('end', resolve).once('close', resolve);
    watchBodyIdle(req, deps.timeouts.bodyIdleMs, () => req.destroy());
    req.resume();
  });
  return undefined;
}
