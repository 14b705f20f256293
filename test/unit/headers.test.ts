import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { assertHeaderValue, connectionNamed, gitUpstreamHeaders as gitHeadersOnly, isCredentialHeaderName, scrubResponseHeaders, withCredential } from '../../src/http/headers.ts';
import { Secret } from '../../src/http/secret-value.ts';

const HOST = 'github.com';
const AUTH = 'Bearer ghp_proxytoken';

/** The headers a git request takes upstream: gitUpstreamHeaders', then our Authorization, added as forward.ts writes the request. */
const gitUpstreamHeaders = (incoming: IncomingHttpHeaders, host: string, authorization: string) => withCredential(gitHeadersOnly(incoming, host), { authorization: new Secret(authorization) });

const GIT_CLIENT_HEADERS: IncomingHttpHeaders = {
  'content-type': 'application/x-git-upload-pack-request',
  'content-encoding': 'gzip',
  'git-protocol': 'version=2',
  accept: 'application/x-git-upload-pack-result',
  'accept-encoding': 'deflate, gzip',
  'accept-language': 'en-US, *;q=0.9',
  'user-agent': 'git/2.39.5',
  'cache-control': 'no-cache',
  pragma: 'no-cache',
};

test('gitUpstreamHeaders keeps the allowlisted git client headers unchanged', () => {
  const out = gitUpstreamHeaders(GIT_CLIENT_HEADERS, HOST, AUTH);
  assert.deepEqual(out, { ...GIT_CLIENT_HEADERS, host: HOST, authorization: AUTH });
});

test('gitUpstreamHeaders drops client credentials, cookies and forwarding headers', () => {
  const incoming: IncomingHttpHeaders = {
    'content-type': 'application/x-git-receive-pack-request',
    authorization: 'Basic Y2xpZW50OmNyZWRz',
    'proxy-authorization': 'Basic cHJveHk6Y3JlZHM=',
    cookie: 'session=abc',
    'x-forwarded-for': '10.0.0.1',
    'x-forwarded-host': 'evil.example',
    forwarded: 'for=10.0.0.1',
    'x-github-api-version': '2022-11-28',
    expect: '100-continue',
    origin: 'http://evil.example',
  };
  const out = gitUpstreamHeaders(incoming, HOST, AUTH);
  assert.deepEqual(out, { 'content-type': 'application/x-git-receive-pack-request', host: HOST, authorization: AUTH });
});

test('gitUpstreamHeaders drops every hop-by-hop header', () => {
  const incoming: IncomingHttpHeaders = {
    'user-agent': 'git/2.39.5',
    connection: 'keep-alive',
    'keep-alive': 'timeout=5',
    te: 'trailers',
    trailer: 'x-checksum',
    'transfer-encoding': 'chunked',
    upgrade: 'h2c',
    'proxy-connection': 'keep-alive',
  };
  assert.deepEqual(gitUpstreamHeaders(incoming, HOST, AUTH), { 'user-agent': 'git/2.39.5', host: HOST, authorization: AUTH });
});

test('gitUpstreamHeaders drops allowlisted headers that the client names in Connection', () => {
  const incoming: IncomingHttpHeaders = {
    ...GIT_CLIENT_HEADERS,
    connection: 'close, Git-Protocol ,  USER-AGENT,,accept-language',
  };
  const out = gitUpstreamHeaders(incoming, HOST, AUTH);
  assert.equal(out['git-protocol'], undefined);
  assert.equal(out['user-agent'], undefined);
  assert.equal(out['accept-language'], undefined);
  assert.equal(out['content-type'], GIT_CLIENT_HEADERS['content-type']);
  assert.equal(out.accept, GIT_CLIENT_HEADERS.accept);
});

test('a client cannot strip the Authorization or Host header via Connection', () => {
  const incoming: IncomingHttpHeaders = { connection: 'authorization, host, Authorization', host: 'proxy:8447' };
  const out = gitUpstreamHeaders(incoming, HOST, AUTH);
  assert.equal(out.authorization, AUTH);
  assert.equal(out.host, HOST);
});

test('Host comes from the registry and Authorization from the proxy, never from the client', () => {
  const incoming: IncomingHttpHeaders = { host: 'evil.example', authorization: 'Bearer client-token' };
  const out = gitUpstreamHeaders(incoming, HOST, AUTH);
  assert.deepEqual(out, { host: HOST, authorization: AUTH });
});

