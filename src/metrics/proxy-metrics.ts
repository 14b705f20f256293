// What this proxy measures, and how a finished request's record becomes metrics. Every label
// value comes from a closed set or from configuration (allowlisted models, registered hosts,
// status codes), or from the verified identity, which each family's series cap bounds.
// Because metrics are derived from the same record as the access log line, the two agree.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { ERRORS, type UpstreamFailure } from '../http/errors.ts';
import { CREDENTIAL_REJECTED_STATUSES, credentialRejectedError, TURN_METHOD, type ModelRequestRecord } from '../gateway/record.ts';
import type { GitRequestRecord } from '../git/record.ts';
import { openFileCount } from './open-files.ts';
import { Registry } from './registry.ts';
import { costUsd, type PriceTable } from '../limits/prices.ts';

// OpenTelemetry GenAI semantic conventions, ExplicitBucketBoundaries of
// gen_ai.client.operation.duration and gen_ai.server.time_to_first_token.
const GENAI_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
const GENAI_TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
// Git requests range from a millisecond ref advertisement to a many-minute push.
const STORE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const GIT_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];

/**
 * Every UpstreamFailure (`satisfies` fails the build when the type gains one this lacks) but the
 * client's stalled body, which cuts the upstream request without being the upstream's failure.
 */
const UPSTREAM_FAILURES: ReadonlySet<string> = new Set(
  Object.keys({ connect_refused: 0, dns: 0, tls: 0, reset: 0, connect_timeout: 0, response_timeout: 0, idle_timeout: 0, protocol: 0, truncated: 0, body_timeout: 0, egress: 0, other: 0 } satisfies Record<UpstreamFailure, 0>).filter((k) => k !== 'body_timeout'),
);
/** The one label value for anything unknown (no provider, model, identity, host): never "", which Prometheus reads as no label. */
const NONE = 'none';
/**
 * The gateway's own refusals (4xx codes of its rules: the token, the body, the model, tools,
 * stored state), counted by code; the limits' refusals have their metric, upstream answers none.
 */
const LIMIT_CODES: ReadonlySet<string> = new Set([ERRORS.limitRateExceeded, ERRORS.budgetSpentOpenAi, ERRORS.budgetSpentAnthropic].map((e) => e.code));
const GATEWAY_REFUSALS: ReadonlySet<string> = new Set(
  Object.values(ERRORS)
    .filter((e) => (e.status >= 400 && e.status < 500 && !LIMIT_CODES.has(e.code)) || e === ERRORS.revocationStoreUnavailable || e === ERRORS.revocationStoreStateLost)
    .map((e) => e.code),
);

/** A model call's record error when its provider refused the gateway's own credential (gateway/record.ts). */
const MODEL_CREDENTIAL_REJECTED: ReadonlySet<string> = new Set(CREDENTIAL_REJECTED_STATUSES.map(credentialRejectedError));

// Refusals by the workload token or the hosts file's limits, ref rules included. A request
// without a token is not one: git's first request of every command is answered with the 401
// challenge by design.
const SCOPE_REFUSALS: ReadonlySet<string> = new Set(
  [ERRORS.workloadTokenInvalid, ERRORS.repoNotInScope, ERRORS.pushNotInScope, ERRORS.repoNotInHostRepos, ERRORS.hostReadOnly, ERRORS.refNotAllowed, ERRORS.pushUnreadable].map((e) => e.code),
);

export interface ProxyMetricsOptions {
  readonly maxSeriesPerFamily: number;
  /** Series not updated for this long are dropped (0: never); see Registry. */
  readonly seriesTtlMs: number;
  /** run_id as a label: unbounded by nature, so only when the operator asks. */
  readonly runIdLabel: boolean;
  /** --metrics-drop-instance-id: no instance_id label (a pod name churns); the records keep it. */
  readonly dropInstanceId?: boolean;
  /** proxy_build_info's labels: the version, the commit the bundle was built from, Node's version. */
  readonly build?: { readonly version: string; readonly commit: string; readonly node: string };
  readonly prices: PriceTable;
}

