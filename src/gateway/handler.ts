// The model gateway: authenticates the bot, validates the model, injects the upstream key and
// relays chat completions (streamed or not) while recording usage. Decisions are made by the
// pure functions of rules.ts, retry.ts, ../auth/jwt.ts and sse.ts; forwarding is ../http/forward.ts.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Agent } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorForUpstreamFailure, ERRORS, type ProxyError, type UpstreamError, type UpstreamFailure } from '../http/errors.ts';
import { abortUpstreamOnClientClose, newExchange, openUpstream, relayResponse, type UpstreamCall, type UpstreamTimeouts } from '../http/forward.ts';
import type { GatewayConfig } from './config.ts';
import {
  clientRequestId,
  gatewayUpstreamHeaders,
  identityFromHeaders,
  isJsonContentType,
  modelsListBody,
  openAiErrorBody,
  routeGatewayRequest,
  upstreamChatPath,
  validateChatRequest,
  type Identity,
} from './rules.ts';
import { scrubResponseHeaders } from '../http/headers.ts';
import { TOKEN_LEEWAY_SEC, verifyBotToken } from '../auth/jwt.ts';
import { elapsedMs, type LogSink } from '../http/log.ts';
import { nextRetryDelay, retryHintMs, type RetryPolicy } from './retry.ts';
import type { SecretSource } from '../config/secret.ts';
import { writeProxyError } from '../http/server.ts';
import { SseInspector, summarizeJsonCompletion, type CompletionSummary } from './sse.ts';

/** What one model call did: the access log line, and what the metrics count. */
export type ModelRequestRecord = {
  readonly event: 'request';
  readonly listener: 'model';
  readonly request_id: string;
  readonly upstream_request_id: string | null;
  readonly provider: string;
  /** Only ever an allowlisted model ID (null when refused before validation). */
  readonly model: string | null;
  readonly response_model: string | null;
  readonly method: string;
  readonly path: string | null;
  readonly status: number;
  readonly stream: boolean;
  readonly duration_ms: number;
  readonly ttft_ms: number | null;
  readonly input_tokens: number | null;
  readonly output_tokens: number | null;
  readonly reasoning_tokens: number | null;
  readonly cached_tokens: number | null;
  readonly usage_complete: boolean;
  readonly finish_reason: string | null;
  readonly interrupted: 'client' | 'upstream' | 'idle_timeout' | null;
  readonly retries: number;
  readonly rate_limited: number;
  readonly instance_id: string | null;
  readonly workflow: string | null;
  readonly run_id: string | null;
  readonly bytes_in: number;
  readonly bytes_out: number;
  readonly error: string | null;
};

export interface GatewayDeps {
  /** Called once per request, when it is over. */
  readonly record: (rec: ModelRequestRecord) => void;
  /** Told when an SSE relay starts and ends (for the streams-in-flight gauge). */
  readonly streams?: { opened(model: string): void; closed(model: string): void };
  readonly config: GatewayConfig;
  readonly agent: Agent;
  readonly apiKey: SecretSource | undefined;
  readonly timeouts: UpstreamTimeouts;
  readonly retry: RetryPolicy;
  readonly maxBodyBytes: number;
  readonly maxTokenLifetimeSec: number;
  readonly log: LogSink;
}

/** Error bodies are read whole (to redact the key); larger ones are refused rather than leaked. */
const MAX_ERROR_BODY_BYTES = 1024 * 1024;
/** Non-streamed bodies are copied for usage extraction only up to this size. */
const MAX_SUMMARY_BODY_BYTES = 8 * 1024 * 1024;
/** Failures before any response byte that are worth another attempt. */
const RETRYABLE: ReadonlySet<UpstreamFailure> = new Set(['connect_refused', 'connect_timeout', 'reset']);

export function sendGatewayError(req: IncomingMessage, res: ServerResponse, error: ProxyError, param: string | null = null, message?: string, allow?: string): void {
  writeProxyError(req, res, error.status, 'application/json', openAiErrorBody(error, param, message), allow);
}

