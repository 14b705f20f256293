// README.md, SECURITY.md, CHANGELOG.md and docs/ are read in a clone of this repository: every
// relative link must lead to a file in it (and an in-page anchor to a heading there), and no
// figure that the build produces may be written into them by hand.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { markdownAnchors } from '../support/markdown-anchors.ts';

const ROOT = join(__dirname, '..', '..');
const DOCS = ['README.md', 'SECURITY.md', 'CHANGELOG.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

test('every relative link in README.md, SECURITY.md, CHANGELOG.md and docs/ leads to a file inside the repository, and every anchor to a heading', () => {
  const broken: string[] = [];
  let checked = 0;
  for (const doc of DOCS) {
    const text = readFileSync(join(ROOT, doc), 'utf8');
    for (const target of [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/i.test(t))) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? join(ROOT, doc) : join(ROOT, dirname(doc), path);
      checked++;
      if (!file.startsWith(`${ROOT}/`) || !existsSync(file)) broken.push(`${doc}: ${target}`);
      else if (anchor !== undefined && file.endsWith('.md') && !markdownAnchors(readFileSync(file, 'utf8')).has(anchor)) broken.push(`${doc}: ${target} (no such heading)`);
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(checked >= 20, `links checked: ${checked}`);
});

test('every docs/ page is reachable from the README, and none is a copy of an input design document', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  for (const doc of DOCS.filter((d) => d.startsWith('docs/'))) {
    assert.ok(readme.includes(`](${doc})`), `README links ${doc}`);
    assert.doesNotMatch(readFileSync(join(ROOT, doc), 'utf8'), /^Status: proposed|not shown/m, doc);
  }
});

test('README.md, SECURITY.md, CHANGELOG.md and docs/ state no bundle size or line count by hand (the build prints them)', () => {
  for (const doc of DOCS) {
    const lines = readFileSync(join(ROOT, doc), 'utf8').split('\n');
    const aboutTheBundle = lines.filter((l) => /proxy\.js|unminified|`src\/` in this order/.test(l));
    if (!doc.startsWith('docs/')) assert.ok(aboutTheBundle.length >= 2, `${doc} speaks of the bundle`);
    for (const line of aboutTheBundle) assert.doesNotMatch(line, /\d[\d,.]* ?(?:KiB|MiB|kB|lines)\b/, `${doc}: ${line}`);
  }
});
