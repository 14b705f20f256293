// Command line: subcommand, flags and their defaults, and the usage text. Pure: argv in,
// options out; a mistake throws a UsageError whose message says what to type instead.
import { parseArgs } from 'node:util';
import { suggestion } from './suggest.ts';
import { LOG_LEVELS, type LogLevel } from '../http/log.ts';
import { parseByteSize, parseByteSizeAtLeast, parseCount, parseDuration, parseListenAddressOrOff, parseOneOf, parsePositiveAmount, type ListenAddress } from '../http/address.ts';

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export type Command = 'serve' | 'git-config' | 'agent-config' | 'mint-token' | 'revoke' | 'confirm-store-reset' | 'help' | 'version';
const COMMANDS: readonly Command[] = ['serve', 'git-config', 'agent-config', 'mint-token', 'revoke', 'confirm-store-reset', 'help', 'version'];

export interface ServeOptions {
  /** undefined: `--git-auth-listen off`, no git listener whatever else is configured. */
  readonly gitListen: ListenAddress | undefined;
  /** undefined: `--model-gateway-listen off`, no model gateway whatever else is configured. */
  readonly modelListen: ListenAddress | undefined;
  readonly maxRequestBodyBytes: number;
  /** Request body bytes the process holds at once (the gateway's bodies being read and checked); at least maxRequestBodyBytes. */
  readonly maxHeldRequestBytes: number;
  readonly upstreamMaxRetries: number;
  readonly upstreamRetryBudgetMs: number;
  readonly maxTokenLifetimeMs: number;
  readonly gitHostsFile: string | undefined;
  readonly headerTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  /** Per listener: client connections in total and per source address (0: no cap). */
  readonly maxConnections: number;
  readonly maxConnectionsPerClient: number;
  /** Git requests one workload instance may have in progress at once (0: no cap). */
  readonly gitMaxConcurrentPerWorkload: number;
  readonly upstreamConnectTimeoutMs: number;
  readonly upstreamResponseTimeoutMs: number;
  readonly upstreamIdleTimeoutMs: number;
  readonly shutdownGraceMs: number;
  /** revoke, confirm-store-reset: how long to wait for the shared store. */
  readonly storeReachTimeoutMs: number;
  /** undefined: `--metrics-listen off`, no metrics listener. */
  readonly metricsListen: ListenAddress | undefined;
  readonly metricsMaxSeries: number;
  readonly metricsSeriesTtlMs: number;
  readonly metricsRunIdLabel: boolean;
  readonly metricsDropInstanceId: boolean; // model metrics without instance_id (records and spans keep it)
  readonly logLevel: LogLevel;
  /** --providers: the model gateway's providers file. */
  readonly providersFile: string | undefined;
  /** --limits: the model gateway's limits file (mint-token reads it too, for its ceilings). */
  readonly limitsFile: string | undefined;
  /** --allow-unpriced-models: under a money budget, calls to a model without a price go through uncounted (refused otherwise). */
  readonly allowUnpricedModels: boolean;
  /** --limits-store: `memory` (this process) or a redis:// / rediss:// URL shared by replicas. */
  readonly limitsStore: string;
  readonly limitsStorePasswordFile: string | undefined;
  /** --limits-store-ca-file, --limits-store-sentinel-user, --limits-store-sentinel-password-file (store/config.ts); --limits-store-unready-after (0: never). */
  readonly limitsStoreAccess: { readonly caFile: string | undefined; readonly sentinelUser: string | undefined; readonly sentinelPasswordFile: string | undefined };
  readonly limitsStoreFailure: 'open' | 'closed';
  readonly limitsStoreUnreadyAfterMs: number;
  /** --revocations: the deny-list file both listeners read (and `revoke` writes). */
  readonly revocationsFile: string | undefined;
  /** --bot-keys, --git-keys: a key file or a directory of key files (src/auth/keys.ts), re-read when they change. */
  readonly botKeys: string | undefined;
  readonly gitKeys: string | undefined;
  /** --tls-cert, --tls-key: the git and model listeners serve TLS (src/run/tls.ts); undefined: plain HTTP. */
  readonly tlsCertFile: string | undefined;
  readonly tlsKeyFile: string | undefined;
  /** --tls-client-ca: mutual TLS, the CA bundle client certificates must chain to. */
  readonly tlsClientCaFile: string | undefined;
  /** --spiffe-trust-domain: the trust domain of the client certificates' SPIFFE IDs. */
  readonly spiffeTrustDomain: string | undefined;
  /** --workload-policy: namespace/serviceaccount to git scopes, models and limits (src/auth/workload-policy.ts). */
  readonly workloadPolicyFile: string | undefined;
  /** --sa-*: Kubernetes service-account tokens on both listeners (src/run/service-accounts.ts). */
  readonly serviceAccounts: {
    readonly issuer: string | undefined;
    readonly audience: string | undefined;
    readonly jwksFile: string | undefined;
    readonly jwksUrl: string | undefined;
    readonly jwksDiscovery: boolean;
    readonly caFile: string | undefined;
  };
  /** --allow-hosted-tools, split; the names are checked against the gateway's list by main. */
  readonly allowHostedTools: readonly string[];
  /** --egress-proxy-auth-file: the Proxy-Authorization value for the egress proxy (HTTPS_PROXY). */
  readonly egressProxyAuthFile: string | undefined;
}

