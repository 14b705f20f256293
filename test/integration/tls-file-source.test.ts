// The TLS listener's file source (tlsFileSource): when the certificate, key and client CA bundle
// are looked at and read again, on a PKI made by openssl (test/support/mtls-pki.ts), with a fake
// monotonic clock and the files' times set with utimes, never waited for. The listener's pure
// parts are test/unit/tls-listener.test.ts; the listener serving TLS,
// test/integration/tls-listener.test.ts.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { LogRecord } from '../../src/http/log.ts';
import { tlsFileSource, type TlsFiles } from '../../src/http/tls-listener.ts';
import { makeMtlsPki, type MtlsPki } from '../support/mtls-pki.ts';
import { rewriteKeepingTimes } from '../support/file-times.ts';

let pki: MtlsPki;
let work: string;

before(() => {
  pki = makeMtlsPki();
  work = mkdtempSync(join(tmpdir(), 'test-tls-source-'));
});

after(() => {
  pki?.cleanup();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A fresh copy of the server's files and the client CA bundle, so that each test changes its own. */
function copyFiles(name: string): TlsFiles & { clientCaFile: string } {
  const files = { certFile: join(work, `${name}-cert.pem`), keyFile: join(work, `${name}-key.pem`), clientCaFile: join(work, `${name}-ca.pem`) };
  copyFileSync(pki.serverCertFile, files.certFile);
  copyFileSync(pki.serverKeyFile, files.keyFile);
  copyFileSync(pki.caFile, files.clientCaFile);
  return files;
}

/** A time in whole seconds, so that setting it again gives a file the very same time to the nanosecond. */
const wholeSeconds = (ms: number): Date => new Date(Math.floor(ms / 1000) * 1000);

test('TLS files looked at once a second: nothing is looked at within a second of the last look; a changed client CA bundle is then read and reported as a client CA change, a rotated certificate as not one', () => {
  const files = copyFiles('floor');
  const logs: LogRecord[] = [];
  let now = 5000;
  const source = tlsFileSource(files, 'git', (r) => void logs.push(r), () => now);
  writeFileSync(files.clientCaFile, pki.otherCaPem);
  assert.equal(source.changed(), undefined, 'at start-up');
  now += 999;
  assert.equal(source.changed(), undefined, 'within the second');
  now += 1;
  const change = source.changed();
  assert.ok(change !== undefined, 'a second after the last look, the change is seen');
  assert.equal(change.clientCaChanged, true);
  assert.equal(String(change.options.ca), pki.otherCaPem);
  assert.deepEqual(logs, [{ event: 'tls_reloaded', listener: 'git', client_ca_changed: true }]);
  now += 1000;
  assert.equal(source.changed(), undefined, 'nothing changed since');
  // A certificate rotated (the same one, re-encoded with a trailing line): not a client CA change.
  writeFileSync(files.certFile, `${readFileSync(pki.serverCertFile, 'utf8')}\n`);
  now += 1000;
  assert.equal(source.changed()?.clientCaChanged, false);
});

test('TLS files read only when their inode, size or times changed: untouched, an old file is not read again; rewritten in place with the same size and its modification time put back, it is (the change time moved)', () => {
  const files = copyFiles('stat');
  const old = wholeSeconds(Date.now() - 3600_000);
  for (const path of Object.values(files)) utimesSync(path, old, old);
  const logs: LogRecord[] = [];
  let now = 0;
  const source = tlsFileSource(files, 'git', (r) => void logs.push(r), () => now);
  const before = statSync(files.certFile);
  now += 1000;
  assert.equal(source.changed(), undefined);
  assert.equal(logs.length, 0, 'untouched: not read');
  // Bytes that cannot be a certificate: once read, the source says so (tls_reload_failed) and
  // keeps the context in force.
  rewriteKeepingTimes(files.certFile, 'x'.repeat(before.size), old);
  now += 1000;
  assert.equal(source.changed(), undefined);
  assert.deepEqual(logs.map((l) => l.event), ['tls_reload_failed']);
});

test('TLS files recently changed are compared by their bytes: a same-size rewrite within one tick of the kernel clock (the same time) is still seen', () => {
  const files = copyFiles('settle');
  // A time less than 2 s behind the clock (here: one not yet passed, so that the test does not
  // depend on how fast it runs) marks a file that may still be rewritten within the same tick.
  const tick = wholeSeconds(Date.now() + 60_000);
  utimesSync(files.certFile, tick, tick);
  const logs: LogRecord[] = [];
  let now = 0;
  const source = tlsFileSource(files, 'git', (r) => void logs.push(r), () => now);
  const { size } = statSync(files.certFile);
  writeFileSync(files.certFile, 'x'.repeat(size));
  utimesSync(files.certFile, tick, tick);
  now += 1000;
  assert.equal(source.changed(), undefined);
  assert.deepEqual(logs.map((l) => l.event), ['tls_reload_failed'], 'read, although inode, size and time look the same');
  copyFileSync(pki.serverCertFile, files.certFile);
  now += 1000;
  assert.equal(source.changed(), undefined, 'back to the bytes in force: no change to apply');
});