function isEventStream(contentType: string | undefined): boolean {
  return contentType?.split(';', 1)[0]!.trim().toLowerCase() === 'text/event-stream';
}

/** Reads the request body up to `max` bytes: the buffer, 'too_large', or 'aborted'. */
function readBody(req: IncomingMessage, max: number): Promise<Buffer | 'too_large' | 'aborted'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.off('data', onData);
        req.pause();
        resolve('too_large');
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks, size)));
    req.once('close', () => resolve('aborted'));
  });
}

/** Replaces every occurrence of `secret` in an upstream error body. */
export function redactSecret(body: Buffer, secret: string): Buffer {
  if (secret.length === 0 || body.indexOf(secret) < 0) return body;
  return Buffer.from(body.toString('latin1').split(secret).join('[REDACTED]'), 'latin1');
}

function errorClassForStatus(status: number): string | undefined {
  if (status < 400) return undefined;
  if (status === 429) return 'rate_limited';
  if (status === 401 || status === 403) return 'upstream_rejected_key';
  return status < 500 ? 'upstream_4xx' : 'upstream_5xx';
}

function readAll(stream: IncomingMessage, max: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        stream.destroy();
        resolve(undefined);
      } else chunks.push(c);
    });
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('error', () => resolve(undefined));
  });
}

