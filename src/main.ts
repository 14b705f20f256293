// Entry point, and the only file with side effects: reads the environment and files, starts
// listeners, handles signals, writes to stdout/stderr, exits.
import { readFileSync } from 'node:fs';
import { agentProviders, AGENTS, botClaims, renderAgentConfig, type AgentName } from './gateway/agent-config.ts';
import { asUsageError, parseCommandLine, usage, UsageError, type CommandLine, type ServeOptions } from './config/cli.ts';
import { createUpstreamAgent } from './http/forward.ts';
import { createGatewayHandler, refuseAtGateway, type GatewayDeps } from './gateway/handler.ts';
import type { GitRequestRecord } from './git/record.ts';
import { keyHeader, type Provider } from './gateway/providers.ts';
import { hostedToolsPolicy } from './gateway/protocols/tools.ts';
import { PROTOCOLS } from './gateway/protocols/table.ts';
import { parseGatewayEnv, type GatewayConfig, type ProviderConfig } from './gateway/config.ts';
import { gitWorkloadConfig } from './git/config.ts';
import { createGitHandler, refuseAtGit, type GitUpstream } from './git/proxy.ts';
import { isBasicUsername } from './git/credentials.ts';
import { hostsFromEnv, mergeHosts, parseHostsFile, type HostConfig } from './git/hosts.ts';
import { parseSigningKey, signBotToken, tokenIdFrom } from './auth/jwt.ts';
import { formatRepoPattern, gitScopeClaim, unregisteredScopeHost } from './git/scope.ts';
import { asyncLineWriter, jsonLineSink, type LogSink } from './http/log.ts';
import { clockTickMs, serveMetrics } from './metrics/registry.ts';
import { parsePrices, type PriceTable } from './gateway/prices.ts';
import { createProxyMetrics } from './metrics/proxy-metrics.ts';
import { fileSecret, literalSecret, sanitizePassword, secretSource, type SecretSource } from './config/secret.ts';
import { startListener, type Listener } from './http/server.ts';
import { writeProxyError } from './http/respond.ts';
import { descriptorWarning, METRICS_LISTENER_CAPS, softOpenFilesLimit } from './http/connection-caps.ts';
import { VERSION } from './config/version.ts';
import { addRevocation, revocationList, type Revocation } from './auth/revocations.ts';
import { NOT_REVOKED, type RevocationCheck } from './auth/identity.ts';
import { addStoreRevocation, storeRevocations } from './auth/redis-revocations.ts';
import { randomBytes } from 'node:crypto';
import type { CredentialSource } from './gateway/credentials/source.ts';
import { staticKeySource } from './gateway/credentials/static-key.ts';
import { awsSource, awsWebIdentitySource } from './gateway/credentials/aws.ts';
import { exchangeAtTokenEndpoint, fetchMetadataJson, googleMetadataSource, googleServiceAccountSource } from './gateway/credentials/google.ts';
import { fetchBody } from './gateway/credentials/fetch.ts';
import type { MintedSource } from './gateway/credentials/minted.ts';
import { LocalLimits, type LimitsStore } from './limits/admission.ts';
import { RedisLimits } from './limits/redis-store.ts';
import { RespClient } from './store/resp.ts';
import { describeMarker, formatMarker, newEpoch, STATE_KEY, StoreStateWatch } from './store/state-marker.ts';
import { aboveCeilingReason, hostedToolFeesWarning, parseLimitsFile, unpricedWarning, type LimitsPolicy } from './limits/policy.ts';

const env = process.env;
// Log lines never block the event loop; a reader 8 MiB behind loses lines, counted in metrics.
const logWriter = asyncLineWriter(1, 8 * 1024 * 1024);
const log: LogSink = jsonLineSink((line) => logWriter.write(line));

function loadHosts(options: ServeOptions): HostConfig[] {
  const fromFile = options.gitHostsFile ? parseHostsFile(readFileSync(options.gitHostsFile, 'utf8'), options.gitHostsFile) : [];
  return mergeHosts(hostsFromEnv(env), fromFile);
}

