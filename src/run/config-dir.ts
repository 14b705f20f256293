// agent-config --agent opencode --config-dir DIR: the one command that writes files, in a file of
// its own so that the rest of the commands holds no capability module (scripts/kernel.json). DIR's
// package files are read (what is there is kept), then its files written (node:fs).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';

/** Whether `dir`, resolved against the working directory, is named `name`. */
export function dirNamed(dir: string, name: string): boolean {
  return basename(resolve(dir)) === name;
}

/**
 * Writes into `dir` the files `make` returns (and creates dir/node_modules), given those of `kept`
 * that are there already, by name; returns `make`'s text. A failure to write names --config-dir.
 */
export function writeConfigDir(dir: string, kept: readonly string[], make: (existing: Record<string, string>) => { readonly files: Readonly<Record<string, string>>; readonly text: string }): string {
  const existing = Object.fromEntries(kept.filter((f) => existsSync(join(dir, f))).map((f) => [f, readFileSync(join(dir, f), 'utf8')]));
  const { files, text } = make(existing);
  try {
    mkdirSync(join(dir, 'node_modules'), { recursive: true });
    for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  } catch (err) {
    throw new Error(`--config-dir: ${(err as Error).message}`);
  }
  return text;
}
