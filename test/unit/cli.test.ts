import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCommandLine, usage, UsageError } from '../../src/config/cli.ts';

const ALL_FLAGS = [
  'git-auth-listen',
  'git-hosts',
  'header-timeout',
  'idle-timeout',
  'upstream-connect-timeout',
  'upstream-response-timeout',
  'upstream-idle-timeout',
  'shutdown-grace',
] as const;

test('with no arguments the command is serve', () => {
  assert.equal(parseCommandLine([]).command, 'serve');
});

/** Every option's documented default, durations in milliseconds. */
const DEFAULTS = {
  gitListen: { host: undefined, port: 8447 },
  modelListen: { host: undefined, port: 8450 },
  maxRequestBodyBytes: 32 * 1024 * 1024,
  maxHeldRequestBytes: 160 * 1024 * 1024,
  upstreamMaxRetries: 2,
  upstreamRetryBudgetMs: 30_000,
  maxTokenLifetimeMs: 86_400_000,
  gitHostsFile: undefined,
  headerTimeoutMs: 30_000,
  idleTimeoutMs: 60_000,
  bodyTimeoutMs: 60_000,
  maxConnections: 1024,
  maxConnectionsPerClient: 0,
  gitMaxConcurrentPerWorkload: 16,
  upstreamConnectTimeoutMs: 10_000,
  upstreamResponseTimeoutMs: 300_000,
  upstreamIdleTimeoutMs: 300_000,
  shutdownGraceMs: 30_000,
  storeReachTimeoutMs: 5000,
  metricsListen: { host: undefined, port: 9464 },
  metricsMaxSeries: 2000,
  metricsSeriesTtlMs: 3_600_000,
  metricsRunIdLabel: false,
  metricsDropInstanceId: false,
  logLevel: 'info',
  providersFile: undefined,
  limitsFile: undefined,
  allowUnpricedModels: false,
  limitsStore: 'memory',
  limitsStorePasswordFile: undefined,
  limitsStoreAccess: { caFile: undefined, sentinelUser: undefined, sentinelPasswordFile: undefined },
  limitsStoreFailure: 'closed',
  limitsStoreUnreadyAfterMs: 30_000,
  revocationsFile: undefined,
  botKeys: undefined,
  gitKeys: undefined,
  tlsCertFile: undefined,
  tlsKeyFile: undefined,
  tlsClientCaFile: undefined,
  spiffeTrustDomain: undefined,
  workloadPolicyFile: undefined,
  serviceAccounts: { issuer: undefined, audience: undefined, jwksFile: undefined, jwksUrl: undefined, jwksDiscovery: false, caFile: undefined },
  allowHostedTools: [],
  egressProxyAuthFile: undefined,
};

test('every option has its documented default, durations in milliseconds', () => {
  assert.deepEqual(parseCommandLine([]).options, DEFAULTS);
});

test('each named command is recognised', () => {
  for (const command of ['serve', 'git-config', 'help', 'version'] as const) {
    assert.equal(parseCommandLine([command]).command, command);
  }
});

test('flags given after the command still apply', () => {
  const cl = parseCommandLine(['git-config', '--git-hosts', '/etc/hosts.json']);
  assert.equal(cl.command, 'git-config');
  assert.equal(cl.options.gitHostsFile, '/etc/hosts.json');
});

test('"--flag value" and "--flag=value" give the same options', () => {
  const spaced = parseCommandLine([
    '--git-auth-listen', '127.0.0.1:9000',
    '--git-hosts', 'hosts.json',
    '--header-timeout', '5s',
    '--idle-timeout', '2m',
    '--upstream-connect-timeout', '500ms',
    '--upstream-idle-timeout', '1h',
    '--shutdown-grace', '0',
  ]);
  const equals = parseCommandLine([
    '--git-auth-listen=127.0.0.1:9000',
    '--git-hosts=hosts.json',
    '--header-timeout=5s',
    '--idle-timeout=2m',
    '--upstream-connect-timeout=500ms',
    '--upstream-idle-timeout=1h',
    '--shutdown-grace=0',
  ]);
  const expected = {
    ...DEFAULTS,
    gitListen: { host: '127.0.0.1', port: 9000 },
    gitHostsFile: 'hosts.json',
    headerTimeoutMs: 5000,
    idleTimeoutMs: 120_000,
    upstreamConnectTimeoutMs: 500,
    upstreamIdleTimeoutMs: 3_600_000,
    shutdownGraceMs: 0,
  };
  assert.deepEqual(spaced.options, expected);
  assert.deepEqual(equals.options, expected);
  assert.equal(spaced.command, 'serve');
  assert.equal(equals.command, 'serve');
});

