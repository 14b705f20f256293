import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatAddress, parseListenAddressOrOff, parseByteSize, parseCount, parseDuration, parseListenAddress, parseServiceHost } from '../../src/http/address.ts';

test('every accepted listen address form parses to host and port', () => {
  const cases: [string, { host: string | undefined; port: number }][] = [
    [':8447', { host: undefined, port: 8447 }],
    ['127.0.0.1:0', { host: '127.0.0.1', port: 0 }],
    ['[::1]:8447', { host: '::1', port: 8447 }],
    ['[::]:8447', { host: '::', port: 8447 }],
    ['[fe80::1:2]:1', { host: 'fe80::1:2', port: 1 }],
    ['localhost:80', { host: 'localhost', port: 80 }],
    ['proxy.ns.svc.cluster.local:65535', { host: 'proxy.ns.svc.cluster.local', port: 65535 }],
    ['0.0.0.0:8447', { host: '0.0.0.0', port: 8447 }],
  ];
  for (const [text, expected] of cases) {
    assert.deepEqual(parseListenAddress('git-auth-listen', text), expected, text);
  }
});

test('a listen address with no host means every interface (host undefined), not an empty host', () => {
  const addr = parseListenAddress('git-auth-listen', ':0');
  assert.equal(addr.host, undefined);
  assert.equal(addr.port, 0);
});

test('malformed listen addresses are rejected', () => {
  const bad = [
    '', // empty
    '8447', // no colon
    'localhost', // no port
    'localhost:', // empty port
    ':', // empty port, no host
    ':65536', // port out of range
    ':99999',
    ':123456', // more than 5 digits
    ':-1',
    ':80a',
    ':0x50',
    '[::1]', // v6 without port
    '[::1]8447', // v6 without colon before port
    '[::1:8447', // unclosed bracket
    '[]:8447', // empty v6
    '[::g]:8447', // bad v6 character
    '[127.0.0.1]:8447', // v4 in brackets
    '[localhost]:80',
    '::1:8447', // unbracketed v6
    ' :8447', // leading space
    ':8447 ', // trailing space
    'local host:80', // inner space
    'localhost :80',
    'user@host:80',
    'host/path:80',
    'http://localhost:80',
  ];
  for (const text of bad) {
    assert.throws(() => parseListenAddress('git-auth-listen', text), Error, JSON.stringify(text));
  }
});

test('a listen address error names the flag, quotes the input and lists the accepted forms', () => {
  assert.throws(
    () => parseListenAddress('git-auth-listen', 'localhost'),
    (err: Error) => {
      assert.match(err.message, /^--git-auth-listen: /);
      assert.ok(err.message.includes('"localhost"'), err.message);
      assert.ok(err.message.includes(':PORT'), err.message);
      assert.ok(err.message.includes('[IPV6]:PORT'), err.message);
      return true;
    },
  );
  assert.throws(() => parseListenAddress('other-listen', ':65536'), /^Error: --other-listen: /);
});

test('formatAddress brackets IPv6 hosts and leaves IPv4 and names alone', () => {
  assert.equal(formatAddress('127.0.0.1', 8447), '127.0.0.1:8447');
  assert.equal(formatAddress('localhost', 80), 'localhost:80');
  assert.equal(formatAddress('::1', 8447), '[::1]:8447');
  assert.equal(formatAddress('::', 0), '[::]:0');
  assert.equal(formatAddress('fe80::1', 443), '[fe80::1]:443');
});

test('formatAddress output of a v6 address parses back to the same address', () => {
  assert.deepEqual(parseListenAddress('x', formatAddress('::1', 8447)), { host: '::1', port: 8447 });
  assert.deepEqual(parseListenAddress('x', formatAddress('127.0.0.1', 9)), { host: '127.0.0.1', port: 9 });
});

test('parseDuration accepts ms, s, m and h (integer or decimal) and returns milliseconds', () => {
  const cases: [string, number][] = [
    ['0', 0],
    ['0ms', 0],
    ['0s', 0],
    ['1ms', 1],
    ['500ms', 500],
    ['1s', 1000],
    ['30s', 30_000],
    ['1.5s', 1500],
    ['0.25s', 250],
    ['5m', 300_000],
    ['1.5m', 90_000],
    ['1h', 3_600_000],
    ['2h', 7_200_000],
  ];
  for (const [text, ms] of cases) assert.equal(parseDuration('idle-timeout', text), ms, text);
});

test('parseDuration rounds fractional milliseconds to an integer', () => {
  assert.equal(parseDuration('x', '1.4ms'), 1);
  assert.equal(parseDuration('x', '1.6ms'), 2);
  assert.ok(Number.isInteger(parseDuration('x', '0.0015s')));
});

test('parseDuration rejects a bare number, an unknown unit, a sign, spaces and upper case', () => {
  const bad = ['', '30', '1000', '-1s', '+1s', '1d', '1w', '1us', '1 s', ' 1s', '1s ', 's', 'ms', '.5s', '1.s', '1e3ms', '30S', '1H', '1m30s', '00', 'NaN', 'Infinityh'];
  for (const text of bad) {
    assert.throws(() => parseDuration('idle-timeout', text), Error, JSON.stringify(text));
  }
});

