import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  envSecret,
  fileSecret,
  literalSecret,
  sanitizePassword,
  sanitizeSecret,
  secretSource,
} from '../../src/config/secret.ts';
import { revealed } from '../support/secrets.ts';

function withTempDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'secret-test-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('trailing CR and LF are stripped from a secret', () => {
  const cases: [string, string][] = [
    ['tok', 'tok'],
    ['tok\n', 'tok'],
    ['tok\r\n', 'tok'],
    ['tok\n\n\n', 'tok'],
    ['tok\r\n\r\n', 'tok'],
    ['tok\r', 'tok'],
  ];
  for (const [raw, value] of cases) {
    assert.deepEqual(revealed(sanitizeSecret(raw)), { ok: true, value }, JSON.stringify(raw));
  }
});

test('only trailing CR/LF is stripped: other trailing or leading whitespace makes the secret invalid', () => {
  for (const raw of ['tok ', 'tok\t', ' tok', '\ntok', '\rtok', 'tok \n', 'tok\n ']) {
    assert.deepEqual(revealed(sanitizeSecret(raw)), { ok: false, reason: 'invalid' }, JSON.stringify(raw));
  }
});

test('an undefined or empty secret is missing', () => {
  for (const raw of [undefined, '', '\n', '\r\n', '\n\n']) {
    assert.deepEqual(revealed(sanitizeSecret(raw)), { ok: false, reason: 'missing' }, JSON.stringify(raw));
  }
});

test('a token with an embedded space, CR, LF, NUL, tab, DEL or non-ASCII byte is invalid and never used', () => {
  for (const raw of ['to ken', 'to\rken', 'to\nken', 'to\r\nken', 'to\0ken', 'to\tken', 'to\x7fken', 'tökén', 'tok\u2028en', 'tok\u00a0']) {
    const read = sanitizeSecret(raw);
    assert.deepEqual(revealed(read), { ok: false, reason: 'invalid' }, JSON.stringify(raw));
    assert.ok(!('value' in read));
  }
});

test('every visible ASCII character is allowed in a secret', () => {
  let all = '';
  for (let c = 0x21; c <= 0x7e; c++) all += String.fromCharCode(c);
  assert.deepEqual(revealed(sanitizeSecret(all)), { ok: true, value: all });
});

test('envSecret reads the variable at call time, not when it is created', () => {
  const env: NodeJS.ProcessEnv = {};
  const source = envSecret(env, 'GIT_HOST_A_TOKEN');
  assert.deepEqual(revealed(source.read()), { ok: false, reason: 'missing' });
  env.GIT_HOST_A_TOKEN = 'first';
  assert.deepEqual(revealed(source.read()), { ok: true, value: 'first' });
  env.GIT_HOST_A_TOKEN = 'second\n';
  assert.deepEqual(revealed(source.read()), { ok: true, value: 'second' });
  env.GIT_HOST_A_TOKEN = 'bad token';
  assert.deepEqual(revealed(source.read()), { ok: false, reason: 'invalid' });
  env.GIT_HOST_A_TOKEN = '';
  assert.deepEqual(revealed(source.read()), { ok: false, reason: 'missing' });
  delete env.GIT_HOST_A_TOKEN;
  assert.deepEqual(revealed(source.read()), { ok: false, reason: 'missing' });
});

test('fileSecret reads the file and strips its trailing newline', () => {
  withTempDir((dir) => {
    const path = join(dir, 'token');
    writeFileSync(path, 'filetoken\n');
    const source = fileSecret(path);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'filetoken' });
  });
});

test('fileSecret re-reads the file after it is rewritten in place', () => {
  withTempDir((dir) => {
    const path = join(dir, 'token');
    writeFileSync(path, 'old-token\n');
    const source = fileSecret(path);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'old-token' });
    writeFileSync(path, 'a-new-and-longer-token\n');
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'a-new-and-longer-token' });
  });
});

test('fileSecret re-reads the file after a new file is renamed over it', () => {
  withTempDir((dir) => {
    const path = join(dir, 'token');
    writeFileSync(path, 'old-token\n');
    const source = fileSecret(path);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'old-token' });
    // Same size on purpose: only the file's identity (inode) tells the two apart.
    const next = join(dir, 'token.next');
    writeFileSync(next, 'new-token\n');
    renameSync(next, path);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'new-token' });
  });
});

