// README.md and SECURITY.md are read in a clone of this repository: every relative link must
// lead to a file in it, and no figure that the build produces may be written into them by hand.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';

const ROOT = join(__dirname, '..', '..');
const DOCS = ['README.md', 'SECURITY.md'];

/** Targets of Markdown links `[text](target)` that are not URLs or in-page anchors. */
function relativeLinks(markdown: string): string[] {
  return [...markdown.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/i.test(t) && !t.startsWith('#'));
}

test('every relative link in README.md and SECURITY.md leads to a file inside the repository', () => {
  const broken: string[] = [];
  let checked = 0;
  for (const doc of DOCS) {
    for (const target of relativeLinks(readFileSync(join(ROOT, doc), 'utf8'))) {
      const file = join(ROOT, dirname(doc), target.split('#')[0]!);
      checked++;
      if (!file.startsWith(`${ROOT}/`) || !existsSync(file)) broken.push(`${doc}: ${target}`);
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(checked >= 2, 'the design document links were found');
});

test('the design documents are carried in docs/ and linked from README.md', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  for (const doc of ['docs/git-auth-proxy.md', 'docs/model-gateway.md']) {
    assert.ok(existsSync(join(ROOT, doc)), `${doc} exists`);
    assert.ok(readme.includes(`](${doc})`), `README links ${doc}`);
  }
});

test('README.md and SECURITY.md state no bundle size or line count by hand (the build prints them)', () => {
  for (const doc of DOCS) {
    const lines = readFileSync(join(ROOT, doc), 'utf8').split('\n');
    const aboutTheBundle = lines.filter((l) => /proxy\.js|unminified|`src\/` in this order/.test(l));
    assert.ok(aboutTheBundle.length >= 2, `${doc} speaks of the bundle`);
    for (const line of aboutTheBundle) assert.doesNotMatch(line, /\d[\d,.]* ?(?:KiB|MiB|kB|lines)\b/, `${doc}: ${line}`);
  }
});
