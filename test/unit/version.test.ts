import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { VERSION } from '../../src/config/version.ts';

test('VERSION equals the version in package.json', () => {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string };
  assert.equal(typeof pkg.version, 'string');
  assert.equal(VERSION, pkg.version);
});

test('VERSION is a semantic version', () => {
  assert.match(VERSION, /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/);
});
