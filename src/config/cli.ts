// Command line: subcommand, flags and their defaults, and the usage text. Pure: argv in,
// options out; a mistake throws a UsageError whose message says what to type instead.
import { parseArgs } from 'node:util';
import { parseByteSize, parseCount, parseDuration, parseListenAddress, type ListenAddress } from '../http/address.ts';

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export type Command = 'serve' | 'git-config' | 'agent-config' | 'mint-token' | 'help' | 'version';
const COMMANDS: readonly Command[] = ['serve', 'git-config', 'agent-config', 'mint-token', 'help', 'version'];

export interface ServeOptions {
  readonly gitListen: ListenAddress;
  readonly modelListen: ListenAddress;
  readonly maxRequestBodyBytes: number;
  readonly upstreamMaxRetries: number;
  readonly upstreamRetryBudgetMs: number;
  readonly maxTokenLifetimeMs: number;
  readonly gitHostsFile: string | undefined;
  readonly headerTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly upstreamConnectTimeoutMs: number;
  readonly upstreamResponseTimeoutMs: number;
  readonly upstreamIdleTimeoutMs: number;
  readonly shutdownGraceMs: number;
  /** undefined: `--metrics-listen off`, no metrics listener. */
  readonly metricsListen: ListenAddress | undefined;
  readonly metricsMaxSeries: number;
  readonly metricsSeriesTtlMs: number;
  readonly metricsRunIdLabel: boolean;
}

export interface MintOptions {
  readonly instanceId: string | undefined;
  readonly workflow: string | undefined;
  readonly runId: string | undefined;
  readonly ttlMs: number;
}

export interface AgentConfigOptions {
  readonly proxyHost: string | undefined;
  readonly providerName: string | undefined;
  readonly model: string | undefined;
  readonly smallModel: string | undefined;
}

export interface CommandLine {
  readonly command: Command;
  readonly options: ServeOptions;
  readonly mint: MintOptions;
  readonly agent: AgentConfigOptions;
}

/** Flag name, default, and one line of help: the single source for parsing and usage text. */
const FLAGS = {
  'git-auth-listen': { default: ':8447', help: 'git proxy listen address (:PORT, HOST:PORT, [V6]:PORT)' },
  'git-hosts': { default: undefined, help: 'JSON file with more git hosts (see README, "Hosts file")' },
  'model-gateway-listen': { default: ':8450', help: 'model gateway listen address' },
  'max-request-body': { default: '32MiB', help: 'largest chat-completion request body (413 beyond)' },
  'upstream-max-retries': { default: '2', help: 'model gateway: retries after a 429 or a failed connect, before any byte reached the client' },
  'upstream-retry-budget': { default: '30s', help: 'model gateway: total time retries of one request may wait' },
  'max-token-lifetime': { default: '24h', help: 'longest bot token lifetime (exp - iat) the gateway accepts and mint-token issues' },
  'header-timeout': { default: '30s', help: 'time a client has to send its request head' },
  'idle-timeout': { default: '60s', help: 'idle keep-alive client connections are closed after this' },
  'upstream-connect-timeout': { default: '10s', help: 'TCP connect + TLS handshake to an upstream (504 after)' },
  'upstream-response-timeout': { default: '5m', help: 'waiting for the upstream response head with no byte moving (504 after); a big push is still being sent, so it is not idle' },
  'upstream-idle-timeout': { default: '5m', help: 'a response body or stream with no byte for this long is cut (stream idle timeout)' },
  'shutdown-grace': { default: '30s', help: 'on SIGTERM/SIGINT, how long in-flight requests may finish' },
  'metrics-listen': { default: ':9464', help: 'Prometheus metrics listener (GET /metrics, /healthz), or off to run without it' },
  'metrics-max-series': { default: '2000', help: 'most series one metric family may hold; further label sets fold into an overflow series' },
  'metrics-series-ttl': { default: '1h', help: 'a metric series not updated for this long is dropped (0: never), so the cap bounds identities active at once' },
  'instance-id': { default: undefined, help: 'mint-token: the bot instance (claim sub)' },
  workflow: { default: undefined, help: 'mint-token: the workflow (claim workflow)' },
  'run-id': { default: undefined, help: 'mint-token: the run (claim run_id)' },
  ttl: { default: '1h', help: 'mint-token: token lifetime' },
  'proxy-host': { default: undefined, help: 'agent-config: gateway host[:port] as bots reach it (default $MODEL_GATEWAY_PROXY_HOST)' },
  'provider-name': { default: undefined, help: 'agent-config: display name of the provider' },
  model: { default: undefined, help: 'agent-config: default model (default: first allowed model)' },
  'small-model': { default: undefined, help: 'agent-config: small model (default: the default model)' },
} as const satisfies Record<string, { default: string | undefined; help: string }>;

