import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseHostKey } from '../../src/git/host-key.ts';
import { hostsFromEnv, mergeHosts, parseHostsFile, type HostConfig } from '../../src/git/hosts.ts';

const FIXTURES = join(__dirname, '..', 'fixtures', 'hosts');

test('parseHostKey accepts a host name, host:port and IPv4:port, defaulting the port to 443', () => {
  const cases: [string, { key: string; hostname: string; port: number }][] = [
    ['github.com', { key: 'github.com', hostname: 'github.com', port: 443 }],
    ['git.example.com:8443', { key: 'git.example.com:8443', hostname: 'git.example.com', port: 8443 }],
    ['127.0.0.1:9000', { key: '127.0.0.1:9000', hostname: '127.0.0.1', port: 9000 }],
    ['localhost', { key: 'localhost', hostname: 'localhost', port: 443 }],
    ['a-b.example.com:1', { key: 'a-b.example.com:1', hostname: 'a-b.example.com', port: 1 }],
    ['x.io:65535', { key: 'x.io:65535', hostname: 'x.io', port: 65535 }],
  ];
  for (const [text, expected] of cases) assert.deepEqual(parseHostKey(text), expected, text);
});

test('parseHostKey lower-cases the key and the host name', () => {
  assert.deepEqual(parseHostKey('GitHub.COM'), { key: 'github.com', hostname: 'github.com', port: 443 });
  assert.deepEqual(parseHostKey('Git.Example.COM:8443'), { key: 'git.example.com:8443', hostname: 'git.example.com', port: 8443 });
});

test('parseHostKey rejects userinfo, brackets, trailing dots, bad ports, empty labels and odd characters', () => {
  const bad = [
    '',
    'a@b',
    'user@github.com',
    'user:pass@github.com',
    '[::1]',
    '[::1]:443',
    '[github.com]',
    '::1',
    'github.com.',
    '.github.com',
    'github..com',
    'github.com:0',
    'github.com:99999',
    'github.com:65536',
    'github.com:',
    'github.com:08443',
    'github.com:-1',
    'github.com:443:443',
    ':443',
    'git%2ehub.com',
    '%67ithub.com',
    'git_hub.com',
    'git hub.com',
    ' github.com',
    'github.com ',
    'github.com/org',
    'github.com\\org',
    'github.com?x',
    'github.com#x',
    '-github.com',
    'github-.com',
    'gïthub.com',
    `${'a'.repeat(64)}.com`, // label longer than 63
    `${'a.'.repeat(127)}ab`, // 255 characters
  ];
  for (const text of bad) assert.equal(parseHostKey(text), null, JSON.stringify(text));
});

test('parseHostKey accepts a 63-character label', () => {
  const host = `${'a'.repeat(63)}.com`;
  assert.equal(parseHostKey(host)?.hostname, host);
});

test('a GIT_HOST_A_TOKEN without GIT_HOST_A registers github.com as the bearer host, reading GIT_HOST_A_TOKEN', () => {
  const expected: HostConfig[] = [
    {
      key: 'github.com',
      hostname: 'github.com',
      port: 443,
      authType: 'bearer',
      token: { env: 'GIT_HOST_A_TOKEN' },
      username: undefined,
      caFile: undefined,
      tlsInsecureSkipVerify: false,
      repos: undefined,
      readOnly: false,
      protectedRefs: [],
    },
  ];
  assert.deepEqual(hostsFromEnv({ GIT_HOST_A_TOKEN: 'tok' }), expected);
  assert.deepEqual(hostsFromEnv({ GIT_HOST_A: '', GIT_HOST_A_TOKEN: 'tok' }), expected);
});

test('without GIT_HOST_A and GIT_HOST_A_TOKEN (unset or empty) there is no host A, github.com included', () => {
  assert.deepEqual(hostsFromEnv({}), []);
  assert.deepEqual(hostsFromEnv({ GIT_HOST_A: '', GIT_HOST_A_TOKEN: '' }), []);
});

// What the proxy answers for a host whose token is missing (503) is rule 7 in test/integration/git-proxy.test.ts.
test('GIT_HOST_A alone registers host A, its token still read from GIT_HOST_A_TOKEN', () => {
  assert.deepEqual(hostsFromEnv({ GIT_HOST_A: 'github.com' }).map((h) => [h.key, h.token]), [['github.com', { env: 'GIT_HOST_A_TOKEN' }]]);
});

