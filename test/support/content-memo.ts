// Answers of a pure function of a file's text, kept between test runs under the SHA-256 of the
// text and of everything else the answer depends on (`salt`: the function's own source, the
// version of the library it calls, its limits). A text whose digest is known is not computed
// again, as tsc --incremental keeps a file's diagnostics while the file is unchanged; any
// change to the text or the salt computes it afresh. What is kept is the answer, never a
// verdict: the test still asserts on every answer, cached or not.
//
// The memo is node_modules/.cache/test-memo/<name>.json; save() writes the answers this run
// used (so a removed file's drop out), aside and renamed, as test files run in parallel.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const DIR = join(__dirname, '..', '..', 'node_modules', '.cache', 'test-memo');

export interface ContentMemo<T> {
  /** compute()'s answer for `input` (all it reads: a file's name and text): the kept one when this input (and salt) had one. */
  answer(input: string, compute: () => T): T;
  /** Keeps this run's answers for the next run. */
  save(): void;
}

export function contentMemo<T>(name: string, salt: string): ContentMemo<T> {
  const file = join(DIR, `${name}.json`);
  let kept: Record<string, T> = {};
  try {
    kept = JSON.parse(readFileSync(file, 'utf8')) as Record<string, T>;
  } catch {
    // none yet, or unreadable: every answer is computed
  }
  const used: Record<string, T> = {};
  return {
    answer(input, compute) {
      const key = createHash('sha256').update(salt).update('\0').update(input).digest('hex');
      used[key] = Object.hasOwn(kept, key) ? kept[key]! : compute();
      return used[key]!;
    },
    save() {
      mkdirSync(DIR, { recursive: true });
      const aside = `${file}.${process.pid}`;
      writeFileSync(aside, JSON.stringify(used));
      renameSync(aside, file);
    },
  };
}