export interface MintOptions {
  readonly instanceId: string | undefined;
  readonly workflow: string | undefined;
  readonly runId: string | undefined;
  readonly ttlMs: number;
  /** `--git-repo host/path:read|write[:refs/...]`, repeatable: a token for the git proxy with this scope. */
  readonly gitRepos: readonly string[];
  /** Limits the token lowers for its run (the gateway applies the lower of these and --limits). */
  readonly budgetUsd: number | undefined;
  readonly maxConcurrent: number | undefined;
  readonly requestsPerMinute: number | undefined;
  readonly tokensPerMinute: number | undefined;
  /** revoke --token-id: one token, by its id (mint-token prints it). */
  readonly tokenId: string | undefined;
  /** mint-token --signing-key: the key file to sign with (KID.pem private key, or KID.hs256). */
  readonly signingKeyFile: string | undefined;
}

export interface AgentConfigOptions {
  /** --agent, checked against the agents agent-config knows by main. */
  readonly agent: string;
  readonly proxyHost: string | undefined;
  readonly providerName: string | undefined;
  readonly model: string | undefined;
  readonly smallModel: string | undefined;
  /** --token-file: the agent reads the bot token from this file (see agent-config.ts for when). */
  readonly tokenFile: string | undefined;
  /** --config-dir (opencode): write its configuration directory and print its environment. */
  readonly configDir: string | undefined;
  readonly websocket: boolean;
}

export interface GitConfigOptions {
  readonly proxyHost: string | undefined;
  /** --tls: the git listener serves TLS, so git is routed to https:// on the proxy. */
  readonly tls: boolean;
  readonly workloadTokenEnv: string | undefined;
  readonly workloadTokenFile: string | undefined;
}

export interface CommandLine {
  readonly command: Command;
  readonly options: ServeOptions;
  readonly mint: MintOptions;
  readonly agent: AgentConfigOptions;
  readonly gitConfig: GitConfigOptions;
}

type FlagCommand = Exclude<Command, 'help' | 'version'>;
interface FlagSpec {
  readonly default: string | undefined;
  readonly help: string;
  /** The commands that use the flag; any other command refuses it, so that no flag is silently ignored. */
  readonly commands: readonly FlagCommand[];
  readonly type?: 'boolean';
  readonly multiple?: true;
}

const SERVE: readonly FlagCommand[] = ['serve'];

