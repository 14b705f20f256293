// docs/security-rules.md gives each security rule in full with every function that enforces it
// and every test that proves it; SECURITY.md points to it and lists the credential kernel a
// reviewer reads. This keeps both honest: every cited function is defined in the file named,
// every cited test exists, with that exact name, in the file named, the rules are numbered 1 to N
// as SECURITY.md counts them, and SECURITY.md's kernel is scripts/kernel.json's, with its lines.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

const ROOT = join(__dirname, '..', '..');
const short = readFileSync(join(ROOT, 'SECURITY.md'), 'utf8');
const full = readFileSync(join(ROOT, 'docs', 'security-rules.md'), 'utf8');
const doc = `${short}\n${full}`;
const rowsOf = (text: string) => text.split('\n').filter((line) => /^\| \d+ \|/.test(line));
const ruleRows = rowsOf(doc);

test('docs/security-rules.md numbers its rules 1 to N, as many as SECURITY.md says it holds', () => {
  const numbers = rowsOf(full).map((row) => Number(/^\| (\d+) \|/.exec(row)![1]));
  assert.deepEqual(numbers, Array.from({ length: numbers.length }, (_, i) => i + 1));
  assert.match(short, new RegExp(`\\]\\(docs/security-rules\\.md\\) holds every rule \\(${numbers.length} of them\\)`));
});

test('SECURITY.md lists the credential kernel scripts/kernel.json declares, no file more or less, each with its lines to within a tenth', () => {
  const kernel = Object.keys((JSON.parse(readFileSync(join(ROOT, 'scripts', 'kernel.json'), 'utf8')) as { kernel: Record<string, string> }).kernel);
  const review = short.slice(short.indexOf('## How to review'));
  const listed = new Map<string, number>();
  // `gateway/credentials/source.ts` (42), then `table.ts` (46): a bare name is in the folder before it.
  let folder = '';
  for (const [, name, lines] of review.matchAll(/`([\w./-]+\.ts)`\s+\((\d+)\)/g)) {
    if (name!.includes('/')) folder = name!.slice(0, name!.lastIndexOf('/'));
    listed.set(`src/${name!.includes('/') || folder === '' ? name : `${folder}/${name}`}`, Number(lines));
  }
  assert.deepEqual([...listed.keys()].sort(), [...kernel].sort(), 'the files SECURITY.md lists are the kernel');
  for (const [file, stated] of listed) {
    const actual = readFileSync(join(ROOT, file), 'utf8').split('\n').length - 1;
    assert.ok(Math.abs(actual - stated) <= Math.max(5, actual / 10), `${file}: SECURITY.md says ${stated} lines, it has ${actual}`);
  }
});

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The names of the tests in a file; a template name matches any text where it interpolates. */
function testNameMatchers(file: string): RegExp[] {
  const source = readFileSync(join(ROOT, file), 'utf8');
  const matchers: RegExp[] = [];
  for (const m of source.matchAll(/\btest\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|`((?:[^`\\]|\\.)*)`)/g)) {
    if (m[3] !== undefined) {
      matchers.push(new RegExp(`^${m[3].split(/\$\{[^}]*\}/).map(escapeRegExp).join('.+')}$`));
    } else {
      const name = (m[1] ?? m[2]!).replace(/\\(.)/g, '$1');
      matchers.push(new RegExp(`^${escapeRegExp(name)}$`));
    }
  }
  return matchers;
}

test('SECURITY.md has a rule table that cites a function and a test in every row', () => {
  assert.ok(ruleRows.length >= 20, `only ${ruleRows.length} rule rows found`);
  for (const row of ruleRows) {
    assert.match(row, /`(?:src|scripts)\/[\w./-]+:\w+`/, `no enforcing function in: ${row.slice(0, 80)}`);
    assert.match(row, /`test\/[\w/.-]+\.test\.ts`: «[^»]+»/, `no test in: ${row.slice(0, 80)}`);
  }
});

test('every function SECURITY.md cites is defined in the file it names', () => {
  const missing: string[] = [];
  for (const [, file, name] of doc.matchAll(/`((?:src|scripts)\/[\w./-]+\.(?:ts|mjs)):(\w+)`/g)) {
    const source = readFileSync(join(ROOT, file!), 'utf8');
    if (!new RegExp(`(?:function|class|const|let)\\s+${name}\\b`).test(source)) missing.push(`${file}:${name}`);
  }
  assert.deepEqual(missing, []);
});

test('every test SECURITY.md cites exists, with that exact name, in the file it names', () => {
  const cited = [...doc.matchAll(/`(test\/[\w/.-]+\.test\.ts)`: «([^»]+)»/g)];
  assert.ok(cited.length >= 50, `only ${cited.length} tests cited`);
  const missing: string[] = [];
  const matchersByFile = new Map<string, RegExp[]>();
  for (const [, file, name] of cited) {
    if (!matchersByFile.has(file!)) matchersByFile.set(file!, testNameMatchers(file!));
    if (!matchersByFile.get(file!)!.some((m) => m.test(name!))) missing.push(`${file}: ${name}`);
  }
  assert.deepEqual(missing, []);
});
