// Start-up: the model gateway, with its limits, providers and credentials, its warnings and its
// listening line.
import type { ServeOptions } from '../config/cli.ts';
import { VERSION } from '../config/version.ts';
import type { LogSink } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';
import { createUpstreamAgent } from '../http/forward.ts';
import { tunnelRouteFor, type Egress } from '../http/tunnel.ts';
import { startListener, type Listener } from '../http/server.ts';
import type { GatewayConfig } from '../gateway/config.ts';
import { createGatewayHandler, createGatewayUpgrade, refuseAtGateway, type GatewayDeps } from '../gateway/handler.ts';
import type { Provider } from '../gateway/providers.ts';
import { PROTOCOLS, servedApis } from '../gateway/protocols/table.ts';
import { openCredential } from '../gateway/credentials/table.ts';
import { readTextFile, type ServeConfig } from './load.ts';
import { notReadyReason, unusableFiles } from './readiness.ts';
import { openLimits, type Shared } from './shared.ts';
import { startupWarnings, unenforcedPolicyLimits } from './warnings.ts';
import { listenerAuthentication, listenerVerifier, openVerifier } from './keys.ts';
import { listenerTls } from './tls.ts';

type RefreshOutcome = { ok: true } | { ok: false; reason: string };

function openProviders(gateway: GatewayConfig, env: NodeJS.ProcessEnv, egress: Egress, onRefresh: (provider: string, outcome: RefreshOutcome) => void): Provider[] {
  return gateway.providers.map((config) => ({
    config,
    agent: createUpstreamAgent({ ca: config.caFile ? readTextFile(config.caFile, `provider ${config.name}: CA file`) : undefined, tlsInsecureSkipVerify: false, plainHttp: config.upstream.plainHttp, tunnel: config.upstream.plainHttp ? undefined : tunnelRouteFor(egress, config.upstream.hostname, config.upstream.port) }),
    credential: openCredential(config, env, (outcome) => onRefresh(config.name, outcome), egress),
  }));
}

export async function startGateway(options: ServeOptions, env: NodeJS.ProcessEnv, config: ServeConfig, shared: Shared, log: LogSink<LogEvent>): Promise<Listener> {
  const { gateway, hostedTools } = config;
  const { metrics, prices } = shared;
  const keys = openVerifier(config.botKeys, config.maxTokenLifetimeSec, { log, onProblem: (listener) => metrics?.keyFileProblem(listener) });
  if (keys !== undefined) shared.atExit(keys.close);
  const tlsOf = listenerTls(options, 'model', shared.workloadPolicy, log);
  // Identities the gateway verifies itself: bot tokens, service-account tokens, client certificates.
  const verified = keys !== undefined || shared.serviceAccounts !== undefined || tlsOf.certificates !== undefined;
  const limits = openLimits(config.limits, options, verified, shared.store, log, metrics);
  if (limits === undefined && options.workloadPolicyFile !== undefined) {
    const unenforced = unenforcedPolicyLimits(shared.workloadPolicy()());
    if (unenforced !== undefined) throw new Error(unenforced);
  }
  const providers = openProviders(gateway, env, config.egress, (provider, outcome) => {
    metrics?.credentialRefresh(provider, outcome.ok);
    if (!outcome.ok) log({ event: 'credential_refresh_failed', listener: 'model', provider, reason: outcome.reason });
  });
  for (const { credential } of providers) if (credential.close !== undefined) shared.atExit(() => credential.close?.());
  const gatewayDeps: GatewayDeps = {
    record: (rec) => {
      log(rec);
      metrics?.model(rec);
    },
    streams: metrics?.streams,
    sockets: metrics?.sockets,
    verifier: listenerVerifier([tlsOf.certificates, shared.serviceAccounts, keys?.source]),
    providers,
    protocols: PROTOCOLS,
    hostedTools,
    timeouts: shared.upstreamTimeouts,
    retry: { maxRetries: options.upstreamMaxRetries, budgetMs: options.upstreamRetryBudgetMs, baseDelayMs: 500 },
    maxBodyBytes: options.maxRequestBodyBytes,
    heldBodies: shared.heldBodies,
    revoked: shared.revoked,
    limits: limits?.store,
    prices,
    log,
    trace: shared.telemetry?.model,
  };
  const model = await startListener({
    name: 'model',
    flag: 'model-gateway-listen',
    address: options.modelListen!, // set: load.ts enables no listener whose flag is off
    timeouts: shared.listenerTimeouts,
    ...shared.capped('model'),
    rootIsHealth: true,
    log,
    handle: createGatewayHandler(gatewayDeps),
    notReady: () => notReadyReason(unusableFiles(config.credentialFiles.model)) ?? shared.store?.notReady(),
    refuse: refuseAtGateway(gatewayDeps),
    upgrade: createGatewayUpgrade(gatewayDeps),
    tls: tlsOf.tls,
  });
  const auth = listenerAuthentication(tlsOf.mode, keys, shared.serviceAccounts && options.serviceAccounts.issuer);
  const warnings = startupWarnings({
    model: {
      limits: limits?.policy,
      providers: providers.map((p) => ({ name: p.config.name, models: p.config.models, plainHttp: p.config.upstream.plainHttp, credential: p.credential.type })),
      priced: (provider, model) => prices.get(provider, model) !== undefined,
      hostedTools,
      botAuth: auth.authenticated,
    },
  });
  for (const warning of warnings) log(warning);
  log({
    event: 'listening',
    listener: 'model',
    address: model.address,
    version: VERSION,
    providers: providers.map((p) => ({
      name: p.config.name,
      kind: p.config.kind,
      upstream: `${p.config.upstream.plainHttp ? 'http' : 'https'}://${p.config.upstream.host}${p.config.upstream.basePath}`,
      models: p.config.models,
      // Presence only; a key's value is never logged.
      credential: p.credential.type,
      key: p.credential.present() ? 'present' : 'missing',
      egress: p.config.upstream.plainHttp ? 'direct' : (tunnelRouteFor(config.egress, p.config.upstream.hostname, p.config.upstream.port)?.proxy.label ?? 'direct'),
      websocket: p.config.websocket,
    })),
    apis: servedApis(PROTOCOLS, providers.map((p) => p.config.kind)),
    hosted_tools: [...hostedTools],
    bot_auth: auth.mode,
    ...auth.fields,
  });
  return model;
}
