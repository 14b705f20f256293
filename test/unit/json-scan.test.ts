// The strict scanner's named parts (src/json/scan.ts), one property each: where a string ends,
// what a key needs before it is compared, how two keys compare in place, the keys of the open
// objects (pairwise up to 32, then one Map) and the limits on size and depth. The whole scan is
// tested through parseStrictJson in json.test.ts and json-case.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { policyKeySet } from '../../src/json/keys.ts';
import { KeyStack, keyForm, keysMatch, policyVariant, ShapeBudget, stringEnd } from '../../src/json/scan.ts';
import { fuzzSeed, mulberry32 } from '../support/prng.ts';

const SEED = fuzzSeed(0x5ca4_0e1d);

/** Keys laid out one after the other in one text, with each key's [start, end). */
function layout(keys: readonly string[]): { text: string; spans: [number, number][] } {
  let text = '';
  const spans: [number, number][] = [];
  for (const key of keys) {
    spans.push([text.length, text.length + key.length]);
    text += key;
  }
  return { text, spans };
}

test('stringEnd: a quote after an odd run of backslashes is content; after an even run it ends the string', () => {
  // [the text from its opening quote, where the closing quote is]
  const cases: [string, number][] = [
    ['"abc"', 4],
    ['"a\\"b"', 5], // \" : content
    ['"a\\\\"b"', 4], // \\ then the quote: the end
    ['"a\\\\\\"b"', 7], // \\\" : content
    ['"\\\\\\\\"', 5], // four backslashes, then the end
    ['"\\""', 3],
    ['""', 1],
  ];
  for (const [text, end] of cases) assert.equal(stringEnd(text, 1), end, text);
});

test('stringEnd: an unterminated string is -1, the last quote escaped or missing', () => {
  for (const text of ['"abc', '"a\\"', '"\\\\\\"', '"']) assert.equal(stringEnd(text, 1), -1, text);
});

test(`stringEnd: fuzzed, it finds the closing quote JSON.stringify wrote, whatever runs of backslashes and quotes the string holds (seed ${SEED})`, () => {
  const rng = mulberry32(SEED);
  for (let i = 0; i < 5000; i++) {
    const value = Array.from({ length: rng.int(12) }, () => rng.pick(['\\', '"', 'a', '\\\\', '\n'])).join('');
    const written = JSON.stringify(value);
    const text = `${written}:"${rng.pick(['', 'x', '\\\\', '\\"'])}"`;
    assert.equal(stringEnd(text, 1), written.length - 1, text);
  }
});

test('keyForm: an escape or a non-ASCII character needs decoding, whatever else the key holds; ASCII capitals need a fold', () => {
  const form = (key: string) => keyForm(key, 0, key.length);
  assert.equal(form('model'), 'as-is');
  assert.equal(form('max_tokens-2'), 'as-is');
  assert.equal(form(''), 'as-is');
  assert.equal(form('Model'), 'has-capitals');
  assert.equal(form('MODEL'), 'has-capitals');
  assert.equal(form('mod\\u0065l'), 'needs-decoding');
  assert.equal(form('Mod\\u0065l'), 'needs-decoding');
  assert.equal(form('ſtream'), 'needs-decoding');
  assert.equal(form('Éa'), 'needs-decoding');
});

test('policyVariant: a key with capitals that folds to a policy key is named with it; other keys are none', () => {
  const policy = policyKeySet(['model', 'tools']);
  const variant = (key: string) => policyVariant(policy, key, 0, key.length);
  assert.deepEqual(variant('Tools'), { ok: false, reason: 'policy_key_variant', key: 'Tools', policyKey: 'tools' });
  assert.deepEqual(variant('MODEL'), { ok: false, reason: 'policy_key_variant', key: 'MODEL', policyKey: 'model' });
  assert.equal(variant('Stream'), undefined);
  assert.equal(variant('Toolz'), undefined);
});

test('keysMatch: equal characters are exact, letters equal but for case a case variant; only letters fold ("[" and "{", "@" and "`" differ by the case bit alone)', () => {
  const match = (a: string, b: string, inMap = false) => {
    const { text, spans } = layout([a, b]);
    return keysMatch(text, spans[0]![0], spans[1]![0], a.length, inMap);
  };
  assert.equal(match('model', 'model'), 'exact');
  assert.equal(match('model', 'MODEL'), 'case');
  assert.equal(match('max_Tokens', 'MAX_tokens'), 'case');
  assert.equal(match('model', 'mode1'), undefined);
  assert.equal(match('a[', 'a{'), undefined);
  assert.equal(match('@x', '`x'), undefined);
  assert.equal(match('a^', 'a~'), undefined);
});

test('keysMatch: within a map only exact equality counts', () => {
  const { text, spans } = layout(['Model', 'model', 'model']);
  assert.equal(keysMatch(text, spans[0]![0], spans[1]![0], 5, true), undefined);
  assert.equal(keysMatch(text, spans[1]![0], spans[2]![0], 5, true), 'exact');
});

test('KeyStack: within a map only exact equality counts', () => {
  const { text, spans } = layout(['Model', 'model', 'MODEL', 'model']);
  const map = new KeyStack(text);
  map.openObject(true);
  assert.equal(map.add(...spans[0]!), undefined);
  assert.equal(map.add(...spans[1]!), undefined);
  assert.equal(map.add(...spans[2]!), undefined);
  assert.deepEqual(map.add(...spans[3]!), { ok: false, reason: 'duplicate_key', key: 'model' });
  const object = new KeyStack(text);
  object.openObject(false);
  assert.equal(object.add(...spans[0]!), undefined);
  assert.deepEqual(object.add(...spans[1]!), { ok: false, reason: 'case_variant_key', key: 'model', other: 'Model' });
});

