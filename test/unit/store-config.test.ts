// The shared store's settings: where it is (--limits-store) and its password file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseStoreUrl, storePassword } from '../../src/store/config.ts';

test('parseStoreUrl: redis:// or rediss:// (TLS), a host name, an address or a bracketed IPv6, and a port', () => {
  assert.deepEqual(parseStoreUrl('redis://redis.ns.svc:6379'), { host: 'redis.ns.svc', port: 6379, tls: false });
  assert.deepEqual(parseStoreUrl('rediss://10.0.0.7:6380/'), { host: '10.0.0.7', port: 6380, tls: true });
  assert.deepEqual(parseStoreUrl('redis://[::1]:6379'), { host: '::1', port: 6379, tls: false });
});

test('parseStoreUrl: a password, a database, a missing port or one past 65535 is an error naming --limits-store and where a password goes', () => {
  for (const text of ['redis://:secret@redis:6379', 'redis://redis:6379/2', 'redis://redis', 'redis://redis:65536', 'http://redis:6379', 'memory:']) {
    assert.throws(() => parseStoreUrl(text), (err: Error) => err.message.startsWith('--limits-store: ') && err.message.includes('--limits-store-password-file'), text);
  }
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
  assert.deepEqual(source.read(), { ok: true, value: 'first' });
  writeFileSync(file, 'second\n');
  const again = source.read();
  assert.equal(again.ok && again.value, 'second');
});
