// The shared store's settings: where it is (--limits-store: one Redis or its sentinels, a user,
// TLS), its password files and CA bundle, and the flags that only make sense together.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { usage } from '../../src/config/cli.ts';
import { describeStore, parseStoreUrl, storeConnection, storePassword, type StoreFlags } from '../../src/store/config.ts';
import { reveal } from '../../src/http/secret-value.ts';
import { revealed } from '../support/secrets.ts';

test('parseStoreUrl: redis:// or rediss:// (TLS), a host name, an address or a bracketed IPv6, and a port', () => {
  assert.deepEqual(parseStoreUrl('redis://redis.ns.svc:6379'), { kind: 'direct', address: { host: 'redis.ns.svc', port: 6379 }, tls: false, user: undefined });
  assert.deepEqual(parseStoreUrl('rediss://10.0.0.7:6380/'), { kind: 'direct', address: { host: '10.0.0.7', port: 6380 }, tls: true, user: undefined });
  assert.deepEqual(parseStoreUrl('redis://[::1]:6379'), { kind: 'direct', address: { host: '::1', port: 6379 }, tls: false, user: undefined });
});

test('parseStoreUrl: an ACL user before the host; sentinels (redis+sentinel://, rediss+sentinel:// for TLS) as a list of HOST:PORT and the master\'s name', () => {
  assert.deepEqual(parseStoreUrl('redis://gateway@redis:6379'), { kind: 'direct', address: { host: 'redis', port: 6379 }, tls: false, user: 'gateway' });
  assert.deepEqual(parseStoreUrl('redis+sentinel://s0.redis:26379,10.0.0.8:26380,[fd00::1]:26379/credential-proxy'), {
    kind: 'sentinel',
    sentinels: [{ host: 's0.redis', port: 26379 }, { host: '10.0.0.8', port: 26380 }, { host: 'fd00::1', port: 26379 }],
    master: 'credential-proxy',
    tls: false,
    user: undefined,
  });
  assert.deepEqual(parseStoreUrl('rediss+sentinel://gw.limits@s0:26379/m'), { kind: 'sentinel', sentinels: [{ host: 's0', port: 26379 }], master: 'm', tls: true, user: 'gw.limits' });
  assert.equal(describeStore(parseStoreUrl('redis+sentinel://s0:26379,[::1]:26379/m')), 'm via s0:26379,[::1]:26379');
  assert.equal(describeStore(parseStoreUrl('rediss://u@[::1]:6379')), '[::1]:6379');
});

test('parseStoreUrl: a password, a database, a missing port or one past 65535, several hosts without sentinels, sentinels without a master: an error naming --limits-store and where a password goes', () => {
  for (const text of ['redis://:secret@redis:6379', 'redis://user:secret@redis:6379', 'redis://redis:6379/2', 'redis://redis', 'redis://redis:65536', 'http://redis:6379', 'memory:', 'redis://a:1,b:2', 'redis+sentinel://s:26379', 'redis+sentinel://s:26379/', 'redis+sentinel://s:26379,s2/m', 'redis+sentinel://s:26379/m/x', 'redis://us er@redis:6379', 'redis://a@b@redis:6379']) {
    assert.throws(() => parseStoreUrl(text), (err: Error) => err.message.startsWith('--limits-store: ') && err.message.includes('--limits-store-password-file'), text);
  }
  assert.throws(() => parseStoreUrl('redis://user:secret@redis:6379'), (err: Error) => err.message.includes('holds a password') && !err.message.includes('secret@'));
});

const flags = (over: Partial<StoreFlags>): StoreFlags => ({ url: 'redis://redis:6379', passwordFile: undefined, caFile: undefined, sentinelUser: undefined, sentinelPasswordFile: undefined, ...over });

test('storeConnection: a flag the URL gives no use for is refused, not ignored: a CA file without rediss, sentinel credentials without sentinels, a user without a password file', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'store-config-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'file');
  writeFileSync(file, 'x\n');
  assert.throws(() => storeConnection(flags({ caFile: file })), /^Error: --limits-store-ca-file: the store is reached without TLS; name it rediss:\/\//);
  assert.throws(() => storeConnection(flags({ sentinelPasswordFile: file })), /^Error: --limits-store-sentinel-password-file: the store is not reached through sentinels/);
  assert.throws(() => storeConnection(flags({ sentinelUser: 'u', sentinelPasswordFile: file })), /^Error: --limits-store-sentinel-user: the store is not reached through sentinels/);
  assert.throws(() => storeConnection(flags({ url: 'redis://gateway@redis:6379' })), /^Error: --limits-store: the user gateway needs its password in --limits-store-password-file$/);
  assert.throws(() => storeConnection(flags({ url: 'redis+sentinel://s:26379/m', sentinelUser: 'u' })), /needs its password in --limits-store-sentinel-password-file/);
  assert.throws(() => storeConnection(flags({ url: 'rediss://redis:6379', caFile: path.join(dir, 'missing.pem') })), /^Error: --limits-store-ca-file: .*missing\.pem cannot be read/);
  const direct = storeConnection(flags({ url: 'rediss://gateway@redis:6379', passwordFile: file, caFile: file }));
  assert.deepEqual({ ...direct.options, password: undefined }, { address: { host: 'redis', port: 6379 }, tls: { caFile: file }, user: 'gateway', password: undefined, role: 'if-answered' });
  const sentinel = storeConnection(flags({ url: 'redis+sentinel://s:26379/m', sentinelPasswordFile: file }));
  assert.equal(sentinel.options.role, 'required', 'a node the sentinels name must say it is the master');
  assert.equal(typeof sentinel.options.address, 'function', 'asked before every connection');
  assert.equal(sentinel.where, 'm via s:26379');
});

test('storePassword: no file is no password; a missing or empty file stops start-up naming the flag; a rotated file is read again', (t) => {
  assert.equal(storePassword(undefined), undefined);
  const dir = mkdtempSync(path.join(tmpdir(), 'store-config-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'password');
  assert.throws(() => storePassword(file), /^Error: --limits-store-password-file: .*password cannot be read, or is empty$/);
  writeFileSync(file, '');
  assert.throws(() => storePassword(file), /cannot be read, or is empty/);
  writeFileSync(file, 'first\n');
  const source = storePassword(file)!;
  assert.deepEqual(revealed(source.read()), { ok: true, value: 'first' });
  writeFileSync(file, 'second\n');
  const again = source.read();
  assert.equal(again.ok && reveal(again.value), 'second');
});

test('store password never in argv: --limits-store refuses a URL with a password and does not show it back; every password the store flags take is a file\'s', () => {
  for (const text of ['redis://:s3cret-value@redis:6379', 'rediss://gateway:s3cret-value@redis:6379', 'redis+sentinel://u:s3cret-value@s:26379/m']) {
    assert.throws(() => parseStoreUrl(text), (err: Error) => /holds a password/.test(err.message) && !err.message.includes('s3cret-value') && err.message.includes('--limits-store-password-file'), text);
  }
  const flags = usage().split('\n').filter((l) => /^ {2}--limits-store-[a-z-]*password/.test(l)).map((l) => l.trim().split(/\s+/)[0]);
  assert.deepEqual(flags, ['--limits-store-password-file', '--limits-store-sentinel-password-file'], 'passwords come from files, never a flag\'s value');
});