/** Every family, registered once: the names, help texts and labels a scrape shows. */
function registerFamilies(registry: Registry, opts: Pick<ProxyMetricsOptions, 'runIdLabel' | 'dropInstanceId'>) {
  // Counters carry the identity: who made the request, down to the bot instance (and run).
  const who = whoLabels(opts);
  // Latency histograms carry only labels bounded by configuration. A histogram series is 17 to
  // 19 lines (one per bucket), so a label per bot instance made them 84% of a scrape at the
  // cap (86,000 lines, 11 MiB). `api` is the wire protocol (chat_completions, responses,
  // messages): the protocols differ in what a request is, so their latencies are apart.
  const latencyLabels = ['provider', 'model', 'workflow', 'api'];

  return {
    requests: registry.counter('model_gateway_requests_total', 'Model gateway requests by wire protocol and final HTTP status (0: the client left before an answer).', [...who, 'api', 'status']),
    duration: registry.histogram('model_gateway_request_duration_seconds', 'Model gateway request duration, until the last byte was relayed.', latencyLabels, GENAI_DURATION_BUCKETS),
    ttft: registry.histogram('model_gateway_time_to_first_token_seconds', 'Time from request arrival to the first output-bearing stream event.', latencyLabels, GENAI_TTFT_BUCKETS),
    tokens: registry.counter('model_gateway_tokens_total', 'Tokens reported by the upstream usage block, by type (input includes cached and cache_write, output includes reasoning).', [...who, 'type']),
    cost: registry.usdCounter('model_gateway_cost_usd_total', 'Estimated cost in USD from MODEL_PRICES_FILE; models without a price are not counted.', who),
    rateLimited: registry.counter('model_gateway_upstream_rate_limited_total', 'Upstream 429 responses, retried or not.', who),
    modelCredentialRejected: registry.counter('model_gateway_upstream_credential_rejected_total', "Upstream 401 and 403 answers to model calls: the provider refused the gateway's own credential (answered 502 upstream_auth_failed).", ['provider']),
    retries: registry.counter('model_gateway_retries_total', 'Upstream attempts after the first.', who),
    interruptions: registry.counter('model_gateway_stream_interruptions_total', 'Streams that ended before a clean end, by reason.', [...who, 'reason']),
    usageIncomplete: registry.counter('model_gateway_usage_incomplete_total', 'Answered requests whose usage was not (completely) reported.', who),
    inFlight: registry.gauge('model_gateway_streams_in_flight', 'Streams being relayed right now.', ['provider', 'model']),
    gitRequests: registry.counter('git_proxy_requests_total', 'Git proxy requests by final HTTP status (0: the client left before an answer).', ['host', 'route', 'status']),
    gitDuration: registry.histogram('git_proxy_request_duration_seconds', 'Git proxy request duration, until the last byte was relayed.', ['host', 'route'], GIT_DURATION_BUCKETS),
    gitBytesIn: registry.counter('git_proxy_request_bytes_total', 'Request body bytes received from workloads.', ['host', 'route']),
    gitBytesOut: registry.counter('git_proxy_response_bytes_total', 'Response body bytes relayed to workloads.', ['host', 'route']),
    gitUpstreamErrors: registry.counter('git_proxy_upstream_errors_total', 'Upstream failures by kind.', ['host', 'kind']),
    gitCredentialRejected: registry.counter('git_proxy_upstream_credential_rejected_total', "Upstream 401 answers: the git host refused the proxy's own credential (answered 502).", ['host']),
    gitChallenges: registry.counter('git_proxy_auth_challenges_total', 'Requests without credentials answered with the 401 that makes git ask its credential helper (how every git command begins with workload tokens); not in git_proxy_requests_total.', ['host']),
    gitScopeRefusals: registry.counter('git_proxy_scope_refusals_total', 'Git requests refused by the workload token or the hosts file limits, by reason (the error code).', ['host', 'reason']),
    gitClientAborts: registry.counter('git_proxy_client_aborts_total', 'Requests whose client went away before the response was complete.', ['host', 'route']),
    spansExported: registry.counter('proxy_trace_spans_exported_total', 'Spans the OpenTelemetry collector took (OTEL_EXPORTER_OTLP_*).'),
    spansDropped: registry.counter('proxy_trace_spans_dropped_total', 'Spans not exported, by reason: queue_full (the bounded queue was full: the collector slow, down or throttling), export_failed (refused, or never taken after the retries), shutdown (no time left in the grace).', ['reason']),
    buildInfo: registry.gauge('proxy_build_info', 'Always 1: the proxy\'s version, the source commit its bundle was built from, and the Node.js version it runs on.', ['version', 'commit', 'node']),
    rss: registry.gauge('process_resident_memory_bytes', 'Resident memory size in bytes.'),
    fds: registry.gauge('process_open_fds', 'Number of open file descriptors.'),
    startTime: registry.gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.'),
    lagP99: registry.gauge('nodejs_eventloop_lag_p99_seconds', 'Event loop delay beyond the 10 ms sampling interval, 99th percentile since the previous scrape.'),
    lagMax: registry.gauge('nodejs_eventloop_lag_max_seconds', 'Event loop delay beyond the 10 ms sampling interval, maximum since the previous scrape.'),
    heapUsed: registry.gauge('nodejs_heap_size_used_bytes', 'V8 heap in use, in bytes.'),
    heapTotal: registry.gauge('nodejs_heap_size_total_bytes', 'V8 heap reserved, in bytes.'),
    connections: registry.gauge('proxy_active_connections', 'Open client connections per listener.', ['listener']),
    limitRefusals: registry.counter('model_gateway_limit_refusals_total', 'Model calls refused by a limit of --limits, by kind (concurrency, requests_per_minute, tokens_per_minute, run_budget, workflow_budget).', ['provider', 'model', 'workflow', 'kind']),
    limitsStoreUp: registry.gauge('model_gateway_limits_store_up', 'Whether the shared limits store (Redis) is connected (1) or not (0).'),
    limitCharged: registry.usdCounter('model_gateway_limit_charged_usd_total', 'Money charged against the budgets of --limits, by workflow; estimated="true": the upstream reported no complete usage, so the charge is an estimate from the bytes relayed.', ['workflow', 'estimated']),
    limitsStoreSeconds: registry.histogram('model_gateway_limits_store_seconds', 'Round trip of a command to the shared limits store (Redis), by operation (admit, charge).', ['op'], STORE_BUCKETS),
    limitsStoreErrors: registry.counter('model_gateway_limits_store_errors_total', 'Admissions or charges the limits store could not serve (the failure policy applied).'),
    limitsStoreStateLost: registry.counter('model_gateway_limits_store_state_lost_total', 'Times the shared limits store (Redis) was found to have lost its state (its state marker gone or replaced: restarted empty, flushed, evicting); the failure policy applies until an operator confirms it or the tokens issued before have expired.'),
    credentialRefreshes: registry.counter('model_gateway_credential_refreshes_total', 'Refreshes of a minted provider credential (a Google access token), by outcome (ok, failed).', ['provider', 'outcome']),
    connectionsRefused: registry.counter('proxy_connections_refused_total', 'Client connections closed on arrival by a listener total cap (reason total: --max-connections; 64 on the metrics listener) or per-address cap (per_client: --max-connections-per-client; 16 on the metrics listener).', ['listener', 'reason']),
    gatewayRefusals: registry.counter('model_gateway_refusals_total', "Model calls the gateway refused by its own rules, by workflow and reason (the error code: invalid_bot_token, tool_not_allowed, stored_state_not_allowed, model_not_allowed, duplicate_key, revocation_store_unavailable, ...); the limits' refusals are model_gateway_limit_refusals_total.", ['workflow', 'reason']),
    revokedRefused: registry.counter('proxy_revoked_tokens_refused_total', 'Requests refused because their token, run or instance is on the deny list (--revocations, or the shared store), on either listener.'),
    keyFileProblems: registry.counter('proxy_key_file_problems_total', 'Problems found when re-reading a listener\'s token key files (--bot-keys, --git-keys, *_SIGNING_KEY_FILE): a file unreadable or malformed (its last good key stays), two files with one kid, a key file or directory gone (its keys removed); each counted once until it is fixed.', ['listener']),
    logDropped: registry.counter('proxy_log_lines_dropped_total', 'Log lines dropped because the stdout reader fell more than 8 MiB behind.'),
    bodyBytesHeld: registry.gauge('proxy_request_body_bytes_held', 'Request body bytes the process holds right now (model calls being read and checked, until their answer begins), counted against --max-held-request-bytes.'),
    socketsOpen: registry.gauge('model_gateway_websockets_open', 'Responses API WebSocket connections open through the gateway, by provider.', ['provider']),
    socketTurns: registry.counter('model_gateway_websocket_turns_total', 'Turns on Responses WebSocket connections, by outcome (completed, incomplete, failed, upstream_error, refused by the gateway, interrupted).', ['provider', 'model', 'workflow', 'outcome']),
    socketFramesRefused: registry.counter('model_gateway_websocket_frames_refused_total', 'WebSocket frames and messages refused, by side (client, upstream) and reason (the RFC 6455 rule broken, or binary_message).', ['side', 'reason']),
    bodiesRefused: registry.counter('model_gateway_request_bodies_refused_total', 'Model calls answered 503 request_bodies_full: their body would have taken the request body bytes held at once past --max-held-request-bytes.'),
  };
}