test('the hosts file may define github.com when the environment does not; when it does, that is registered twice', () => {
  const fromFile = parseHostsFile(JSON.stringify({ hosts: [{ host: 'github.com', auth: 'bearer', tokenFile: '/var/run/secrets/github/token' }] }), 'hosts.json');
  assert.deepEqual(mergeHosts(hostsFromEnv({}), fromFile).map((h) => [h.key, h.token]), [['github.com', { file: '/var/run/secrets/github/token' }]]);
  for (const env of [{ GIT_HOST_A_TOKEN: 'tok' }, { GIT_HOST_A: 'GitHub.com' }]) {
    assert.throws(() => mergeHosts(hostsFromEnv(env), fromFile), /git host "github\.com" is registered twice/, JSON.stringify(env));
  }
});

test('GIT_HOST_A replaces the default bearer host name', () => {
  const hosts = hostsFromEnv({ GIT_HOST_A: 'GHE.Example.com:8443' });
  assert.equal(hosts.length, 1);
  assert.equal(hosts[0]!.key, 'ghe.example.com:8443');
  assert.equal(hosts[0]!.port, 8443);
  assert.equal(hosts[0]!.authType, 'bearer');
  assert.deepEqual(hosts[0]!.token, { env: 'GIT_HOST_A_TOKEN' });
});

test('the GIT_HOST_B basic host is registered only when GIT_HOST_B is set', () => {
  assert.ok(!hostsFromEnv({}).some((h) => h.authType === 'basic'));
  assert.ok(!hostsFromEnv({ GIT_HOST_B: '' }).some((h) => h.authType === 'basic'));
});

test('GIT_HOST_B_TOKEN or GIT_HOST_B_USERNAME without GIT_HOST_B is an error naming the variable', () => {
  for (const name of ['GIT_HOST_B_TOKEN', 'GIT_HOST_B_USERNAME']) {
    assert.throws(() => hostsFromEnv({ [name]: 'x' }), new RegExp(`^Error: ${name} is set but GIT_HOST_B is not`), name);
  }
});

test('GIT_HOST_B is a basic host reading GIT_HOST_B_TOKEN and GIT_HOST_B_USERNAME, after GIT_HOST_A', () => {
  const hosts = hostsFromEnv({ GIT_HOST_A_TOKEN: 'tok', GIT_HOST_B: 'git.internal.example:8443' });
  assert.deepEqual(hosts.map((h) => h.key), ['github.com', 'git.internal.example:8443']);
  assert.deepEqual(hosts[1], {
    key: 'git.internal.example:8443',
    hostname: 'git.internal.example',
    port: 8443,
    authType: 'basic',
    token: { env: 'GIT_HOST_B_TOKEN' },
    username: { env: 'GIT_HOST_B_USERNAME' },
    caFile: undefined,
    tlsInsecureSkipVerify: false,
    repos: undefined,
    readOnly: false,
    protectedRefs: [],
  });
});

test('hostsFromEnv never reads a token value into the configuration', () => {
  const hosts = hostsFromEnv({ GIT_HOST_A_TOKEN: 'secret-a', GIT_HOST_B: 'b.example', GIT_HOST_B_TOKEN: 'secret-b', GIT_HOST_B_USERNAME: 'user-b' });
  const text = JSON.stringify(hosts);
  for (const v of ['secret-a', 'secret-b', 'user-b']) assert.ok(!text.includes(v), v);
});

test('an invalid GIT_HOST_A or GIT_HOST_B is an error naming the variable and the value', () => {
  for (const [name, value] of [['GIT_HOST_A', 'user@github.com'], ['GIT_HOST_A', 'https://github.com'], ['GIT_HOST_B', 'host_b'], ['GIT_HOST_B', 'b.example:0']]) {
    assert.throws(
      () => hostsFromEnv({ [name!]: value }),
      (err: Error) => {
        assert.ok(err.message.startsWith(`${name}: `), err.message);
        assert.ok(err.message.includes(`"${value}"`), err.message);
        return true;
      },
      `${name}=${value}`,
    );
  }
});

