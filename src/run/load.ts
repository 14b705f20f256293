// Start-up, step one: the configuration the flags, the environment and the files they name give.
// Reads files; returns data; every error names the flag, variable or file at fault.
import type { HostState } from './log-events.ts';
import { readFileSync } from 'node:fs';
import type { ServeOptions } from '../config/cli.ts';
import { asUsageError } from '../config/cli.ts';
import { fileSecret, literalSecret, secretSource } from '../config/secret.ts';
import { createUpstreamAgent } from '../http/forward.ts';
import { judgeProxyAuthorization, parseEgressEnv } from '../http/egress.ts';
import { tunnelRouteFor, type Egress } from '../http/tunnel.ts';
import { softOpenFilesLimit } from '../http/connection-caps.ts';
import { reveal } from '../http/secret-value.ts';
import { isBasicUsername } from '../git/credentials.ts';
import { appPrivateKey } from '../git/github-app.ts';
import { hostsFromEnv, mergeHosts, parseHostsFile, type HostConfig } from '../git/hosts.ts';
import type { GitUpstream } from '../git/proxy.ts';
import { formatRepoRule } from '../git/scope.ts';
import { parseGatewayEnv, type GatewayConfig } from '../gateway/config.ts';
import { parsePrices, type PriceTable } from '../limits/prices.ts';
import { hostedToolsPolicy } from '../gateway/protocols/tools.ts';
import { parseLimitsFile, type LimitsPolicy } from '../limits/policy.ts';
import { parseSigningKey } from '../auth/jwt.ts';
import { loadListenerKeys, type ListenerKeys } from './keys.ts';
import { gitCredentialFiles, modelCredentialFiles, type CredentialFile } from './readiness.ts';

/** The registered git hosts: GIT_HOST_A/B from the environment, merged with the --git-hosts file. */
export function loadHosts(options: ServeOptions, env: NodeJS.ProcessEnv): HostConfig[] {
  const fromFile = options.gitHostsFile ? parseHostsFile(readFileSync(options.gitHostsFile, 'utf8'), options.gitHostsFile) : [];
  return mergeHosts(hostsFromEnv(env), fromFile);
}