test('fileSecret follows a rotated symlink, as mounted secrets rotate', () => {
  withTempDir((dir) => {
    writeFileSync(join(dir, 'v1'), 'token-one\n');
    writeFileSync(join(dir, 'v2'), 'token-two-longer\n');
    const link = join(dir, 'token');
    symlinkSync(join(dir, 'v1'), link);
    const source = fileSecret(link);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'token-one' });
    const tmpLink = join(dir, 'token.tmp');
    symlinkSync(join(dir, 'v2'), tmpLink);
    renameSync(tmpLink, link);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'token-two-longer' });
  });
});

test('fileSecret of a file that does not exist is missing', () => {
  withTempDir((dir) => {
    assert.deepEqual(revealed(fileSecret(join(dir, 'absent')).read()), { ok: false, reason: 'missing' });
  });
});

test('fileSecret of a file deleted after it was read is missing, not the old value', () => {
  withTempDir((dir) => {
    const path = join(dir, 'token');
    writeFileSync(path, 'gone-soon\n');
    const source = fileSecret(path);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'gone-soon' });
    unlinkSync(path);
    assert.deepEqual(revealed(source.read()), { ok: false, reason: 'missing' });
  });
});

test('fileSecret picks the file up again when it reappears after being deleted', () => {
  withTempDir((dir) => {
    const path = join(dir, 'token');
    writeFileSync(path, 'first\n');
    const source = fileSecret(path);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'first' });
    unlinkSync(path);
    assert.deepEqual(revealed(source.read()), { ok: false, reason: 'missing' });
    writeFileSync(path, 'first\n');
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'first' });
  });
});

test('fileSecret of an empty file is missing and of a file with a bad value is invalid', () => {
  withTempDir((dir) => {
    const empty = join(dir, 'empty');
    writeFileSync(empty, '\n');
    assert.deepEqual(revealed(fileSecret(empty).read()), { ok: false, reason: 'missing' });
    const bad = join(dir, 'bad');
    writeFileSync(bad, 'two\nlines\n');
    assert.deepEqual(revealed(fileSecret(bad).read()), { ok: false, reason: 'invalid' });
  });
});

test('fileSecret of a directory is missing', () => {
  withTempDir((dir) => {
    assert.deepEqual(revealed(fileSecret(dir).read()), { ok: false, reason: 'missing' });
  });
});

test('secretSource picks the environment or the file by the reference kind', () => {
  withTempDir((dir) => {
    const path = join(dir, 'token');
    writeFileSync(path, 'from-file');
    const env = { TOKEN: 'from-env' };
    assert.deepEqual(revealed(secretSource(env, { env: 'TOKEN' }).read()), { ok: true, value: 'from-env' });
    assert.deepEqual(revealed(secretSource(env, { file: path }).read()), { ok: true, value: 'from-file' });
  });
});

test('literalSecret is sanitized like any other secret', () => {
  assert.deepEqual(revealed(literalSecret('alice').read()), { ok: true, value: 'alice' });
  assert.deepEqual(revealed(literalSecret('alice\n').read()), { ok: true, value: 'alice' });
  assert.deepEqual(revealed(literalSecret('al ice').read()), { ok: false, reason: 'invalid' });
  assert.deepEqual(revealed(literalSecret('').read()), { ok: false, reason: 'missing' });
});

test('a limits store password keeps every byte but the trailing newlines, and empty is missing (sanitizePassword)', () => {
  assert.deepEqual(revealed(sanitizePassword('pass word with spaces\r\n')), { ok: true, value: 'pass word with spaces' });
  assert.deepEqual(revealed(sanitizePassword('ünïcode\ttab')), { ok: true, value: 'ünïcode\ttab' });
  assert.deepEqual(revealed(sanitizePassword('\n')), { ok: false, reason: 'missing' });
  assert.deepEqual(revealed(sanitizePassword(undefined)), { ok: false, reason: 'missing' });
});

test('fileSecret with sanitizePassword re-reads a rotated password file, as the limits store connects again', () => {
  withTempDir((dir) => {
    const path = join(dir, 'redis-password');
    writeFileSync(path, 'first pass\n');
    const source = fileSecret(path, sanitizePassword);
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'first pass' });
    writeFileSync(path, 'the second, longer pass\n');
    assert.deepEqual(revealed(source.read()), { ok: true, value: 'the second, longer pass' });
  });
});
