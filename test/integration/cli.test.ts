// The bundle's command line, as an operator or a workload runs it. Each command runs through
// the bundle at least once (its output and exit code from src/main.ts); the other cases of the
// commands other than serve run in this process (test/support/command-in-process.ts), the same
// functions and text without a process start each.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { after, test } from 'node:test';
import { send } from '../support/http-client.ts';
import { BUNDLE, ROOT, runProxyCommand, startProxy, type ProxyProcess } from '../support/proxy-process.ts';
import { runCommandInProcess } from '../support/command-in-process.ts';
import { startServe } from '../support/serve-in-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'cli-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * One bundle started with GIT_AUTH_ENABLED=true and nothing else (the default listen arguments),
 * shared by the tests that only read what it printed at start-up; it must exit 0 on SIGTERM.
 */
let gitOnly: Promise<ProxyProcess> | undefined;
const gitOnlyProxy = () => (gitOnly ??= startProxy({ env: { GIT_AUTH_ENABLED: 'true' } }));
after(async () => {
  const p = await gitOnly?.catch(() => undefined);
  if (p) assert.equal((await p.stop()).code, 0, `GIT_AUTH_ENABLED=true alone: exit 0 on SIGTERM; output:\n${p.output()}`);
});

test('the bundle is one file that requires only node: built-ins', () => {
  const text = readFileSync(BUNDLE, 'utf8');
  const required = [...text.matchAll(/\brequire\(["']([^"']+)["']\)/g)].map((m) => m[1]!);
  assert.ok(required.length > 0);
  assert.deepEqual(required.filter((r) => !r.startsWith('node:')), []);
  assert.doesNotMatch(text, /\bimport\(/, 'no dynamic imports');
});

test('--version prints the package version', async () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const r = await runProxyCommand(['--version']);
  assert.equal(r.code, 0);
  assert.equal(r.stdout.trim(), pkg.version);
});

test('--help lists every flag', async () => {
  const r = await runProxyCommand(['--help']);
  assert.equal(r.code, 0);
  for (const flag of ['--git-auth-listen', '--git-hosts', '--header-timeout', '--idle-timeout', '--upstream-connect-timeout', '--upstream-idle-timeout', '--shutdown-grace']) {
    assert.ok(r.stdout.includes(flag), flag);
  }
});

test('an unknown flag is an error with the usage message and exit code 2', async () => {
  const r = await runProxyCommand(['--no-such-flag']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown flag --no-such-flag\n/);
  assert.match(r.stderr, /usage: node proxy\.js/);
});

test('with no listener enabled the process exits non-zero and names the enabling variables and --providers', async () => {
  const r = await runProxyCommand([]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /no listener is enabled/);
  assert.match(r.stderr, /GIT_HOST_A_TOKEN/);
  assert.match(r.stderr, /GIT_AUTH_ENABLED=true/);
  assert.match(r.stderr, /model gateway: give --providers FILE, set UPSTREAM_API_KEY/);
});

test('GIT_AUTH_ENABLED=true starts the git listener without any token', async () => {
  const p = await gitOnlyProxy(); // stopped, exit 0, after the file's tests
  assert.ok(p.ports.git! > 0);
});

test('listen addresses accept both --flag value and --flag=value, and IPv6 in brackets', async () => {
  // '--git-auth-listen 127.0.0.1:0' is startProxy's default: the shared proxy was started with it.
  for (const args of [['--git-auth-listen', '127.0.0.1:0'], ['--git-auth-listen=[::1]:0']]) {
    const shared = args[0] === '--git-auth-listen';
    const p = shared ? await gitOnlyProxy() : await startProxy({ env: { GIT_AUTH_ENABLED: 'true' }, args });
    try {
      const rec = p.records().find((r) => r.event === 'listening')!;
      assert.match(String(rec.address), args[0]!.includes('::1') ? /^\[::1\]:\d+$/ : /^127\.0\.0\.1:\d+$/);
    } finally {
      if (!shared) await p.stop();
    }
  }
});

