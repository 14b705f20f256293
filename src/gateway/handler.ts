// The model gateway's request handler, one for every wire protocol: it authenticates the bot,
// checks the body with the protocol's rules, injects the upstream key, retries while nothing has
// reached the client, relays the answer (SSE unbuffered) and records what the call did. What
// differs per protocol comes from its module (./protocols/); the decisions themselves are the
// pure functions of rules.ts, retry.ts and ../auth/jwt.ts; forwarding is ../http/forward.ts.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { verifyBotToken } from '../auth/jwt.ts';
import { errorForUpstreamFailure, ERRORS, type ProxyError, type UpstreamError, type UpstreamFailure } from '../http/errors.ts';
import { abortUpstreamOnClientClose, newExchange, openUpstream, relayRedactedBody, relayResponse, type Exchange, type UpstreamCall, type UpstreamTimeouts } from '../http/forward.ts';
import { watchBodyIdle } from '../http/body-idle.ts';
import { headerCount, mediaType, scrubResponseHeaders } from '../http/headers.ts';
import { isIdentity, StreamRedactor } from '../http/redact.ts';
import { elapsedMs, pathForLog, type LogSink } from '../http/log.ts';
import { writeProxyError } from '../http/respond.ts';
import { providersByModel, routesOfKind, type Provider } from './providers.ts';
import { openAiErrorBody } from './protocols/openai.ts';
import { bounded, type ApiName, type CallSummary, type RequestPolicy, type WireProtocol } from './protocols/protocol.ts';
import { nextRetryDelay, retryHintMs, type RetryPolicy } from './retry.ts';
import {
  botToken,
  checkRequestBody,
  clientRequestId,
  gatewayUpstreamHeaders,
  identityFromHeaders,
  isJsonContentType,
  modelBody,
  modelsListBody,
  routeGatewayRequest,
  upstreamPath,
  type Identity,
} from './rules.ts';
import { SseFramer } from './sse.ts';
import { EventStreamFramer, EventStreamGuard } from './eventstream.ts';
import type { CredentialSource } from './credentials/source.ts';
import type { RevocationCheck } from '../auth/revocations.ts';
import { STORE_UNREACHABLE } from '../auth/redis-revocations.ts';
import { effectivePolicy, mayHaveCost, type LimitsStore, type Reservation, type Who } from '../limits/admission.ts';
import { unpricedCallReason } from '../limits/policy.ts';
import { costUsd, type PriceTable } from './prices.ts';

/** What one model call did: the access log line, and what the metrics count. */
export type ModelRequestRecord = {
  readonly event: 'request';
  readonly listener: 'model';
  readonly request_id: string;
  readonly upstream_request_id: string | null;
  /** The provider the model belongs to (null when refused before the model was known). */
  readonly provider: string | null;
  /** The cloud whose credential the provider uses (`aws`, `google`; null for a key or none). */
  readonly cloud: 'aws' | 'google' | null;
  /** The wire protocol (null for the catalog and for paths no protocol serves). */
  readonly api: ApiName | null;
  /** Only ever an allowlisted model ID (null when refused before or by the allowlist). */
  readonly model: string | null;
  /** A model the allowlist refused, bounded: for the operator, never a metric label. */
  readonly refused_model: string | null;
  readonly response_model: string | null;
  readonly method: string;
  /** The request path without its query, bounded. */
  readonly path: string;
  readonly status: number;
  readonly stream: boolean;
  readonly duration_ms: number;
  readonly ttft_ms: number | null;
  readonly input_tokens: number | null;
  readonly output_tokens: number | null;
  readonly reasoning_tokens: number | null;
  readonly cached_tokens: number | null;
  readonly cache_write_tokens: number | null;
  /** The upstream reported the usage whole; null where no usage is expected (catalog, token counts). */
  readonly usage_complete: boolean | null;
  readonly finish_reason: string | null;
  readonly interrupted: 'client' | 'upstream' | 'idle_timeout' | null;
  /** Upstream attempts made (0 when the request never reached the upstream). */
  readonly attempts: number;
  readonly retries: number;
  readonly rate_limited: number;
  readonly instance_id: string | null;
  readonly workflow: string | null;
  readonly run_id: string | null;
  /** Request body bytes received from the client (once, however many attempts). */
  readonly bytes_in: number;
  /** Response body bytes relayed to the client. */
  readonly bytes_out: number;
  readonly error: string | null;
  /** The limit that refused the call (--limits), else null. */
  readonly limit: string | null;
  /** What the call was charged against its limits, in USD (null without --limits or a price). */
  readonly charged_usd: number | null;
  /** The charge was estimated from the bytes relayed: the upstream reported no (complete) usage. */
  readonly charge_estimated: boolean | null;
};

