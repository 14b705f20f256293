// Directories the tests need many times over and whose content is fixed by a recipe, made once a
// day per checkout instead of once per use: the PKIs (made with the openssl CLI: about 60 files
// made their own, three openssl runs each, the mutual-TLS one twenty-two) and the seeded bare
// repository of the git fixture (seven git commands each). Each call still gets its own
// directory, a copy of the cached files, so a test may write next to them, push into them or
// remove them as before, and nothing it does reaches the cache or another test.
//
// The cache is node_modules/.cache/test-pki/<name>-<recipe hash>-<UTC date>: a changed recipe
// (the commands and the code that runs them) makes a new one, and the date keeps every
// certificate (valid one day from when it was made) inside its validity when used. Test files
// run in parallel: the first to need a directory makes it in one of its own and renames it into
// place; a process that loses that race removes its copy and uses the winner's.
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CACHE = join(__dirname, '..', '..', 'node_modules', '.cache', 'test-pki');

/**
 * A new directory holding the files `make` writes into an empty directory: `into` (made if
 * missing), else a new temporary one. `make` runs at most once a day for a given `name` and
 * `recipe` (everything its output depends on).
 */
export function cachedDir(name: string, recipe: string, make: (dir: string) => void, into?: string): string {
  const key = `${name}-${createHash('sha256').update(recipe).update(make.toString()).digest('hex').slice(0, 12)}-${new Date().toISOString().slice(0, 10)}`;
  const cached = join(CACHE, key);
  if (!existsSync(cached)) {
    mkdirSync(CACHE, { recursive: true });
    const making = mkdtempSync(join(CACHE, `.making-${name}-`));
    try {
      make(making);
      renameSync(making, cached);
      // Older days and recipes of this PKI are of no further use.
      for (const old of readdirSync(CACHE)) if (old.startsWith(`${name}-`) && old !== key) rmSync(join(CACHE, old), { recursive: true, force: true });
    } catch (err) {
      rmSync(making, { recursive: true, force: true });
      if (!existsSync(cached)) throw err; // not a lost race: openssl failed
    }
  }
  const dir = into ?? mkdtempSync(join(tmpdir(), `test-${name}-`));
  cpSync(cached, dir, { recursive: true });
  return dir;
}
