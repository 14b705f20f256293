// docs/configuration.md is the configuration reference: it must name every flag (with the default
// --help prints), every environment variable the code reads, and every field the config-file
// parsers accept. Add a flag, a variable or a field without documenting it and this fails.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { usage } from '../../src/config/cli.ts';
import { CREDENTIAL_FIELDS, PROVIDER_FIELDS } from '../../src/gateway/config.ts';
import { PRICE_FIELDS } from '../../src/limits/prices.ts';
import { LIMITS_FIELDS } from '../../src/limits/policy.ts';
import { HOST_FIELDS } from '../../src/git/hosts.ts';

const ROOT = join(__dirname, '..', '..');
const page = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');

/** The text of the section under `heading` (to the next heading of the same or a higher level). */
function section(heading: string): string {
  const start = page.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `docs/configuration.md has the section ${heading}`);
  const level = heading.indexOf(' ');
  const rest = page.slice(start + heading.length + 2);
  const next = rest.search(new RegExp(`\\n#{1,${level}} `));
  return next < 0 ? rest : rest.slice(0, next);
}

test('docs/configuration.md has a row for every flag --help prints, with the default --help prints', () => {
  const flags = [...usage().matchAll(/^ {2}--([a-z-]+)\s.*?(?:\(default ([^)]*)\))?$/gm)].map((m) => ({ name: m[1]!, dflt: m[2] }));
  assert.ok(flags.length >= 30, `flags parsed from --help: ${flags.length}`);
  const problems: string[] = [];
  for (const { name, dflt } of flags) {
    const row = page.split('\n').find((l) => l.startsWith(`| \`--${name}`) && (l[3 + name.length + 2] === ' ' || l[3 + name.length + 2] === '`'));
    if (row === undefined) problems.push(`--${name}: no row`);
    else if (dflt !== undefined && !row.split('|')[2]!.includes(`\`${dflt}\``)) problems.push(`--${name}: default ${dflt} not in its row`);
  }
  assert.deepEqual(problems, []);
});

test('docs/configuration.md names every environment variable src/ reads', () => {
  const read = new Set<string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else for (const m of readFileSync(path, 'utf8').matchAll(/\benv\.([A-Z][A-Z0-9_]+)|\benv\[['"]([A-Z][A-Z0-9_]+)['"]\]/g)) read.add(m[1] ?? m[2]!);
    }
  };
  walk(join(ROOT, 'src'));
  assert.ok(read.size >= 10, [...read].join(' '));
  assert.deepEqual([...read].filter((name) => !page.includes(`\`${name}\``)), []);
});

test('docs/configuration.md lists every field the hosts file, providers file and price table parsers accept', () => {
  const sections: [string, ReadonlySet<string>][] = [
    ['### Hosts file (`--git-hosts`)', HOST_FIELDS],
    ['### Providers file (`--providers`)', PROVIDER_FIELDS],
    ['### Price table (`MODEL_PRICES_FILE`)', PRICE_FIELDS],
    ['### Limits file (`--limits`)', new Set(Object.entries(LIMITS_FIELDS).flatMap(([section, fields]) => [...fields].map((f) => (section === '(file)' ? f : `${section}.${f}`))).filter((f) => f.includes('.')))],
    ['#### `credential` (providers file)', new Set([...Object.keys(CREDENTIAL_FIELDS), ...Object.values(CREDENTIAL_FIELDS).flatMap((f) => [...f])])],
  ];
  const missing: string[] = [];
  for (const [heading, fields] of sections) {
    const text = section(heading);
    for (const field of fields) if (!text.includes(`\`${field}\``)) missing.push(`${heading}: ${field}`);
  }
  assert.deepEqual(missing, []);
});