/** A file the configuration names; `what` says which, as in `<what> <path> cannot be read (ENOENT)`. */
export function readTextFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${what} ${path} cannot be read (${(err as NodeJS.ErrnoException).code})`);
  }
}

function openGitUpstreams(hosts: readonly HostConfig[], env: NodeJS.ProcessEnv, egress: Egress): Map<string, GitUpstream> {
  const upstreams = new Map<string, GitUpstream>();
  for (const config of hosts) {
    const ca = config.caFile ? readTextFile(config.caFile, `git host ${config.key}: CA file`) : undefined;
    const username = config.username === undefined ? undefined : 'literal' in config.username ? literalSecret(config.username.literal) : secretSource(env, config.username);
    const name = username?.read();
    if (name?.ok && !isBasicUsername(reveal(name.value))) throw new Error(`git host ${config.key}: the username contains ":", which Basic authentication cannot carry (RFC 7617); fix its username`);
    if (config.githubApp) checkAppKey(config.key, config.githubApp.privateKeyFile);
    upstreams.set(config.key, {
      config,
      agent: createUpstreamAgent({ ca, tlsInsecureSkipVerify: config.tlsInsecureSkipVerify, tunnel: tunnelRouteFor(egress, config.hostname, config.port) }),
      token: config.token && secretSource(env, config.token),
      username,
    });
  }
  return upstreams;
}

/** A GitHub App host's private key must be there and be one at start-up (it is re-read when it changes); its text is never shown. */
function checkAppKey(hostKey: string, file: string): void {
  const key = appPrivateKey(readTextFile(file, `git host ${hostKey}: githubApp.privateKeyFile`));
  if ('error' in key) throw new Error(`git host ${hostKey}: githubApp.privateKeyFile ${file} ${key.error}`);
}

/**
 * The egress proxy, read here once from the environment start-up was given (HTTPS_PROXY,
 * NO_PROXY, either case) and handed to every connection opener: nothing reads it later. A
 * malformed variable, or a --egress-proxy-auth-file that is unreadable or holds what a header
 * cannot carry, stops start-up naming it.
 */
function loadEgress(options: ServeOptions, env: NodeJS.ProcessEnv): Egress {
  const settings = parseEgressEnv(env);
  const file = options.egressProxyAuthFile;
  if (file === undefined) return { settings, authorization: undefined, connectTimeoutMs: options.upstreamConnectTimeoutMs };
  if (settings.proxy === undefined) throw new Error('--egress-proxy-auth-file: there is no egress proxy to send it to; set HTTPS_PROXY, or drop the flag');
  const authorization = fileSecret(file, judgeProxyAuthorization);
  const first = authorization.read();
  if (!first.ok) throw new Error(`--egress-proxy-auth-file: ${file} ${first.reason === 'missing' ? 'cannot be read, or is empty' : 'holds CR, LF or another character a header cannot carry'}; write the Proxy-Authorization value (e.g. Basic <base64 of user:password>) on one line`);
  return { settings, authorization, connectTimeoutMs: options.upstreamConnectTimeoutMs };
}

/** The model gateway's configuration: the environment, or the --providers file. */
export function loadGateway(options: ServeOptions, env: NodeJS.ProcessEnv): GatewayConfig {
  const file = options.providersFile;
  return file === undefined ? parseGatewayEnv(env) : parseGatewayEnv(env, { text: readTextFile(file, '--providers:'), name: file });
}

/** The price table of MODEL_PRICES_FILE; without one, no model has a price. */
export function loadPrices(env: NodeJS.ProcessEnv): PriceTable {
  const file = env.MODEL_PRICES_FILE;
  return file ? parsePrices(readFileSync(file, 'utf8'), file) : { get: () => undefined };
}

/** RLIMIT_NOFILE's soft limit where /proc tells it (Linux); undefined elsewhere. */
export function openFilesLimit(): number | undefined {
  try {
    return softOpenFilesLimit(readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    return undefined;
  }
}

export interface ServeConfig {
  readonly gitUpstreams: Map<string, GitUpstream>;
  /** Each listener's token keys (environment, files); undefined: network-policy mode. */
  readonly gitKeys: ListenerKeys | undefined;
  readonly botKeys: ListenerKeys | undefined;
  readonly gateway: GatewayConfig;
  readonly hostedTools: ReadonlySet<string>;
  readonly maxTokenLifetimeSec: number;
  readonly hostStates: readonly HostState[];
  readonly gitEnabled: boolean;
  /** The egress proxy (HTTPS_PROXY, NO_PROXY), read once here. */
  readonly egress: Egress;
  /** The credential files each listener needs, checked at start-up and by every /healthz (readiness.ts). */
  readonly credentialFiles: { readonly git: readonly CredentialFile[]; readonly model: readonly CredentialFile[] };
  /** The gateway's --limits file, read once here: what the gateway enforces is what the start-up warnings judge. */
  readonly limits: LimitsFile | undefined;
}

/** A --limits file as read: its policy and its name. */
export interface LimitsFile {
  readonly policy: LimitsPolicy;
  readonly file: string;
}

/** Everything `serve` needs to know before it starts anything. */
export function loadServeConfig(options: ServeOptions, env: NodeJS.ProcessEnv): ServeConfig {
  const egress = loadEgress(options, env);
  const gitUpstreams = openGitUpstreams(loadHosts(options, env), env, egress);
  const gitKeys = loadListenerKeys('git', parseSigningKey('GIT_PROXY_SIGNING_KEY', env.GIT_PROXY_SIGNING_KEY), env, options.gitKeys);
  // A listener switched off (--git-auth-listen off, --model-gateway-listen off) is not enabled, whatever the environment says.
  const configured = loadGateway(options, env);
  const gateway = options.modelListen === undefined ? { ...configured, enabled: false } : configured;
  const botKeys = loadListenerKeys('model', gateway.signingKey, env, options.botKeys);
  const hostedTools = asUsageError(() => hostedToolsPolicy(options.allowHostedTools));
  const maxTokenLifetimeSec = Math.floor(options.maxTokenLifetimeMs / 1000);
  const hostStates = [...gitUpstreams.values()].map((u): HostState => ({
    host: u.config.key,
    auth: u.config.authType,
    // Presence only; a credential's value is never logged.
    credential: u.config.githubApp !== undefined || u.token?.read().ok ? 'present' : 'missing',
    tls_verify: !u.config.tlsInsecureSkipVerify,
    repos: u.config.repos?.map(formatRepoRule),
    read_only: u.config.readOnly,
    ...(u.config.protectedRefs.length > 0 ? { protected_refs: u.config.protectedRefs.map((p) => p.text) } : {}),
    egress: tunnelRouteFor(egress, u.config.hostname, u.config.port)?.proxy.label ?? 'direct',
  }));
  const hosts = [...gitUpstreams.values()].map((u) => u.config);
  const credentialFiles = { git: gitCredentialFiles(hosts), model: modelCredentialFiles(gateway) };
  // A host whose token is a file is configured even while the file is missing: the listener
  // starts, names the file and answers /healthz 503 until it is mounted, as the gateway does.
  const gitEnabled = options.gitListen !== undefined && (env.GIT_AUTH_ENABLED === 'true' || hostStates.some((h) => h.credential === 'present') || credentialFiles.git.some((f) => f.what === 'token file'));
  const limits = gateway.enabled && options.limitsFile !== undefined ? { policy: parseLimitsFile(readTextFile(options.limitsFile, '--limits:'), options.limitsFile), file: options.limitsFile } : undefined;
  return { gitUpstreams, gitKeys, botKeys, gateway, hostedTools, maxTokenLifetimeSec, hostStates, gitEnabled, credentialFiles, egress, limits };
}
