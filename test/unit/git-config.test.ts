import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_CREDENTIAL_HELPER, DEFAULT_PROXY_PORT, gitWorkloadConfig as generate, proxyBaseUrl, type GitConfigInput } from '../../src/git/config.ts';

const KEYS = ['github.com', 'git.internal.example:8443'];

/** The config text for hosts, GIT_AUTH_PROXY_HOST and GIT_CREDENTIAL_HELPER, no flags. */
function gitWorkloadConfig(hostKeys: readonly string[], proxyHostEnv: string | undefined, credentialHelper: string | undefined): string {
  return generate({ hostKeys, proxyHostFlag: undefined, proxyHostEnv, credentialHelper, workloadTokenEnv: undefined }).text;
}

const INPUT: GitConfigInput = { hostKeys: KEYS, proxyHostFlag: undefined, proxyHostEnv: 'proxy', credentialHelper: undefined, workloadTokenEnv: undefined };

/** The config text as the real git reads it: `git config -f FILE --list`, one "key=value" per entry. */
function gitList(configText: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'git-config-test-'));
  try {
    const file = join(dir, 'gitconfig');
    writeFileSync(file, configText);
    const out = execFileSync('git', ['config', '-f', file, '--list'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, GIT_CONFIG_NOSYSTEM: '1', LANG: 'C' },
      encoding: 'utf8',
    });
    return out.split('\n').filter((l) => l !== '');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the default proxy port is 8447 and the default credential helper is executor', () => {
  assert.equal(DEFAULT_PROXY_PORT, 8447);
  assert.equal(DEFAULT_CREDENTIAL_HELPER, 'executor');
});

test('proxyBaseUrl adds port 8447 to a bare name and keeps a given port', () => {
  assert.equal(proxyBaseUrl('proxy'), 'http://proxy:8447');
  assert.equal(proxyBaseUrl('proxy.ns.svc.cluster.local'), 'http://proxy.ns.svc.cluster.local:8447');
  assert.equal(proxyBaseUrl('proxy:9000'), 'http://proxy:9000');
  assert.equal(proxyBaseUrl('10.0.0.5:65535'), 'http://10.0.0.5:65535');
});