type Families = ReturnType<typeof registerFamilies>;

/** The identity labels of the model counters: instance_id unless dropped, run_id when asked for. */
function whoLabels({ runIdLabel, dropInstanceId }: Pick<ProxyMetricsOptions, 'runIdLabel' | 'dropInstanceId'>): string[] {
  return ['provider', 'model', ...(dropInstanceId ? [] : ['instance_id']), 'workflow', ...(runIdLabel ? ['run_id'] : [])];
}

/** Pure: how a WebSocket turn ended, from its record (the metric's `outcome`). */
export function turnOutcome(r: Pick<ModelRequestRecord, 'attempts' | 'interrupted' | 'status' | 'error' | 'finish_reason'>): string {
  if (r.attempts === 0) return 'refused';
  if (r.interrupted !== null) return 'interrupted';
  if (r.status >= 400) return 'upstream_error';
  if (r.error !== null) return 'failed';
  return r.finish_reason === 'completed' ? 'completed' : 'incomplete';
}

/** A finished model call's record, as metrics (the same record the access log line is). */
function recordModelCall(m: Families, opts: ProxyMetricsOptions, r: ModelRequestRecord): void {
  const w = opts.dropInstanceId ? [r.provider ?? NONE, r.model ?? NONE, r.workflow ?? NONE] : [r.provider ?? NONE, r.model ?? NONE, r.instance_id ?? NONE, r.workflow ?? NONE];
  if (opts.runIdLabel) w.push(r.run_id ?? NONE);
  m.requests.inc([...w, r.api ?? NONE, String(r.status)]);
  const latency = [r.provider ?? NONE, r.model ?? NONE, r.workflow ?? NONE, r.api ?? NONE];
  m.duration.observe(latency, r.duration_ms / 1000);
  if (r.ttft_ms !== null) m.ttft.observe(latency, r.ttft_ms / 1000);
  if (r.rate_limited > 0) m.rateLimited.inc(w, r.rate_limited);
  if (r.error !== null && MODEL_CREDENTIAL_REJECTED.has(r.error)) m.modelCredentialRejected.inc([r.provider ?? NONE]);
  if (r.retries > 0) m.retries.inc(w, r.retries);
  if (r.interrupted !== null) m.interruptions.inc([...w, r.interrupted]);
  if (r.status >= 200 && r.status < 300 && r.usage_complete === false) m.usageIncomplete.inc(w);
  if (r.error !== null && r.limit === null && GATEWAY_REFUSALS.has(r.error)) m.gatewayRefusals.inc([r.workflow ?? NONE, r.error]);
  if (r.error === ERRORS.requestBodiesFull.code) m.bodiesRefused.inc([]);
  if (r.method === TURN_METHOD) m.socketTurns.inc([r.provider ?? NONE, r.model ?? NONE, r.workflow ?? NONE, turnOutcome(r)]);
  if (r.limit !== null) m.limitRefusals.inc([r.provider ?? NONE, r.model ?? NONE, r.workflow ?? NONE, r.limit]);
  if (r.charged_usd !== null && r.charged_usd > 0) m.limitCharged.inc([r.workflow ?? NONE, String(r.charge_estimated === true)], r.charged_usd);
  const counts = { input: r.input_tokens, output: r.output_tokens, reasoning: r.reasoning_tokens, cached: r.cached_tokens, cache_write: r.cache_write_tokens };
  for (const [type, n] of Object.entries(counts)) if (n !== null && n > 0) m.tokens.inc([...w, type], n);
  const price = r.model === null || r.provider === null ? undefined : opts.prices.get(r.provider, r.model);
  const cost = price ? costUsd(price, counts) : undefined;
  if (cost !== undefined && cost > 0) m.cost.inc(w, cost);
}

