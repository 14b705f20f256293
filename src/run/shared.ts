// Start-up, the parts both listeners share: metrics, the store client, the deny list, the
// connection caps, the count of request bodies held and the timeouts; and the limits the gateway applies.
import type { ServeOptions } from '../config/cli.ts';
import { asUsageError } from '../config/cli.ts';
import { COMMIT, VERSION } from '../config/version.ts';
import { HeldBodies } from '../http/held-bodies.ts';
import type { LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import type { ListenerTimeouts } from '../http/server.ts';
import type { Egress } from '../http/tunnel.ts';
import { runCoarseClock } from '../metrics/registry.ts';
import { createProxyMetrics } from '../metrics/proxy-metrics.ts';
import type { PriceTable } from '../limits/prices.ts';
import { revocationList } from '../auth/revocations.ts';
import { NOT_REVOKED, type RevocationCheck, type RevocationVerdict } from '../auth/identity.ts';
import { storeRevocations } from '../auth/redis-revocations.ts';
import { LocalLimits, type LimitsStore } from '../limits/admission.ts';
import { RedisLimits } from '../limits/redis-store.ts';
import type { LimitsPolicy } from '../limits/policy.ts';
import { RespClient } from '../store/resp.ts';
import { showAddress } from '../store/node.ts';
import { storeConnection, storeFlags } from '../store/config.ts';
import { storeNotReadyReason } from './readiness.ts';
import { StoreStateWatch } from '../store/state-marker.ts';
import type { TokenSource } from '../auth/verifier.ts';
import type { WorkloadPolicy } from '../auth/workload-policy.ts';
import { sharedWorkloadPolicy } from './policy-file.ts';
import { loadPrices, type LimitsFile } from './load.ts';
import { openServiceAccounts } from './service-accounts.ts';
import { openTelemetry, type Telemetry } from './telemetry.ts';

type ProxyMetrics = ReturnType<typeof createProxyMetrics>;
type StoreMetrics = { limitsStore(up: boolean): void; limitsStoreError(): void; limitsStoreRoundTrip(op: 'admit' | 'charge', seconds: number): void; limitsStoreStateLost(): void; revokedTokenRefused(): void };

/**
 * The store the replicas share, whether it lost its state (a store/state-marker.ts verdict, read on
 * every call), and /healthz's reason to answer 503 for it (readiness.ts: storeNotReadyReason).
 */
type SharedStore = { readonly client: RespClient; readonly stateLost: () => boolean; readonly notReady: () => string | undefined };


export type ConnectionCapsOf = (listener: string, listenerCaps?: { total: number; perClient: number }) => {
  caps: { total: number; perClient: number };
  onConnectionRefused: (reason: 'total' | 'per_client') => void;
};

/** What every listener is built from. */
export interface Shared {
  readonly prices: PriceTable;
  readonly metrics: ProxyMetrics | undefined;
  readonly store: SharedStore | undefined;
  readonly revoked: RevocationCheck | undefined;
  /** Kubernetes service-account tokens (--sa-issuer), asked by both listeners before their own keys. */
  readonly serviceAccounts?: TokenSource;
  /** The --workload-policy file, opened once at its first use: certificates and service accounts are mapped through it. */
  readonly workloadPolicy: () => () => WorkloadPolicy;
  readonly caps: { total: number; perClient: number };
  readonly capped: ConnectionCapsOf;
  /** The request-body bytes the process holds at once, under --max-held-request-bytes: one count for every listener that holds bodies (the gateway; git streams its pushes). */
  readonly heldBodies: HeldBodies;
  readonly listenerTimeouts: ListenerTimeouts;
  readonly upstreamTimeouts: { connectMs: number; responseMs: number; idleMs: number; bodyIdleMs: number };
  /**
   * Takes what a part of start-up runs on its own (a refresh timer, a file watch, a poll), for the
   * shutdown order's end to stop (Shutdown.onExit): in a process that serves, its exit ends them
   * anyway; a proxy served in a test's process is stopped whole.
   */
  readonly atExit: (stop: () => void) => void;
  /** Tracing (OTEL_EXPORTER_OTLP_*), when a collector is named. */
  readonly telemetry: Telemetry | undefined;
  /** Closes the store's connection and stops the series clock (the shutdown order's end). */
  readonly release: () => void;
}

export function openShared(options: ServeOptions, env: NodeJS.ProcessEnv, egress: Egress, log: LogSink<LogEvent>, atExit: Shared['atExit']): Shared {
  // The price table is checked even with `--metrics-listen off` (e.g. a second proxy beside the
  // first on one host), so that switching metrics on cannot reveal a broken file; but nothing
  // is recorded that nobody could read.
  const prices = loadPrices(env);
  const metrics =
    options.metricsListen === undefined
      ? undefined
      : createProxyMetrics({ maxSeriesPerFamily: options.metricsMaxSeries, seriesTtlMs: options.metricsSeriesTtlMs, runIdLabel: options.metricsRunIdLabel, dropInstanceId: options.metricsDropInstanceId, prices, build: { version: VERSION, commit: COMMIT, node: process.version } });
  // Series expiry runs on a coarse clock, so that recording a request never reads the time.
  const clock = metrics && options.metricsSeriesTtlMs > 0 ? runCoarseClock(metrics.registry, () => performance.now()) : undefined;
  const listenerTimeouts = { headerMs: options.headerTimeoutMs, keepAliveMs: options.idleTimeoutMs };
  const store = openStore(options, log, metrics, atExit);
  const revoked = openRevocations(options, store, log, metrics);
  const workloadPolicy = sharedWorkloadPolicy(options.workloadPolicyFile, log);
  const serviceAccounts = openServiceAccounts(options, Math.floor(options.maxTokenLifetimeMs / 1000), egress, workloadPolicy, log, atExit);
  const caps = { total: options.maxConnections, perClient: options.maxConnectionsPerClient };
  const capped: ConnectionCapsOf = (listener, listenerCaps = caps) => ({ caps: listenerCaps, onConnectionRefused: (reason) => metrics?.connectionRefused(listener, reason) });
  const heldBodies = new HeldBodies(options.maxHeldRequestBytes);
  const upstreamTimeouts = { connectMs: options.upstreamConnectTimeoutMs, responseMs: options.upstreamResponseTimeoutMs, idleMs: options.upstreamIdleTimeoutMs, bodyIdleMs: options.bodyTimeoutMs };
  const release = () => {
    store?.client.close();
    clearInterval(clock);
  };
  const telemetry = openTelemetry(env, egress, log);
  if (telemetry !== undefined) atExit(telemetry.stop);
  return { prices, metrics, store, revoked, serviceAccounts, workloadPolicy, caps, capped, heldBodies, listenerTimeouts, upstreamTimeouts, atExit, release, telemetry };
}

/**
 * The store the replicas share (--limits-store redis://), when there is one: the limits' state and
 * the deny list of revoked tokens. Its state changes are logged and counted: up and down, and a
 * store found to have lost its state (its marker, checked on every connection before it carries a
 * call and every few seconds), and trusted again. Its settings are checked at the first connection.
 */
function openStore(options: ServeOptions, log: LogSink<LogEvent>, metrics: StoreMetrics | undefined, atExit: Shared['atExit']): SharedStore | undefined {
  if (options.limitsStore === 'memory') return undefined;
  const { where, options: connection, switches } = asUsageError(() => storeConnection(storeFlags(options)));
  const policy = options.limitsStoreFailure;
  const iso = (sec: number) => new Date(sec * 1000).toISOString();
  const state = new StoreStateWatch({
    maxTokenLifetimeSec: Math.floor(options.maxTokenLifetimeMs / 1000),
    onWarning: (message) => log({ event: 'warning', store: where, message }),
    onChange: (change) => {
      if (change.state === 'trusted') {
        log({ event: 'limits_store', state: 'trusted', store: where, reason: change.reason, failure_policy: policy });
        return;
      }
      metrics?.limitsStoreStateLost();
      const consequence = policy === 'closed'
        ? `model calls are refused and tokens are unchecked (503) until an operator runs confirm-store-reset, or until ${iso(change.untilSec)}, when every token issued before has expired`
        : 'calls go on without them (--limits-store-failure open)';
      log({ event: 'limits_store', state: 'lost', store: where, lost_at: iso(change.lostAtSec), until: iso(change.untilSec), failure_policy: policy, message: `the limits store lost its state (restarted empty, flushed or evicting): revocations and spend written before ${iso(change.lostAtSec)} may be gone; ${consequence}` });
    },
  });
  metrics?.limitsStore(false);
  // Unreachable since start-up until the first connection, and from each loss of it.
  let downSinceMs: number | undefined = Date.now();
  const client = new RespClient({
    ...connection,
    name: 'the limits store',
    handshake: (command) => state.onConnect(command),
    onState: (up, why, at) => {
      metrics?.limitsStore(up);
      downSinceMs = up ? undefined : (downSinceMs ?? Date.now());
      // The node it reached: the master the sentinels named, which a failover changes.
      const node = at !== undefined && connection.role === 'required' ? showAddress(at) : undefined;
      log({ event: 'limits_store', state: up ? 'up' : 'down', store: where, node, reason: why || undefined, failure_policy: policy });
    },
  });
  atExit(state.watch(client));
  // A failover's end, as the sentinels announce it: the connection to the old master is dropped then, not when it drops its clients.
  if (switches) atExit(switches((to) => client.leaveUnlessAt(to, `the sentinels moved the master to ${showAddress(to)} (+switch-master)`)));
  const notReady = () => (policy === 'closed' ? storeNotReadyReason(downSinceMs, Date.now(), options.limitsStoreUnreadyAfterMs) : undefined);
  return { client, stateLost: () => state.lost, notReady };
}

/**
 * The limits (--limits), held in this process or in the shared store. They apply per verified
 * identity, so they need bot keys (MODEL_PROXY_SIGNING_KEY, its _FILE, --bot-keys): an identity from headers is the caller's say-so.
 */
export function openLimits(limits: LimitsFile | undefined, options: ServeOptions, botAuth: boolean, shared: SharedStore | undefined, log: LogSink<LogEvent>, metrics: StoreMetrics | undefined): { store: LimitsStore; policy: LimitsPolicy } | undefined {
  if (limits === undefined) return undefined;
  if (!botAuth) throw new Error('--limits: limits apply per verified identity, which needs MODEL_PROXY_SIGNING_KEY (or MODEL_PROXY_SIGNING_KEY_FILE, or --bot-keys), service-account tokens (--sa-issuer) or client certificates (--tls-client-ca); without one, identities are the callers\' own headers');
  const policy: LimitsPolicy = options.allowUnpricedModels ? { ...limits.policy, unpricedModels: 'allowed' } : limits.policy;
  if (shared === undefined) return { store: new LocalLimits(policy), policy };
  const store = new RedisLimits(policy, shared.client, options.limitsStoreFailure, {
    stateLost: shared.stateLost,
    onError: () => metrics?.limitsStoreError(),
    onRoundTrip: (op, seconds) => metrics?.limitsStoreRoundTrip(op, seconds),
    // Charges the store could not take wait for it: logged when they start waiting, when one is
    // dropped (the backlog full), and when all are settled.
    onBacklog: ({ pending, dropped, settled }) => log({ event: 'limits_charges', state: pending > 0 ? 'waiting' : 'settled', pending, settled, dropped }),
  });
  return { store, policy };
}

/**
 * The deny list both listeners read: the --revocations file (re-read when it changed; an
 * unreadable one refuses every token, logged once per distinct problem) and, with a shared store,
 * its keys (one round trip a token). A token either names is refused.
 */
function openRevocations(options: ServeOptions, shared: SharedStore | undefined, log: LogSink<LogEvent>, metrics: StoreMetrics | undefined): RevocationCheck | undefined {
  let lastError = '';
  const file = options.revocationsFile === undefined ? undefined : revocationList(options.revocationsFile, (message) => {
    if (message === lastError) return;
    lastError = message;
    log({ event: 'config_error', message });
  });
  const store = shared === undefined ? undefined : storeRevocations(shared.client, options.limitsStoreFailure, () => metrics?.limitsStoreError(), shared.stateLost);
  if (file === undefined && store === undefined) return undefined;
  // Each refusal of a revoked token is counted (proxy_revoked_tokens_refused_total), whichever listener asked.
  const counted = (verdict: RevocationVerdict): RevocationVerdict => {
    if (verdict.kind === 'revoked') metrics?.revokedTokenRefused();
    return verdict;
  };
  return (who, nowSec) => {
    const why = file?.reason(who, nowSec);
    if (why !== undefined) return counted({ kind: 'revoked', reason: why });
    if (store === undefined) return NOT_REVOKED;
    const verdict = store.verdict(who);
    return verdict instanceof Promise ? verdict.then(counted) : counted(verdict);
  };
}