export interface GatewayDeps {
  /** Called once per request, when it is over. */
  readonly record: (rec: ModelRequestRecord) => void;
  /** Told when an SSE relay starts and ends (for the streams-in-flight gauge). */
  readonly streams?: { opened(provider: string, model: string): void; closed(provider: string, model: string): void };
  /** HS256 key for bot tokens; undefined: network-policy mode. */
  readonly signingKey: Buffer | undefined;
  /** The providers, each serving its own models (./providers.ts). */
  readonly providers: readonly Provider[];
  /** The wire protocols served (./protocols/table.ts). */
  readonly protocols: readonly WireProtocol[];
  /** Provider-executed tool types allowed (--allow-hosted-tools). */
  readonly hostedTools: ReadonlySet<string>;
  readonly timeouts: UpstreamTimeouts;
  readonly retry: RetryPolicy;
  readonly maxBodyBytes: number;
  /** The deny list (--revocations): why a verified token is refused anyway, or undefined. */
  readonly revoked?: RevocationCheck;
  /** --limits: admission before a call is forwarded, its charge when it is over; undefined: none. */
  readonly limits?: LimitsStore;
  /** Prices, to charge a call against a money budget. */
  readonly prices?: PriceTable;
  readonly maxTokenLifetimeSec: number;
  readonly log: LogSink;
}

/** Non-streamed bodies are copied for usage extraction only up to this size. */
const MAX_SUMMARY_BODY_BYTES = 8 * 1024 * 1024;

/**
 * Whether a failure before any response byte is worth another attempt: only a refused or
 * timed-out connect, which sent nothing. Any reset, on a new or a reused connection, may have
 * come after the upstream read the whole request and began a (billed) generation, so a model
 * call is never sent twice; the client's SDK decides whether to try again.
 */
function retryable(kind: UpstreamFailure): boolean {
  return kind === 'connect_refused' || kind === 'connect_timeout';
}

/** The log's error class of an upstream error status (>= 400). */
function errorClassForStatus(status: number): string {
  if (status === 429) return 'rate_limited';
  return status < 500 ? 'upstream_4xx' : 'upstream_5xx';
}

/**
 * Reads the request body up to `max` bytes: the buffer, 'too_large', 'aborted', or 'stalled' (no
 * byte for `idleMs`: body-idle.ts).
 */
function readBody(req: IncomingMessage, max: number, idleMs: number): Promise<Buffer | 'too_large' | 'aborted' | 'stalled'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Every listener goes once the body is settled: they share `resolve`, and through it the
    // promise and its Buffer, which a listener left on the request would keep alive for as long
    // as the connection (a 32 MiB body for the length of a stream).
    const settle = (result: Buffer | 'too_large' | 'aborted' | 'stalled') => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      chunks.length = 0;
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.pause();
        settle('too_large');
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle(Buffer.concat(chunks, size));
    const onClose = () => settle('aborted');
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
    watchBodyIdle(req, idleMs, () => {
      req.pause();
      settle('stalled');
    });
  });
}

/**
 * Pure: where a bot token goes, as the protocol's own clients send it: the Anthropic SDKs and
 * Claude Code send `x-api-key`, the OpenAI SDKs `Authorization: Bearer` (both are accepted).
 */
function tokenHeaderHint(protocol: WireProtocol | undefined): string {
  return protocol?.kind === 'anthropic'
    ? "as x-api-key: $MODEL_PROXY_TOKEN (the Anthropic SDKs' api key; Authorization: Bearer works too)"
    : "as Authorization: Bearer $MODEL_PROXY_TOKEN (the OpenAI SDKs' api key; x-api-key works too)";
}

function missingTokenHint(protocol: WireProtocol | undefined): string {
  return `a bot token is required: send the one mint-token made ${tokenHeaderHint(protocol)}`;
}

/**
 * Charges a call to its limits when it is over: its tokens and cost from the upstream's usage, or,
 * without (complete) usage, estimated from the bytes relayed (about 4 bytes a token), marked so.
 */