export function createGatewayHandler(deps: GatewayDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const allowed = new Set(deps.config.allowedModels);
  const modelsBody = modelsListBody(deps.config.allowedModels, deps.config.provider);
  const { upstream } = deps.config;

  return (req, res) => {
    void handle(req, res).catch((err: unknown) => {
      deps.log({ event: 'handler_error', listener: 'model', error: (err as Error)?.name ?? 'Error', detail: String((err as Error)?.message ?? err) });
      if (!res.headersSent) sendGatewayError(req, res, ERRORS.internal);
      else res.destroy();
    });
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedAt = performance.now();
    const exchange = newExchange();
    const method = req.method ?? '';
    const route = routeGatewayRequest(method, req.url ?? '');
    let identity: Identity = { instanceId: null, workflow: null, runId: null };
    let model: string | undefined;
    let stream = false;
    /** An SSE relay began: only then can a stream be interrupted. */
    let relaying = false;
    let summary: CompletionSummary | undefined;
    let retries = 0;
    let rateLimited = 0;
    let upstreamRequestId: string | undefined;
    let requestId: string;

    const logDone = (status: number, error?: string) => {
      const usage = summary?.usage ?? null;
      const interrupted = exchange.failure === undefined ? null : exchange.failure === 'client_aborted' ? 'client' : exchange.failure === 'idle_timeout' ? 'idle_timeout' : 'upstream';
      deps.record({
        event: 'request',
        listener: 'model',
        request_id: requestId,
        upstream_request_id: upstreamRequestId ?? null,
        provider: deps.config.provider,
        model: model ?? null,
        response_model: summary?.model?.slice(0, 128) ?? null,
        method,
        path: route.ok ? (route.route === 'chat' ? '/v1/chat/completions' : '/v1/models') : null,
        status,
        stream,
        duration_ms: elapsedMs(startedAt, performance.now()),
        ttft_ms: summary?.firstTokenAt != null ? elapsedMs(startedAt, summary.firstTokenAt) : null,
        input_tokens: usage?.inputTokens ?? null,
        output_tokens: usage?.outputTokens ?? null,
        reasoning_tokens: usage?.reasoningTokens ?? null,
        cached_tokens: usage?.cachedTokens ?? null,
        usage_complete: usage !== null,
        finish_reason: summary?.finishReason ?? null,
        interrupted: relaying ? interrupted : null,
        retries,
        rate_limited: rateLimited,
        instance_id: identity.instanceId,
        workflow: identity.workflow,
        run_id: identity.runId,
        bytes_in: exchange.bytesIn,
        bytes_out: exchange.bytesOut,
        error: error ?? exchange.failure ?? null,
      });
    };
    const reject = (error: ProxyError, param: string | null = null, message?: string, allow?: string) => {
      sendGatewayError(req, res, error, param, message, allow);
      logDone(error.status, error.code);
    };

    // Rule 7: correlation id, forwarded or generated, returned to the client on every answer,
    // and in the log line even when the request is refused or abandoned.
    requestId = clientRequestId(req.headers) ?? randomUUID();
    res.setHeader('x-client-request-id', requestId);

    if (!route.ok) return reject(route.error, null, undefined, route.allow);

    // Rule 1: who is asking. With a signing key only a verified token counts; without one the
    // headers are informational (network-policy mode).
    if (deps.config.signingKey) {
      const m = /^Bearer +([^ ]+)$/.exec(req.headers.authorization ?? '');
      if (!m) return reject(ERRORS.unauthenticated);
      const verified = verifyBotToken(m[1]!, deps.config.signingKey, {
        nowSec: Math.floor(Date.now() / 1000),
        maxLifetimeSec: deps.maxTokenLifetimeSec,
        leewaySec: TOKEN_LEEWAY_SEC,
      });
      if (!verified.ok) return reject(ERRORS.unauthenticated, null, `${ERRORS.unauthenticated.message} (token ${verified.reason})`);
      identity = { instanceId: verified.claims.sub, workflow: verified.claims.workflow, runId: verified.claims.run_id };
    } else {
      const fromHeaders = identityFromHeaders(req.headers);
      if ('error' in fromHeaders) return reject(fromHeaders.error, fromHeaders.param);
      identity = fromHeaders;
    }

    if (route.route === 'models') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(modelsBody), 'cache-control': 'no-store' });
      res.end(modelsBody);
      return logDone(200);
    }

    // Rule 2: the model, from the JSON body.
    if (!isJsonContentType(req.headers['content-type'])) return reject(ERRORS.unsupportedMediaType);
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > deps.maxBodyBytes) return reject(ERRORS.bodyTooLarge);
    const body = await readBody(req, deps.maxBodyBytes);
    if (body === 'aborted') {
      exchange.failure = 'client_aborted';
      return logDone(0);
    }
    if (body === 'too_large') {
      reject(ERRORS.bodyTooLarge);
      res.once('finish', () => req.destroy());
      return;
    }
    const chat = validateChatRequest(body, allowed);
    if (!chat.ok) return reject(chat.error, chat.param);
    model = chat.model;
    stream = chat.stream;

    // Rule 3: the key, read now (it may have rotated).
    if (!deps.apiKey) return reject(ERRORS.upstreamKeyMissing);
    const key = deps.apiKey.read();
    if (!key.ok) return reject(key.reason === 'missing' ? ERRORS.upstreamKeyMissing : ERRORS.upstreamKeyInvalid);

    const target = {
      agent: deps.agent,
      hostname: upstream.hostname,
      port: upstream.port,
      method: 'POST',
      path: upstreamChatPath(upstream.basePath, route.query),
      headers: gatewayUpstreamHeaders(req.headers, {
        host: upstream.host,
        apiKey: key.value,
        clientRequestId: requestId,
        contentLength: body.length,
        organization: deps.config.organization,
        project: deps.config.project,
      }),
    };

    // Made only when a retry has to wait: most requests never need it.
    let cancel: AbortController | undefined;
    let call: UpstreamCall | undefined;
    abortUpstreamOnClientClose(res, () => call?.request, exchange, () => cancel?.abort());

    // Rule 4 with retries: only while nothing has been sent to the client.
    let waited = 0;
    for (;;) {
      call = openUpstream(target, deps.timeouts, body, exchange);
      let upstreamRes: IncomingMessage;
      try {
        upstreamRes = await call.response;
      } catch (err) {
        const kind = (err as UpstreamError).kind;
        if (exchange.failure === 'client_aborted') return logDone(0);
        const delay = RETRYABLE.has(kind) ? nextRetryDelay(deps.retry, retries, waited, undefined, Math.random) : undefined;
        if (delay === undefined) {
          const error = errorForUpstreamFailure(kind);
          sendGatewayError(req, res, error);
          return logDone(error.status, kind);
        }
        exchange.failure = undefined;
        if (!(await wait(delay))) return logDone(0);
        waited += delay;
        retries++;
        continue;
      }

      const status = upstreamRes.statusCode ?? 502;
      upstreamRequestId = typeof upstreamRes.headers['x-request-id'] === 'string' ? upstreamRes.headers['x-request-id'].slice(0, 128) : undefined;
      if (status === 429) {
        rateLimited++;
        const delay = nextRetryDelay(deps.retry, retries, waited, retryHintMs(upstreamRes.headers, Date.now()), Math.random);
        if (delay !== undefined) {
          upstreamRes.resume();
          if (!(await wait(delay))) return logDone(0);
          waited += delay;
          retries++;
          continue;
        }
      }
      return relay(upstreamRes, status, key.value);
    }

    async function wait(ms: number): Promise<boolean> {
      if (exchange.failure === 'client_aborted') return false; // gone before the wait began
      try {
        cancel ??= new AbortController();
        await sleep(ms, undefined, { signal: cancel.signal });
        return true;
      } catch {
        return false; // the client went away while we waited
      }
    }

    async function relay(upstreamRes: IncomingMessage, status: number, apiKey: string): Promise<void> {
      // Rule 8: credential-bearing headers removed, by name and by value. The correlation id
      // is ours (set on the response at the start), whatever the upstream echoes.
      const headers = scrubResponseHeaders(upstreamRes.rawHeaders, [apiKey]);
      const pairs: string[] = [];
      for (let i = 0; i < headers.length; i += 2) {
        if (headers[i]!.toLowerCase() === 'x-client-request-id') continue;
        pairs.push(headers[i]!, headers[i + 1]!);
      }

      if (status >= 400) {
        // Upstreams echo keys in "incorrect API key" messages: read the error whole, redact.
        const errorBody = await readAll(upstreamRes, MAX_ERROR_BODY_BYTES);
        if (errorBody === undefined) {
          sendGatewayError(req, res, ERRORS.upstreamProtocol);
          return logDone(ERRORS.upstreamProtocol.status, 'upstream_error_body_too_large');
        }
        const clean = redactSecret(errorBody, apiKey);
        const out: string[] = [];
        for (let i = 0; i < pairs.length; i += 2) {
          if (pairs[i]!.toLowerCase() !== 'content-length') out.push(pairs[i]!, pairs[i + 1]!);
        }
        out.push('Content-Length', String(clean.length));
        exchange.bytesOut = clean.length;
        res.writeHead(status, out);
        res.end(clean);
        if (status === 401 || status === 403) {
          deps.log({ event: 'config_error', listener: 'model', provider: deps.config.provider, status, message: 'the upstream refused the gateway API key: check UPSTREAM_API_KEY / UPSTREAM_API_KEY_FILE' });
        }
        return logDone(status, errorClassForStatus(status));
      }

      if (isEventStream(upstreamRes.headers['content-type'])) {
        stream = true;
        relaying = true;
        // Rule 5: every chunk is written as it arrives; a copy goes to the usage inspector.
        pairs.push('X-Accel-Buffering', 'no');
        const inspector = new SseInspector(() => performance.now());
        deps.streams?.opened(model!);
        try {
          await relayResponse(res, upstreamRes, pairs, exchange, (chunk) => inspector.push(chunk), true);
        } finally {
          deps.streams?.closed(model!);
        }
        summary = inspector.finish();
        return logDone(status);
      }

      const copy: Buffer[] = [];
      let copied = 0;
      await relayResponse(res, upstreamRes, pairs, exchange, (chunk) => {
        copied += chunk.length;
        if (copied <= MAX_SUMMARY_BODY_BYTES) copy.push(chunk);
      });
      if (copied <= MAX_SUMMARY_BODY_BYTES && exchange.failure === undefined) summary = summarizeJsonCompletion(Buffer.concat(copy));
      return logDone(status);
    }
  }
}