test('a v6 listen address is accepted on the command line', () => {
  assert.deepEqual(parseCommandLine(['--git-auth-listen=[::1]:8447']).options.gitListen, { host: '::1', port: 8447 });
});

test('an unknown flag is a UsageError', () => {
  for (const argv of [['--nope'], ['--git-auth-port', '8447'], ['serve', '--listen=:1'], ['-x']]) {
    assert.throws(() => parseCommandLine(argv), UsageError, argv.join(' '));
  }
});

test('an unknown command is a UsageError naming it', () => {
  assert.throws(() => parseCommandLine(['server']), (err: unknown) => {
    assert.ok(err instanceof UsageError);
    assert.ok(err.message.includes('"server"'), err.message);
    return true;
  });
});

test('a second positional argument is a UsageError naming it', () => {
  assert.throws(() => parseCommandLine(['serve', 'extra']), (err: unknown) => {
    assert.ok(err instanceof UsageError);
    assert.ok(err.message.includes('"extra"'), err.message);
    return true;
  });
});

test('a string flag without its value is a UsageError', () => {
  assert.throws(() => parseCommandLine(['--git-hosts']), UsageError);
});

test('a boolean flag given a value is a UsageError', () => {
  assert.throws(() => parseCommandLine(['--help=yes']), UsageError);
  assert.throws(() => parseCommandLine(['--version=1']), UsageError);
});

test('--help and -h select the help command, whatever command is named', () => {
  assert.equal(parseCommandLine(['--help']).command, 'help');
  assert.equal(parseCommandLine(['-h']).command, 'help');
  assert.equal(parseCommandLine(['git-config', '--help']).command, 'help');
});

test('--version selects the version command, and --help wins over it', () => {
  assert.equal(parseCommandLine(['--version']).command, 'version');
  assert.equal(parseCommandLine(['serve', '--version']).command, 'version');
  assert.equal(parseCommandLine(['--version', '--help']).command, 'help');
});

test('a bad duration on any duration flag is a UsageError naming that flag', () => {
  const durationFlags = ['header-timeout', 'idle-timeout', 'upstream-connect-timeout', 'upstream-idle-timeout', 'shutdown-grace'];
  for (const flag of durationFlags) {
    assert.throws(
      () => parseCommandLine([`--${flag}`, '30']),
      (err: unknown) => {
        assert.ok(err instanceof UsageError, flag);
        assert.ok(err.message.startsWith(`--${flag}: `), err.message);
        return true;
      },
      flag,
    );
  }
});

test('--max-held-request-bytes is a size of at least --max-request-body: below it a body of the largest size could never be read, a UsageError naming both flags', () => {
  assert.equal(parseCommandLine(['--max-held-request-bytes', '64MiB']).options.maxHeldRequestBytes, 64 * 1024 * 1024);
  assert.equal(parseCommandLine(['--max-held-request-bytes', '8MiB', '--max-request-body', '8MiB']).options.maxHeldRequestBytes, 8 * 1024 * 1024);
  for (const args of [['--max-held-request-bytes', '16MiB'], ['--max-held-request-bytes', '32MiB', '--max-request-body', '33MiB']]) {
    assert.throws(
      () => parseCommandLine(args),
      (err: unknown) => err instanceof UsageError && err.message.startsWith('--max-held-request-bytes: ') && err.message.includes('--max-request-body'),
      args.join(' '),
    );
  }
  assert.throws(() => parseCommandLine(['--max-held-request-bytes', '0']), /^UsageError: --max-held-request-bytes: "0" is not a size/);
});