/** A file the configuration names; `what` says which, as in `<what> <path> cannot be read (ENOENT)`. */
function readTextFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${what} ${path} cannot be read (${(err as NodeJS.ErrnoException).code})`);
  }
}

function openGitUpstreams(hosts: readonly HostConfig[]): Map<string, GitUpstream> {
  const upstreams = new Map<string, GitUpstream>();
  for (const config of hosts) {
    const ca = config.caFile ? readTextFile(config.caFile, `git host ${config.key}: CA file`) : undefined;
    const username = config.username === undefined ? undefined : 'literal' in config.username ? literalSecret(config.username.literal) : secretSource(env, config.username);
    const name = username?.read();
    if (name?.ok && !isBasicUsername(name.value)) throw new Error(`git host ${config.key}: the username contains ":", which Basic authentication cannot carry (RFC 7617); fix its username`);
    upstreams.set(config.key, {
      config,
      agent: createUpstreamAgent({ ca, tlsInsecureSkipVerify: config.tlsInsecureSkipVerify }),
      token: secretSource(env, config.token),
      username,
    });
  }
  return upstreams;
}

function loadGateway(options: ServeOptions): GatewayConfig {
  const file = options.providersFile;
  return file === undefined ? parseGatewayEnv(env) : parseGatewayEnv(env, { text: readTextFile(file, '--providers:'), name: file });
}

function openProviders(gateway: GatewayConfig, onRefresh: (provider: string, outcome: { ok: true } | { ok: false; reason: string }) => void): Provider[] {
  return gateway.providers.map((config) => ({
    config,
    agent: createUpstreamAgent({ ca: config.caFile ? readTextFile(config.caFile, `provider ${config.name}: CA file`) : undefined, tlsInsecureSkipVerify: false, plainHttp: config.upstream.plainHttp }),
    credential: openCredential(config, (outcome) => onRefresh(config.name, outcome)),
  }));
}

/** A provider's credential source, from its configuration (the credential-source table). */
function openCredential(config: ProviderConfig, onRefresh: (outcome: { ok: true } | { ok: false; reason: string }) => void): CredentialSource {
  const c = config.credential;
  switch (c.type) {
    case 'none':
      return { type: 'none', present: () => true, authenticate: async () => ({ ok: true, headers: {}, secrets: [] }) };
    case 'key':
      return staticKeySource(c.key ? secretSource(env, c.key) : undefined, c.header === undefined ? keyHeader(config.kind) : (key) => [c.header!, key]);
    case 'aws-sigv4':
      return awsSource({ accessKeyId: secretSource(env, c.accessKeyId), secretAccessKey: secretSource(env, c.secretAccessKey), sessionToken: c.sessionToken ? secretSource(env, c.sessionToken) : undefined, region: c.region, service: c.service });
    case 'google-service-account':
      return kept(googleServiceAccountSource({ readKeyFile: () => readFileSync(c.keyFile, 'utf8'), scope: c.scope, exchange: exchangeAtTokenEndpoint, onRefresh }));
    case 'google-metadata':
      return kept(googleMetadataSource({ metadataHost: env.GCE_METADATA_HOST || 'metadata.google.internal', fetchJson: fetchMetadataJson, onRefresh }));
    case 'aws-web-identity':
      return kept(awsWebIdentitySource({ roleArn: c.roleArn, readTokenFile: () => readFileSync(c.tokenFile, 'utf8'), stsEndpoint: c.stsEndpoint, region: c.region, service: c.service, assume: (url, form) => fetchBody(url, { form }), onRefresh }));
  }
}

/** A minted credential's first fetch at once, then refreshes ahead of each expiry, so that no call waits on one. */
function kept(source: MintedSource): CredentialSource {
  void source.refresh(Date.now());
  setInterval(() => void source.refreshIfDue(Date.now()), 30_000).unref();
  return source;
}

function loadPrices(): PriceTable {
  const file = env.MODEL_PRICES_FILE;
  return file ? parsePrices(readFileSync(file, 'utf8'), file) : { get: () => undefined };
}

/** At a forced shutdown, how long the calls cut get to record and charge themselves before the process exits. */
const FORCED_CUT_DEADLINE_MS = 1000;

async function serve(options: ServeOptions): Promise<void> {
  const gitUpstreams = openGitUpstreams(loadHosts(options));
  const gitSigningKey = parseSigningKey('GIT_PROXY_SIGNING_KEY', env.GIT_PROXY_SIGNING_KEY);
  const gateway = loadGateway(options);
  const hostedTools = asUsageError(() => hostedToolsPolicy(options.allowHostedTools));
  const maxTokenLifetimeSec = Math.floor(options.maxTokenLifetimeMs / 1000);
  const hostStates = [...gitUpstreams.values()].map((u) => ({
    host: u.config.key,
    auth: u.config.authType,
    // Presence only; a credential's value is never logged.
    credential: u.token.read().ok ? 'present' : 'missing',
    tls_verify: !u.config.tlsInsecureSkipVerify,
    repos: u.config.repos?.map(formatRepoPattern),
    read_only: u.config.readOnly,
  }));
  const gitEnabled = env.GIT_AUTH_ENABLED === 'true' || hostStates.some((h) => h.credential === 'present');
  if (!gitEnabled && !gateway.enabled) {
    logWriter.flushSync();
    process.stderr.write(
      'proxy: no listener is enabled.\n' +
        '  git proxy:     set GIT_HOST_A_TOKEN (host GIT_HOST_A, default github.com), GIT_HOST_B_TOKEN with GIT_HOST_B,\n' +
        '                 a token of a --git-hosts file, or GIT_AUTH_ENABLED=true.\n' +
        '  model gateway: set UPSTREAM_API_KEY or UPSTREAM_API_KEY_FILE, or MODEL_GATEWAY_ENABLED=true.\n',
    );
    process.exit(1);
  }

  // A bug reached by one request must not take every other request down with it: log it and
  // keep serving. Handlers catch their own errors; this is the net under them.
  process.on('uncaughtException', (err: Error) => log({ event: 'uncaught_exception', error: err?.name ?? 'Error', detail: String(err?.message ?? err) }));
  process.on('unhandledRejection', (reason: unknown) => log({ event: 'unhandled_rejection', detail: String((reason as Error)?.message ?? reason) }));

  // Signal handlers go in before anything is announced: a supervisor may send SIGTERM as soon
  // as it reads a listening line.
  const listeners: Listener[] = [];
  let metricsListener: Listener | undefined;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      // Forced: every connection is cut now, and each call still open ends as a cut one:
      // recorded, charged and its slot given back (bounded wait), before the process exits.
      log({ event: 'shutdown', signal, phase: 'forced' });
      const proxies = listeners.filter((l) => l !== metricsListener);
      void Promise.all(proxies.map((l) => l.cut(FORCED_CUT_DEADLINE_MS))).finally(() => {
        logWriter.flushSync();
        process.exit(0);
      });
      return;
    }
    stopping = true;
    // The proxy listeners stop accepting at once (closed first, announced after: whoever reads
    // "draining" can no longer get a connection in). The metrics listener stays up until they
    // have drained, answering /healthz with 503, so probes and scrapes see the drain.
    const proxies = listeners.filter((l) => l !== metricsListener);
    const closing = proxies.map((l) => l.close(options.shutdownGraceMs));
    metricsListener?.markDraining();
    log({ event: 'shutdown', signal, phase: 'draining', grace_ms: options.shutdownGraceMs });
    Promise.all(closing)
      .then(() => metricsListener?.close(0))
      .then(() => {
        log({ event: 'shutdown', signal, phase: 'done' });
        return logWriter.drain();
      })
      .then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  // The price table is checked even with `--metrics-listen off` (e.g. a second proxy beside the
  // first on one host), so that switching metrics on cannot reveal a broken file; but nothing
  // is recorded that nobody could read.
  const prices = loadPrices();
  const metrics =
    options.metricsListen === undefined
      ? undefined
      : createProxyMetrics({ maxSeriesPerFamily: options.metricsMaxSeries, seriesTtlMs: options.metricsSeriesTtlMs, runIdLabel: options.metricsRunIdLabel, prices });
  if (metrics && options.metricsSeriesTtlMs > 0) {
    // Series expiry runs on a coarse clock, so that recording a request never reads the time.
    setInterval(() => metrics.registry.tick(performance.now()), clockTickMs(options.metricsSeriesTtlMs)).unref();
  }
  const listenerTimeouts = { headerMs: options.headerTimeoutMs, keepAliveMs: options.idleTimeoutMs };
  const storeClient = openStore(options, log, metrics);
  const revoked = openRevocations(options, storeClient, log, metrics);
  const caps = { total: options.maxConnections, perClient: options.maxConnectionsPerClient };
  const capped = (listener: string, listenerCaps = caps) => ({ caps: listenerCaps, onConnectionRefused: (reason: 'total' | 'per_client') => metrics?.connectionRefused(listener, reason) });
  const upstreamTimeouts = { connectMs: options.upstreamConnectTimeoutMs, responseMs: options.upstreamResponseTimeoutMs, idleMs: options.upstreamIdleTimeoutMs, bodyIdleMs: options.bodyTimeoutMs };

  if (gitEnabled) {
    const gitDeps = {
      hosts: gitUpstreams,
      revoked,
      maxConcurrentPerWorkload: options.gitMaxConcurrentPerWorkload,
      workloadAuth: gitSigningKey && { key: gitSigningKey, maxLifetimeSec: maxTokenLifetimeSec },
      timeouts: upstreamTimeouts,
      record: (rec: GitRequestRecord) => {
        log(rec);
        metrics?.git(rec);
      },
      log,
    };
    const git = await startListener({
      name: 'git',
      flag: 'git-auth-listen',
      address: options.gitListen,
      timeouts: listenerTimeouts,
      ...capped('git'),
      log,
      handle: createGitHandler(gitDeps),
      refuse: refuseAtGit(gitDeps),
    });
    listeners.push(git);
    for (const h of hostStates) {
      if (!h.tls_verify) log({ event: 'warning', listener: 'git', host: h.host, message: 'TLS verification is switched off for this host (tlsInsecureSkipVerify)' });
    }
    if (!gitSigningKey) {
      log({ event: 'warning', listener: 'git', message: 'GIT_PROXY_SIGNING_KEY is not set: workloads are not authenticated (network-policy mode); whoever reaches this port may use every registered host credential, within the hosts file limits' });
    }
    log({ event: 'listening', listener: 'git', address: git.address, version: VERSION, hosts: hostStates, workload_auth: gitSigningKey ? 'jwt' : 'network-policy' });
  }

  if (gateway.enabled) {
    const limits = openLimits(options, gateway, storeClient, log, metrics);
    const unpriced = limits && unpricedWarning(limits.policy, gateway.providers.flatMap((p) => p.models.map((model) => ({ provider: p.name, model }))), (provider, model) => prices.get(provider, model) !== undefined);
    if (unpriced) log({ event: 'warning', listener: 'model', message: unpriced });
    const toolFees = limits && hostedToolFeesWarning(limits.policy, hostedTools);
    if (toolFees) log({ event: 'warning', listener: 'model', message: toolFees });
    const providers = openProviders(gateway, (provider, outcome) => {
      metrics?.credentialRefresh(provider, outcome.ok);
      if (!outcome.ok) log({ event: 'credential_refresh_failed', listener: 'model', provider, reason: outcome.reason });
    });
    const gatewayDeps: GatewayDeps = {
      record: (rec) => {
        log(rec);
        metrics?.model(rec);
      },
      streams: metrics?.streams,
      signingKey: gateway.signingKey,
      providers,
      protocols: PROTOCOLS,
      hostedTools,
      timeouts: upstreamTimeouts,
      retry: { maxRetries: options.upstreamMaxRetries, budgetMs: options.upstreamRetryBudgetMs, baseDelayMs: 500 },
      maxBodyBytes: options.maxRequestBodyBytes,
      revoked,
      limits: limits?.store,
      prices,
      maxTokenLifetimeSec,
      log,
    };
    const model = await startListener({
      name: 'model',
      flag: 'model-gateway-listen',
      address: options.modelListen,
      timeouts: listenerTimeouts,
      ...capped('model'),
      rootIsHealth: true,
      log,
      handle: createGatewayHandler(gatewayDeps),
      refuse: refuseAtGateway(gatewayDeps),
    });
    listeners.push(model);
    if (!gateway.signingKey) {
      log({ event: 'warning', listener: 'model', message: 'MODEL_PROXY_SIGNING_KEY is not set: bots are not authenticated (network-policy mode); identity headers are informational only' });
    }
    for (const p of providers) {
      if (!p.config.upstream.plainHttp) continue;
      const clear = p.credential.type !== 'none';
      log({ event: 'warning', listener: 'model', provider: p.config.name, message: `provider ${p.config.name} is reached over plain http (allowPlainHttp)${clear ? ', and its credential travels in clear (allowCredentialOverPlainHttp)' : ''}: only for a server inside the cluster` });
    }
    if (providers.every((p) => p.config.models.length === 0)) {
      log({ event: 'warning', listener: 'model', message: 'no model is allowed (UPSTREAM_ALLOWED_MODELS is empty): every model request will be refused until it lists the model IDs bots may use' });
    }
    if (hostedTools.size > 0) {
      log({ event: 'warning', listener: 'model', message: `hosted tools allowed (--allow-hosted-tools): ${[...hostedTools].join(', ')}; the provider runs them outside the sandbox` });
    }
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
      })),
      apis: PROTOCOLS.map((p) => p.api),
      hosted_tools: [...hostedTools],
      bot_auth: gateway.signingKey ? 'jwt' : 'network-policy',
    });
  }

  const fdWarning = descriptorWarning(openFilesLimit(), listeners.length, caps, options.metricsListen === undefined ? undefined : METRICS_LISTENER_CAPS);
  if (fdWarning) log({ event: 'warning', message: fdWarning });

  if (metrics === undefined || options.metricsListen === undefined) return; // --metrics-listen off
  // A separate port, so that workloads need not (and, by network policy, cannot) reach it.
  const proxyListeners = [...listeners];
  metrics.watchProcess(() => new Map(proxyListeners.map((l) => [l.name, l.connections()])), () => logWriter.dropped());
  metricsListener = await startListener({
    name: 'metrics',
    flag: 'metrics-listen',
    address: options.metricsListen,
    timeouts: listenerTimeouts,
    // Its own caps, not the proxy listeners': a client filling those cannot starve probes and scrapes.
    ...capped('metrics', METRICS_LISTENER_CAPS),
    log,
    handle: (req, res) => void serveMetrics(metrics.registry, req, res).catch(() => res.destroy()),
    refuse: (req, res, { error }) => writeProxyError(req, res, error.status, 'text/plain; charset=utf-8', `${error.message}\n`),
  });
  listeners.push(metricsListener);
  log({ event: 'listening', listener: 'metrics', address: metricsListener.address, version: VERSION });
}

/**
 * The limits store's password: read again on every connection, so a rotated file is used from the
 * next reconnect on; a file that is missing or empty at start-up stops it, naming the flag.
 */
function storePassword(file: string | undefined): SecretSource | undefined {
  if (file === undefined) return undefined;
  const source = fileSecret(file, sanitizePassword);
  if (!source.read().ok) throw new Error(`--limits-store-password-file: ${file} cannot be read, or is empty`);
  return source;
}

type StoreMetrics = { limitsStore(up: boolean): void; limitsStoreError(): void; limitsStoreRoundTrip(op: 'admit' | 'charge', seconds: number): void; limitsStoreStateLost(): void };

/** The store the replicas share, and whether it lost its state (a store/state-marker.ts verdict, read on every call). */
type SharedStore = { readonly client: RespClient; readonly stateLost: () => boolean };

/**
 * The store the replicas share (--limits-store redis://), when there is one: the limits' state and
 * the deny list of revoked tokens. Its state changes are logged and counted: up and down, and a
 * store found to have lost its state (its marker, checked on every connection before it carries a
 * call and every few seconds), and trusted again. Its settings are checked at the first connection.
 */
function openStore(options: ServeOptions, log: LogSink, metrics: StoreMetrics | undefined): SharedStore | undefined {
  if (options.limitsStore === 'memory') return undefined;
  const store = asUsageError(() => parseStoreUrl(options.limitsStore));
  const password = storePassword(options.limitsStorePasswordFile);
  const where = `${store.host}:${store.port}`;
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
  const client = new RespClient({
    ...store,
    password,
    name: 'the limits store',
    handshake: (command) => state.onConnect(command),
    onState: (up, why) => {
      metrics?.limitsStore(up);
      log({ event: 'limits_store', state: up ? 'up' : 'down', store: where, ...(why ? { reason: why } : {}), failure_policy: policy });
    },
  });
  state.watch(client);
  return { client, stateLost: () => state.lost };
}

/**
 * The limits (--limits), held in this process or in the shared store. They apply per verified
 * identity, so they need MODEL_PROXY_SIGNING_KEY: an identity from headers is the caller's say-so.
 */
function openLimits(options: ServeOptions, gateway: GatewayConfig, shared: SharedStore | undefined, log: LogSink, metrics: StoreMetrics | undefined): { store: LimitsStore; policy: LimitsPolicy } | undefined {
  if (options.limitsFile === undefined) return undefined;
  if (!gateway.signingKey) throw new Error('--limits: limits apply per bot identity, which needs MODEL_PROXY_SIGNING_KEY (without it, identities are the callers\' own headers)');
  const file = parseLimitsFile(readTextFile(options.limitsFile, '--limits:'), options.limitsFile);
  const policy: LimitsPolicy = options.allowUnpricedModels ? { ...file, unpricedModels: 'allowed' } : file;
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
function openRevocations(options: ServeOptions, shared: SharedStore | undefined, log: LogSink, metrics: StoreMetrics | undefined): RevocationCheck | undefined {
  let lastError = '';
  const file = options.revocationsFile === undefined ? undefined : revocationList(options.revocationsFile, (message) => {
    if (message === lastError) return;
    lastError = message;
    log({ event: 'config_error', message });
  });
  const store = shared === undefined ? undefined : storeRevocations(shared.client, options.limitsStoreFailure, () => metrics?.limitsStoreError(), shared.stateLost);
  if (file === undefined && store === undefined) return undefined;
  return (who, nowSec) => {
    const why = file?.reason(who, nowSec);
    if (why !== undefined) return { kind: 'revoked', reason: why };
    return store === undefined ? NOT_REVOKED : store.verdict(who);
  };
}

/** Pure: `redis://HOST:PORT` or `rediss://HOST:PORT` (TLS), nothing else (a password comes from a file). */
function parseStoreUrl(text: string): { host: string; port: number; tls: boolean } {
  const m = /^(rediss?):\/\/([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})\/?$/.exec(text);
  if (!m || Number(m[3]) > 65535) throw new Error(`--limits-store: "${text}" must be memory, redis://HOST:PORT or rediss://HOST:PORT (a password goes in --limits-store-password-file)`);
  return { host: m[2]!.replace(/^\[|\]$/g, ''), port: Number(m[3]), tls: m[1] === 'rediss' };
}