/** A finished git request's record, as metrics. */
function recordGitRequest(m: Families, r: GitRequestRecord): void {
  // The credential challenge that begins every git command is no refusal: counted apart,
  // so that a 4xx rate on git_proxy_requests_total means something.
  if (r.challenge) return m.gitChallenges.inc([r.host ?? NONE]);
  const where = [r.host ?? NONE, r.route ?? NONE];
  m.gitRequests.inc([...where, String(r.status)]);
  m.gitDuration.observe(where, r.duration_ms / 1000);
  if (r.bytes_in > 0) m.gitBytesIn.inc(where, r.bytes_in);
  if (r.bytes_out > 0) m.gitBytesOut.inc(where, r.bytes_out);
  if (r.error !== undefined && UPSTREAM_FAILURES.has(r.error)) m.gitUpstreamErrors.inc([r.host ?? NONE, r.error]);
  if (r.error === 'client_aborted') m.gitClientAborts.inc(where);
  if (r.error === ERRORS.upstreamRejectedCredential.code) m.gitCredentialRejected.inc([r.host ?? NONE]);
  if (r.error !== undefined && SCOPE_REFUSALS.has(r.error)) m.gitScopeRefusals.inc([r.host ?? NONE, r.error]);
}

/** What the process gauges read when scraped. */
export interface ProcessReadings {
  /** Open client connections, by listener. */
  readonly connections: () => ReadonlyMap<string, number>;
  readonly logLinesDropped: () => number;
  /** Request body bytes held right now (src/http/held-bodies.ts). */
  readonly requestBodyBytesHeld: () => number;
  /** With tracing on: spans exported and dropped so far (src/telemetry/exporter.ts). */
  readonly spans?: () => { readonly exported: number; readonly dropped: Readonly<Record<string, number>> };
}

