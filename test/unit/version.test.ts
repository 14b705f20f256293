import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NODE_LINES } from '../../scripts/node-releases.ts';
import { VERSION } from '../../src/config/version.ts';

test('VERSION equals the version in package.json', () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string };
  assert.equal(typeof pkg.version, 'string');
  assert.equal(VERSION, pkg.version);
});

test('VERSION is a semantic version', () => {
  assert.match(VERSION, /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/);
});

test('package.json engines names exactly the Node lines npm run test:node-lines runs the bundle on, and not Node 20 (end of life since April 2026)', () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { engines: { node: string } };
  const lines = pkg.engines.node.split('||').map((range) => /^\^(\d+)$/.exec(range.trim())?.[1]);
  assert.ok(lines.every((l) => l !== undefined), `each range of "${pkg.engines.node}" is one major line, ^N`);
  assert.deepEqual(lines.map(Number), NODE_LINES.map((p) => p.line));
  assert.ok(!lines.includes('20'));
});