/** RLIMIT_NOFILE's soft limit where /proc tells it (Linux); undefined elsewhere. */
function openFilesLimit(): number | undefined {
  try {
    return softOpenFilesLimit(readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Adds a run, an instance or a token to the deny list both listeners read (the --revocations file,
 * the shared store of --limits-store, or both), for as long as a token it names could live.
 */
async function revoke(cli: CommandLine): Promise<string> {
  const { revocationsFile: file, limitsStore } = cli.options;
  if (file === undefined && limitsStore === 'memory') throw new UsageError('revoke: give --revocations FILE (the deny-list file the listeners read) or --limits-store redis://HOST:PORT (the store they share), or both');
  const named = ([['run_id', cli.mint.runId], ['instance_id', cli.mint.instanceId], ['token_id', cli.mint.tokenId]] as const).filter(([, v]) => v !== undefined);
  if (named.length !== 1) throw new UsageError('revoke: give exactly one of --run-id, --instance-id, --token-id');
  const [key, value] = named[0]!;
  const nowSec = Math.floor(Date.now() / 1000);
  const until = nowSec + Math.floor(cli.options.maxTokenLifetimeMs / 1000) + 60;
  const where: string[] = [];
  if (file !== undefined) {
    const count = addRevocation(file, { [key]: value, until } as unknown as Revocation, nowSec);
    where.push(`${count} entries in ${file}`);
  }
  if (limitsStore !== 'memory') {
    const store = asUsageError(() => parseStoreUrl(limitsStore));
    const client = await connectToStore(cli.options, `revoke: the store at ${store.host}:${store.port} could not be reached within 5 s; nothing was revoked there`);
    try {
      await addStoreRevocation(client, key, value!, until - nowSec);
    } finally {
      client.close();
    }
    where.push(`in the store at ${store.host}:${store.port}`);
  }
  return `revoked ${key} ${value} until ${new Date(until * 1000).toISOString()} (${where.join('; ')}); both listeners refuse its tokens from their next request`;
}

/** A one-off connection to the store of --limits-store (for a command): up within 5 s, or `failure` is thrown. */
async function connectToStore(options: ServeOptions, failure: string): Promise<RespClient> {
  const store = asUsageError(() => parseStoreUrl(options.limitsStore));
  const password = storePassword(options.limitsStorePasswordFile);
  let connected!: () => void;
  const up = new Promise<void>((resolve) => (connected = resolve));
  const client = new RespClient({ ...store, password, name: 'the limits store', onState: (isUp) => isUp && connected() });
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(failure)), 5000)));
  try {
    await Promise.race([up, gaveUp]);
  } catch (err) {
    client.close();
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return client;
}