/** Flag name, default, commands and one line of help: the single source for parsing and usage text. */
const FLAGS = {
  'git-auth-listen': { default: ':8447', commands: SERVE, help: 'git proxy listen address (:PORT, HOST:PORT, [V6]:PORT), or off to run without it whatever is configured' },
  'git-hosts': { default: undefined, commands: ['serve', 'git-config', 'mint-token'], help: 'JSON file with more git hosts (see docs/configuration.md#hosts-file---git-hosts)' },
  'model-gateway-listen': { default: ':8450', commands: SERVE, help: 'model gateway listen address, or off to run without it whatever is configured' },
  'max-request-body': { default: '32MiB', commands: SERVE, help: 'largest model request body, any route (413 beyond)' },
  'max-held-request-bytes': { default: '160MiB', commands: SERVE, help: 'request body bytes all model calls hold at once while read and checked; a call past it gets 503 with Retry-After, its body unread. At least --max-request-body; the default fits a 768Mi memory limit (docs/operations.md#sizing)' },
  'upstream-max-retries': { default: '2', commands: SERVE, help: 'model gateway: retries after a 429 or a failed connect, before any byte reached the client' },
  'upstream-retry-budget': { default: '30s', commands: SERVE, help: 'model gateway: total time retries of one request may wait' },
  limits: { default: undefined, commands: ['serve', 'mint-token'], help: 'model gateway: JSON file of the limits enforced per workload (requests in progress, per minute, tokens per minute, money per run and per workflow per day); needs MODEL_PROXY_SIGNING_KEY. mint-token reads it to refuse a token that asks more than its ceilings' },
  'allow-unpriced-models': { default: undefined, commands: SERVE, type: 'boolean', help: 'model gateway, under a money budget in --limits: let calls to models without a price in MODEL_PRICES_FILE through, counting tokens only and spending no budget (by default they are refused)' },
  revocations: { default: undefined, commands: ['serve', 'revoke'], help: 'deny-list file of revoked runs, instances and tokens, re-read when it changes (both listeners; revoke writes it)' },
  'tls-cert': { default: undefined, commands: SERVE, help: 'PEM certificate (chain) the git and model listeners serve TLS with (TLS 1.2 minimum, 1.3 preferred; re-read when it changes); without it they serve plain HTTP' },
  'tls-key': { default: undefined, commands: SERVE, help: "PEM private key of --tls-cert (re-read when it changes)" },
  'tls-client-ca': { default: undefined, commands: SERVE, help: 'mutual TLS: PEM CA bundle every client certificate must chain to (else the handshake fails); re-read when it changes; the identity is the certificate\'s SPIFFE ID (needs --spiffe-trust-domain and --workload-policy)' },
  'spiffe-trust-domain': { default: undefined, commands: SERVE, help: 'with --tls-client-ca: the trust domain of the SPIFFE IDs accepted (spiffe://<domain>/ns/<namespace>/sa/<serviceaccount>)' },
  'workload-policy': { default: undefined, commands: SERVE, help: 'JSON file mapping namespace/serviceaccount (* for either half) to git scopes, models and limits, for identities without a minted token (service-account tokens, client certificates); re-read when it changes' },
  'sa-issuer': { default: undefined, commands: SERVE, help: 'both listeners accept Kubernetes projected service-account tokens whose iss is exactly this (the cluster\'s --service-account-issuer), mapped through --workload-policy; needs --sa-audience and one of --sa-jwks-file, --sa-jwks-url, --sa-jwks-discovery' },
  'sa-audience': { default: undefined, commands: SERVE, help: 'the audience a service-account token must carry (the projected volume\'s audience, e.g. credential-proxy)' },
  'sa-jwks-file': { default: undefined, commands: SERVE, help: 'the issuer\'s public keys: a mounted copy of the cluster\'s /openid/v1/jwks, re-read when it changes' },
  'sa-jwks-url': { default: undefined, commands: SERVE, help: 'the issuer\'s public keys fetched from this https URL (at start, every 10 min, and on an unknown kid at most every 30 s)' },
  'sa-jwks-discovery': { default: undefined, commands: SERVE, type: 'boolean', help: 'the issuer\'s public keys fetched from the jwks_uri of <sa-issuer>/.well-known/openid-configuration (https, on the issuer\'s own origin), as --sa-jwks-url' },
  'sa-ca-file': { default: undefined, commands: SERVE, help: 'PEM CA bundle that verifies the issuer\'s HTTPS certificate, instead of the system\'s (in a pod: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt)' },
  'bot-keys': { default: undefined, commands: SERVE, help: 'model gateway: bot token keys by kid, a key file or a directory of them: KID.pem (an Ed25519 or P-256 public key) or KID.hs256 (an HS256 secret), re-read when they change; beside MODEL_PROXY_SIGNING_KEY(_FILE), the key of tokens without kid' },
  'git-keys': { default: undefined, commands: SERVE, help: 'git proxy: workload token keys by kid, as --bot-keys; beside GIT_PROXY_SIGNING_KEY(_FILE)' },
  'token-id': { default: undefined, commands: ['revoke'], help: 'a token id (mint-token prints it): revoke that token alone' },
  'limits-store': { default: 'memory', commands: ['serve', 'revoke', 'confirm-store-reset'], help: 'where the limits\' state and the revoked tokens are: memory (this process), or Redis shared by every replica (revoke writes there): redis://[USER@]HOST:PORT, rediss://... (TLS), or the sentinels of a master, redis+sentinel://[USER@]HOST:PORT,HOST:PORT,.../MASTER (rediss+sentinel: TLS); USER is an ACL user' },
  'store-reach-timeout': { default: '5s', commands: ['revoke', 'confirm-store-reset'], help: 'how long revoke and confirm-store-reset wait for the shared store before they give up (exit 1, nothing written)' },
  'limits-store-password-file': { default: undefined, commands: ['serve', 'revoke', 'confirm-store-reset'], help: 'file holding the Redis password, of USER when the URL names one (read again on every connection)' },
  'limits-store-ca-file': { default: undefined, commands: ['serve', 'revoke', 'confirm-store-reset'], help: 'with rediss://: PEM CA bundle the store\'s certificate (and the sentinels\') must chain to, instead of the system\'s; read again on every connection' },
  'limits-store-sentinel-user': { default: undefined, commands: ['serve', 'revoke', 'confirm-store-reset'], help: 'with redis+sentinel://: the ACL user the sentinels are asked as (needs --limits-store-sentinel-password-file)' },
  'limits-store-sentinel-password-file': { default: undefined, commands: ['serve', 'revoke', 'confirm-store-reset'], help: 'with redis+sentinel://: file holding the sentinels\' password (their requirepass, or the sentinel user\'s), read again on every connection' },
  'limits-store-failure': { default: 'closed', commands: SERVE, help: 'with the Redis store unreachable, closed refuses model calls (503) and tokens it cannot check for revocation until it is back, open lets them through without limits or revocations; the same with a store found to have lost its state, until confirm-store-reset or until every token issued before the loss has expired' },
  'limits-store-unready-after': { default: '30s', commands: SERVE, help: 'with --limits-store-failure closed: once the Redis store has been unreachable this long, /healthz answers 503 (on every listener) until it is back, so that the replica leaves the load balancer; 0: never' },
  providers: { default: undefined, commands: ['serve', 'agent-config'], help: 'JSON file of model gateway providers (see docs/configuration.md#providers-file---providers); the UPSTREAM_* variables are the one-provider shorthand' },
  'allow-hosted-tools': { default: '', commands: ['serve', 'agent-config'], help: 'model gateway: provider-run tools allowed, comma-separated (web_search, web_fetch, file_search, code_interpreter, code_execution, image_generation, mcp, shell, tool_search; url_content: images, documents and files given by URL); none by default' },
  'max-token-lifetime': { default: '24h', commands: ['serve', 'mint-token', 'revoke'], help: 'longest bot or workload token lifetime (exp - iat) the proxy accepts and mint-token issues' },
  'header-timeout': { default: '30s', commands: SERVE, help: 'time a client has to send its request head' },
  'idle-timeout': { default: '60s', commands: SERVE, help: 'idle keep-alive client connections are closed after this' },
  'body-timeout': { default: '60s', commands: SERVE, help: 'a request body with no byte arriving for this long is cut (408) and the connection closed; 0: off' },
  'max-connections': { default: '1024', commands: SERVE, help: 'client connections the git and the model listener each hold at once; a further one is closed at once and counted (0: no cap; the metrics listener has its own 64)' },
  'max-connections-per-client': { default: '0', commands: SERVE, help: 'client connections one source address holds on the git or the model listener; a further one is closed at once and counted. 0 (no cap) by default: behind a mesh sidecar or NAT every workload has one address; set it when workloads connect from their own pod IPs (the metrics listener has its own 16)' },
  'git-max-concurrent-per-workload': { default: '16', commands: SERVE, help: 'git requests one workload token (instance) may have in progress at once; more get 429 (0: no cap)' },
  'egress-proxy-auth-file': { default: undefined, commands: SERVE, help: 'file holding the Proxy-Authorization value (e.g. Basic <base64>) for the egress proxy HTTPS_PROXY names; read again for every tunnel, never logged' },
  'upstream-connect-timeout': { default: '10s', commands: SERVE, help: 'TCP connect + TLS handshake to an upstream (504 after)' },
  'upstream-response-timeout': { default: '5m', commands: SERVE, help: 'waiting for the upstream response head with no byte moving (504 after); a big push is still being sent, so it is not idle' },
  'upstream-idle-timeout': { default: '5m', commands: SERVE, help: 'a response body or stream with no byte for this long is cut (stream idle timeout)' },
  'shutdown-grace': { default: '30s', commands: SERVE, help: 'on SIGTERM/SIGINT, how long in-flight requests may finish' },
  'metrics-listen': { default: ':9464', commands: SERVE, help: 'Prometheus metrics listener (GET /metrics, /healthz), or off to run without it' },
  'metrics-max-series': { default: '2000', commands: SERVE, help: 'most series one metric family may hold; further label sets fold into an overflow series' },
  'metrics-series-ttl': { default: '1h', commands: SERVE, help: 'a metric series not updated for this long is dropped (0: never), so the cap bounds identities active at once' },
  'metrics-run-id-label': { default: undefined, commands: SERVE, type: 'boolean', help: 'add run_id as a label to model metrics (unbounded; still under --metrics-max-series)' },
  'metrics-drop-instance-id': { default: undefined, commands: SERVE, type: 'boolean', help: 'leave instance_id out of the model metrics\' labels (a pod name churns: hundreds of pods fill --metrics-max-series); the log lines and spans keep it' },
  'log-level': { default: 'info', commands: SERVE, help: 'the least level of the log lines written: debug, info, warn or error' },
  'instance-id': { default: undefined, commands: ['mint-token', 'revoke'], help: 'the workload instance (claim sub)' },
  workflow: { default: undefined, commands: ['mint-token'], help: 'the workflow (claim workflow)' },
  'run-id': { default: undefined, commands: ['mint-token', 'revoke'], help: 'the run (claim run_id)' },
  ttl: { default: '1h', commands: ['mint-token'], help: 'token lifetime' },
  'budget-usd': { default: undefined, commands: ['mint-token'], help: "the run's money budget in USD (within --limits' perRun.budgetUsd: at most its max, or its value when it has none)" },
  'max-concurrent': { default: undefined, commands: ['mint-token'], help: "model calls the run's instance may have in progress (within --limits' perInstance.concurrent: at most its max, or its value)" },
  'requests-per-minute': { default: undefined, commands: ['mint-token'], help: "model calls the run's instance may make a minute (within --limits' perInstance.requestsPerMinute: at most its max, or its value)" },
  'tokens-per-minute': { default: undefined, commands: ['mint-token'], help: "tokens the run's instance may use a minute (within --limits' perInstance.tokensPerMinute: at most its max, or its value)" },
  'git-repo': { default: undefined, commands: ['mint-token'], multiple: true, help: 'repeatable: host/path:read|write (* only as a whole last segment), :write then ref rules to narrow a push (:refs/heads/agent/run-42/*:delete); makes a git proxy token (GIT_PROXY_SIGNING_KEY)' },
  'signing-key': { default: undefined, commands: ['mint-token'], help: 'the key file to sign with: KID.pem (an Ed25519 or P-256 private key; the proxy holds the public key) or KID.hs256 (an HS256 secret); the token names KID. Default: MODEL_PROXY_SIGNING_KEY(_FILE), or GIT_PROXY_SIGNING_KEY(_FILE) with --git-repo' },
  agent: { default: 'opencode', commands: ['agent-config'], help: 'the agent to configure: opencode (opencode.json), codex (config.toml) or claude-code (settings.json)' },
  'proxy-host': { default: undefined, commands: ['git-config', 'agent-config'], help: 'the proxy host[:port] as workloads reach it (default $GIT_AUTH_PROXY_HOST / $MODEL_GATEWAY_PROXY_HOST)' },
  'workload-token-env': { default: undefined, commands: ['git-config'], help: 'add a credential helper that gives git the workload token from this variable' },
  'workload-token-file': { default: undefined, commands: ['git-config'], help: 'add a credential helper that gives git the workload token read from this file (absolute path) each time git asks' },
  tls: { default: undefined, commands: ['git-config'], type: 'boolean', help: 'the git listener serves TLS (--tls-cert): route git to https:// on the proxy instead of http://' },
  'token-file': { default: undefined, commands: ['agent-config'], help: 'the agent reads the bot token from this file (absolute path) instead of $MODEL_PROXY_TOKEN; see docs/gateway.md for when each agent reads it again' },
  'config-dir': { default: undefined, commands: ['agent-config'], help: 'opencode: write opencode.json and the files that keep opencode from npm-installing at start into this directory ($XDG_CONFIG_HOME/opencode where opencode runs), and print the environment it needs' },
  'provider-name': { default: undefined, commands: ['agent-config'], help: 'display name of the provider' },
  model: { default: undefined, commands: ['agent-config'], help: 'default model (default: first allowed model)' },
  'small-model': { default: undefined, commands: ['agent-config'], help: 'small model (default: the default model)' },
  websocket: { default: undefined, commands: ['agent-config'], type: 'boolean', help: 'codex: let Codex speak the Responses API over a WebSocket through the gateway (a provider must serve it; see docs/gateway.md)' },
} as const satisfies Record<string, FlagSpec>;

