// What `node build.mjs` reads, copied apart from the checkout: for the tests that build (or
// release) a copy of it, so that one list says what a build is made of.
import { cpSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './proxy-process.ts';

const FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'build.mjs'];
const SCRIPTS = ['build-bundle.mjs', 'bundle-policy.mjs', 'bundle-report.mjs', 'audit-bundle.mjs', 'audit-rules.mjs', 'audit-source.mjs', 'kernel.json', 'size-budget.json', 'name-clashes.json'];

/** src/, the build's files and scripts (and `extra` files of the checkout, by path) at `at`, with node_modules linked in. */
export function copyBuildInputs(at: string, extra: readonly string[] = []): string {
  mkdirSync(join(at, 'scripts'), { recursive: true });
  cpSync(join(ROOT, 'src'), join(at, 'src'), { recursive: true });
  for (const file of [...FILES, ...SCRIPTS.map((s) => join('scripts', s)), ...extra]) cpSync(join(ROOT, file), join(at, file));
  symlinkSync(join(ROOT, 'node_modules'), join(at, 'node_modules'), 'dir');
  return at;
}