test('without GIT_HOST_A and GIT_HOST_A_TOKEN the proxy registers no github.com: its requests are 403, never forwarded', async () => {
  const p = await startProxy({ env: { GIT_AUTH_ENABLED: 'true', GIT_HOST_B: 'git.corp.example' } });
  try {
    const start = p.records().find((r) => r.event === 'listening' && r.listener === 'git')!;
    assert.deepEqual((start.hosts as { host: string }[]).map((h) => h.host), ['git.corp.example']);
    const r = await send(p.ports.git!, 'GET', '/github.com/acme/widgets.git/info/refs?service=git-upload-pack');
    assert.equal(r.status, 403);
    assert.match(r.body.toString(), /not in the proxy registry/);
  } finally {
    assert.equal((await p.stop()).code, 0);
  }
});

test('metrics listener: --metrics-listen off runs the proxy without it, listening on the proxy port only', async () => {
  const p = await startProxy({ env: { GIT_AUTH_ENABLED: 'true' }, args: ['--git-auth-listen', '127.0.0.1:0', '--metrics-listen', 'off'] });
  try {
    assert.deepEqual(p.listeningPorts(), [p.ports.git]);
    assert.deepEqual(p.records().filter((r) => r.event === 'listening').map((r) => r.listener), ['git']);
  } finally {
    assert.equal((await p.stop()).code, 0);
  }
});

test('listeners: --git-auth-listen off and --model-gateway-listen off each run the proxy without that listener whatever the environment enables; both off is "no listener is enabled"', async () => {
  const env = { GIT_AUTH_ENABLED: 'true', MODEL_GATEWAY_ENABLED: 'true' };
  const gitOff = await startServe({ env, args: ['--git-auth-listen', 'off', '--model-gateway-listen', '127.0.0.1:0', '--metrics-listen', 'off'], listeners: ['model'] });
  try {
    assert.deepEqual(gitOff.records().filter((r) => r.event === 'listening').map((r) => r.listener), ['model']);
  } finally {
    assert.equal((await gitOff.stop()).code, 0);
  }
  const modelOff = await startServe({ env, args: ['--git-auth-listen', '127.0.0.1:0', '--model-gateway-listen', 'off', '--metrics-listen', 'off'], listeners: ['git'] });
  try {
    assert.deepEqual(modelOff.records().filter((r) => r.event === 'listening').map((r) => r.listener), ['git']);
  } finally {
    assert.equal((await modelOff.stop()).code, 0);
  }
  const both = await runCommandInProcess(['--git-auth-listen', 'off', '--model-gateway-listen', 'off'], env);
  assert.equal(both.code, 1);
  assert.match(both.stderr, /no listener is enabled/);
});

test('a hosts file may register github.com (e.g. with a rotating tokenFile) when the environment does not', async () => {
  const file = join(dir, 'github-hosts.json');
  writeFileSync(file, JSON.stringify({ hosts: [{ host: 'github.com', auth: 'bearer', tokenFile: join(dir, 'github-token') }] }));
  const p = await startProxy({ env: { GIT_AUTH_ENABLED: 'true' }, args: ['--git-auth-listen', '127.0.0.1:0', '--git-hosts', file] });
  try {
    const start = p.records().find((r) => r.event === 'listening' && r.listener === 'git')!;
    assert.deepEqual(start.hosts, [{ host: 'github.com', auth: 'bearer', credential: 'missing', tls_verify: true, read_only: false, egress: 'direct' }]);
  } finally {
    assert.equal((await p.stop()).code, 0);
  }
  const twice = await runProxyCommand(['--git-hosts', file], { GIT_HOST_A_TOKEN: 'tok' });
  assert.equal(twice.code, 1);
  assert.match(twice.stderr, /git host "github\.com" is registered twice/);
});

test('git-config without GIT_HOST_A or GIT_HOST_A_TOKEN writes no github.com rule; with no host at all it fails saying what to set', async () => {
  const r = await runCommandInProcess(['git-config'], { GIT_AUTH_PROXY_HOST: 'proxy', GIT_HOST_B: 'git.corp.example' });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(gitConfigList(r.stdout), ['url.http://proxy:8447/git.corp.example/.insteadof=https://git.corp.example/']);
  const none = await runCommandInProcess(['git-config'], { GIT_AUTH_PROXY_HOST: 'proxy' });
  assert.equal(none.code, 1);
  assert.equal(none.stdout, '');
  assert.match(none.stderr, /git-config: no git host is configured: set GIT_HOST_A and\/or GIT_HOST_B/);
});

