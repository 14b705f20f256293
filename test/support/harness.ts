// In-process harness for both handlers: a handler built from its dependencies (any of them
// replaceable: a slow or broken credential source, a limits store behind a gate, a protocol that
// throws), served by the real listener on a loopback port, against a fake upstream. Each request's
// record lands in `records`, each log line in `logs`, so a test can see how every call ended
// without spawning the bundle.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RevocationCheck } from '../../src/auth/identity.ts';
import type { TokenVerifier } from '../../src/auth/verifier.ts';
import { secretVerifier } from './tokens.ts';
import { literalSecret } from '../../src/config/secret.ts';
import { parseGatewayEnv } from '../../src/gateway/config.ts';
import type { CredentialSource } from '../../src/gateway/credentials/source.ts';
import { staticKeySource } from '../../src/gateway/credentials/static-key.ts';
import { createGatewayHandler, createGatewayUpgrade, refuseAtGateway, type GatewayDeps } from '../../src/gateway/handler.ts';
import type { PriceTable } from '../../src/limits/prices.ts';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import type { WireProtocol } from '../../src/gateway/protocols/protocol.ts';
import { keyHeader, type Provider } from '../../src/gateway/providers.ts';
import type { ModelRequestRecord } from '../../src/gateway/record.ts';
import { createGitHandler, refuseAtGit, type GitProxyDeps, type GitUpstream } from '../../src/git/proxy.ts';
import { parseHostsFile } from '../../src/git/hosts.ts';
import type { GitRequestRecord } from '../../src/git/record.ts';
import { createUpstreamAgent } from '../../src/http/forward.ts';
import { HeldBodies } from '../../src/http/held-bodies.ts';
import type { LogRecord } from '../../src/http/log.ts';
import { startListener, type Listener } from '../../src/http/server.ts';
import type { LimitsStore } from '../../src/limits/admission.ts';
import type { TestPki } from './tls.ts';

/** Records as they come, and a way to wait for the next ones. */
export class RecordLog<T> {
  readonly all: T[] = [];
  #waiters: { count: number; resolve: () => void }[] = [];