/**
 * Tells the gateways that the shared store's state, as it is now, is the one to trust: a new
 * marker of kind confirmed. Gateways that refuse calls because the store lost its state serve
 * again at their next check of the marker (within a second).
 */
async function confirmStoreReset(cli: CommandLine): Promise<string> {
  if (cli.options.limitsStore === 'memory') throw new UsageError('confirm-store-reset: give --limits-store redis://HOST:PORT (the store the gateways share)');
  const store = asUsageError(() => parseStoreUrl(cli.options.limitsStore));
  const client = await connectToStore(cli.options, `confirm-store-reset: the store at ${store.host}:${store.port} could not be reached within 5 s; nothing was confirmed`);
  try {
    const found = await client.command(['GET', STATE_KEY]);
    if (found !== null && typeof found !== 'string') throw new Error(`confirm-store-reset: the store answered GET ${STATE_KEY} with something else; nothing was confirmed`);
    const marker = { kind: 'confirmed', epoch: newEpoch(), sinceSec: Math.floor(Date.now() / 1000) } as const;
    const reply = await client.command(['SET', STATE_KEY, formatMarker(marker)]);
    if (reply !== 'OK') throw new Error('confirm-store-reset: the store refused the marker; nothing was confirmed');
    return `confirmed the store at ${store.host}:${store.port} (${describeMarker(found)}): the gateways trust its state as it is now, revocations and spend before included, from their next check (within a second)`;
  } finally {
    client.close();
  }
}

