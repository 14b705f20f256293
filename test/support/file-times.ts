// A file rewritten in place with its times put back, as cp -p or a restore leaves it: the same
// inode, size and modification time, only the kernel's change time moved. For the tests of the
// readers that read a file again only when it changed.
import assert from 'node:assert/strict';
import { statSync, utimesSync, writeFileSync } from 'node:fs';

/**
 * Rewrites `file` (whose times are `times`, whole seconds, which utimes sets exactly) with `text`, of
 * the same length, and sets its times back to `times`; again until the kernel's clock has moved
 * past the last change time (it ticks every few milliseconds).
 */
export function rewriteKeepingTimes(file: string, text: string, times: number | Date): void {
  const before = statSync(file);
  do {
    writeFileSync(file, text);
    utimesSync(file, times, times);
  } while (statSync(file).ctimeMs === before.ctimeMs);
  const after = statSync(file);
  assert.deepEqual([after.ino, after.size, after.mtimeMs], [before.ino, before.size, before.mtimeMs], 'inode, size and modification time as before');
}