test('metrics listener: a busy metrics port stops start-up with a message naming --metrics-listen and the way out', async () => {
  const squatter = createServer();
  await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
  const port = (squatter.address() as { port: number }).port;
  try {
    const r = await runProxyCommand(['--git-auth-listen', '127.0.0.1:0', '--metrics-listen', `127.0.0.1:${port}`], { GIT_AUTH_ENABLED: 'true' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`^proxy: --metrics-listen 127\\.0\\.0\\.1:${port}: the address is already in use`, 'm'));
    assert.match(r.stderr, /--metrics-listen off to run without the metrics listener/);
  } finally {
    squatter.close();
  }
});

test('a bad hosts file stops start-up with an error naming the field', async () => {
  const file = join(dir, 'bad-hosts.json');
  writeFileSync(file, JSON.stringify({ hosts: [{ host: 'git.example.com', auth: 'bearer', tokenEnv: 'T', tlsInsecureSkipVerify: 'yes' }] }));
  const r = await runProxyCommand(['--git-hosts', file], { GIT_AUTH_ENABLED: 'true' });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /hosts\[0\]\.tlsInsecureSkipVerify: must be true or false/);
});

function gitConfigList(text: string): string[] {
  const file = join(dir, 'workload.gitconfig');
  writeFileSync(file, text);
  return execFileSync('git', ['config', '-f', file, '--list'], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: '1' } })
    .trim()
    .split('\n');
}

test('git-config with GIT_AUTH_PROXY_HOST prints one insteadOf rule per host and no credential helper', async () => {
  const r = await runProxyCommand(['git-config'], { GIT_AUTH_PROXY_HOST: 'git-proxy.ns.svc', GIT_HOST_A: 'github.com', GIT_HOST_B: 'git.corp.example:8443' });
  assert.equal(r.code, 0);
  assert.deepEqual(gitConfigList(r.stdout), [
    'url.http://git-proxy.ns.svc:8447/github.com/.insteadof=https://github.com/',
    'url.http://git-proxy.ns.svc:8447/git.corp.example:8443/.insteadof=https://git.corp.example:8443/',
  ]);
});

test('git-config keeps a port given in GIT_AUTH_PROXY_HOST', async () => {
  const r = await runCommandInProcess(['git-config'], { GIT_AUTH_PROXY_HOST: 'proxy:9000', GIT_HOST_A: 'github.com' });
  assert.deepEqual(gitConfigList(r.stdout), ['url.http://proxy:9000/github.com/.insteadof=https://github.com/']);
});

test('git-config without GIT_AUTH_PROXY_HOST falls back to credential-helper entries', async () => {
  const r = await runCommandInProcess(['git-config'], { GIT_HOST_A: 'github.com', GIT_HOST_B: 'git.corp.example', GIT_CREDENTIAL_HELPER: '/usr/local/bin/executor-helper --mode "git"' });
  assert.deepEqual(gitConfigList(r.stdout), [
    'credential.https://github.com.helper=/usr/local/bin/executor-helper --mode "git"',
    'credential.https://git.corp.example.helper=/usr/local/bin/executor-helper --mode "git"',
  ]);
});

test('git-config refuses a flag it does not use, with the usage message and exit code 2', async () => {
  for (const args of [['--git-auth-listen', ':1'], ['--ttl', '1h']]) {
    const r = await runCommandInProcess(['git-config', ...args], { GIT_AUTH_PROXY_HOST: 'proxy', GIT_HOST_A: 'github.com' });
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.stderr, new RegExp(`${args[0]} is not a flag of git-config \\(git-config takes --git-hosts, --proxy-host, --workload-token-env, --workload-token-file, --tls\\)`));
    assert.equal(r.stdout, '');
  }
});

test('git-config --proxy-host wins over GIT_AUTH_PROXY_HOST', async () => {
  const r = await runCommandInProcess(['git-config', '--proxy-host', 'flag-proxy:9000'], { GIT_AUTH_PROXY_HOST: 'env-proxy', GIT_HOST_A: 'github.com' });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(gitConfigList(r.stdout), ['url.http://flag-proxy:9000/github.com/.insteadof=https://github.com/']);
  assert.equal(r.stderr, '');
});