/** A bot token for the gateway, or with --git-repo a workload token for the git proxy (never both in one). */
function mintToken(cli: CommandLine): string {
  // With the gateway's --limits file at hand, a limit asked above its ceiling is an error: the
  // gateway would apply the ceiling, and the orchestrator would believe in another budget.
  if (cli.options.limitsFile !== undefined) {
    const { budgetUsd, maxConcurrent: concurrent, requestsPerMinute, tokensPerMinute } = cli.mint;
    const policy = parseLimitsFile(readTextFile(cli.options.limitsFile, '--limits:'), cli.options.limitsFile);
    const above = aboveCeilingReason(policy, { budgetUsd, concurrent, requestsPerMinute, tokensPerMinute }, cli.options.limitsFile);
    if (above) throw new Error(above);
  }
  // Its own id, printed on stderr, to revoke this token alone (`revoke --token-id`).
  const jti = tokenIdFrom(randomBytes(12));
  process.stderr.write(`mint-token: token id ${jti} (stop it before it expires: proxy.js revoke --token-id ${jti} with --revocations FILE or --limits-store URL)\n`);
  // A missing or malformed flag is a usage error (exit 2), like an unknown one.
  const claims = asUsageError(() =>
    botClaims({
      ...cli.mint,
      ttlSec: Math.floor(cli.mint.ttlMs / 1000),
      maxLifetimeSec: Math.floor(cli.options.maxTokenLifetimeMs / 1000),
      nowSec: Math.floor(Date.now() / 1000),
    }),
  );
  if (cli.mint.gitRepos.length > 0) {
    const git = asUsageError(() => gitScopeClaim(cli.mint.gitRepos));
    const registered = loadHosts(cli.options).map((h) => h.key);
    const unknown = asUsageError(() => unregisteredScopeHost(git, registered));
    if (unknown === 'unchecked') process.stderr.write('mint-token: no git host is registered in this environment (GIT_HOST_A, GIT_HOST_B, --git-hosts): the scope\'s hosts were not checked against the registry\n');
    const key = parseSigningKey('GIT_PROXY_SIGNING_KEY', env.GIT_PROXY_SIGNING_KEY);
    if (!key) throw new Error('mint-token: --git-repo makes a token for the git proxy, and GIT_PROXY_SIGNING_KEY is not set');
    return signBotToken({ ...claims, git, jti }, key);
  }
  const gateway = parseGatewayEnv(env);
  if (!gateway.signingKey) throw new Error('mint-token: MODEL_PROXY_SIGNING_KEY is not set');
  return signBotToken({ ...claims, jti }, gateway.signingKey);
}

