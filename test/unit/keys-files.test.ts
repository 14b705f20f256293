// Key files on disk (src/auth/key-files.ts): what start-up refuses, and how a re-read treats
// each file: removed keys are gone (fail closed), a broken file keeps its last good key, a new
// one is added, two files with one kid leave the kid to the key that held it. And the watch:
// a change in the directory is read without a restart.
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { VerificationKey } from '../../src/auth/jwt.ts';
import { KeyFiles } from '../../src/auth/key-files.ts';

const root = mkdtempSync(join(tmpdir(), 'keys-files-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const dir = join(root, `d${n++}`);
  mkdirSync(dir);
  return dir;
};
const publicPem = (k: KeyObject = generateKeyPairSync('ed25519').publicKey) => k.export({ type: 'spki', format: 'pem' }).toString();
const SECRET = 'k'.repeat(40);
const kids = (keys: readonly VerificationKey[]) => keys.map((k) => `${k.kid ?? '(none)'}:${k.alg}`).sort();

test('key files at start-up: a directory of KID.pem and KID.hs256 gives a key per file; hidden entries (a secret mount\'s ..data) are skipped', () => {
  const dir = freshDir();
  writeFileSync(join(dir, 'ed-a.pem'), publicPem());
  writeFileSync(join(dir, 'ec-b.pem'), publicPem(generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey));
  writeFileSync(join(dir, 'shared.hs256'), `${SECRET}\n`);
  mkdirSync(join(dir, '..2026_11_26'));
  symlinkSync('..2026_11_26', join(dir, '..data'));
  const files = new KeyFiles({ path: dir, kind: 'keys', name: '--bot-keys' });
  assert.deepEqual(kids(files.keys), ['ec-b:ES256', 'ed-a:EdDSA', 'shared:HS256']);
  const single = new KeyFiles({ path: join(dir, 'ed-a.pem'), kind: 'keys', name: '--git-keys' });
  assert.deepEqual(kids(single.keys), ['ed-a:EdDSA']);
  const secret = new KeyFiles({ path: join(dir, 'shared.hs256'), kind: 'secret', name: 'MODEL_PROXY_SIGNING_KEY_FILE' });
  assert.deepEqual(kids(secret.keys), ['(none):HS256'], 'the *_FILE secret has no kid, whatever its file is called');
});

test('bad key file stops start-up: the message names the flag, the path, the file and what to fix', () => {
  const dir = freshDir();
  writeFileSync(join(dir, 'good.pem'), publicPem());
  writeFileSync(join(dir, 'notes.txt'), 'hello');
  assert.throws(() => new KeyFiles({ path: dir, kind: 'keys', name: '--bot-keys' }), new RegExp(`^Error: --bot-keys ${dir}: notes\\.txt: not a key file: name it KID\\.pem`));
  assert.throws(() => new KeyFiles({ path: join(dir, 'absent.pem'), kind: 'keys', name: '--git-keys' }), /^Error: --git-keys .*absent\.pem cannot be read \(ENOENT\)$/);
  const empty = freshDir();
  assert.throws(() => new KeyFiles({ path: empty, kind: 'keys', name: '--bot-keys' }), /no key file in it \(KID\.pem or KID\.hs256\)$/);
  assert.throws(() => new KeyFiles({ path: dir, kind: 'secret', name: 'GIT_PROXY_SIGNING_KEY_FILE' }), /a directory; it names one file holding the HS256 secret/);
  writeFileSync(join(dir, 'short'), 'too short');
  assert.throws(() => new KeyFiles({ path: join(dir, 'short'), kind: 'secret', name: 'MODEL_PROXY_SIGNING_KEY_FILE' }), /MODEL_PROXY_SIGNING_KEY_FILE .*short: short: an HS256 secret must be at least 32 bytes/);
});

test('two keys same kid in a directory (k.pem and k.hs256) stop start-up naming both files', () => {
  const dir = freshDir();
  writeFileSync(join(dir, 'k.pem'), publicPem());
  writeFileSync(join(dir, 'k.hs256'), SECRET);
  assert.throws(() => new KeyFiles({ path: dir, kind: 'keys', name: '--bot-keys' }), /k\.hs256 and k\.pem have the same key id "k": remove or rename one/);
});

test('removed key: a re-read drops the key of a file removed (fail closed), keeps the others as the same key objects, and adds a new file\'s key', () => {
  const dir = freshDir();
  writeFileSync(join(dir, 'old.pem'), publicPem());
  writeFileSync(join(dir, 'keep.hs256'), SECRET);
  const files = new KeyFiles({ path: dir, kind: 'keys', name: '--bot-keys' });
  const keep = files.keys.find((k) => k.kid === 'keep');
  writeFileSync(join(dir, 'new.pem'), publicPem());
  assert.deepEqual(files.reread(), { changed: true, problems: [] });
  assert.deepEqual(kids(files.keys), ['keep:HS256', 'new:EdDSA', 'old:EdDSA']);
  rmSync(join(dir, 'old.pem'));
  assert.deepEqual(files.reread(), { changed: true, problems: [] });
  assert.deepEqual(kids(files.keys), ['keep:HS256', 'new:EdDSA']);
  assert.equal(files.keys.find((k) => k.kid === 'keep'), keep, 'an unchanged file keeps its key object (and the cache its entries)');
  assert.deepEqual(files.reread(), { changed: false, problems: [] });
});

test('a failed re-read keeps the last good key of a broken file, reports it, and still drops removed keys', () => {
  const dir = freshDir();
  writeFileSync(join(dir, 'a.pem'), publicPem());
  writeFileSync(join(dir, 'b.pem'), publicPem());
  const files = new KeyFiles({ path: dir, kind: 'keys', name: '--bot-keys' });
  const a = files.keys.find((k) => k.kid === 'a');
  writeFileSync(join(dir, 'a.pem'), '-----BEGIN PUBLIC KEY-----\ntruncated');
  rmSync(join(dir, 'b.pem'));
  writeFileSync(join(dir, 'c.hs256'), 'short');
  const { changed, problems } = files.reread();
  assert.equal(changed, true);
  assert.deepEqual(problems, ['a.pem: not a PEM public key (an encrypted key is not taken); its key read before stays', 'c.hs256: an HS256 secret must be at least 32 bytes (e.g. openssl rand -hex 32 > FILE)']);
  assert.deepEqual(kids(files.keys), ['a:EdDSA']);
  assert.equal(files.keys[0], a);
});

test('two keys same kid on a re-read: the key that held the kid stays; a kid new in two files is nobody\'s', () => {
  const dir = freshDir();
  writeFileSync(join(dir, 'k.pem'), publicPem());
  const files = new KeyFiles({ path: dir, kind: 'keys', name: '--bot-keys' });
  const held = files.keys[0];
  writeFileSync(join(dir, 'k.hs256'), SECRET);
  writeFileSync(join(dir, 'n.pem'), publicPem());
  writeFileSync(join(dir, 'n.hs256'), SECRET);
  const { problems } = files.reread();
  assert.deepEqual(problems, ['k.hs256 and k.pem have the same key id "k": remove or rename one', 'n.hs256 and n.pem have the same key id "n": remove or rename one']);
  assert.deepEqual(files.keys, [held]);
});

test('removed key: a key directory gone removes every key; a single key file gone removes its key', () => {
  const dir = freshDir();
  writeFileSync(join(dir, 'a.pem'), publicPem());
  const files = new KeyFiles({ path: dir, kind: 'keys', name: '--bot-keys' });
  const single = new KeyFiles({ path: join(dir, 'a.pem'), kind: 'keys', name: '--git-keys' });
  renameSync(dir, `${dir}-moved`);
  assert.deepEqual(files.reread(), { changed: true, problems: ['the directory is gone: every token is refused until it is back'] });
  assert.deepEqual(files.keys, []);
  assert.deepEqual(single.reread(), { changed: true, problems: ['the file is gone: its tokens are refused until it is back'] });
  assert.deepEqual(single.keys, []);
  renameSync(`${dir}-moved`, dir);
  assert.equal(files.reread().changed, true);
  assert.deepEqual(kids(files.keys), ['a:EdDSA'], 'back when the directory is');
});

test('key files are watched: a file written into the directory is read without a restart, and a problem is reported once until fixed', async () => {
  const dir = freshDir();
  writeFileSync(join(dir, 'a.pem'), publicPem());
  const files = new KeyFiles({ path: dir, kind: 'keys', name: '--bot-keys' });
  const changes: string[][] = [];
  const problems: string[] = [];
  let wake = () => {};
  const next = () => new Promise<void>((resolve) => (wake = resolve));
  // The watch holds no event loop open (the listeners do, in the proxy): this test holds it.
  const keepAlive = setInterval(() => {}, 60_000);
  after(() => clearInterval(keepAlive));
  // A long poll: what arrives here came from the watch.
  const stop = files.watch((keys) => (changes.push(kids(keys)), wake()), (message) => (problems.push(message), wake()), 3_600_000);
  after(stop);
  let seen = next();
  // Written under a hidden name and renamed into place, as docs/operations.md says: never read half-way.
  writeFileSync(join(dir, '.b.hs256.tmp'), SECRET);
  renameSync(join(dir, '.b.hs256.tmp'), join(dir, 'b.hs256'));
  await seen;
  while (!changes.some((c) => c.includes('b:HS256'))) await (seen = next());
  assert.deepEqual(changes.at(-1), ['a:EdDSA', 'b:HS256']);
  assert.deepEqual(problems, []);
  const before = problems.length;
  seen = next();
  writeFileSync(join(dir, 'b.hs256'), 'short');
  await seen;
  while (problems.length === before) await (seen = next());
  assert.match(problems.at(-1)!, new RegExp(`^--bot-keys ${dir}: b\\.hs256: an HS256 secret must be at least 32 bytes .*; its key read before stays$`));
  assert.deepEqual(kids(files.keys), ['a:EdDSA', 'b:HS256']);
  const reported = problems.length;
  assert.equal(files.reread().problems.length, 1, 'still broken');
  assert.equal(problems.length, reported, 'a direct re-read reports nothing; the watch reports each problem once');
});
