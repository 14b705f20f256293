// The bundle's command line, as an operator or a workload runs it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { after, test } from 'node:test';
import { BUNDLE, ROOT, runProxyCommand, startProxy } from '../support/proxy-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'cli-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

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
  assert.match(r.stderr, /Unknown option '--no-such-flag'/);
  assert.match(r.stderr, /usage: node proxy\.js/);
});

test('with no listener enabled the process exits non-zero and names the enabling variables', async () => {
  const r = await runProxyCommand([]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /no listener is enabled/);
  assert.match(r.stderr, /GIT_HOST_A_TOKEN/);
  assert.match(r.stderr, /GIT_AUTH_ENABLED=true/);
});

test('GIT_AUTH_ENABLED=true starts the git listener without any token', async () => {
  const p = await startProxy({ env: { GIT_AUTH_ENABLED: 'true' } });
  try {
    assert.ok(p.ports.git! > 0);
  } finally {
    assert.equal((await p.stop()).code, 0);
  }
});

test('listen addresses accept both --flag value and --flag=value, and IPv6 in brackets', async () => {
  for (const args of [['--git-auth-listen', '127.0.0.1:0'], ['--git-auth-listen=[::1]:0']]) {
    const p = await startProxy({ env: { GIT_AUTH_ENABLED: 'true' }, args });
    try {
      const rec = p.records().find((r) => r.event === 'listening')!;
      assert.match(String(rec.address), args[0]!.includes('::1') ? /^\[::1\]:\d+$/ : /^127\.0\.0\.1:\d+$/);
    } finally {
      await p.stop();
    }
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
  const r = await runProxyCommand(['git-config'], { GIT_AUTH_PROXY_HOST: 'git-proxy.ns.svc', GIT_HOST_B: 'git.corp.example:8443' });
  assert.equal(r.code, 0);
  assert.deepEqual(gitConfigList(r.stdout), [
    'url.http://git-proxy.ns.svc:8447/github.com/.insteadof=https://github.com/',
    'url.http://git-proxy.ns.svc:8447/git.corp.example:8443/.insteadof=https://git.corp.example:8443/',
  ]);
});

test('git-config keeps a port given in GIT_AUTH_PROXY_HOST', async () => {
  const r = await runProxyCommand(['git-config'], { GIT_AUTH_PROXY_HOST: 'proxy:9000' });
  assert.deepEqual(gitConfigList(r.stdout), ['url.http://proxy:9000/github.com/.insteadof=https://github.com/']);
});

test('git-config without GIT_AUTH_PROXY_HOST falls back to credential-helper entries', async () => {
  const r = await runProxyCommand(['git-config'], { GIT_HOST_B: 'git.corp.example', GIT_CREDENTIAL_HELPER: '/usr/local/bin/executor-helper --mode "git"' });
  assert.deepEqual(gitConfigList(r.stdout), [
    'credential.https://github.com.helper=/usr/local/bin/executor-helper --mode "git"',
    'credential.https://git.corp.example.helper=/usr/local/bin/executor-helper --mode "git"',
  ]);
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

test('mint-token without a signing key fails with a clear message', async () => {
  const r = await runProxyCommand(['mint-token', '--instance-id', 'a', '--workflow', 'b', '--run-id', 'c']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /MODEL_PROXY_SIGNING_KEY is not set/);
});
