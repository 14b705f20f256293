// JSON errors in the configuration files (hosts, providers, limits, prices) give line and column
// (src/json/syntax-error.ts), where JSON.parse gives a byte position or quotes the whole text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfigJson } from '../../src/config/config-file.ts';
import { parseHostsFile } from '../../src/git/hosts.ts';
import { parseLimitsFile } from '../../src/limits/policy.ts';
import { jsonSyntaxError } from '../../src/json/syntax-error.ts';

test('jsonSyntaxError: the first error of a document, by line and column, with what is wrong', () => {
  const cases: [string, number, number, RegExp][] = [
    ['{"a": 1,\n  "b": }', 2, 8, /where a value should be/],
    ['{\n"a": 1\n', 3, 1, /"," or "}" expected after a value, not the end of the file/],
    ['{"a":1}x', 1, 8, /more text after the JSON value/],
    ['', 1, 1, /the file is empty/],
    ['  \n', 2, 1, /the file is empty/],
    ['{"a": tru}', 1, 7, /unexpected "t" where a value should be/],
    ['[1,2,\n\n   3,]', 3, 6, /a comma before "\]"/],
    ['{"hosts": [],}', 1, 14, /a comma before "}"/],
    ["{'a': 1}", 1, 2, /a key in double quotes expected/],
    ['{"a" 1}', 1, 6, /":" expected after the key/],
    ['{"a": "x\ny"}', 1, 9, /a control character inside a string/],
    ['{"a": "\\q"}', 1, 8, /"q" cannot follow a backslash/],
    ['{"a": "\\u12"}', 1, 8, /four hex digits/],
        ['{\n  "a": "never closed', 2, 8, /a string that is never closed/],
    ['{\n  "a": "line\nbreak"}', 2, 13, /a control character inside a string/],
    ['{"a": -}', 1, 7, /unexpected "-"/],
    ['{"a": 01}', 1, 8, /"," or "}" expected/],
  ];
  for (const [text, line, column, problem] of cases) {
    const found = jsonSyntaxError(text);
    assert.ok(found, JSON.stringify(text));
    assert.deepEqual([found.line, found.column], [line, column], JSON.stringify(text));
    assert.match(found.problem, problem, JSON.stringify(text));
    assert.throws(() => JSON.parse(text), SyntaxError, `JSON.parse agrees: ${JSON.stringify(text)}`);
  }
});

test('jsonSyntaxError: valid JSON has none (JSON.parse agrees)', () => {
  for (const text of ['{}', '[]', ' {"a": [1, -2.5e+3, true, false, null, "\\u00e9\\n", {"b": {}}]}\n', '"x"', '0', '{"a":"é ✓"}']) {
    assert.equal(jsonSyntaxError(text), undefined, text);
    JSON.parse(text);
  }
});

test('JSON errors give line and column: the hosts file, the limits file and every config file', () => {
  assert.throws(() => parseHostsFile('{"hosts": [\n  {"host": "github.com", "auth": "bearer",}\n]}', 'hosts.json'), /^Error: hosts\.json: \(file\): not valid JSON \(line 2, column 43: a comma before "}" \(JSON allows no trailing comma\)\)$/);
  assert.throws(() => parseLimitsFile('{\n  "perRun": {"budgetUsd": 5}\n  "perInstance": {}\n}', 'limits.json'), /^Error: limits\.json: \(file\): not valid JSON \(line 3, column 3: "," or "}" expected after a value, not "\\""\)$/);
  assert.throws(() => parseConfigJson('{"providers": [}', 'providers.json'), /^Error: providers\.json: \(file\): not valid JSON \(line 1, column 16: /);
});
