// git-config's output as the real git reads it (`git config -f FILE --list`, `git credential`):
// the rewrites, the helpers quoted so that git reads back the exact command, and the workload
// token helper answering when git asks. The text itself is test/unit/git-config.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitWorkloadConfig as generate, proxyBaseUrl, type GitConfigInput } from '../../src/git/config.ts';

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

test('the real git reads the proxy configuration as url.<proxy>/<host>/.insteadof=https://<host>/', () => {
  assert.deepEqual(gitList(gitWorkloadConfig(KEYS, 'proxy', undefined)), [
    'url.http://proxy:8447/github.com/.insteadof=https://github.com/',
    'url.http://proxy:8447/git.internal.example:8443/.insteadof=https://git.internal.example:8443/',
  ]);
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