/** The exporter's totals since the last scrape, added to the span counters. */
function countSpans(m: Families, now: ReturnType<NonNullable<ProcessReadings['spans']>>, seen: { exported: number; dropped: Record<string, number> }): void {
  if (now.exported > seen.exported) m.spansExported.inc([], now.exported - seen.exported);
  seen.exported = now.exported;
  for (const [reason, n] of Object.entries(now.dropped)) {
    if (n > (seen.dropped[reason] ?? 0)) m.spansDropped.inc([reason], n - (seen.dropped[reason] ?? 0));
    seen.dropped[reason] = n;
  }
}

/** Process and listener gauges, read when scraped. */
function watchProcessGauges(registry: Registry, m: Families, { connections, logLinesDropped, requestBodyBytesHeld, spans }: ProcessReadings): () => void {
  let droppedSeen = 0;
  const spansSeen = { exported: 0, dropped: {} as Record<string, number> };
  // The histogram measures each sampling timer's delay including the interval itself.
  const LAG_RESOLUTION_MS = 10;
  const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  lag.enable();
  registry.onCollect(() => {
    const mem = process.memoryUsage();
    m.rss.set([], mem.rss);
    m.heapUsed.set([], mem.heapUsed);
    m.heapTotal.set([], mem.heapTotal);
    const fds = openFileCount();
    if (fds !== undefined) m.fds.set([], fds); // not Linux: the metric keeps its last value (0)
    const beyond = (ns: number) => Math.max(0, ns / 1e9 - LAG_RESOLUTION_MS / 1000);
    m.lagP99.set([], beyond(lag.percentile(99)));
    m.lagMax.set([], beyond(lag.max));
    lag.reset();
    for (const [listener, n] of connections()) m.connections.set([listener], n);
    m.bodyBytesHeld.set([], requestBodyBytesHeld());
    const dropped = logLinesDropped();
    if (dropped > droppedSeen) m.logDropped.inc([], dropped - droppedSeen);
    droppedSeen = dropped;
    if (spans !== undefined) countSpans(m, spans(), spansSeen);
  });
  return () => lag.disable();
}