type FlagName = keyof typeof FLAGS;
const FLAG_NAMES = Object.keys(FLAGS) as FlagName[];

export function usage(): string {
  const flagLines = FLAG_NAMES.map((name) => {
    const f: FlagSpec = FLAGS[name];
    const dflt = f.default === undefined || f.default === '' ? '' : ` (default ${f.default})`;
    const commands = f.commands === SERVE ? '' : `${f.commands.join(', ')}: `;
    return `  --${name.padEnd(26)} ${commands}${f.help}${dflt}`;
  });
  return [
    'usage: node proxy.js [serve] [flags]     start the listeners enabled by the environment',
    '       node proxy.js git-config [--git-hosts FILE] [--proxy-host H] [--tls] [--workload-token-env VAR | --workload-token-file PATH]',
    '                                         print the workload git configuration',
    '       node proxy.js agent-config [--agent opencode|codex|claude-code] [--proxy-host H] [--model M] ...   print the agent\'s config',
    '       node proxy.js mint-token --instance-id I --workflow W --run-id R [--ttl 1h] [--git-repo host/path:read|write ...]',
    '       node proxy.js revoke (--revocations FILE | --limits-store URL) (--run-id R | --instance-id I | --token-id T)',
    '       node proxy.js confirm-store-reset --limits-store URL   trust the shared store\'s state again after it lost it',
    '       node proxy.js --help | --version',
    '',
    'flags (--flag value or --flag=value; a flag another command uses is an error):',
    ...flagLines,
    '',
    'The git listener starts when a git host token is set (GIT_HOST_A_TOKEN, GIT_HOST_B_TOKEN,',
    'or a token of the --git-hosts file) or GIT_AUTH_ENABLED=true; the model gateway when',
    'a --providers file is given, UPSTREAM_API_KEY or UPSTREAM_API_KEY_FILE is set, or',
    'MODEL_GATEWAY_ENABLED=true. Every environment variable: see docs/configuration.md#environment-variables',
  ].join('\n');
}