test('gitUpstreamHeaders never carries the client framing: Content-Length and Transfer-Encoding are the forwarding core\'s', () => {
  for (const incoming of [{ 'content-length': '10' }, { 'transfer-encoding': 'chunked' }, { 'content-length': '10', 'transfer-encoding': 'chunked' }] as IncomingHttpHeaders[]) {
    const out = gitUpstreamHeaders({ ...incoming, 'content-type': 'application/x-git-receive-pack-request' }, HOST, AUTH);
    assert.ok(!('content-length' in out) && !('transfer-encoding' in out), JSON.stringify(incoming));
    assert.equal(out['content-type'], 'application/x-git-receive-pack-request');
  }
});

test('gitUpstreamHeaders does not modify the incoming header object', () => {
  const incoming: IncomingHttpHeaders = { ...GIT_CLIENT_HEADERS, 'transfer-encoding': 'chunked', authorization: 'x' };
  const copy = { ...incoming };
  gitHeadersOnly(incoming, HOST);
  assert.deepEqual(incoming, copy);
});

test('assertHeaderValue returns a clean value and rejects CR, LF and NUL', () => {
  assert.equal(assertHeaderValue('authorization', 'Bearer abc'), 'Bearer abc');
  for (const value of ['a\rb', 'a\nb', 'a\r\nX-Injected: 1', 'a\0b', '\n', 'abc\r']) {
    assert.throws(() => assertHeaderValue('authorization', value), /refusing to set header authorization/, JSON.stringify(value));
  }
});

test('the assertHeaderValue error does not echo the value', () => {
  assert.throws(() => assertHeaderValue('authorization', 'Bearer sekrit\n'), (err: Error) => !err.message.includes('sekrit'));
});

test('gitUpstreamHeaders throws if the Authorization or Host it is given contains CR, LF or NUL', () => {
  for (const bad of ['Bearer a\r\nX-Evil: 1', 'Bearer a\nb', 'Bearer a\rb', 'Bearer a\0b']) {
    assert.throws(() => gitUpstreamHeaders({}, HOST, bad), /authorization/, JSON.stringify(bad));
  }
  for (const bad of ['github.com\r\nX-Evil: 1', 'github.com\n', 'github.com\0']) {
    assert.throws(() => gitUpstreamHeaders({}, bad, AUTH), /host/, JSON.stringify(bad));
  }
});

test('connectionNamed lower-cases and trims the listed names, from a string or a list', () => {
  assert.deepEqual(connectionNamed(undefined), new Set());
  assert.deepEqual(connectionNamed(' Keep-Alive , X-Foo,,'), new Set(['keep-alive', 'x-foo']));
  assert.deepEqual(connectionNamed(['close', 'X-Bar, x-baz']), new Set(['close', 'x-bar', 'x-baz']));
});

test('scrubResponseHeaders keeps ordinary headers with their order and case', () => {
  const raw = [
    'X-GitHub-Request-Id', 'ABCD:1234',
    'Content-Type', 'application/x-git-upload-pack-advertisement',
    'Location', 'https://github.com/org/repo.git/info/refs',
    'Cache-Control', 'no-cache',
    'Content-Length', '42',
    'X-GitHub-Request-Id', 'second',
  ];
  assert.deepEqual(scrubResponseHeaders(raw, ['ghp_secret']), raw);
});

test('scrubResponseHeaders drops every Set-Cookie and the credential-bearing headers', () => {
  const raw = [
    'Content-Type', 'text/plain',
    'Set-Cookie', 'a=1',
    'WWW-Authenticate', 'Basic realm="GitHub"',
    'set-cookie', 'b=2',
    'Proxy-Authenticate', 'Basic',
    'Authorization', 'Bearer x',
    'Proxy-Authorization', 'Basic y',
    'Set-Cookie2', 'c=3',
    'X-Other', 'kept',
  ];
  assert.deepEqual(scrubResponseHeaders(raw, []), ['Content-Type', 'text/plain', 'X-Other', 'kept']);
});

test('scrubResponseHeaders drops hop-by-hop headers in any case', () => {
  const raw = [
    'Connection', 'keep-alive',
    'Keep-Alive', 'timeout=5',
    'Transfer-Encoding', 'chunked',
    'TE', 'trailers',
    'Trailer', 'X-Checksum',
    'Upgrade', 'h2c',
    'Proxy-Connection', 'keep-alive',
    'Content-Type', 'application/x-git-upload-pack-result',
  ];
  assert.deepEqual(scrubResponseHeaders(raw, []), ['Content-Type', 'application/x-git-upload-pack-result']);
});

