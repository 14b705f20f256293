// `serve`: start-up as its order. Signals are handled before any listener is announced (a
// supervisor may send SIGTERM as soon as it reads a listening line). `startServing` is the same
// start-up without the process around it (its handlers, signals and exit).
import type { ServeOptions } from '../config/cli.ts';
import { VERSION } from '../config/version.ts';
import { METRICS_LISTENER_CAPS } from '../http/connection-caps.ts';
import type { LineWriter, LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import { writeProxyError } from '../http/respond.ts';
import { startListener, type Listener } from '../http/server.ts';
import { serveMetrics } from '../metrics/registry.ts';
import { startGateway } from './gateway.ts';
import { startGit } from './git.ts';
import { loadServeConfig, openFilesLimit, type ServeConfig } from './load.ts';
import { credentialFileWarnings, notReadyReason, unusableFiles, type CredentialFile } from './readiness.ts';
import { openShared, type Shared } from './shared.ts';
import { installProcessNets, installShutdown, type Shutdown } from './shutdown.ts';
import { startupWarnings, type PolicyFacts } from './warnings.ts';

/** `serve` as a process: the nets under the handlers and the signals first, then start-up. */
export async function serve(options: ServeOptions, env: NodeJS.ProcessEnv, log: LogSink<LogEvent>, lines: LineWriter): Promise<void> {
  installProcessNets(log);
  await startServing(options, env, log, lines, installShutdown(options.shutdownGraceMs, log, lines));
}

/**
 * Start-up in its order, each listener handed to `shutdown` as it starts. Nothing here touches
 * the process (its handlers, its exit), so a test can serve in its own process and stop it with
 * `shutdown.stop`.
 */
export async function startServing(options: ServeOptions, env: NodeJS.ProcessEnv, log: LogSink<LogEvent>, lines: LineWriter, shutdown: Shutdown): Promise<void> {
  const config = loadServeConfig(options, env);
  refuseIfNothingEnabled(config);
  const needed = [...(config.gitEnabled ? config.credentialFiles.git : []), ...(config.gateway.enabled ? config.credentialFiles.model : [])];
  for (const warning of credentialFileWarnings(unusableFiles(needed))) log(warning);
  const shared = openShared(options, env, config.egress, log, shutdown.onExit);
  shutdown.onExit(shared.release);
  if (shared.telemetry !== undefined) shutdown.onDrained(shared.telemetry.flush);
  if (config.gitEnabled) shutdown.addProxy(await startGit(options, config, shared, log));
  if (config.gateway.enabled) shutdown.addProxy(await startGateway(options, env, config, shared, log));
  const facts = { openFilesLimit: openFilesLimit(), proxyListeners: shutdown.proxies.length, caps: shared.caps, metricsCaps: options.metricsListen === undefined ? undefined : METRICS_LISTENER_CAPS };
  for (const warning of startupWarnings({ policy: policyFacts(options, config, shared), descriptors: facts })) log(warning);
  if (shared.metrics === undefined || options.metricsListen === undefined) return; // --metrics-listen off
  shutdown.setMetrics(await startMetrics(options.metricsListen, shared.metrics, shared, shutdown, needed, log, lines));
}

/** The workload policy the listeners hold, and the --limits file (as the gateway read it) that caps its entries' limits, for the warnings. */
function policyFacts(options: ServeOptions, config: ServeConfig, shared: Shared): PolicyFacts | undefined {
  if (options.workloadPolicyFile === undefined) return undefined;
  return { policy: shared.workloadPolicy()(), limits: config.limits };
}

/** With neither listener enabled there is nothing to serve: the error says how to enable one (main exits 1). */
function refuseIfNothingEnabled(config: ServeConfig): void {
  if (config.gitEnabled || config.gateway.enabled) return;
  throw new Error(
    'no listener is enabled (a listener whose --git-auth-listen or --model-gateway-listen is off never is).\n' +
      '  git proxy:     set GIT_HOST_A_TOKEN (host GIT_HOST_A, default github.com), GIT_HOST_B_TOKEN with GIT_HOST_B,\n' +
      '                 a token of a --git-hosts file, or GIT_AUTH_ENABLED=true.\n' +
      '  model gateway: give --providers FILE, set UPSTREAM_API_KEY or UPSTREAM_API_KEY_FILE, or MODEL_GATEWAY_ENABLED=true.',
  );
}

/** The metrics listener: a separate port, so that workloads need not (and, by network policy, cannot) reach it. */
async function startMetrics(address: NonNullable<ServeOptions['metricsListen']>, metrics: NonNullable<Shared['metrics']>, shared: Shared, shutdown: Shutdown, credentialFiles: readonly CredentialFile[], log: LogSink<LogEvent>, lines: LineWriter): Promise<Listener> {
  const proxies = [...shutdown.proxies];
  shutdown.onExit(
    metrics.watchProcess({
      connections: () => new Map(proxies.map((l) => [l.name, l.connections()])),
      logLinesDropped: () => lines.dropped(),
      requestBodyBytesHeld: () => shared.heldBodies.held,
      spans: shared.telemetry?.counts,
    }),
  );
  const listener = await startListener({
    name: 'metrics',
    flag: 'metrics-listen',
    address,
    timeouts: shared.listenerTimeouts,
    // Its own caps, not the proxy listeners': a client filling those cannot starve probes and scrapes.
    ...shared.capped('metrics', METRICS_LISTENER_CAPS),
    // The pod's readiness probe: not ready while a credential file either listener needs is
    // unusable, or while the shared store has been unreachable past --limits-store-unready-after.
    notReady: () => notReadyReason(unusableFiles(credentialFiles)) ?? shared.store?.notReady(),
    log,
    handle: (req, res) => void serveMetrics(metrics.registry, req, res).catch(() => res.destroy()),
    refuse: (req, res, { error }) => writeProxyError(req, res, error.status, 'text/plain; charset=utf-8', `${error.message}\n`),
  });
  log({ event: 'listening', listener: 'metrics', address: listener.address, version: VERSION });
  return listener;
}