export function parseCommandLine(argv: readonly string[]): CommandLine {
  const parsed = unknownFlagAsUsageError(() =>
    parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: true,
      options: {
        ...Object.fromEntries(
          FLAG_NAMES.map((n) => {
            const f: FlagSpec = FLAGS[n];
            return [n, { type: f.type ?? ('string' as const), multiple: f.multiple === true }];
          }),
        ),
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean' },
      },
    }),
  );
  const { positionals } = parsed;
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  if (positionals.length > 1) throw new UsageError(`unexpected argument "${positionals[1]}"`);
  let command: Command = 'serve';
  if (positionals[0] !== undefined) {
    if (!COMMANDS.includes(positionals[0] as Command)) throw new UsageError(`unknown command "${positionals[0]}"${suggestion(positionals[0], COMMANDS)}`);
    command = positionals[0] as Command;
  }
  if (values.help) command = 'help';
  else if (values.version) command = 'version';
  else refuseFlagsOfOtherCommands(command, values);

  const str = (name: FlagName): string | undefined => (values[name] as string | undefined) ?? FLAGS[name].default;
  const duration = (name: FlagName) => asUsageError(() => parseDuration(name, str(name)!));
  return {
    command,
    options: {
      gitListen: asUsageError(() => parseListenAddressOrOff('git-auth-listen', str('git-auth-listen')!)),
      modelListen: asUsageError(() => parseListenAddressOrOff('model-gateway-listen', str('model-gateway-listen')!)),
      maxRequestBodyBytes: asUsageError(() => parseByteSize('max-request-body', str('max-request-body')!)),
      maxHeldRequestBytes: asUsageError(() => parseByteSizeAtLeast('max-held-request-bytes', str('max-held-request-bytes')!, parseByteSize('max-request-body', str('max-request-body')!), `below --max-request-body (${str('max-request-body')}), a body of that size would always be refused; raise it, or lower --max-request-body`)),
      upstreamMaxRetries: asUsageError(() => parseCount('upstream-max-retries', str('upstream-max-retries')!, 0, 10)),
      upstreamRetryBudgetMs: duration('upstream-retry-budget'),
      maxTokenLifetimeMs: duration('max-token-lifetime'),
      gitHostsFile: str('git-hosts'),
      headerTimeoutMs: duration('header-timeout'),
      idleTimeoutMs: duration('idle-timeout'),
      bodyTimeoutMs: duration('body-timeout'),
      maxConnections: asUsageError(() => parseCount('max-connections', str('max-connections')!, 0, 1_000_000)),
      maxConnectionsPerClient: asUsageError(() => parseCount('max-connections-per-client', str('max-connections-per-client')!, 0, 1_000_000)),
      gitMaxConcurrentPerWorkload: asUsageError(() => parseCount('git-max-concurrent-per-workload', str('git-max-concurrent-per-workload')!, 0, 1_000_000)),
      upstreamConnectTimeoutMs: duration('upstream-connect-timeout'),
      upstreamResponseTimeoutMs: duration('upstream-response-timeout'),
      upstreamIdleTimeoutMs: duration('upstream-idle-timeout'),
      shutdownGraceMs: duration('shutdown-grace'),
      storeReachTimeoutMs: duration('store-reach-timeout'),
      metricsListen: asUsageError(() => parseListenAddressOrOff('metrics-listen', str('metrics-listen')!)),
      metricsMaxSeries: asUsageError(() => parseCount('metrics-max-series', str('metrics-max-series')!, 10, 1_000_000)),
      metricsSeriesTtlMs: duration('metrics-series-ttl'),
      metricsRunIdLabel: values['metrics-run-id-label'] === true,
      metricsDropInstanceId: values['metrics-drop-instance-id'] === true,
      logLevel: asUsageError(() => parseOneOf('log-level', str('log-level')!, LOG_LEVELS)),
      providersFile: str('providers'),
      limitsFile: str('limits'),
      allowUnpricedModels: values['allow-unpriced-models'] === true,
      limitsStore: str('limits-store')!,
      limitsStorePasswordFile: str('limits-store-password-file'),
      limitsStoreAccess: { caFile: str('limits-store-ca-file'), sentinelUser: str('limits-store-sentinel-user'), sentinelPasswordFile: str('limits-store-sentinel-password-file') },
      limitsStoreUnreadyAfterMs: duration('limits-store-unready-after'),
      revocationsFile: str('revocations'),
      botKeys: str('bot-keys'),
      gitKeys: str('git-keys'),
      tlsCertFile: str('tls-cert'),
      tlsKeyFile: str('tls-key'),
      tlsClientCaFile: str('tls-client-ca'),
      spiffeTrustDomain: str('spiffe-trust-domain'),
      workloadPolicyFile: str('workload-policy'),
      serviceAccounts: { issuer: str('sa-issuer'), audience: str('sa-audience'), jwksFile: str('sa-jwks-file'), jwksUrl: str('sa-jwks-url'), jwksDiscovery: values['sa-jwks-discovery'] === true, caFile: str('sa-ca-file') },
      limitsStoreFailure: asUsageError(() => parseOneOf('limits-store-failure', str('limits-store-failure')!, ['open', 'closed'] as const)),
      allowHostedTools: str('allow-hosted-tools')!.split(',').map((t) => t.trim()).filter((t) => t !== ''),
      egressProxyAuthFile: str('egress-proxy-auth-file'),
    },
    ...otherCommandsOptions(str, values, duration),
  };
}