export function createProxyMetrics(opts: ProxyMetricsOptions) {
  const registry = new Registry(opts.maxSeriesPerFamily, opts.seriesTtlMs);
  const m = registerFamilies(registry, opts);
  m.startTime.set([], Math.round(Date.now() / 1000 - process.uptime()));
  if (opts.build) m.buildInfo.set([opts.build.version, opts.build.commit, opts.build.node], 1);

  return {
    registry,
    model: (r: ModelRequestRecord): void => recordModelCall(m, opts, r),
    git: (r: GitRequestRecord): void => recordGitRequest(m, r),

    streams: {
      opened: (provider: string, model: string) => m.inFlight.add([provider, model], 1),
      closed: (provider: string, model: string) => m.inFlight.add([provider, model], -1),
    },

    sockets: {
      opened: (provider: string) => m.socketsOpen.add([provider], 1),
      closed: (provider: string) => m.socketsOpen.add([provider], -1),
      refused: (side: 'client' | 'upstream', reason: string) => m.socketFramesRefused.inc([side, reason]),
    },

    limitsStore(up: boolean): void {
      m.limitsStoreUp.set([], up ? 1 : 0);
    },

    revokedTokenRefused(): void {
      m.revokedRefused.inc([]);
    },

    limitsStoreError(): void {
      m.limitsStoreErrors.inc([]);
    },

    limitsStoreStateLost(): void {
      m.limitsStoreStateLost.inc([]);
    },

    limitsStoreRoundTrip(op: 'admit' | 'charge', seconds: number): void {
      m.limitsStoreSeconds.observe([op], seconds);
    },

    credentialRefresh(provider: string, ok: boolean): void {
      m.credentialRefreshes.inc([provider, ok ? 'ok' : 'failed']);
    },

    keyFileProblem(listener: string): void {
      m.keyFileProblems.inc([listener]);
    },

    connectionRefused(listener: string, reason: 'total' | 'per_client'): void {
      m.connectionsRefused.inc([listener, reason]);
    },

    /** Starts the process and listener gauges, read when scraped; returns what stops their sampling. */
    watchProcess(readings: ProcessReadings): () => void {
      return watchProcessGauges(registry, m, readings);
    },
  };
}