  push(rec: T): void {
    this.all.push(rec);
    for (const w of this.#waiters.filter((w) => this.all.length >= w.count)) w.resolve();
    this.#waiters = this.#waiters.filter((w) => this.all.length < w.count);
  }

  /** Resolves with the `n`-th record (1-based), once it is there. */
  async nth(n: number): Promise<T> {
    if (this.all.length < n) await new Promise<void>((resolve) => this.#waiters.push({ count: n, resolve }));
    return this.all[n - 1]!;
  }
}

export interface InProcessListener<R> {
  readonly port: number;
  readonly listener: Listener;
  readonly records: RecordLog<R>;
  readonly logs: LogRecord[];
  /** Resolves once the listener holds no client connection (a client that left has been seen). */
  clientsGone(): Promise<void>;
  close(): Promise<void>;
}

async function serveInProcess<R>(name: 'git' | 'model', records: RecordLog<R>, logs: LogRecord[], handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>, refuse: Parameters<typeof startListener>[0]['refuse'], keepAliveMs = 5000, upgrade?: Parameters<typeof startListener>[0]['upgrade']): Promise<InProcessListener<R>> {
  const listener = await startListener({
    name,
    flag: name === 'git' ? 'git-auth-listen' : 'model-gateway-listen',
    address: { host: '127.0.0.1', port: 0 },
    timeouts: { headerMs: 5000, keepAliveMs },
    caps: { total: 0, perClient: 0 },
    rootIsHealth: name === 'model',
    log: (r) => void logs.push(r),
    handle,
    refuse,
    ...(upgrade ? { upgrade } : {}),
  });
  return {
    port: listener.port,
    listener,
    records,
    logs,
    async clientsGone() {
      while (listener.connections() > 0) await new Promise((r) => setImmediate(r));
    },
    close: () => listener.close(0),
  };
}

export const TEST_MODEL = 'gpt-test';
export const UPSTREAM_KEY = 'sk-upstream-harness-0123456789';

export interface GatewayOptions {
  /** The upstream's base URL (`https://127.0.0.1:PORT/v1`). */
  readonly baseUrl: string;
  readonly pki: Pick<TestPki, 'caPem'>;
  readonly credential?: CredentialSource;
  readonly limits?: LimitsStore;
  readonly prices?: PriceTable;
  readonly signingKey?: Buffer;
  readonly revoked?: RevocationCheck;
  /** The protocol table (a test may wrap one to make it throw). */
  readonly protocols?: readonly WireProtocol[];
  /** Replaces fields of the provider (a broken agent, say). */
  readonly provider?: (p: Provider) => Provider;
  readonly deps?: Partial<GatewayDeps>;
  /** The provider's kind (default openai): anthropic serves TEST_MODEL on /v1/messages. */
  readonly kind?: 'openai' | 'anthropic';
}

/** The gateway's handler in this process: one OpenAI-kind provider serving TEST_MODEL at `baseUrl`. */
export async function startGatewayInProcess(opts: GatewayOptions): Promise<InProcessListener<ModelRequestRecord>> {
  const config =
    opts.kind === 'anthropic'
      ? parseGatewayEnv({}, { text: JSON.stringify({ providers: [{ name: 'anthropic', kind: 'anthropic', baseUrl: opts.baseUrl, keyEnv: 'HARNESS_KEY', models: [TEST_MODEL] }] }), name: 'harness' }).providers[0]!
      : parseGatewayEnv({ UPSTREAM_BASE_URL: opts.baseUrl, UPSTREAM_API_KEY: UPSTREAM_KEY, UPSTREAM_ALLOWED_MODELS: TEST_MODEL }).providers[0]!;
  const base: Provider = {
    config,
    agent: createUpstreamAgent({ ca: opts.pki.caPem, tlsInsecureSkipVerify: false }),
    credential: opts.credential ?? staticKeySource(literalSecret(UPSTREAM_KEY), keyHeader(config.kind)),
  };
  const records = new RecordLog<ModelRequestRecord>();
  const logs: LogRecord[] = [];
  const deps: GatewayDeps = {
    record: (rec) => records.push(rec),
    verifier: opts.signingKey && secretVerifier(opts.signingKey, 3600),
    providers: [opts.provider ? opts.provider(base) : base],
    protocols: opts.protocols ?? PROTOCOLS,
    hostedTools: new Set(),
    timeouts: { connectMs: 5000, responseMs: 10_000, idleMs: 10_000, bodyIdleMs: 5000 },
    retry: { maxRetries: 0, budgetMs: 0, baseDelayMs: 1 },
    maxBodyBytes: 1024 * 1024,
    heldBodies: new HeldBodies(64 * 1024 * 1024),
    revoked: opts.revoked,
    limits: opts.limits,
    prices: opts.prices,
    log: (r) => void logs.push(r),
    ...opts.deps,
  };
  return serveInProcess('model', records, logs, createGatewayHandler(deps), refuseAtGateway(deps), undefined, createGatewayUpgrade(deps));
}

export interface GitOptions {
  /** `127.0.0.1:PORT` of an HTTPS upstream. */
  readonly hostKey: string;
  readonly pki: Pick<TestPki, 'caPem'>;
  readonly token?: GitUpstream['token'];
  /** The git signing key (one HS256 secret) and the longest token lifetime; absent: network-policy mode. */
  readonly workloadAuth?: { readonly key: Buffer; readonly maxLifetimeSec: number };
  /** A verifier of its own (key files, say), instead of workloadAuth's secret. */
  readonly verifier?: TokenVerifier;
  readonly revoked?: RevocationCheck;
  readonly maxConcurrentPerWorkload?: number;
  /** The request body's idle limit (5 s unless given; 0: off). */
  readonly bodyIdleMs?: number;
  /** The listener's keep-alive timeout, for a connection whose answer is out (5 s unless given; 0: off). */
  readonly keepAliveMs?: number;
}

/** The git handler in this process, with one bearer-token host. */
export async function startGitInProcess(opts: GitOptions): Promise<InProcessListener<GitRequestRecord>> {
  const [config] = parseHostsFile(JSON.stringify({ hosts: [{ host: opts.hostKey, auth: 'bearer', tokenEnv: 'UNUSED_HARNESS_TOKEN' }] }), 'harness');
  const upstream: GitUpstream = { config: config!, agent: createUpstreamAgent({ ca: opts.pki.caPem, tlsInsecureSkipVerify: false }), token: opts.token ?? literalSecret('ghp_harness_token_0123456789'), username: undefined };
  const records = new RecordLog<GitRequestRecord>();
  const logs: LogRecord[] = [];
  const deps: GitProxyDeps = {
    hosts: new Map([[config!.key, upstream]]),
    verifier: opts.verifier ?? (opts.workloadAuth && secretVerifier(opts.workloadAuth.key, opts.workloadAuth.maxLifetimeSec)),
    timeouts: { connectMs: 5000, responseMs: 10_000, idleMs: 10_000, bodyIdleMs: opts.bodyIdleMs ?? 5000 },
    revoked: opts.revoked,
    maxConcurrentPerWorkload: opts.maxConcurrentPerWorkload ?? 0,
    record: (rec) => records.push(rec),
    log: (r) => void logs.push(r),
  };
  return serveInProcess('git', records, logs, createGitHandler(deps), refuseAtGit(deps), opts.keepAliveMs);
}
