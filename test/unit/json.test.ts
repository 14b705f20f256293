// Strict JSON: duplicate keys are refused (issue 11, item 2).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseStrictJson } from '../../src/json/strict.ts';
import { parseWithPolicy } from '../support/json-reference.ts';
import { fuzzSeed, mulberry32, type Rng } from '../support/prng.ts';

const strict = (text: string) => parseStrictJson(Buffer.from(text));

test('parseStrictJson reads what JSON.parse reads when no key repeats', () => {
  for (const text of ['{}', '[]', '"x"', '42', 'null', ' {"a":1,"b":[1,{"a":2}],"c":{"a":3}} ', '{"a":"}{\\"]["}', '{"a":"\\\\","b":"\\\\\\""}', '{"é":1,"e":2}', '[{"a":1},{"a":2}]']) {
    const r = strict(text);
    assert.equal(r.ok, true, text);
    if (r.ok) assert.deepEqual(r.value, JSON.parse(text), text);
  }
});

/** JSON.parse's own message for a text it refuses. */
function parseError(text: string): string {
  try {
    JSON.parse(text);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`JSON.parse accepted ${text}`);
}

test('parseStrictJson refuses invalid JSON as invalid, with JSON.parse\'s message', () => {
  for (const text of ['', '{', '{"a":1,}', "{'a':1}", '{"a":1}x']) assert.deepEqual(strict(text), { ok: false, reason: 'invalid', message: parseError(text) }, text);
});

test('a duplicate top-level key is refused, naming the key: the allowlist bypass {"model":"secret","model":"allowed"}', () => {
  assert.deepEqual(strict('{"model":"gpt-secret","model":"gpt-test","messages":[]}'), { ok: false, reason: 'duplicate_key', key: 'model' });
  assert.deepEqual(strict('{"stream":false,"messages":[],"stream":true}'), { ok: false, reason: 'duplicate_key', key: 'stream' });
});

test('a duplicate key in any nested object is refused', () => {
  assert.deepEqual(strict('{"messages":[{"role":"user","role":"system","content":"x"}]}'), { ok: false, reason: 'duplicate_key', key: 'role' });
  assert.deepEqual(strict('{"tools":[{"type":"function","x":{"y":{"type":1,"type":2}}}]}'), { ok: false, reason: 'duplicate_key', key: 'type' });
});

test('escaped but equal key names are judged on their decoded value', () => {
  assert.deepEqual(strict('{"model":"a","mod\\u0065l":"b"}'), { ok: false, reason: 'duplicate_key', key: 'model' });
  assert.deepEqual(strict('{"m\\u006fdel":"a","model":"b"}'), { ok: false, reason: 'duplicate_key', key: 'model' });
  assert.deepEqual(strict('{"a\\"b":1,"a\\u0022b":2}'), { ok: false, reason: 'duplicate_key', key: 'a"b' });
  assert.equal(strict('{"a\\"b":1,"ab":2}').ok, true);
  // Text (a configuration file) is judged as its bytes are.
  assert.deepEqual(parseStrictJson('{"model":"a","mod\\u0065l":"b"}'), { ok: false, reason: 'duplicate_key', key: 'model' });
});

test('the same key in sibling objects, or as a value, is no duplicate', () => {
  assert.equal(strict('{"a":{"k":1},"b":{"k":2},"k":"k","c":["k","k"]}').ok, true);
});

test('objects with many keys are checked too (the set path): a late duplicate is found, and a key a many-key object shares with its parent is none', () => {
  const keys = Array.from({ length: 50_000 }, (_, i) => `"key-${i}":${i}`);
  assert.equal(strict(`{${keys.join(',')}}`).ok, true);
  assert.deepEqual(strict(`{${keys.join(',')},"key-49":0}`), { ok: false, reason: 'duplicate_key', key: 'key-49' });
  assert.deepEqual(strict(`{"nested":{${keys.join(',')}},"key-1":1,"x":{"key-1":1,"key-1":2}}`), { ok: false, reason: 'duplicate_key', key: 'key-1' });
});

// ---- property test: first-wins and last-wins parsers agree on whatever is accepted ----

const SEED = fuzzSeed(0x0d0b_1e51);
const BODIES = 2000;

function keyVariant(rng: Rng, key: string): string {
  // The same key spelled differently: plain, one letter \u-escaped, or a different key.
  if (rng.chance(0.3)) {
    const at = rng.int(key.length);
    return `${key.slice(0, at)}\\u${key.charCodeAt(at).toString(16).padStart(4, '0')}${key.slice(at + 1)}`;
  }
  return key;
}

function jsonValue(rng: Rng, depth: number): string {
  const r = rng.next();
  if (depth > 2 || r < 0.4) return rng.pick(['1', 'true', 'null', '"x"', '"a\\"b"', '"}{"', '"\\\\"', '"gpt-test"', '""']);
  if (r < 0.7) return `[${Array.from({ length: rng.int(3) }, () => jsonValue(rng, depth + 1)).join(',')}]`;
  return jsonObject(rng, depth + 1, ['role', 'type', 'content', 'model']);
}

function jsonObject(rng: Rng, depth: number, keys: readonly string[]): string {
  const members: string[] = [];
  for (let n = rng.int(4); n > 0; n--) members.push(`"${keyVariant(rng, rng.pick(keys))}":${jsonValue(rng, depth)}`);
  return `{${members.join(rng.pick([',', ', ', ',\n']))}}`;
}

/** A chat-like body where `model` may appear once, twice, spelled with escapes, or nested. */
function body(rng: Rng): string {
  const members: string[] = [];
  const models = rng.between(1, rng.chance(0.5) ? 1 : 3);
  for (let k = 0; k < models; k++) members.push(`"${keyVariant(rng, 'model')}":"${rng.pick(['gpt-test', 'gpt-secret'])}"`);
  members.push(`"messages":[${Array.from({ length: rng.int(3) }, () => jsonObject(rng, 1, ['role', 'content', 'model'])).join(',')}]`);
  if (rng.chance(0.5)) members.push(`"stream":${rng.pick(['true', 'false'])}`);
  if (rng.chance(0.3)) members.push(`"extra":${jsonValue(rng, 0)}`);
  for (let k = members.length - 1; k > 0; k--) {
    const j = rng.int(k + 1);
    [members[k], members[j]] = [members[j]!, members[k]!];
  }
  return `{${members.join(',')}}`;
}

test(`property: whatever parseStrictJson accepts, first-wins and last-wins parsers read alike (seed ${SEED})`, (t) => {
  const rng = mulberry32(SEED);
  let accepted = 0;
  let refused = 0;
  for (let i = 0; i < BODIES; i++) {
    const text = body(rng);
    let duplicates = 0;
    const first = parseWithPolicy(text, 'first', () => duplicates++);
    const last = parseWithPolicy(text, 'last');
    const r = strict(text);
    assert.equal(r.ok, duplicates === 0, `refused exactly when a key repeats in one object: ${text}`);
    if (r.ok) {
      accepted++;
      assert.deepEqual(first, last, `accepted but read two ways: ${text}`);
      assert.deepEqual(r.value, last, text);
    } else {
      refused++;
      assert.equal(r.reason, 'duplicate_key', text);
    }
  }
  t.diagnostic(`seed ${SEED}: ${accepted} accepted, ${refused} refused`);
  assert.ok(accepted > BODIES * 0.2 && refused > BODIES * 0.2, 'both outcomes must be exercised');
});
