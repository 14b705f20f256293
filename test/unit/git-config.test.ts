// git-config's text (src/git/config.ts): the rewrites to the proxy, the credential helpers and
// their quoting, what is refused. As the real git reads it: test/integration/git-config.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_CREDENTIAL_HELPER, DEFAULT_PROXY_PORT, gitWorkloadConfig as generate, proxyBaseUrl, type GitConfigInput } from '../../src/git/config.ts';

const KEYS = ['github.com', 'git.internal.example:8443'];

/** The config text for hosts, GIT_AUTH_PROXY_HOST and GIT_CREDENTIAL_HELPER, no flags. */
function gitWorkloadConfig(hostKeys: readonly string[], proxyHostEnv: string | undefined, credentialHelper: string | undefined): string {
  return generate({ hostKeys, proxyHostFlag: undefined, proxyHostEnv, credentialHelper, workloadTokenEnv: undefined }).text;
}

const INPUT: GitConfigInput = { hostKeys: KEYS, proxyHostFlag: undefined, proxyHostEnv: 'proxy', credentialHelper: undefined, workloadTokenEnv: undefined };

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

test('--workload-token-env without a proxy host, or with a name that is not a variable, is an error', () => {
  assert.throws(() => generate({ ...INPUT, proxyHostEnv: undefined, workloadTokenEnv: 'TOKEN' }), /--workload-token-env needs the proxy host/);
  for (const name of ['', '1TOKEN', 'TOK EN', 'TOKEN;rm', '$TOKEN']) {
    assert.throws(() => generate({ ...INPUT, workloadTokenEnv: name }), /--workload-token-env: .* is not an environment variable name/, name);
  }
});