test('git-config without a proxy host prints the credential-helper fallback and says so on stderr', async () => {
  const r = await runCommandInProcess(['git-config'], { GIT_HOST_A: 'github.com' });
  assert.equal(r.code, 0);
  assert.deepEqual(gitConfigList(r.stdout), ['credential.https://github.com.helper=executor']);
  assert.match(r.stderr, /^proxy: git-config: no proxy host \(--proxy-host or GIT_AUTH_PROXY_HOST\): printed the credential-helper fallback, helper "executor" \(the default; GIT_CREDENTIAL_HELPER is not set\)/);
  assert.match(r.stderr, /GIT_AUTH_PROXY_HOST was lost/);
});

test('agent-config prints the bot provider entry of the design as JSON', async () => {
  const r = await runProxyCommand(['agent-config', '--proxy-host', 'gw.ns.svc', '--small-model', 'gpt-small'], { UPSTREAM_ALLOWED_MODELS: 'gpt-big,gpt-small', UPSTREAM_PROVIDER: 'corp' });
  assert.equal(r.code, 0, r.stderr);
  const config = JSON.parse(r.stdout) as Record<string, unknown>;
  assert.deepEqual(config.provider, {
    corp: {
      npm: '@ai-sdk/openai-compatible',
      name: 'corp (gateway)',
      options: { baseURL: 'http://gw.ns.svc:8450/v1', apiKey: '{env:MODEL_PROXY_TOKEN}', includeUsage: true },
      models: { 'gpt-big': { name: 'gpt-big' }, 'gpt-small': { name: 'gpt-small' } },
    },
  });
  assert.equal(config.model, 'corp/gpt-big');
  assert.equal(config.small_model, 'corp/gpt-small');
  assert.deepEqual(config.enabled_providers, ['corp']);
  assert.equal(config.share, 'disabled');
});

test('agent locked to the gateway: agent-config --agent opencode --config-dir writes the directory opencode reads at start and prints the environment it needs; again over its own files it writes the same', async () => {
  const configDir = join(dir, 'home', '.config', 'opencode');
  const args = ['agent-config', '--agent', 'opencode', '--proxy-host', 'gw.ns.svc', '--config-dir', configDir];
  const env = { UPSTREAM_ALLOWED_MODELS: 'gpt-big,gpt-small' };
  const r = await runProxyCommand(args, env);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '');
  assert.deepEqual(r.stdout.split('\n').filter((l) => l !== '' && !l.startsWith('#')), ['export OPENCODE_DISABLE_MODELS_FETCH=1', 'export OPENCODE_DISABLE_PROJECT_CONFIG=1']);
  assert.deepEqual(readdirSync(configDir).sort(), ['.gitignore', 'node_modules', 'opencode.json', 'package-lock.json', 'package.json']);
  assert.deepEqual(readdirSync(join(configDir, 'node_modules')), [], 'the record of the install, not the install');
  const config = JSON.parse(readFileSync(join(configDir, 'opencode.json'), 'utf8')) as Record<string, unknown>;
  assert.equal((config.provider as Record<string, { options: { baseURL: string } }>).openai!.options.baseURL, 'http://gw.ns.svc:8450/v1');
  assert.deepEqual([config.share, config.autoupdate, config.lsp, config.formatter], ['disabled', false, false, false]);
  assert.deepEqual(JSON.parse(readFileSync(join(configDir, 'package-lock.json'), 'utf8')).packages[''].dependencies, { '@opencode-ai/plugin': '1.18.33' });
  const before = Object.fromEntries(['.gitignore', 'opencode.json', 'package-lock.json', 'package.json'].map((f) => [f, readFileSync(join(configDir, f), 'utf8')]));
  const again = await runCommandInProcess([...args, '--model', 'gpt-small'], env);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, r.stdout);
  assert.equal(JSON.parse(readFileSync(join(configDir, 'opencode.json'), 'utf8')).model, 'openai/gpt-small', 'opencode.json is written again');
  for (const f of ['.gitignore', 'package-lock.json', 'package.json']) assert.equal(readFileSync(join(configDir, f), 'utf8'), before[f], f);
  // A directory whose own package.json opencode would install: nothing written, the reason named.
  writeFileSync(join(configDir, 'package.json'), JSON.stringify({ dependencies: { 'opencode-foo': '1.0.0' } }));
  const refused = await runCommandInProcess(args, env);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /--config-dir: opencode would npm-install into the directory at every start: its package-lock\.json does not name opencode-foo/);
  assert.equal(JSON.parse(readFileSync(join(configDir, 'opencode.json'), 'utf8')).model, 'openai/gpt-small', 'nothing was written');
});