test('KeyStack: past 32 keys the Map decides: a late duplicate of the first key and a case variant are found, and in a map a case variant is none', () => {
  const many = Array.from({ length: 40 }, (_, i) => `k${i}`);
  const { text, spans } = layout([...many, 'k0', 'K1', 'k1']);
  const objectStack = new KeyStack(text);
  objectStack.openObject(false);
  for (let i = 0; i < 40; i++) assert.equal(objectStack.add(...spans[i]!), undefined, many[i]);
  assert.deepEqual(objectStack.add(...spans[40]!), { ok: false, reason: 'duplicate_key', key: 'k0' });
  assert.deepEqual(objectStack.add(...spans[41]!), { ok: false, reason: 'case_variant_key', key: 'K1', other: 'k1' });
  const mapStack = new KeyStack(text);
  mapStack.openObject(true);
  for (let i = 0; i < 40; i++) mapStack.add(...spans[i]!);
  assert.equal(mapStack.add(...spans[41]!), undefined);
  assert.deepEqual(mapStack.add(...spans[42]!), { ok: false, reason: 'duplicate_key', key: 'k1' });
});

test(`KeyStack: below and past 32 keys, the first problem is the one a plain comparison with every earlier key finds (seed ${SEED})`, () => {
  const rng = mulberry32(SEED);
  for (let round = 0; round < 400; round++) {
    const inMap = rng.chance(0.3);
    const keys = Array.from({ length: rng.between(1, 80) }, () => `${rng.pick(['k', 'K', 'key', 'KEY', 'x'])}${rng.int(60)}`);
    const { text, spans } = layout(keys);
    const stack = new KeyStack(text);
    stack.openObject(inMap);
    let found: unknown;
    let expected: unknown;
    for (let i = 0; i < keys.length && found === undefined && expected === undefined; i++) {
      const key = keys[i]!;
      const other = keys.slice(0, i).find((k) => (inMap ? k === key : k.toUpperCase() === key.toUpperCase()));
      if (other !== undefined) expected = other === key ? { ok: false, reason: 'duplicate_key', key } : { ok: false, reason: 'case_variant_key', key, other };
      found = stack.add(...spans[i]!);
    }
    assert.deepEqual(found, expected, `${inMap ? 'map ' : ''}${keys.join(',')}`);
  }
});

test('KeyStack: a key is compared with its own object\'s keys only: an enclosing object\'s are not, a closed object\'s are forgotten', () => {
  const { text, spans } = layout(['a', 'a', 'a', 'a']);
  const stack = new KeyStack(text);
  stack.openObject(false);
  assert.equal(stack.add(...spans[0]!), undefined);
  stack.openObject(false);
  assert.equal(stack.add(...spans[1]!), undefined, 'a child object is not compared with its parent');
  stack.close();
  stack.openArray();
  stack.openObject(false);
  assert.equal(stack.add(...spans[2]!), undefined, 'nor an object in an array');
  stack.close();
  assert.equal(stack.inObject(), false);
  stack.close();
  assert.equal(stack.inObject(), true);
  assert.deepEqual(stack.add(...spans[3]!), { ok: false, reason: 'duplicate_key', key: 'a' }, 'back in the parent, its own keys count');
  stack.close();
  stack.close(); // nothing open: no-op
  assert.equal(stack.depth, 0);
});

test('KeyStack: a closed object\'s Map goes with it: a sibling past 32 keys is compared with its own keys only', () => {
  const first = Array.from({ length: 40 }, (_, i) => `k${i}`);
  const second = Array.from({ length: 40 }, (_, i) => `k${i + 40}`);
  const { text, spans } = layout([...first, ...second, 'k5', 'k41']);
  const stack = new KeyStack(text);
  stack.openArray();
  stack.openObject(false);
  for (let i = 0; i < 40; i++) stack.add(...spans[i]!);
  stack.close();
  stack.openObject(false);
  for (let i = 40; i < 80; i++) assert.equal(stack.add(...spans[i]!), undefined, text.slice(...spans[i]!));
  assert.equal(stack.add(...spans[80]!), undefined, 'k5 was a key of the closed object, not of this one');
  assert.deepEqual(stack.add(...spans[81]!), { ok: false, reason: 'duplicate_key', key: 'k41' }, 'k41 is one of this object\'s first 32 keys');
});

test('ShapeBudget: the node past maxNodes is refused, naming the limit; at the limit it passes', () => {
  const budget = new ShapeBudget({ maxDepth: 64, maxNodes: 3 });
  assert.equal(budget.node(), undefined);
  assert.equal(budget.node(), undefined);
  assert.equal(budget.open(0), undefined);
  assert.deepEqual(budget.node(), { ok: false, reason: 'too_many_nodes', limit: 3 });
});

test('ShapeBudget: a container opening with maxDepth containers open is too deep, naming the limit; the node is counted first', () => {
  const budget = new ShapeBudget({ maxDepth: 2, maxNodes: 10 });
  assert.equal(budget.open(0), undefined);
  assert.equal(budget.open(1), undefined);
  assert.deepEqual(budget.open(2), { ok: false, reason: 'too_deep', limit: 2 });
  const full = new ShapeBudget({ maxDepth: 2, maxNodes: 1 });
  assert.equal(full.node(), undefined);
  assert.deepEqual(full.open(2), { ok: false, reason: 'too_many_nodes', limit: 1 }, 'both breached: the node count is named');
});

test('ShapeBudget: without limits nothing is refused', () => {
  const budget = new ShapeBudget(undefined);
  for (let i = 0; i < 100_000; i++) assert.equal(budget.node(), undefined);
  assert.equal(budget.open(1_000_000), undefined);
});