test('a full valid hosts file parses into host configurations in file order', () => {
  const text = JSON.stringify({
    hosts: [
      { host: 'git.example.com', auth: 'bearer', tokenEnv: 'EXAMPLE_TOKEN' },
      {
        host: 'Git.Internal.Example:8443',
        auth: 'basic',
        tokenFile: '/run/secrets/internal-token',
        username: 'deploy-bot',
        caFile: '/etc/ssl/internal-ca.pem',
        tlsInsecureSkipVerify: false,
      },
      { host: '127.0.0.1:9000', auth: 'basic', tokenEnv: 'LOCAL_TOKEN', usernameEnv: 'LOCAL_USER', tlsInsecureSkipVerify: true },
      { host: 'files.example', auth: 'basic', tokenEnv: '_T0', usernameFile: '/run/secrets/user', repos: ['Acme/widgets.git', 'group/sub/*'], readOnly: true },
    ],
  });
  const expected: HostConfig[] = [
    {
      key: 'git.example.com',
      hostname: 'git.example.com',
      port: 443,
      authType: 'bearer',
      token: { env: 'EXAMPLE_TOKEN' },
      username: undefined,
      caFile: undefined,
      tlsInsecureSkipVerify: false,
      repos: undefined,
      readOnly: false,
      protectedRefs: [],
    },
    {
      key: 'git.internal.example:8443',
      hostname: 'git.internal.example',
      port: 8443,
      authType: 'basic',
      token: { file: '/run/secrets/internal-token' },
      username: { literal: 'deploy-bot' },
      caFile: '/etc/ssl/internal-ca.pem',
      tlsInsecureSkipVerify: false,
      repos: undefined,
      readOnly: false,
      protectedRefs: [],
    },
    {
      key: '127.0.0.1:9000',
      hostname: '127.0.0.1',
      port: 9000,
      authType: 'basic',
      token: { env: 'LOCAL_TOKEN' },
      username: { env: 'LOCAL_USER' },
      caFile: undefined,
      tlsInsecureSkipVerify: true,
      repos: undefined,
      readOnly: false,
      protectedRefs: [],
    },
    {
      key: 'files.example',
      hostname: 'files.example',
      port: 443,
      authType: 'basic',
      token: { env: '_T0' },
      username: { file: '/run/secrets/user' },
      caFile: undefined,
      tlsInsecureSkipVerify: false,
      repos: [
        { segments: ['acme', 'widgets'], wildcard: false },
        { segments: ['group', 'sub'], wildcard: true },
      ],
      readOnly: true,
      protectedRefs: [],
    },
  ];
  assert.deepEqual(parseHostsFile(text, 'hosts.json'), expected);
});

test('ref rules, hosts file: protectedRefs and repos entries with ref rules are read into patterns, kept as written', () => {
  const [host] = parseHostsFile(JSON.stringify({ hosts: [{ host: 'github.com', auth: 'bearer', tokenEnv: 'T', protectedRefs: ['refs/heads/main', 'refs/tags/*'], repos: ['acme/widgets:refs/heads/agent/*:delete', 'acme/*'] }] }), 'hosts.json');
  assert.deepEqual(host!.protectedRefs.map((p) => [p.text, p.wildcard]), [['refs/heads/main', false], ['refs/tags/*', true]]);
  assert.deepEqual(host!.repos!.map((r) => [r.segments, r.refs?.patterns.map((p) => p.text), r.refs?.delete]), [[['acme', 'widgets'], ['refs/heads/agent/*'], true], [['acme'], undefined, undefined]]);
});

test('a hosts file with an empty hosts array registers no host', () => {
  assert.deepEqual(parseHostsFile('{"hosts": []}', 'hosts.json'), []);
});