test('agent locked to the gateway: agent-config --agent opencode without --config-dir says on stderr what opencode.json alone leaves open; --config-dir is refused for a directory not named opencode and for the other agents', async () => {
  const env = { UPSTREAM_ALLOWED_MODELS: 'gpt-big' };
  const alone = await runCommandInProcess(['agent-config', '--proxy-host', 'gw'], env);
  assert.equal(alone.code, 0, alone.stderr);
  assert.match(alone.stderr, /^agent-config: opencode\.json alone lets opencode fetch its model catalogue and npm-install a plugin at every start; --config-dir writes what stops that/);
  const elsewhere = join(dir, 'opencode-config');
  const misnamed = await runCommandInProcess(['agent-config', '--proxy-host', 'gw', '--config-dir', elsewhere], env);
  assert.equal(misnamed.code, 2);
  assert.match(misnamed.stderr, /--config-dir: ".*opencode-config" is not named opencode: opencode reads \$XDG_CONFIG_HOME\/opencode/);
  assert.throws(() => readdirSync(elsewhere), /ENOENT/, 'nothing written');
  for (const agent of ['codex', 'claude-code']) {
    const other = await runCommandInProcess(['agent-config', '--agent', agent, '--proxy-host', 'gw', '--config-dir', join(dir, agent, 'opencode')], env);
    assert.equal(other.code, 2, other.stderr);
    assert.match(other.stderr, new RegExp(`--config-dir is for --agent opencode: ${agent}'s whole configuration is the file agent-config prints`));
  }
  const codex = await runCommandInProcess(['agent-config', '--agent', 'codex', '--proxy-host', 'gw'], env);
  assert.equal(codex.code, 0, codex.stderr);
  assert.equal(codex.stderr, '', 'Codex\'s file is its whole lock-down: no notice');
});

test('agent-config --agent codex prints a Codex config.toml for the gateway; an unknown agent is a usage error', async () => {
  const r = await runCommandInProcess(['agent-config', '--agent', 'codex', '--proxy-host', 'gw.ns.svc:9000', '--model', 'gpt-small'], { UPSTREAM_ALLOWED_MODELS: 'gpt-big,gpt-small' });
  assert.equal(r.code, 0, r.stderr);
  for (const line of ['model = "gpt-small"', 'model_provider = "gateway"', 'web_search = "disabled"', '[model_providers.gateway]', 'base_url = "http://gw.ns.svc:9000/v1"', 'env_key = "MODEL_PROXY_TOKEN"', 'wire_api = "responses"']) {
    assert.ok(r.stdout.split('\n').includes(line), line);
  }
  const codexArgs = ['agent-config', '--agent', 'codex', '--proxy-host', 'gw'];
  const denied = await runCommandInProcess(codexArgs, { UPSTREAM_ALLOWED_MODELS: 'gpt-big' });
  const allowed = await runCommandInProcess([...codexArgs, '--allow-hosted-tools', 'web_search'], { UPSTREAM_ALLOWED_MODELS: 'gpt-big' });
  assert.equal(denied.code, 0, denied.stderr);
  assert.equal(allowed.code, 0, allowed.stderr);
  assert.match(allowed.stdout, /^wire_api = "responses"$/m);
  assert.ok(!allowed.stdout.includes('web_search'), allowed.stdout);
  // The same config but for the two lines that switch Codex's web search off.
  const deniedLines = denied.stdout.split('\n');
  assert.deepEqual(deniedLines.filter((l) => l.includes('web_search')), ['# The gateway refuses provider-hosted tools; without this Codex offers {"type":"web_search"}.', 'web_search = "disabled"']);
  assert.equal(allowed.stdout, deniedLines.filter((l) => !l.includes('web_search')).join('\n'));
  const unknown = await runCommandInProcess(['agent-config', '--agent', 'cursor', '--proxy-host', 'gw'], { UPSTREAM_ALLOWED_MODELS: 'gpt-big' });
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /--agent: "cursor" is not an agent agent-config knows; use opencode, codex, claude-code/);
});