test('with a proxy host, each registered host gets one url.insteadOf rewrite to the proxy', () => {
  const text = gitWorkloadConfig(KEYS, 'proxy', undefined);
  assert.ok(text.includes('[url "http://proxy:8447/github.com/"]\n\tinsteadOf = https://github.com/\n'), text);
  assert.ok(
    text.includes('[url "http://proxy:8447/git.internal.example:8443/"]\n\tinsteadOf = https://git.internal.example:8443/\n'),
    text,
  );
  assert.equal(text.match(/^\[url /gm)?.length, KEYS.length);
  assert.equal(text.match(/insteadOf/g)?.length, KEYS.length);
  assert.ok(text.endsWith('\n'));
});

test('git-config --tls: the rewrites and the workload token helper name https:// on the proxy, as the real git reads them; without --tls they stay http://', () => {
  assert.equal(proxyBaseUrl('proxy', 'GIT_AUTH_PROXY_HOST', true), 'https://proxy:8447');
  const text = generate({ ...INPUT, tls: true, workloadTokenEnv: 'GIT_WORKLOAD_TOKEN' }).text;
  const listed = gitList(text);
  assert.ok(listed.includes('url.https://proxy:8447/github.com/.insteadof=https://github.com/'), listed.join('\n'));
  assert.ok(listed.includes('url.https://proxy:8447/git.internal.example:8443/.insteadof=https://git.internal.example:8443/'), listed.join('\n'));
  assert.ok(listed.some((l) => l.startsWith('credential.https://proxy:8447.helper=!f()')), listed.join('\n'));
  assert.ok(!text.includes('http://'), text);
  assert.ok(generate(INPUT).text.includes('[url "http://proxy:8447/github.com/"]'), 'http:// unless asked');
  assert.throws(() => generate({ ...INPUT, proxyHostEnv: undefined, tls: true }), /--tls needs the proxy host \(--proxy-host or GIT_AUTH_PROXY_HOST\)/);
});

test('with a proxy host, no credential helper entry is written', () => {
  const text = gitWorkloadConfig(KEYS, 'proxy', 'store');
  assert.ok(!/credential/i.test(text.split('\n').filter((l) => !l.startsWith('#')).join('\n')), text);
  assert.ok(!text.includes('helper'), text);
});

test('a custom proxy port is kept in the rewrite', () => {
  const text = gitWorkloadConfig(['github.com'], 'git-auth.ns.svc:9000', undefined);
  assert.ok(text.includes('[url "http://git-auth.ns.svc:9000/github.com/"]'), text);
  assert.ok(!text.includes(':8447'), text);
});

test('the real git reads the proxy configuration as url.<proxy>/<host>/.insteadof=https://<host>/', () => {
  assert.deepEqual(gitList(gitWorkloadConfig(KEYS, 'proxy', undefined)), [
    'url.http://proxy:8447/github.com/.insteadof=https://github.com/',
    'url.http://proxy:8447/git.internal.example:8443/.insteadof=https://git.internal.example:8443/',
  ]);
});

test('without a proxy host, each host gets a credential helper entry using the default helper', () => {
  for (const proxyHost of [undefined, '']) {
    const text = gitWorkloadConfig(KEYS, proxyHost, undefined);
    assert.ok(text.includes('[credential "https://github.com"]\n\thelper = "executor"\n'), text);
    assert.ok(text.includes('[credential "https://git.internal.example:8443"]\n\thelper = "executor"\n'), text);
    assert.ok(!text.includes('[url'), text);
    assert.ok(!text.includes('insteadOf'), text);
  }
});

test('an empty GIT_CREDENTIAL_HELPER falls back to the default helper', () => {
  assert.ok(gitWorkloadConfig(['github.com'], undefined, '').includes('helper = "executor"'));
});

test('GIT_CREDENTIAL_HELPER replaces the default helper and the real git reads it back unchanged', () => {
  const text = gitWorkloadConfig(KEYS, undefined, 'store');
  assert.ok(!text.includes('executor'), text);
  assert.deepEqual(gitList(text), ['credential.https://github.com.helper=store', 'credential.https://git.internal.example:8443.helper=store']);
});

test('a helper with spaces, quotes and backslashes is quoted so git reads back the exact command', () => {
  const helper = String.raw`!f() { echo "user=x\ty"; }; f --file "C:\creds dir\a.txt"`;
  const text = gitWorkloadConfig(['github.com'], undefined, helper);
  assert.ok(text.includes(String.raw`helper = "!f() { echo \"user=x\\ty\"; }; f --file \"C:\\creds dir\\a.txt\""`), text);
  assert.deepEqual(gitList(text), [`credential.https://github.com.helper=${helper}`]);
});

test('a helper with a ; or # comment character is kept whole', () => {
  const helper = 'store --file /tmp/a;b #c';
  assert.deepEqual(gitList(gitWorkloadConfig(['github.com'], undefined, helper)), [`credential.https://github.com.helper=${helper}`]);
});

test('a helper containing a line break or NUL is refused', () => {
  for (const helper of ['store\n[core]\n\tsshCommand = evil', 'store\r', 'store\0']) {
    assert.throws(() => gitWorkloadConfig(['github.com'], undefined, helper), /line breaks/, JSON.stringify(helper));
  }
});

test('a bad proxy host throws naming GIT_AUTH_PROXY_HOST', () => {
  const bad = ['http://proxy', 'proxy:0', 'proxy:65536', 'proxy:', 'proxy:80:80', 'proxy/path', 'pro xy', '[::1]:8447', 'user@proxy', 'proxy:08447', 'proxy"]\n[core', ':8447'];
  for (const proxyHost of bad) {
    assert.throws(() => gitWorkloadConfig(['github.com'], proxyHost, undefined), /^Error: GIT_AUTH_PROXY_HOST: /, JSON.stringify(proxyHost));
    assert.throws(() => proxyBaseUrl(proxyHost), /GIT_AUTH_PROXY_HOST/, JSON.stringify(proxyHost));
  }
});

test('the generated configuration starts with a comment saying which mode it is in', () => {
  assert.match(gitWorkloadConfig(['github.com'], 'proxy', undefined), /^# git-auth-proxy: route github\.com through http:\/\/proxy:8447/);
  assert.match(gitWorkloadConfig(['github.com'], undefined, undefined), /^# git-auth-proxy: GIT_AUTH_PROXY_HOST is not set/);
});

test('--proxy-host wins over GIT_AUTH_PROXY_HOST', () => {
  const { text } = generate({ ...INPUT, proxyHostFlag: 'flag-proxy:9000', proxyHostEnv: 'env-proxy' });
  assert.ok(text.includes('[url "http://flag-proxy:9000/github.com/"]'), text);
  assert.ok(!text.includes('env-proxy'), text);
});

test('a bad --proxy-host is an error naming --proxy-host, even when GIT_AUTH_PROXY_HOST is good', () => {
  for (const proxyHostFlag of ['', 'http://proxy', 'proxy:0']) {
    assert.throws(() => generate({ ...INPUT, proxyHostFlag }), /^Error: --proxy-host: /, JSON.stringify(proxyHostFlag));
  }
});

test('the credential-helper fallback comes with a notice for stderr; the proxy configuration does not', () => {
  const fallback = generate({ ...INPUT, proxyHostEnv: undefined });
  assert.match(fallback.notice ?? '', /no proxy host \(--proxy-host or GIT_AUTH_PROXY_HOST\): printed the credential-helper fallback, helper "executor"/);
  assert.equal(generate(INPUT).notice, undefined);
});

test('the fallback notice says which helper it wrote and why, and what a lost GIT_AUTH_PROXY_HOST means in a pod', () => {
  const byDefault = generate({ ...INPUT, proxyHostEnv: undefined }).notice ?? '';
  assert.match(byDefault, /helper "executor" \(the default; GIT_CREDENTIAL_HELPER is not set\)/);
  assert.match(byDefault, /in a workload pod this means GIT_AUTH_PROXY_HOST was lost and git will not go through the proxy/);
  const fromEnv = generate({ ...INPUT, proxyHostEnv: undefined, credentialHelper: 'store' }).notice ?? '';
  assert.match(fromEnv, /helper "store" \(from GIT_CREDENTIAL_HELPER\)/);
});

test('git-config with no registered host is an error saying which variables name the hosts', () => {
  assert.throws(() => generate({ ...INPUT, hostKeys: [] }), /no git host is configured: set GIT_HOST_A and\/or GIT_HOST_B .* or give --git-hosts/);
});

test('--workload-token-env adds a credential helper for the proxy URL only, after an empty helper that resets the list', () => {
  const { text } = generate({ ...INPUT, workloadTokenEnv: 'GIT_WORKLOAD_TOKEN' });
  assert.deepEqual(
    gitList(text).filter((l) => l.startsWith('credential.')),
    [
      'credential.http://proxy:8447.helper=',
      `credential.http://proxy:8447.helper=!f() { test "$1" = get || exit 0; if test -z "$GIT_WORKLOAD_TOKEN"; then echo 'git-auth-proxy: $GIT_WORKLOAD_TOKEN is empty: no workload token for git to present' >&2; exit 0; fi; printf 'username=workload\\npassword=%s\\n' "$GIT_WORKLOAD_TOKEN"; }; f`,
    ],
  );
  assert.equal(gitList(text).filter((l) => l.startsWith('url.')).length, KEYS.length);
});

test('--workload-token-env without a proxy host, or with a name that is not a variable, is an error', () => {
  assert.throws(() => generate({ ...INPUT, proxyHostEnv: undefined, workloadTokenEnv: 'TOKEN' }), /--workload-token-env needs the proxy host/);
  for (const name of ['', '1TOKEN', 'TOK EN', 'TOKEN;rm', '$TOKEN']) {
    assert.throws(() => generate({ ...INPUT, workloadTokenEnv: name }), /--workload-token-env: .* is not an environment variable name/, name);
  }
});

test('the real git gets the workload token from the helper as the variable holds it when git asks, and stores it nowhere', () => {
  const dir = mkdtempSync(join(tmpdir(), 'git-config-helper-'));
  try {
    const configFile = join(dir, 'proxy.gitconfig');
    writeFileSync(configFile, generate({ ...INPUT, workloadTokenEnv: 'WORKLOAD_TOKEN' }).text);
    // A store helper configured before the include: the generated empty helper drops it.
    writeFileSync(join(dir, '.gitconfig'), `[credential]\n\thelper = store\n[include]\n\tpath = ${configFile}\n`);
    const credential = (op: string, input: string, token: string | undefined) =>
      execFileSync('git', ['credential', op], {
        input,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LANG: 'C', ...(token ? { WORKLOAD_TOKEN: token } : {}) },
        encoding: 'utf8',
        stdio: ['pipe', 'pipe', 'pipe'],
      });
    const ask = 'protocol=http\nhost=proxy:8447\npath=github.com/acme/widgets.git\n\n';
    assert.match(credential('fill', ask, 'first-token'), /^username=workload\npassword=first-token\n/m);
    assert.match(credential('fill', ask, 'rotated-token'), /password=rotated-token\n/, 'read when git asks, not when the config was written');
    credential('approve', 'protocol=http\nhost=proxy:8447\nusername=workload\npassword=rotated-token\n\n', 'rotated-token');
    assert.ok(!existsSync(join(dir, '.git-credentials')), 'no helper stored the token');
    // Another host (or the proxy on another port) gets nothing from this helper.
    assert.throws(() => credential('fill', 'protocol=https\nhost=github.com\n\n', 'first-token'), /terminal prompts disabled|could not read/);
    assert.throws(() => credential('fill', 'protocol=http\nhost=proxy:9999\n\n', 'first-token'), /terminal prompts disabled|could not read/);
    // An empty variable: git is told why it has no token.
    assert.throws(() => credential('fill', ask, undefined), (err: { stderr?: string }) => /\$WORKLOAD_TOKEN is empty/.test(String(err.stderr)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
