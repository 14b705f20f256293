// The egress proxy's settings and the CONNECT exchange's bytes (src/http/egress.ts): pure rules,
// one test per rule, named after it. The tunnel against a real CONNECT proxy is
// test/integration/egress-proxy.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bypassesEgress, connectRequestHead, egressProxyFor, judgeProxyAuthorization, parseEgressEnv, parseNoProxy, parseProxyUrl, readConnectAnswer } from '../../src/http/egress.ts';
import { revealed } from '../support/secrets.ts';

test('egress proxy URL http://HOST:PORT only: host names, IPv4 and bracketed IPv6 with an explicit port, a trailing slash allowed', () => {
  assert.deepEqual(parseProxyUrl('http://proxy.corp.example:3128', 'HTTPS_PROXY'), { host: 'proxy.corp.example', port: 3128, label: 'proxy.corp.example:3128' });
  assert.deepEqual(parseProxyUrl('HTTP://Proxy.Corp:8080/', 'HTTPS_PROXY'), { host: 'proxy.corp', port: 8080, label: 'proxy.corp:8080' });
  assert.deepEqual(parseProxyUrl('http://10.0.0.7:3128', 'https_proxy'), { host: '10.0.0.7', port: 3128, label: '10.0.0.7:3128' });
  assert.deepEqual(parseProxyUrl('http://[fd00::7]:3128', 'HTTPS_PROXY'), { host: 'fd00::7', port: 3128, label: '[fd00::7]:3128' });
});

test('egress proxy URL http://HOST:PORT only: another scheme, a credential, a path, query or fragment, no port or a bad one stops start-up naming the variable', () => {
  const cases: [string, RegExp][] = [
    ['https://proxy:3128', /^HTTPS_PROXY: the scheme https:\/\/ is not supported/],
    ['socks5://proxy:1080', /^HTTPS_PROXY: the scheme socks5:\/\/ is not supported/],
    ['http://user:pw@proxy:3128', /^HTTPS_PROXY: a user name or password in the URL is not accepted.*--egress-proxy-auth-file/],
    ['http://proxy:3128/path', /^HTTPS_PROXY: "http:\/\/proxy:3128\/path" is not a proxy URL this proxy understands \(no path, query or fragment\)/],
    ['http://proxy:3128?x=1', /^HTTPS_PROXY: /],
    ['http://proxy:3128#f', /^HTTPS_PROXY: /],
    ['http://proxy', /^HTTPS_PROXY: .* needs a host and an explicit port/],
    ['http://proxy:0', /explicit port/],
    ['http://proxy:65536', /explicit port/],
    ['http://:3128', /explicit port/],
    ['http://pro xy:3128', /explicit port/],
    ['proxy:3128', /^HTTPS_PROXY: "proxy:3128" is not a proxy URL/],
  ];
  for (const [text, expected] of cases) assert.throws(() => parseProxyUrl(text, 'HTTPS_PROXY'), (err: Error) => expected.test(err.message) && err.message.includes('http://HOST:PORT'), text);
});

test('egress variables in either case: the same value twice is one setting; different values stop start-up naming both', () => {
  assert.equal(parseEgressEnv({}).proxy, undefined);
  assert.equal(parseEgressEnv({ HTTPS_PROXY: '' }).proxy, undefined, 'empty is unset');
  assert.equal(parseEgressEnv({ https_proxy: 'http://p:1' }).proxy?.label, 'p:1');
  assert.equal(parseEgressEnv({ HTTPS_PROXY: 'http://p:1', https_proxy: 'http://p:1' }).proxy?.label, 'p:1');
  assert.throws(() => parseEgressEnv({ HTTPS_PROXY: 'http://p:1', https_proxy: 'http://q:1' }), /^Error: HTTPS_PROXY and https_proxy are both set, to different values/);
  assert.throws(() => parseEgressEnv({ HTTPS_PROXY: 'http://p:1', NO_PROXY: 'a', no_proxy: 'b' }), /^Error: NO_PROXY and no_proxy are both set/);
  assert.throws(() => parseEgressEnv({ HTTPS_PROXY: 'nonsense' }), /^Error: HTTPS_PROXY: /);
  assert.throws(() => parseEgressEnv({ no_proxy: 'a b' }), /^Error: no_proxy: "a b" is not an entry/);
});

test('NO_PROXY names: a name matches itself and every name under it, a leading . or *. the same, case and a trailing dot ignored; never a name that merely ends alike', () => {
  const list = parseNoProxy('internal.corp, .svc.cluster.local,*.example.com,LOCALHOST.', 'NO_PROXY');
  for (const host of ['internal.corp', 'git.internal.corp', 'a.b.internal.corp', 'redis.ns.svc.cluster.local', 'svc.cluster.local', 'example.com', 'api.example.com', 'localhost', 'Git.Internal.Corp', 'git.internal.corp.']) {
    assert.equal(bypassesEgress(list, host, 443), true, host);
  }
  for (const host of ['notinternal.corp', 'internal.corp.evil.com', 'example.com.org', 'api.openai.com', '127.0.0.1']) {
    assert.equal(bypassesEgress(list, host, 443), false, host);
  }
});

test('NO_PROXY ports: an entry with :PORT matches that port only', () => {
  const list = parseNoProxy('git.corp:8443,10.0.0.1:443,[fd00::1]:443', 'NO_PROXY');
  assert.equal(bypassesEgress(list, 'git.corp', 8443), true);
  assert.equal(bypassesEgress(list, 'git.corp', 443), false);
  assert.equal(bypassesEgress(list, '10.0.0.1', 443), true);
  assert.equal(bypassesEgress(list, '10.0.0.1', 8443), false);
  assert.equal(bypassesEgress(list, 'fd00::1', 443), true);
  assert.equal(bypassesEgress(list, '[fd00::1]', 443), true);
});