type FlagValue = (name: FlagName) => string | undefined;

/** The options of mint-token, agent-config and git-config (serve's are the rest of CommandLine). */
function otherCommandsOptions(str: FlagValue, values: Record<string, string | boolean | string[] | undefined>, duration: (name: FlagName) => number): Pick<CommandLine, 'mint' | 'agent' | 'gitConfig'> {
  return {
    mint: {
      instanceId: str('instance-id'),
      workflow: str('workflow'),
      runId: str('run-id'),
      ttlMs: duration('ttl'),
      gitRepos: (values['git-repo'] as string[] | undefined) ?? [],
      budgetUsd: str('budget-usd') === undefined ? undefined : asUsageError(() => parsePositiveAmount('budget-usd', str('budget-usd')!)),
      tokenId: str('token-id'),
      signingKeyFile: str('signing-key'),
      maxConcurrent: str('max-concurrent') === undefined ? undefined : asUsageError(() => parseCount('max-concurrent', str('max-concurrent')!, 1, 10_000)),
      requestsPerMinute: str('requests-per-minute') === undefined ? undefined : asUsageError(() => parseCount('requests-per-minute', str('requests-per-minute')!, 1, 100_000_000)),
      tokensPerMinute: str('tokens-per-minute') === undefined ? undefined : asUsageError(() => parseCount('tokens-per-minute', str('tokens-per-minute')!, 1, 1_000_000_000_000)),
    },
    agent: { agent: str('agent')!, proxyHost: str('proxy-host'), providerName: str('provider-name'), model: str('model'), smallModel: str('small-model'), tokenFile: str('token-file'), configDir: str('config-dir'), websocket: values.websocket === true },
    gitConfig: {
      proxyHost: str('proxy-host'),
      tls: values.tls === true,
      workloadTokenEnv: str('workload-token-env'),
      workloadTokenFile: str('workload-token-file'),
    },
  };
}

