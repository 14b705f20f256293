// scripts/recorded-reads.mjs, which lets the type check (scripts/check-exports.mjs) reprint a
// passing result when every read TypeScript made answers the same: a changed, added or removed
// file is a different answer, and a call it cannot record leaves no record at all.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { recordReads, sameReads, type RecordedRead } from '../../scripts/recorded-reads.mjs';

/** The few methods of TypeScript's System a program reads through, on node:fs. */
const fsSystem = {
  readFile: (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : undefined),
  fileExists: (file: string) => existsSync(file),
  readDirectory: (dir: string, extensions: readonly string[]) => readdirSync(dir).filter((f) => extensions.some((e) => f.endsWith(e))).sort(),
  createHash: (text: string) => `${text.length}`,
  watchFile: () => undefined,
};

/** A directory with a.ts and b.ts, and the reads of a "program" over it (JSON round trip, as kept on disk). */
function recorded(): { dir: string; reads: RecordedRead[]; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'recorded-reads-'));
  writeFileSync(join(dir, 'a.ts'), 'export const a = 1;\n');
  writeFileSync(join(dir, 'b.ts'), 'export const b = 2;\n');
  const r = recordReads(fsSystem, (file) => file.endsWith('.tsbuildinfo'));
  for (const f of r.system.readDirectory(dir, ['.ts'])) r.system.readFile(join(dir, f));
  r.system.fileExists(join(dir, 'c.ts'));
  r.system.readFile(join(dir, 'cache.tsbuildinfo'));
  r.system.createHash('x');
  const reads = JSON.parse(JSON.stringify(r.reads())) as RecordedRead[];
  return { dir, reads, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

test('recorded reads: the same files answer the same; the checker\'s own cache and pure methods are not inputs', () => {
  const { dir, reads, cleanup } = recorded();
  try {
    assert.deepEqual(reads.map(([method]) => method), ['readDirectory', 'readFile', 'readFile', 'fileExists']);
    assert.equal(sameReads(fsSystem, reads), true);
    writeFileSync(join(dir, 'cache.tsbuildinfo'), 'changed');
    assert.equal(sameReads(fsSystem, reads), true, 'the build info is skipped');
  } finally {
    cleanup();
  }
});

test('recorded reads: a changed file, an added file and a removed file each answer differently', () => {
  for (const change of [
    (dir: string) => writeFileSync(join(dir, 'a.ts'), 'export const a = 3;\n'),
    (dir: string) => writeFileSync(join(dir, 'c.ts'), 'export const c = 1;\n'),
    (dir: string) => writeFileSync(join(dir, 'd.ts'), ''),
    (dir: string) => rmSync(join(dir, 'b.ts')),
  ]) {
    const { dir, reads, cleanup } = recorded();
    try {
      change(dir);
      assert.equal(sameReads(fsSystem, reads), false, change.toString());
    } finally {
      cleanup();
    }
  }
});

test('recorded reads: a method it does not know spoils the record (the check then runs in full and keeps none)', () => {
  const r = recordReads(fsSystem, () => false);
  r.system.fileExists('/nonexistent');
  assert.equal(r.reads()?.length, 1);
  r.system.watchFile();
  assert.equal(r.reads(), null);
});