test('a bad listen address is a UsageError naming --git-auth-listen', () => {
  for (const value of ['8447', ':65536', '[::1]', 'local host:80']) {
    assert.throws(
      () => parseCommandLine(['--git-auth-listen', value]),
      (err: unknown) => {
        assert.ok(err instanceof UsageError, value);
        assert.ok(err.message.startsWith('--git-auth-listen: '), err.message);
        return true;
      },
      value,
    );
  }
});

test('UsageError is an Error named UsageError', () => {
  const err = new UsageError('x');
  assert.ok(err instanceof Error);
  assert.equal(err.name, 'UsageError');
  assert.equal(err.message, 'x');
});

test('usage() lists every flag, including --help and --version', () => {
  const text = usage();
  for (const flag of [...ALL_FLAGS, 'help', 'version']) {
    assert.ok(text.includes(`--${flag}`), `usage() does not mention --${flag}`);
  }
});

test('usage() shows the default of every flag that has one', () => {
  const text = usage();
  const defaults: Record<string, string> = {
    'git-auth-listen': ':8447',
    'header-timeout': '30s',
    'idle-timeout': '60s',
    'upstream-connect-timeout': '10s',
    'upstream-idle-timeout': '5m',
    'shutdown-grace': '30s',
  };
  const lines = text.split('\n');
  for (const [flag, dflt] of Object.entries(defaults)) {
    const line = lines.find((l) => l.trimStart().startsWith(`--${flag} `));
    assert.ok(line, `no usage line for --${flag}`);
    assert.ok(line.endsWith(`(default ${dflt})`), line);
  }
  const hostsLine = lines.find((l) => l.trimStart().startsWith('--git-hosts '));
  assert.ok(hostsLine);
  assert.ok(!hostsLine.includes('(default'), hostsLine);
});

test('usage() names both commands and both flag syntaxes', () => {
  const text = usage();
  assert.ok(text.includes('git-config'));
  assert.ok(text.includes('serve'));
  assert.ok(text.includes('--flag value or --flag=value'));
});

test('the model gateway flags have their documented defaults', () => {
  const { options } = parseCommandLine([]);
  assert.deepEqual(options.modelListen, { host: undefined, port: 8450 });
  assert.equal(options.maxRequestBodyBytes, 33_554_432);
  assert.equal(options.upstreamMaxRetries, 2);
  assert.equal(options.upstreamRetryBudgetMs, 30_000);
  assert.equal(options.maxTokenLifetimeMs, 86_400_000);
});

test('the model gateway flags are parsed in both flag syntaxes', () => {
  const argv = ['--model-gateway-listen', '127.0.0.1:9450', '--max-request-body', '512KiB', '--upstream-max-retries', '0', '--upstream-retry-budget', '5s', '--max-token-lifetime', '2h'];
  const spaced = parseCommandLine(argv).options;
  const equals = parseCommandLine(argv.reduce<string[]>((acc, v, i) => (i % 2 === 0 ? [...acc, `${v}=${argv[i + 1]}`] : acc), [])).options;
  for (const options of [spaced, equals]) {
    assert.deepEqual(options.modelListen, { host: '127.0.0.1', port: 9450 });
    assert.equal(options.maxRequestBodyBytes, 512 * 1024);
    assert.equal(options.upstreamMaxRetries, 0);
    assert.equal(options.upstreamRetryBudgetMs, 5000);
    assert.equal(options.maxTokenLifetimeMs, 7_200_000);
  }
});

test('a bad value on a model gateway flag is a UsageError naming that flag', () => {
  const cases: [string, string][] = [
    ['model-gateway-listen', '8450'],
    ['max-request-body', '32MB'],
    ['max-request-body', '0B'],
    ['upstream-max-retries', '11'],
    ['upstream-max-retries', '-1'],
    ['upstream-retry-budget', '30'],
    ['max-token-lifetime', '1d'],
    ['ttl', '60'],
  ];
  for (const [flag, value] of cases) {
    assert.throws(
      () => parseCommandLine([...(flag === 'ttl' ? ['mint-token'] : []), `--${flag}=${value}`]),
      (err: unknown) => {
        assert.ok(err instanceof UsageError, `${flag} ${value}`);
        assert.ok(err.message.startsWith(`--${flag}: `), err.message);
        return true;
      },
      `${flag} ${value}`,
    );
  }
});