/** A flag that the command does not use would be silently ignored: refuse it, naming what the command takes. */
function refuseFlagsOfOtherCommands(command: Command, values: Record<string, unknown>): void {
  for (const name of FLAG_NAMES) {
    const f: FlagSpec = FLAGS[name];
    if (values[name] === undefined || (f.commands as readonly Command[]).includes(command)) continue;
    const own = FLAG_NAMES.filter((n) => (FLAGS[n].commands as readonly Command[]).includes(command)).map((n) => `--${n}`);
    throw new UsageError(`--${name} is not a flag of ${command} (${command} takes ${own.length > 0 ? own.join(', ') : 'no flags'})`);
  }
}

/** parseArgs, whose text for an unknown flag is about positional arguments: the flag is named instead, with the one it most likely meant. */
function unknownFlagAsUsageError<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const flag = e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /'(-{1,2}[^']*)'/.exec(e.message)?.[1] : undefined;
    if (flag === undefined) throw new UsageError(e.message);
    const name = flag.replace(/^-+/, '').split('=')[0]!;
    throw new UsageError(`unknown flag ${flag}${suggestion(name, [...FLAG_NAMES, 'help', 'version'], '--')}`);
  }
}

/** `fn`'s result; its error becomes a UsageError, so that the usage text follows the message. */
export function asUsageError<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}