test('a duration error names the flag, quotes the input and shows an example', () => {
  assert.throws(
    () => parseDuration('header-timeout', '30'),
    (err: Error) => {
      assert.match(err.message, /^--header-timeout: /);
      assert.ok(err.message.includes('"30"'), err.message);
      assert.ok(err.message.includes('30s'), err.message);
      assert.ok(err.message.includes('0 to disable'), err.message);
      return true;
    },
  );
});

test('a duration beyond what a Node timer holds is rejected instead of firing at once', () => {
  assert.equal(parseDuration('shutdown-grace', '596h'), 596 * 3_600_000);
  assert.throws(() => parseDuration('shutdown-grace', '600h'), /--shutdown-grace: "600h" is out of range/);
});

test('a non-zero duration that rounds to 0 ms is rejected, never silently disabling a timeout', () => {
  assert.throws(() => parseDuration('idle-timeout', '0.4ms'), /out of range/);
  assert.equal(parseDuration('idle-timeout', '0'), 0);
});

test('parseByteSize accepts a positive whole number with B, KiB, MiB or GiB and returns bytes', () => {
  const cases: [string, number][] = [
    ['1B', 1],
    ['4096B', 4096],
    ['512KiB', 512 * 1024],
    ['32MiB', 32 * 1024 * 1024],
    ['1GiB', 1024 ** 3],
  ];
  for (const [text, bytes] of cases) assert.equal(parseByteSize('max-request-body', text), bytes, text);
});

test('parseByteSize rejects zero, a bare number, decimal units, fractions, signs, spaces and wrong case', () => {
  for (const text of ['0B', '0MiB', '32', '32MB', '32mb', '32mib', '32M', '1.5MiB', '-1MiB', '+1MiB', '32 MiB', ' 32MiB', 'MiB', '', '1e3B', '0x10B']) {
    assert.throws(() => parseByteSize('max-request-body', text), /^Error: --max-request-body: /, text);
  }
});

test('a size error names the flag, quotes the input and shows an example', () => {
  assert.throws(
    () => parseByteSize('max-request-body', '32MB'),
    (err: Error) => {
      assert.match(err.message, /^--max-request-body: /);
      assert.ok(err.message.includes('"32MB"'), err.message);
      assert.ok(err.message.includes('32MiB'), err.message);
      return true;
    },
  );
});

test('parseCount accepts whole numbers from min to max inclusive', () => {
  assert.equal(parseCount('upstream-max-retries', '0', 0, 10), 0);
  assert.equal(parseCount('upstream-max-retries', '2', 0, 10), 2);
  assert.equal(parseCount('upstream-max-retries', '10', 0, 10), 10);
});

test('parseCount rejects numbers outside the range and anything not a whole number', () => {
  for (const text of ['11', '100', '-1', '1.5', '1e1', ' 2', '2 ', '', 'two', '0x2', '+2']) {
    assert.throws(() => parseCount('upstream-max-retries', text, 0, 10), /^Error: --upstream-max-retries: .* must be a whole number from 0 to 10$/, text);
  }
  assert.throws(() => parseCount('n', '0', 1, 5), /from 1 to 5/);
});

test('a size beyond 64GiB is rejected rather than losing integer precision', () => {
  assert.equal(parseByteSize('max-request-body', '64GiB'), 64 * 1024 ** 3);
  assert.throws(() => parseByteSize('max-request-body', '99999999999GiB'), /--max-request-body: "99999999999GiB" is out of range/);
});

test('parseServiceHost adds the default port, keeps a given one, and names the source of a bad value', () => {
  assert.equal(parseServiceHost('--proxy-host', 'proxy.ns.svc', 8447), 'proxy.ns.svc:8447');
  assert.equal(parseServiceHost('--proxy-host', '10.0.0.5:65535', 8447), '10.0.0.5:65535');
  for (const bad of ['', 'http://proxy', 'proxy:0', 'proxy:65536', 'proxy:', 'user@proxy', '[::1]:8447', 'pro xy', 'proxy/path', 'proxy"]\n[core']) {
    assert.throws(() => parseServiceHost('MODEL_GATEWAY_PROXY_HOST', bad, 8450), /^Error: MODEL_GATEWAY_PROXY_HOST: ".*" is not host or host:port$/s, JSON.stringify(bad));
  }
});

test('parseListenAddressOrOff: off is no listener, any other text an address as parseListenAddress reads it (every listener may be switched off)', () => {
  assert.equal(parseListenAddressOrOff('git-auth-listen', 'off'), undefined);
  assert.deepEqual(parseListenAddressOrOff('model-gateway-listen', '127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
  assert.throws(() => parseListenAddressOrOff('git-auth-listen', 'OFF'), /^Error: --git-auth-listen: /);
});