test('mint-token without a signing key fails with a clear message', async () => {
  const r = await runCommandInProcess(['mint-token', '--instance-id', 'a', '--workflow', 'b', '--run-id', 'c']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /MODEL_PROXY_SIGNING_KEY is not set/);
});

test('mint-token --git-repo needs GIT_PROXY_SIGNING_KEY, and a malformed --git-repo is named', async () => {
  const ids = ['mint-token', '--instance-id', 'a', '--workflow', 'b', '--run-id', 'c'];
  const noKey = await runCommandInProcess([...ids, '--git-repo', 'github.com/acme/widgets:write'], { MODEL_PROXY_SIGNING_KEY: 'm'.repeat(32) });
  assert.equal(noKey.code, 1);
  assert.match(noKey.stderr, /mint-token: --git-repo makes a token for the git proxy, and GIT_PROXY_SIGNING_KEY is not set/);
  assert.equal(noKey.stdout, '');
  const bad = await runCommandInProcess([...ids, '--git-repo', 'github.com/acme/*/x:read'], { GIT_PROXY_SIGNING_KEY: 'g'.repeat(32) });
  assert.equal(bad.code, 2, 'a malformed flag value is a usage error');
  assert.match(bad.stderr, /mint-token: --git-repo "github\.com\/acme\/\*\/x:read": "\*" may only be the whole last segment/);
  const short = await runCommandInProcess([...ids, '--git-repo', 'github.com/acme/x:read'], { GIT_PROXY_SIGNING_KEY: 'short' });
  assert.equal(short.code, 1);
  assert.match(short.stderr, /GIT_PROXY_SIGNING_KEY: an HS256 secret must be at least 32 bytes/);
});

test('mint-token --git-repo prints a token whose git claim is the canonical scope', async () => {
  const r = await runProxyCommand(
    ['mint-token', '--instance-id', 'a', '--workflow', 'b', '--run-id', 'c', '--git-repo', 'GitHub.com/Acme/Widgets.git:write', '--git-repo', 'github.com/acme/*:read'],
    { GIT_PROXY_SIGNING_KEY: 'g'.repeat(32) },
  );
  assert.equal(r.code, 0, r.stderr);
  const claims = JSON.parse(Buffer.from(r.stdout.trim().split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
  assert.deepEqual(claims.git, ['github.com/acme/widgets:write', 'github.com/acme/*:read']);
});

test('without GIT_PROXY_SIGNING_KEY the git listener warns that workloads are not authenticated; with it, it says jwt', async () => {
  for (const [env, mode] of [[{}, 'network-policy'], [{ GIT_PROXY_SIGNING_KEY: 'g'.repeat(32) }, 'jwt']] as const) {
    // Without a key this is the shared GIT_AUTH_ENABLED=true proxy (stopped, exit 0, after the file's tests).
    const shared = Object.keys(env).length === 0;
    const p = shared ? await gitOnlyProxy() : await startProxy({ env: { GIT_AUTH_ENABLED: 'true', ...env } });
    try {
      const start = p.records().find((r) => r.event === 'listening' && r.listener === 'git')!;
      assert.equal(start.workload_auth, mode);
      const warned = p.records().some((r) => r.event === 'warning' && r.listener === 'git' && /GIT_PROXY_SIGNING_KEY is not set/.test(String(r.message)));
      assert.equal(warned, mode === 'network-policy');
    } finally {
      if (!shared) assert.equal((await p.stop()).code, 0);
    }
  }
  const short = await runProxyCommand([], { GIT_AUTH_ENABLED: 'true', GIT_PROXY_SIGNING_KEY: 'short' });
  assert.equal(short.code, 1);
  assert.match(short.stderr, /GIT_PROXY_SIGNING_KEY: an HS256 secret must be at least 32 bytes/);
});