test('each bad hosts file is rejected with an error naming the file and the offending field', () => {
  // fixture name -> the "<field>: <why>" the message must carry after the file name
  const cases: [string, string][] = [
    ['unknown-field', 'hosts[0].token: unknown field'],
    ['missing-host', 'hosts[0].host: is required'],
    ['bad-host', 'hosts[0].host: "user@git.example.com" is not host or host:port'],
    ['empty-host', 'hosts[0].host: must be a non-empty string'],
    ['missing-auth', 'hosts[0].auth: is required'],
    ['bad-auth', 'hosts[0].auth: must be "bearer", "basic" or "github-app"'],
    ['token-env-and-file', 'hosts[0].tokenEnv: exactly one of tokenEnv and tokenFile is required'],
    ['no-token', 'hosts[0].tokenEnv: exactly one of tokenEnv and tokenFile is required'],
    ['bad-token-env-name', 'hosts[0].tokenEnv: must be an environment variable name'],
    ['username-on-bearer', 'hosts[0].username: only basic auth takes a username'],
    ['basic-without-username', 'hosts[0].username: basic auth needs exactly one of username, usernameEnv, usernameFile'],
    ['basic-two-usernames', 'hosts[0].username: basic auth needs exactly one of username, usernameEnv, usernameFile'],
    ['tls-insecure-not-boolean', 'hosts[0].tlsInsecureSkipVerify: must be true or false'],
    ['ca-file-not-string', 'hosts[0].caFile: must be a non-empty string'],
    ['invalid-json', '(file): not valid JSON'],
    ['top-level-not-object', '(file): must be a JSON object with a "hosts" array'],
    ['unknown-top-level-key', 'version: unknown field (expected only "hosts")'],
    ['hosts-not-array', 'hosts: must be an array'],
    ['entry-not-object', 'hosts[0]: must be an object'],
    ['error-in-second-entry', 'hosts[1].tlsInsecureSkipVerify: must be true or false'],
    ['repos-empty', 'hosts[0].repos: must be a non-empty array of repository patterns (leave it out to allow every repository)'],
    ['repos-not-array', 'hosts[0].repos: must be a non-empty array'],
    ['repos-entry-not-string', 'hosts[0].repos[1]: must be a string such as "acme/widgets" or "acme/*"'],
    ['repos-bad-pattern', 'hosts[0].repos[0]: "*" may only be the whole last segment'],
    ['repos-dot-segment', 'hosts[0].repos[0]: segment ".." is not a repository name'],
    ['read-only-not-boolean', 'hosts[0].readOnly: must be true or false'],
    ['repos-bad-ref-rule', 'hosts[0].repos[0]: "refs/heads/agent-*" is not a ref name or a ref prefix ending in /*'],
    ['protected-refs-not-array', 'hosts[0].protectedRefs: must be an array of ref patterns such as "refs/heads/main" or "refs/tags/*"'],
    ['protected-refs-bad-pattern', 'hosts[0].protectedRefs[1]: "main" is not a ref name or a ref prefix ending in /* (it is not under refs/)'],
    ['protected-refs-entry-not-string', 'hosts[0].protectedRefs[1]: must be a string such as "refs/heads/main" or "refs/tags/*"'],
  ];
  for (const [name, fieldAndWhy] of cases) {
    const file = join(FIXTURES, `${name}.json`);
    const text = readFileSync(file, 'utf8');
    assert.throws(
      () => parseHostsFile(text, file),
      (err: Error) => {
        assert.ok(err.message.startsWith(`${file}: ${fieldAndWhy}`), `${name}: got "${err.message}"`);
        return true;
      },
      name,
    );
  }
});

test('a hosts file error never echoes a token-looking field value', () => {
  const file = join(FIXTURES, 'unknown-field.json');
  assert.throws(() => parseHostsFile(readFileSync(file, 'utf8'), file), (err: Error) => !err.message.includes('literal-secret'));
});

test('mergeHosts keeps environment hosts first, then file hosts', () => {
  const env = hostsFromEnv({ GIT_HOST_A_TOKEN: 'tok', GIT_HOST_B: 'b.example' });
  const file = parseHostsFile('{"hosts": [{"host": "c.example", "auth": "bearer", "tokenEnv": "C_TOKEN"}]}', 'f.json');
  assert.deepEqual(mergeHosts(env, file).map((h) => h.key), ['github.com', 'b.example', 'c.example']);
});

test('mergeHosts rejects the same host key registered twice, naming it', () => {
  const env = hostsFromEnv({ GIT_HOST_A_TOKEN: 'tok' });
  const file = parseHostsFile('{"hosts": [{"host": "GitHub.com", "auth": "bearer", "tokenEnv": "OTHER"}]}', 'f.json');
  assert.throws(() => mergeHosts(env, file), /git host "github\.com" is registered twice/);
  // within one list too: GIT_HOST_B equal to the default GIT_HOST_A
  assert.throws(() => mergeHosts(hostsFromEnv({ GIT_HOST_A_TOKEN: 'tok', GIT_HOST_B: 'github.com' })), /"github\.com" is registered twice/);
  // within the file
  const twice = parseHostsFile(
    '{"hosts": [{"host": "c.example", "auth": "bearer", "tokenEnv": "A"}, {"host": "c.example", "auth": "bearer", "tokenEnv": "B"}]}',
    'f.json',
  );
  assert.throws(() => mergeHosts([], twice), /"c\.example" is registered twice/);
});