test('agent-config and mint-token are recognised commands', () => {
  assert.equal(parseCommandLine(['agent-config']).command, 'agent-config');
  assert.equal(parseCommandLine(['mint-token']).command, 'mint-token');
});

test('mint-token options default to undefined ids and a 1h ttl', () => {
  assert.deepEqual(parseCommandLine(['mint-token']).mint, { instanceId: undefined, workflow: undefined, runId: undefined, ttlMs: 3_600_000, gitRepos: [], budgetUsd: undefined, maxConcurrent: undefined, requestsPerMinute: undefined, tokensPerMinute: undefined, tokenId: undefined, signingKeyFile: undefined });
});

test('mint-token options are passed through, the ttl in milliseconds', () => {
  const cl = parseCommandLine(['mint-token', '--instance-id', 'bot-7', '--workflow=ci/review', '--run-id', 'run-42', '--ttl', '15m']);
  assert.deepEqual(cl.mint, { instanceId: 'bot-7', workflow: 'ci/review', runId: 'run-42', ttlMs: 900_000, gitRepos: [], budgetUsd: undefined, maxConcurrent: undefined, requestsPerMinute: undefined, tokensPerMinute: undefined, tokenId: undefined, signingKeyFile: undefined });
  assert.deepEqual(parseCommandLine(['mint-token', '--budget-usd', '2.5', '--max-concurrent', '3']).mint.budgetUsd, 2.5);
  assert.throws(() => parseCommandLine(['mint-token', '--budget-usd', '0']), /--budget-usd: "0" must be an amount above 0/);
  const rates = parseCommandLine(['mint-token', '--requests-per-minute', '30', '--tokens-per-minute', '200000']).mint;
  assert.deepEqual([rates.requestsPerMinute, rates.tokensPerMinute], [30, 200_000]);
  assert.throws(() => parseCommandLine(['mint-token', '--requests-per-minute', '0']), /--requests-per-minute/);
});

test('agent-config options default to opencode and undefined', () => {
  assert.deepEqual(parseCommandLine(['agent-config']).agent, { agent: 'opencode', proxyHost: undefined, providerName: undefined, model: undefined, smallModel: undefined, tokenFile: undefined, configDir: undefined, websocket: false });
});

test('agent-config options are passed through unchanged', () => {
  const cl = parseCommandLine(['agent-config', '--agent', 'codex', '--proxy-host', 'gw:9000', '--provider-name=Models', '--model', 'gpt-4.1', '--small-model', 'gpt-4.1-mini', '--token-file', '/run/bot/token', '--config-dir', '/home/bot/.config/opencode', '--websocket']);
  assert.deepEqual(cl.agent, { agent: 'codex', proxyHost: 'gw:9000', providerName: 'Models', model: 'gpt-4.1', smallModel: 'gpt-4.1-mini', tokenFile: '/run/bot/token', configDir: '/home/bot/.config/opencode', websocket: true });
});

test('usage() lists the model gateway, mint-token and agent-config flags, with the defaults of those that have one', () => {
  const lines = usage().split('\n');
  const defaults: Record<string, string | undefined> = {
    'model-gateway-listen': ':8450',
    'max-request-body': '32MiB',
    'upstream-max-retries': '2',
    'upstream-retry-budget': '30s',
    'max-token-lifetime': '24h',
    ttl: '1h',
    'instance-id': undefined,
    workflow: undefined,
    'run-id': undefined,
    'proxy-host': undefined,
    'provider-name': undefined,
    model: undefined,
    'small-model': undefined,
  };
  for (const [flag, dflt] of Object.entries(defaults)) {
    const line = lines.find((l) => l.trimStart().startsWith(`--${flag} `));
    assert.ok(line, `no usage line for --${flag}`);
    if (dflt !== undefined) assert.ok(line.endsWith(`(default ${dflt})`), line);
  }
  const text = usage();
  assert.ok(text.includes('agent-config'));
  assert.ok(text.includes('mint-token'));
});