function chargeCall(reservation: Reservation, summary: CallSummary | undefined, bytesIn: number, bytesOut: number, prices: PriceTable | undefined, provider: string | undefined, model: string | null, billable: boolean): { usd: number | null; estimated: boolean } {
  if (!billable) {
    reservation.release({ tokens: 0, costUsd: 0 });
    return { usd: 0, estimated: false };
  }
  const usage = summary?.usage;
  const estimated = !(summary?.usageComplete === true && usage && usage.inputTokens !== null && usage.outputTokens !== null);
  const input = estimated ? Math.ceil(bytesIn / 4) : usage!.inputTokens!;
  const output = estimated ? Math.ceil(bytesOut / 4) : usage!.outputTokens!;
  const price = provider && model ? prices?.get(provider, model) : undefined;
  const counts = estimated ? { input, output, reasoning: null, cached: null, cache_write: null } : { input, output, reasoning: usage!.reasoningTokens, cached: usage!.cachedTokens, cache_write: usage!.cacheWriteTokens };
  const usd = price ? (costUsd(price, counts) ?? null) : null;
  reservation.release({ tokens: input + output, costUsd: usd ?? 0 });
  return { usd, estimated };
}

/** Pure: the cloud a credential source belongs to, for the record. */
function cloudOf(type: CredentialSource['type']): 'aws' | 'google' | null {
  if (type === 'aws-sigv4' || type === 'aws-web-identity') return 'aws';
  if (type === 'google-service-account' || type === 'google-metadata') return 'google';
  return null;
}

/** An error the listener itself makes on the gateway port (bad HTTP version, a handler bug). */
export function sendGatewayError(req: IncomingMessage, res: ServerResponse, error: ProxyError): void {
  writeProxyError(req, res, error.status, 'application/json', openAiErrorBody(error, null, error.message));
}

