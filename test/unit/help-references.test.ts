// --help points at the documentation by path and heading (`see docs/configuration.md#hosts-file---git-hosts`):
// every such reference must lead to a file of this repository and a heading in it, so that
// --help never sends a reader to a section that was renamed or never existed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { usage } from '../../src/config/cli.ts';
import { markdownAnchors } from '../support/markdown-anchors.ts';

const ROOT = join(__dirname, '..', '..');

test('--help\'s references to the documentation point at files and headings that exist', () => {
  const references = [...usage().matchAll(/\b((?:docs\/[\w-]+|README|SECURITY)\.md)(?:#([\w-]+))?/g)];
  assert.ok(references.length >= 3, `references found: ${references.length}`);
  const broken: string[] = [];
  for (const [text, file, anchor] of references) {
    const path = join(ROOT, file!);
    if (!existsSync(path)) broken.push(`${text}: no such file`);
    else if (anchor !== undefined && !markdownAnchors(readFileSync(path, 'utf8')).has(anchor)) broken.push(`${text}: no such heading`);
  }
  assert.deepEqual(broken, []);
});

test('--help names no section by its title alone (see README, "..."): a reference is a path and a heading', () => {
  assert.doesNotMatch(usage(), /see README\b(?!\.md)|See README\b(?!\.md)|README, "/);
});