test('--metrics-run-id-label is a boolean flag, off unless given', () => {
  assert.equal(parseCommandLine([]).options.metricsRunIdLabel, false);
  assert.equal(parseCommandLine(['--metrics-run-id-label']).options.metricsRunIdLabel, true);
  assert.equal(parseCommandLine(['--metrics-drop-instance-id']).options.metricsDropInstanceId, true);
  assert.equal(parseCommandLine(['--log-level', 'warn']).options.logLevel, 'warn');
  assert.throws(() => parseCommandLine(['--log-level', 'verbose']), /--log-level: "verbose" must be debug or info or warn or error/);
  assert.throws(() => parseCommandLine(['--metrics-max-series', '5']), /--metrics-max-series: "5" must be a whole number from 10/);
});

test('--allow-hosted-tools is split on commas, empty by default', () => {
  assert.deepEqual(parseCommandLine([]).options.allowHostedTools, []);
  assert.deepEqual(parseCommandLine(['--allow-hosted-tools', 'web_search, mcp']).options.allowHostedTools, ['web_search', 'mcp']);
});

test('a flag of another command is a UsageError naming the flag and the flags the command takes', () => {
  const cases: [string[], RegExp][] = [
    [['git-config', '--git-auth-listen', ':1'], /^--git-auth-listen is not a flag of git-config \(git-config takes --git-hosts, --proxy-host, --workload-token-env, --workload-token-file, --tls\)$/],
    [['git-config', '--ttl', '1h'], /^--ttl is not a flag of git-config/],
    [['agent-config', '--git-hosts', 'h.json'], /^--git-hosts is not a flag of agent-config \(agent-config takes --providers, --allow-hosted-tools, --agent, --proxy-host, --token-file, --config-dir, --provider-name, --model, --small-model, --websocket\)$/],
    [['mint-token', '--proxy-host', 'p'], /^--proxy-host is not a flag of mint-token \(mint-token takes --git-hosts, --limits, --max-token-lifetime, --instance-id, --workflow, --run-id, --ttl, --budget-usd, --max-concurrent, --requests-per-minute, --tokens-per-minute, --git-repo, --signing-key\)$/],
    [['serve', '--workload-token-env', 'T'], /^--workload-token-env is not a flag of serve/],
    [['--metrics-run-id-label', 'git-config'], /^--metrics-run-id-label is not a flag of git-config/],
  ];
  for (const [argv, message] of cases) {
    assert.throws(() => parseCommandLine(argv), (err: unknown) => err instanceof UsageError && message.test(err.message), argv.join(' '));
  }
});

test('git-config takes --git-hosts, --proxy-host, --workload-token-env, --workload-token-file and --tls', () => {
  const cl = parseCommandLine(['git-config', '--git-hosts', 'h.json', '--proxy-host=proxy:9000', '--workload-token-env', 'GIT_TOKEN']);
  assert.equal(cl.options.gitHostsFile, 'h.json');
  assert.deepEqual(cl.gitConfig, { proxyHost: 'proxy:9000', workloadTokenEnv: 'GIT_TOKEN', workloadTokenFile: undefined, tls: false });
  assert.deepEqual(parseCommandLine(['git-config']).gitConfig, { proxyHost: undefined, workloadTokenEnv: undefined, workloadTokenFile: undefined, tls: false });
  assert.equal(parseCommandLine(['git-config', '--tls']).gitConfig.tls, true);
  assert.equal(parseCommandLine(['git-config', '--workload-token-file', '/run/git/token']).gitConfig.workloadTokenFile, '/run/git/token');
});

test('--git-repo is repeatable and keeps its values in order', () => {
  const cl = parseCommandLine(['mint-token', '--git-repo', 'github.com/acme/widgets:write', '--git-repo=github.com/acme/*:read']);
  assert.deepEqual(cl.mint.gitRepos, ['github.com/acme/widgets:write', 'github.com/acme/*:read']);
});

test('metrics listener: --metrics-listen off means no metrics listener; the default stays :9464', () => {
  assert.equal(parseCommandLine(['--metrics-listen', 'off']).options.metricsListen, undefined);
  assert.equal(parseCommandLine(['--metrics-listen=off']).options.metricsListen, undefined);
  assert.deepEqual(parseCommandLine([]).options.metricsListen, { host: undefined, port: 9464 });
  assert.throws(() => parseCommandLine(['--metrics-listen', 'of']), /--metrics-listen: "of" is not a listen address/);
});