export function createGatewayHandler(deps: GatewayDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const byModel = providersByModel(deps.providers);
  const policy: RequestPolicy = { allowedModels: new Set(byModel.keys()), hostedTools: deps.hostedTools };
  const configs = deps.providers.map((p) => p.config);
  const modelsBody = modelsListBody(configs);

  return (req, res) => {
    void handle(req, res).catch((err: unknown) => {
      deps.log({ event: 'handler_error', listener: 'model', error: (err as Error)?.name ?? 'Error', detail: String((err as Error)?.message ?? err) });
      if (!res.headersSent) sendGatewayError(req, res, ERRORS.internal);
      else res.destroy();
    });
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedAt = performance.now();
    const method = req.method ?? '';
    const route = routeGatewayRequest(method, req.url ?? '', deps.protocols);
    const protocol = route.ok ? (route.kind === 'protocol' ? route.protocol : undefined) : route.protocol;
    // What the record says, filled in as the request goes.
    const tally = {
      identity: { instanceId: null, workflow: null, runId: null } as Identity,
      provider: undefined as Provider | undefined,
      model: null as string | null,
      refusedModel: null as string | null,
      /** The route's answer carries usage (not a token count). */
      usageExpected: route.ok && route.kind === 'protocol' && !route.route.noUsage && route.pathModel?.countTokens !== true,
      stream: false,
      /** An SSE relay began: only then can a stream be interrupted. */
      relaying: false,
      summary: undefined as CallSummary | undefined,
      attempts: 0,
      retries: 0,
      rateLimited: 0,
      upstreamRequestId: undefined as string | undefined,
      bytesIn: 0,
      limit: null as string | null,
      lowered: undefined as Who['lowered'],
      reservation: undefined as Reservation | undefined,
      charge: undefined as { usd: number | null; estimated: boolean } | undefined,
    };
    // Each upstream attempt has its own Exchange, so a retried attempt's bytes and failure never
    // mix into the final one's. Outside an attempt (reading the body, waiting to retry) a client
    // abort is recorded in `client`.
    const client = newExchange();
    let attempt: Exchange | undefined;

    // Rule 7: correlation id, forwarded or generated, returned on every answer and in the log
    // line even when the request is refused or abandoned. X-Request-Id carries it on the
    // gateway's own answers (the SDKs report it); a relayed answer carries the upstream's.
    const requestId = clientRequestId(req.headers) ?? randomUUID();
    res.setHeader('x-client-request-id', requestId);
    res.setHeader('x-request-id', requestId);
    // Anthropic's SDKs read `request-id`: the gateway's own answers on its routes carry that too.
    if (protocol && protocol.upstreamRequestIdHeader !== 'x-request-id') res.setHeader(protocol.upstreamRequestIdHeader, requestId);

    const logDone = (status: number, error?: string) => {
      const failure = attempt?.failure ?? client.failure;
      if (tally.reservation) tally.charge = chargeCall(tally.reservation, tally.summary, tally.bytesIn, attempt?.bytesOut ?? 0, deps.prices, tally.provider?.config.name, tally.model, mayHaveCost(tally.attempts, status, failure !== undefined));
      const summary = tally.summary;
      const usage = summary?.usage ?? null;
      const interrupted = failure === undefined ? null : failure === 'client_aborted' ? 'client' : failure === 'idle_timeout' ? 'idle_timeout' : 'upstream';
      deps.record({
        event: 'request',
        listener: 'model',
        request_id: requestId,
        upstream_request_id: tally.upstreamRequestId ?? null,
        provider: tally.provider?.config.name ?? null,
        cloud: tally.provider ? cloudOf(tally.provider.credential.type) : null,
        api: protocol?.api ?? null,
        model: tally.model,
        refused_model: tally.refusedModel,
        response_model: summary?.model?.slice(0, 128) ?? null,
        method,
        path: pathForLog(req.url ?? ''),
        status,
        stream: tally.stream,
        duration_ms: elapsedMs(startedAt, performance.now()),
        ttft_ms: summary?.firstTokenAt != null ? elapsedMs(startedAt, summary.firstTokenAt) : null,
        input_tokens: usage?.inputTokens ?? null,
        output_tokens: usage?.outputTokens ?? null,
        reasoning_tokens: usage?.reasoningTokens ?? null,
        cached_tokens: usage?.cachedTokens ?? null,
        cache_write_tokens: usage?.cacheWriteTokens ?? null,
        // Usage is expected only of a call the upstream answered with success.
        usage_complete: tally.usageExpected && tally.attempts > 0 && status >= 200 && status < 300 ? (summary?.usageComplete ?? false) : null,
        finish_reason: summary?.finishReason ?? null,
        interrupted: tally.relaying ? interrupted : null,
        attempts: tally.attempts,
        retries: tally.retries,
        rate_limited: tally.rateLimited,
        instance_id: tally.identity.instanceId,
        workflow: tally.identity.workflow,
        run_id: tally.identity.runId,
        bytes_in: tally.bytesIn,
        bytes_out: attempt?.bytesOut ?? 0,
        error: error ?? failure ?? summary?.streamError ?? null,
        limit: tally.limit,
        charged_usd: tally.charge?.usd ?? null,
        charge_estimated: tally.charge ? tally.charge.estimated : null,
      });
    };
    const errorBody = protocol?.errorBody ?? openAiErrorBody;
    const sendError = (error: ProxyError, param: string | null = null, message = error.message, allow?: string) =>
      writeProxyError(req, res, error.status, 'application/json', errorBody(error, param, message), allow);
    const reject = (error: ProxyError, param: string | null = null, message?: string, allow?: string) => {
      sendError(error, param, message, allow);
      logDone(error.status, error.code);
    };

    if (!route.ok) return reject(route.error, null, undefined, route.allow);

    // Rule 1: who is asking. With a signing key only a verified token counts; without one the
    // headers are informational (network-policy mode).
    if (deps.signingKey) {
      // Two of a header are refused, not chosen from: Node keeps the first, another reader the last.
      const token = headerCount(req.rawHeaders, 'authorization') > 1 || headerCount(req.rawHeaders, 'x-api-key') > 1 ? 'conflict' : botToken(req.headers);
      if (token === 'conflict') return reject(ERRORS.unauthenticated, null, 'the request carries two different bot tokens (Authorization and x-api-key, or one of them twice): send one token');
      if (token === undefined) return reject(ERRORS.unauthenticated, null, missingTokenHint(protocol));
      const verified = verifyBotToken(token, deps.signingKey, {
        nowSec: Math.floor(Date.now() / 1000),
        maxLifetimeSec: deps.maxTokenLifetimeSec,
      });
      if (!verified.ok) return reject(ERRORS.unauthenticated, null, `the bot token was refused (${verified.reason}): send a valid one, from mint-token, ${tokenHeaderHint(protocol)}`);
      const why = await deps.revoked?.(verified.claims, Math.floor(Date.now() / 1000));
      if (why === STORE_UNREACHABLE) {
        res.setHeader('retry-after', '1');
        return reject(ERRORS.revocationStoreUnavailable);
      }
      if (why !== undefined) return reject(ERRORS.unauthenticated, null, `the bot token was refused (${why}): the operator stopped it before it expired`);
      tally.identity = { instanceId: verified.claims.sub, workflow: verified.claims.workflow, runId: verified.claims.run_id };
      const lowered = verified.claims.limits;
      if (lowered) tally.lowered = { budgetUsd: lowered.budget_usd, concurrent: lowered.max_concurrent, requestsPerMinute: lowered.requests_per_minute, tokensPerMinute: lowered.tokens_per_minute };
    } else {
      const fromHeaders = identityFromHeaders(req.headers);
      if ('error' in fromHeaders) return reject(fromHeaders.error, fromHeaders.param);
      tally.identity = fromHeaders;
    }

    if (route.kind === 'models' || route.kind === 'model') {
      const body = route.kind === 'models' ? modelsBody : modelBody(route.id, configs);
      if (body === undefined) return reject(ERRORS.modelNotFound);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
      res.end(body);
      return logDone(200);
    }
    const proto = route.protocol;

    // Rule 2: the model, from the JSON body, checked by the protocol's rules.
    if (!isJsonContentType(req.headers['content-type'])) return reject(ERRORS.unsupportedMediaType);
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > deps.maxBodyBytes) return reject(ERRORS.bodyTooLarge);
    // `let`: released (undefined) once the answer has begun and the call can no longer be resent.
    let body: Buffer | 'too_large' | 'aborted' | 'stalled' | undefined = await readBody(req, deps.maxBodyBytes, deps.timeouts.bodyIdleMs);
    if (body === 'aborted') {
      client.failure = 'client_aborted';
      return logDone(0);
    }
    if (body === 'too_large' || body === 'stalled') {
      // The rest of the body is never read: the answer closes the connection.
      reject(body === 'too_large' ? ERRORS.bodyTooLarge : ERRORS.bodyTimeout);
      res.once('finish', () => req.destroy());
      return;
    }
    tally.bytesIn = body.length;
    const checked = checkRequestBody(body, proto, policy, route.pathModel);
    if (!checked.ok) {
      tally.refusedModel = checked.refusedModel ?? null;
      // Refused for what it asked besides the model: its record names the model and provider.
      if (checked.model !== undefined) {
        tally.model = Buffer.from(checked.model, 'utf8').toString('utf8');
        tally.provider = byModel.get(checked.model);
      }
      return reject(checked.error, checked.param, checked.message);
    }
    // A flat copy: a model id V8 sliced out of the body's text would keep all of that text alive.
    tally.model = Buffer.from(checked.model, 'utf8').toString('utf8');
    tally.stream = checked.stream;
    // The model picks its provider; the route must be one the provider's kind serves.
    const provider = byModel.get(checked.model)!;
    tally.provider = provider;
    if (provider.config.kind !== proto.kind) {
      return reject(ERRORS.modelNotOnRoute, 'model', `model "${checked.model}" is served by ${routesOfKind(provider.config.kind, deps.protocols)} (provider ${provider.config.name}), not by this route`);
    }

    // Limits (--limits): admitted before anything is forwarded, charged in logDone when it is over,
    // whichever way that is (answered, refused upstream, cut, abandoned).
    if (deps.limits) {
      const beta = req.headers['anthropic-beta'];
      const unpriced = unpricedCallReason(effectivePolicy(deps.limits.policy, tally.lowered), checked.serviceTier, typeof beta === 'string' ? beta : undefined, checked.speed);
      if (unpriced) {
        tally.limit = 'unpriced_call';
        return reject(ERRORS.unpricedCall, null, unpriced);
      }
      const who = { instanceId: tally.identity.instanceId ?? 'none', workflow: tally.identity.workflow ?? 'none', runId: tally.identity.runId ?? 'none', lowered: tally.lowered };
      const admitted = await deps.limits.admit(who, body.length, Date.now());
      if (!admitted.ok) {
        tally.limit = admitted.kind;
        if ('retryAfterSec' in admitted) {
          res.setHeader('retry-after', String(admitted.retryAfterSec));
          const error = admitted.kind === 'store_unavailable' ? ERRORS.limitsStoreUnavailable : ERRORS.limitRateExceeded;
          return reject(error, null, `${admitted.message}; retry after ${admitted.retryAfterSec} s`);
        }
        return reject(proto.kind === 'openai' ? ERRORS.budgetSpentOpenAi : ERRORS.budgetSpentAnthropic, null, admitted.message);
      }
      tally.reservation = admitted.reservation;
    }

    // Rule 3: the credential, from the provider's source, for this very call: a key read now
    // (it may have rotated), a minted access token, or a signature over the bytes to be sent.
    // A cloud route names its project and region: only the provider's own (never another
    // project the provider's credential might reach), and the upstream path is built from them.
    const { upstream } = provider.config;
    const pathModel = route.pathModel;
    const scope = { project: provider.config.project, region: provider.config.region };
    if (pathModel && ((pathModel.project !== undefined && pathModel.project !== scope.project) || (pathModel.region !== undefined && pathModel.region !== scope.region))) {
      return reject(ERRORS.cloudScopeNotAllowed, null, `the path names project ${bounded(pathModel.project ?? '')} and region ${bounded(pathModel.region ?? '')}; model ${checked.model} is served in project ${scope.project} and region ${scope.region} (provider ${provider.config.name})`);
    }
    const path = pathModel && route.route.upstreamPathFor ? `${upstream.basePath}${route.route.upstreamPathFor(scope, pathModel)}` : upstreamPath(upstream.basePath, route.route, route.query);
    const contentType = req.headers['content-type'];
    const auth = await provider.credential.authenticate({ method: 'POST', target: path, host: upstream.host, contentType, body }, Date.now());
    if (!auth.ok) {
      deps.log({ event: 'credential_error', listener: 'model', provider: provider.config.name, credential: provider.credential.type, reason: auth.reason });
      const message = auth.error === ERRORS.upstreamCredentialFailed ? `the gateway could not produce its credential for provider ${provider.config.name} (${auth.reason}); the operator must check it` : undefined;
      return reject(auth.error, null, message);
    }
    const secrets = auth.secrets;
    const target = {
      agent: provider.agent,
      plainHttp: upstream.plainHttp,
      hostname: upstream.hostname,
      port: upstream.port,
      method: 'POST',
      path,
      headers: gatewayUpstreamHeaders(req.headers, proto, {
        host: upstream.host,
        provider: provider.config,
        credential: auth.headers,
        clientRequestId: requestId,
      }),
    };

    // Made only when a retry has to wait: most requests never need it.
    let cancel: AbortController | undefined;
    let call: UpstreamCall | undefined;
    abortUpstreamOnClientClose(res, () => ({ request: call?.request, exchange: attempt ?? client }), () => cancel?.abort());

    // Rule 4 with retries: only while nothing has been sent to the client.
    let waited = 0;
    for (;;) {
      attempt = newExchange();
      tally.attempts++;
      call = openUpstream(target, deps.timeouts, body!, attempt);
      let upstreamRes: IncomingMessage;
      try {
        upstreamRes = await call.response;
      } catch (err) {
        const kind = (err as UpstreamError).kind;
        if (attempt.failure === 'client_aborted') return logDone(0);
        const delay = retryable(kind) ? nextRetryDelay(deps.retry, tally.retries, waited, undefined, Math.random) : undefined;
        if (delay === undefined) {
          const error = errorForUpstreamFailure(kind);
          sendError(error);
          return logDone(error.status, kind);
        }
        if (await backOff(delay)) continue;
        return logDone(0);
      }

      const status = upstreamRes.statusCode ?? 502;
      const upstreamId = upstreamRes.headers[proto.upstreamRequestIdHeader];
      tally.upstreamRequestId = typeof upstreamId === 'string' ? upstreamId.slice(0, 128) : undefined;
      if (proto.retryStatuses.has(status)) {
        if (status === 429) tally.rateLimited++;
        const delay = nextRetryDelay(deps.retry, tally.retries, waited, retryHintMs(upstreamRes.headers, Date.now()), Math.random);
        if (delay !== undefined) {
          upstreamRes.resume();
          if (await backOff(delay)) continue;
          return logDone(0);
        }
      }
      // The answer has begun: the call will not be sent again, so its body (up to
      // --max-request-body) is not kept for the length of a stream.
      body = undefined;
      return relay(upstreamRes, status, attempt);
    }

    /** Waits `ms` before the next attempt, counted as a retry; false if the client went away. */
    async function backOff(ms: number): Promise<boolean> {
      attempt = undefined; // between attempts: a client leaving now is recorded in `client`
      if (client.failure === 'client_aborted' || res.destroyed) return false; // gone before the wait began
      try {
        cancel ??= new AbortController();
        await sleep(ms, undefined, { signal: cancel.signal });
      } catch {
        return false; // the client went away while we waited
      }
      waited += ms;
      tally.retries++;
      return true;
    }

    async function relay(upstreamRes: IncomingMessage, status: number, exchange: Exchange): Promise<void> {
      // Rule 8: credential-bearing headers removed, by name and by value. The correlation id
      // is ours (set on the response at the start), whatever the upstream echoes.
      const headers = scrubResponseHeaders(upstreamRes.rawHeaders, secrets);
      const pairs: string[] = [];
      for (let i = 0; i < headers.length; i += 2) {
        if (headers[i]!.toLowerCase() === 'x-client-request-id') continue;
        pairs.push(headers[i]!, headers[i + 1]!);
      }

      if (status === 401 || status === 403) {
        // The upstream refused the gateway's own key: the bot can do nothing about it, and
        // relaying the 401/403 would look like its own token was refused. The upstream body
        // is dropped unread (it may echo the key).
        upstreamRes.resume();
        deps.log({ event: 'config_error', listener: 'model', provider: provider.config.name, status, message: `the upstream refused the gateway API key of provider ${provider.config.name} (${provider.config.origin}): check the key and its permissions` });
        sendError(ERRORS.upstreamAuthFailed);
        return logDone(ERRORS.upstreamAuthFailed.status, `upstream_${status}`);
      }

      const encoding = upstreamRes.headers['content-encoding'];
      if (status >= 400) {
        // Upstreams echo keys in error messages: read the error whole, undo any compression
        // (asked for none, a CDN may apply it all the same), redact every form of the key.
        const relayed = await relayRedactedBody(res, upstreamRes, pairs, secrets, exchange);
        if (!relayed.ok) {
          sendError(ERRORS.upstreamProtocol);
          return logDone(ERRORS.upstreamProtocol.status, relayed.reason);
        }
        return logDone(status, errorClassForStatus(status));
      }

      if (!isIdentity(encoding)) {
        // Asked for identity, answered compressed: neither the usage nor an echoed key could be
        // read on the way, so it is not relayed.
        upstreamRes.resume();
        sendError(ERRORS.upstreamEncoding);
        return logDone(ERRORS.upstreamEncoding.status, 'upstream_encoded_body');
      }
      const contentType = mediaType(upstreamRes.headers['content-type']);
      const isEventStream = proto.streamFraming === 'aws-eventstream' && contentType === 'application/vnd.amazon.eventstream';
      const isStream = contentType === 'text/event-stream' || isEventStream;
      // Every relayed body is redacted on its way, holding back at most one partial event (a
      // binary event-stream frame cannot be redacted inside: one carrying a secret cuts the stream).
      const rewrite = isEventStream ? new EventStreamGuard(secrets) : new StreamRedactor(secrets, isStream);

      if (isStream) {
        tally.stream = true;
        tally.relaying = true;
        // Rule 5: every chunk is written as it arrives; a copy goes to the protocol's reader.
        pairs.push('X-Accel-Buffering', 'no');
        const reader = proto.newStreamReader(() => performance.now());
        const framer = isEventStream ? new EventStreamFramer(reader) : new SseFramer(reader);
        const model = tally.model!;
        deps.streams?.opened(provider.config.name, model);
        try {
          await relayResponse(res, upstreamRes, pairs, exchange, {
            onChunk: (chunk) => framer.push(chunk),
            rewrite,
            flushHead: true,
            endIsClean: proto.streamNeedsEndEvent ? () => reader.summary().terminated && !(framer instanceof EventStreamFramer && framer.corrupt) : undefined,
          });
        } finally {
          deps.streams?.closed(provider.config.name, model);
        }
        tally.summary = reader.summary();
        return logDone(status);
      }

      const copy: Buffer[] = [];
      let copied = 0;
      await relayResponse(res, upstreamRes, pairs, exchange, {
        rewrite,
        onChunk: (chunk) => {
          copied += chunk.length;
          if (copied <= MAX_SUMMARY_BODY_BYTES) copy.push(chunk);
        },
      });
      if (copied <= MAX_SUMMARY_BODY_BYTES && exchange.failure === undefined) tally.summary = proto.summarizeJson(Buffer.concat(copy));
      return logDone(status);
    }
  }
}