test('NO_PROXY IP literals and CIDR blocks: match an upstream given as an address only, never a name (no DNS)', () => {
  const list = parseNoProxy('127.0.0.1,::1,10.0.0.0/8,fd00::/8', 'NO_PROXY');
  for (const host of ['127.0.0.1', '::1', '10.1.2.3', 'fd12::5']) assert.equal(bypassesEgress(list, host, 443), true, host);
  for (const host of ['127.0.0.2', '11.0.0.1', 'fe80::1', 'localhost', '10.example.com']) assert.equal(bypassesEgress(list, host, 443), false, host);
});

test('NO_PROXY * sends every upstream direct; an empty list or empty entries send none', () => {
  assert.equal(bypassesEgress(parseNoProxy('*', 'NO_PROXY'), 'api.openai.com', 443), true);
  assert.equal(bypassesEgress(parseNoProxy(' , ,', 'NO_PROXY'), 'api.openai.com', 443), false);
  assert.equal(egressProxyFor({ proxy: { host: 'p', port: 1, label: 'p:1' }, noProxy: parseNoProxy('*', 'NO_PROXY') }, 'x', 443), undefined);
  assert.equal(egressProxyFor({ proxy: { host: 'p', port: 1, label: 'p:1' }, noProxy: [] }, 'x', 443)?.label, 'p:1');
  assert.equal(egressProxyFor({ proxy: undefined, noProxy: [] }, 'x', 443), undefined);
});

test('NO_PROXY entries this proxy understands, or start-up stops: wildcards inside names, ranges, bad ports and bad blocks are refused naming the variable and the entry', () => {
  for (const bad of ['a*.example.com', 'ex*mple.com', '192.168.1.1-192.168.1.9', '10.0.0', 'host:0', 'host:99999', 'host:x', '10.0.0.0/33', 'fd00::/129', 'name/8', 'a b', 'http://x']) {
    assert.throws(() => parseNoProxy(`ok.example,${bad}`, 'no_proxy'), (err: Error) => err.message.startsWith(`no_proxy: "${bad}" is not an entry this proxy understands`), bad);
  }
  // The forms it takes, in words the operator can type (no placeholder of the code's).
  assert.throws(() => parseNoProxy('host:x', 'NO_PROXY'), { message: 'NO_PROXY: "host:x" is not an entry this proxy understands; use *, a host name, .domain, an IP address or a CIDR block, each optionally with :PORT (a port number)' });
});

test('CONNECT carries only the target and the proxy credential: the request line, Host, and Proxy-Authorization when given', () => {
  assert.equal(connectRequestHead('api.openai.com', 443, undefined), 'CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n');
  assert.equal(connectRequestHead('::1', 8443, 'Basic dTpw'), 'CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\nProxy-Authorization: Basic dTpw\r\n\r\n');
  assert.throws(() => connectRequestHead('evil.com:443 HTTP/1.1\r\nX: y', 443, undefined), /not a host name/);
  assert.throws(() => connectRequestHead('a.com', 0, undefined), /port/);
  assert.throws(() => connectRequestHead('a.com', 443, 'Basic x\r\nX-Injected: 1'), /not a valid header value/);
});

test('egress proxy credential checked for CR/LF: a file\'s trailing newline is dropped; CR, LF, NUL, tabs or non-ASCII inside make it invalid; empty is missing', () => {
  assert.deepEqual(revealed(judgeProxyAuthorization('Basic dXNlcjpwdw==\n')), { ok: true, value: 'Basic dXNlcjpwdw==' });
  assert.deepEqual(revealed(judgeProxyAuthorization('Bearer abc\r\n')), { ok: true, value: 'Bearer abc' });
  for (const bad of ['Basic a\r\nX-Injected: 1', 'Basic a\nb', 'Basic\tabc', 'Basic a\0', 'Basic \u00e9', ' Basic a', 'Basic  a']) {
    assert.deepEqual(judgeProxyAuthorization(bad), { ok: false, reason: 'invalid' }, JSON.stringify(bad));
  }
  assert.deepEqual(judgeProxyAuthorization('\n'), { ok: false, reason: 'missing' });
});

test('a CONNECT answer is framed before the tunnel is used: its status once the head is complete, and the bytes after it counted, never taken as TLS', () => {
  assert.deepEqual(readConnectAnswer(Buffer.from('HTTP/1.1 200 Connection established\r\n')), { kind: 'incomplete' });
  assert.deepEqual(readConnectAnswer(Buffer.from('HTTP/1.1 200 Connection established\r\nVia: x\r\n\r\n')), { kind: 'answer', status: 200, extraBytes: 0 });
  assert.deepEqual(readConnectAnswer(Buffer.from('HTTP/1.0 200\r\n\r\n')), { kind: 'answer', status: 200, extraBytes: 0 });
  assert.deepEqual(readConnectAnswer(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello')), { kind: 'answer', status: 200, extraBytes: 5 });
  assert.deepEqual(readConnectAnswer(Buffer.from('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n')), { kind: 'answer', status: 407, extraBytes: 0 });
  assert.equal(readConnectAnswer(Buffer.from('SSH-2.0-OpenSSH\r\n\r\n')).kind, 'malformed');
  assert.equal(readConnectAnswer(Buffer.from('HTTP/1.1 2000 x\r\n\r\n')).kind, 'malformed');
  assert.equal(readConnectAnswer(Buffer.alloc(9000, 0x61)).kind, 'malformed', 'no blank line within 8 KiB');
});