async function main(argv: readonly string[]): Promise<void> {
  const cli = parseCommandLine(argv);
  switch (cli.command) {
    case 'help':
      process.stdout.write(`${usage()}\n`);
      return;
    case 'version':
      process.stdout.write(`${VERSION}\n`);
      return;
    case 'git-config': {
      const config = gitWorkloadConfig({
        hostKeys: loadHosts(cli.options).map((h) => h.key),
        proxyHostFlag: cli.gitConfig.proxyHost,
        proxyHostEnv: env.GIT_AUTH_PROXY_HOST,
        credentialHelper: env.GIT_CREDENTIAL_HELPER,
        workloadTokenEnv: cli.gitConfig.workloadTokenEnv,
      });
      process.stdout.write(config.text);
      if (config.notice) process.stderr.write(`proxy: ${config.notice}\n`);
      return;
    }
    case 'agent-config': {
      const agent = cli.agent.agent as AgentName;
      if (!AGENTS.includes(agent)) throw new UsageError(`--agent: "${agent}" is not an agent agent-config knows; use ${AGENTS.join(', ')}`);
      const gateway = loadGateway(cli.options);
      process.stdout.write(
        renderAgentConfig(agent, {
          ...agentProviders(agent, gateway.providers, cli.agent.model),
          providerName: cli.agent.providerName,
          proxyHost: cli.agent.proxyHost ?? env.MODEL_GATEWAY_PROXY_HOST,
          model: cli.agent.model,
          smallModel: cli.agent.smallModel,
          webSearchAllowed: cli.options.allowHostedTools.includes('web_search'),
        }),
      );
      return;
    }
    case 'mint-token':
      process.stdout.write(`${mintToken(cli)}\n`);
      return;
    case 'revoke':
      process.stdout.write(`${await revoke(cli)}\n`);
      return;
    case 'confirm-store-reset':
      process.stdout.write(`${await confirmStoreReset(cli)}\n`);
      return;
    case 'serve':
      return serve(cli.options);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  logWriter.flushSync();
  if (err instanceof UsageError) {
    process.stderr.write(`proxy: ${err.message}\n\n${usage()}\n`);
    process.exit(2);
  }
  process.stderr.write(`proxy: ${(err as Error)?.message ?? String(err)}\n`);
  process.exit(1);
});