test('scrubResponseHeaders drops headers named in the upstream Connection header, wherever they appear', () => {
  const raw = [
    'X-Early', 'dropped',
    'Connection', 'X-Early, x-late',
    'connection', 'X-Third',
    'X-Late', 'dropped',
    'X-Third', 'dropped',
    'X-Kept', 'kept',
  ];
  assert.deepEqual(scrubResponseHeaders(raw, []), ['X-Kept', 'kept']);
});

test('response headers whose value contains the token are dropped', () => {
  const token = 'ghp_0123456789abcdef';
  const basic = 'YWxpY2U6Z2hwXzAxMjM0NTY3ODlhYmNkZWY=';
  const raw = [
    'Location', `https://x-access-token:${token}@github.com/org/repo.git`,
    'X-Echo', token,
    'X-Echo-Basic', `Basic ${basic}`,
    'Content-Type', 'text/plain',
  ];
  const out = scrubResponseHeaders(raw, [token, basic]);
  assert.deepEqual(out, ['Content-Type', 'text/plain']);
  assert.ok(!out.join('\n').includes(token));
  assert.ok(!out.join('\n').includes(basic));
});

test('scrubResponseHeaders does not modify its input', () => {
  const raw = ['Set-Cookie', 'a=1', 'Content-Type', 'text/plain'];
  const copy = [...raw];
  scrubResponseHeaders(raw, ['a=1']);
  assert.deepEqual(raw, copy);
});

test('isCredentialHeaderName is true for credential and session header names', () => {
  for (const name of [
    'authorization',
    'proxy-authorization',
    'set-cookie',
    'set-cookie2',
    'www-authenticate',
    'proxy-authenticate',
    'x-api-key',
    'api-key',
    'openai-api-key',
    'x-api_key',
    'x-apikey',
    'x-auth-token',
    'x-session-id',
    'x-client-secret',
    'x-password',
    'x-amz-security-token',
    'x-credential',
  ]) {
    assert.equal(isCredentialHeaderName(name), true, name);
  }
});

test('isCredentialHeaderName is false for rate-limit, retry and ordinary response headers', () => {
  for (const name of [
    'x-ratelimit-remaining-tokens',
    'x-ratelimit-limit-tokens',
    'x-ratelimit-reset-tokens',
    'x-ratelimit-limit-requests',
    'x-ratelimit-remaining-requests',
    'retry-after',
    'retry-after-ms',
    'x-request-id',
    'content-type',
    'openai-processing-ms',
    'openai-version',
    'openai-organization',
  ]) {
    assert.equal(isCredentialHeaderName(name), false, name);
  }
});

test('scrubResponseHeaders keeps the rate-limit and retry headers a client needs', () => {
  const raw = [
    'x-ratelimit-limit-requests', '500',
    'x-ratelimit-remaining-requests', '499',
    'X-RateLimit-Remaining-Tokens', '149984',
    'x-ratelimit-reset-tokens', '6ms',
    'Retry-After', '2',
    'retry-after-ms', '1500',
    'x-request-id', 'req_abc',
    'openai-processing-ms', '12',
  ];
  assert.deepEqual(scrubResponseHeaders(raw, ['sk-upstream-key']), raw);
});

test('scrubResponseHeaders drops token-like response headers the upstream may add', () => {
  const raw = ['Content-Type', 'application/json', 'X-Session-Token', 'abc', 'x-api-key', 'k', 'X-Auth-Token', 't'];
  assert.deepEqual(scrubResponseHeaders(raw, []), ['Content-Type', 'application/json']);
});

test("the key owner's account identifiers are never relayed: OpenAI-Organization, OpenAI-Project, Anthropic-Organization-Id", () => {
  const raw = ['OpenAI-Organization', 'user-acme', 'openai-project', 'proj_acme', 'anthropic-organization-id', '00000000-0000', 'OpenAI-Processing-Ms', '42', 'OpenAI-Version', '2020-10-01'];
  assert.deepEqual(scrubResponseHeaders(raw, []), ['OpenAI-Processing-Ms', '42', 'OpenAI-Version', '2020-10-01']);
});

test('rate-limit headers are exempt from the token name rule: x-ratelimit-* and anthropic-ratelimit-* alike', () => {
  const raw = [
    'x-ratelimit-remaining-tokens', '29998000',
    'anthropic-ratelimit-input-tokens-remaining', '399000',
    'anthropic-ratelimit-output-tokens-reset', '2026-11-23T10:00:00Z',
    'anthropic-ratelimit-tokens-limit', '480000',
    'x-anthropic-token', 'secret',
  ];
  assert.deepEqual(scrubResponseHeaders(raw, []), raw.slice(0, 8));
});