type FlagName = keyof typeof FLAGS;

export function usage(): string {
  const flagLines = (Object.keys(FLAGS) as FlagName[]).map((name) => {
    const f = FLAGS[name];
    const dflt = f.default === undefined ? '' : ` (default ${f.default})`;
    return `  --${name.padEnd(26)} ${f.help}${dflt}`;
  });
  return [
    'usage: node proxy.js [serve] [flags]     start the listeners enabled by the environment',
    '       node proxy.js git-config [--git-hosts FILE]   print the workload git configuration',
    '       node proxy.js agent-config [--proxy-host H] [--model M] ...   print the bot provider config',
    '       node proxy.js mint-token --instance-id I --workflow W --run-id R [--ttl 1h]',
    '       node proxy.js --help | --version',
    '',
    'flags (--flag value or --flag=value):',
    ...flagLines,
    `  --${'metrics-run-id-label'.padEnd(26)} add run_id as a label to model metrics (unbounded; still under --metrics-max-series)`,
    '',
    'The git listener starts when a git host token is set (GIT_HOST_A_TOKEN, GIT_HOST_B_TOKEN,',
    'or a token of the --git-hosts file) or GIT_AUTH_ENABLED=true; the model gateway when',
    'UPSTREAM_API_KEY or UPSTREAM_API_KEY_FILE is set, or MODEL_GATEWAY_ENABLED=true.',
    'See README for every environment variable.',
  ].join('\n');
}

export function parseCommandLine(argv: readonly string[]): CommandLine {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: true,
      options: {
        ...Object.fromEntries((Object.keys(FLAGS) as FlagName[]).map((n) => [n, { type: 'string' as const }])),
        help: { type: 'boolean', short: 'h' },
        'metrics-run-id-label': { type: 'boolean' },
        version: { type: 'boolean' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { positionals } = parsed;
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (positionals.length > 1) throw new UsageError(`unexpected argument "${positionals[1]}"`);
  let command: Command = 'serve';
  if (positionals[0] !== undefined) {
    if (!COMMANDS.includes(positionals[0] as Command)) throw new UsageError(`unknown command "${positionals[0]}"`);
    command = positionals[0] as Command;
  }
  if (values.help) command = 'help';
  else if (values.version) command = 'version';

  const str = (name: FlagName): string | undefined => (values[name] as string | undefined) ?? FLAGS[name].default;
  const duration = (name: FlagName) => wrap(() => parseDuration(name, str(name)!));
  return {
    command,
    options: {
      gitListen: wrap(() => parseListenAddress('git-auth-listen', str('git-auth-listen')!)),
      modelListen: wrap(() => parseListenAddress('model-gateway-listen', str('model-gateway-listen')!)),
      maxRequestBodyBytes: wrap(() => parseByteSize('max-request-body', str('max-request-body')!)),
      upstreamMaxRetries: wrap(() => parseCount('upstream-max-retries', str('upstream-max-retries')!, 0, 10)),
      upstreamRetryBudgetMs: duration('upstream-retry-budget'),
      maxTokenLifetimeMs: duration('max-token-lifetime'),
      gitHostsFile: str('git-hosts'),
      headerTimeoutMs: duration('header-timeout'),
      idleTimeoutMs: duration('idle-timeout'),
      upstreamConnectTimeoutMs: duration('upstream-connect-timeout'),
      upstreamResponseTimeoutMs: duration('upstream-response-timeout'),
      upstreamIdleTimeoutMs: duration('upstream-idle-timeout'),
      shutdownGraceMs: duration('shutdown-grace'),
      metricsListen: str('metrics-listen') === 'off' ? undefined : wrap(() => parseListenAddress('metrics-listen', str('metrics-listen')!)),
      metricsMaxSeries: wrap(() => parseCount('metrics-max-series', str('metrics-max-series')!, 10, 1_000_000)),
      metricsSeriesTtlMs: duration('metrics-series-ttl'),
      metricsRunIdLabel: values['metrics-run-id-label'] === true,
    },
    mint: {
      instanceId: str('instance-id'),
      workflow: str('workflow'),
      runId: str('run-id'),
      ttlMs: duration('ttl'),
    },
    agent: {
      proxyHost: str('proxy-host'),
      providerName: str('provider-name'),
      model: str('model'),
      smallModel: str('small-model'),
    },
  };
}

function wrap<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}
