// Keys that differ only in case, and the cost of a body before it is parsed. A case-insensitive
// upstream (Go's encoding/json, ASP.NET) reads `MODEL` as `model`, `Tools` as `tools`, and the
// last of two such keys wins: the gateway must never check one value while the upstream reads
// another. And a body's depth and size are bounded before JSON.parse runs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { foldKey, policyKeySet } from '../../src/json/keys.ts';
import { parseStrictJson } from '../../src/json/strict.ts';
import { PROTOCOLS } from '../../src/gateway/protocols/table.ts';
import { BODY_LIMITS, checkRequestBody, POLICY_KEYS } from '../../src/gateway/check-call.ts';
import { goFieldValue, goFold } from '../support/go-json-fields.ts';
import { fuzzSeed, mulberry32, type Rng } from '../support/prng.ts';

const chat = PROTOCOLS.find((p) => p.api === 'chat_completions')!;
const responses = PROTOCOLS.find((p) => p.api === 'responses')!;
const messages = PROTOCOLS.find((p) => p.api === 'messages')!;
const policy = { allowedModels: new Set(['gpt-ok', 'claude-ok']), hostedTools: new Set<string>() };

function refusal(body: string, protocol = chat): { code: string; message: string | undefined } {
  const r = checkRequestBody(Buffer.from(body), protocol, policy);
  assert.equal(r.ok, false, `refused: ${body}`);
  return { code: r.ok ? '' : r.error.code, message: r.ok ? undefined : r.message };
}

test('case-folded keys: {"model":"gpt-ok","MODEL":"gpt-secret"} is refused (400 case_variant_key), naming both keys', () => {
  const r = refusal('{"model":"gpt-ok","MODEL":"gpt-secret","messages":[]}');
  assert.equal(r.code, 'case_variant_key');
  assert.match(r.message ?? '', /"MODEL", which case-insensitive readers take for "model"/);
  // Two spellings of a key no policy reads: refused all the same, naming both.
  const twins = refusal('{"model":"gpt-ok","messages":[],"user_tag":"a","USER_TAG":"b"}');
  assert.equal(twins.code, 'case_variant_key');
  assert.match(twins.message ?? '', /"user_tag" and "USER_TAG"/);
});

test('case-folded keys: {"Tools":[{"type":"web_search"}]} on the Responses route is refused, naming the key and its spelling', () => {
  const r = refusal('{"model":"gpt-ok","input":"x","Tools":[{"type":"web_search"}]}', responses);
  assert.equal(r.code, 'case_variant_key');
  assert.match(r.message ?? '', /"Tools", which case-insensitive readers take for "tools"/);
});

test('case-folded keys: {"Previous_Response_Id":"resp_1"} on the Responses route is refused', () => {
  assert.equal(refusal('{"model":"gpt-ok","input":"x","Previous_Response_Id":"resp_1"}', responses).code, 'case_variant_key');
});

test('case-folded keys: Go\'s Unicode folds count: "ſtream" and "s\\u212Aills" are read as stream and skills', () => {
  assert.equal(refusal('{"model":"gpt-ok","messages":[],"ſtream":true}').code, 'case_variant_key');
  assert.equal(refusal('{"model":"gpt-ok","messages":[],"\\u017ftream":true}').code, 'case_variant_key', 'escaped too');
  assert.equal(refusal('{"model":"claude-ok","max_tokens":1,"messages":[],"s\\u212aills":[]}', messages).code, 'case_variant_key');
  assert.equal(refusal('{"m\\u006fdel":"gpt-ok","MODEL":"gpt-secret","messages":[]}').code, 'case_variant_key', 'escaped key, then a variant');
  assert.equal(refusal('{"model":"claude-ok","max_tokens":1,"messages":[{"role":"user","content":[{"TYPE":"document","type":"text","text":"x"}]}]}', messages).code, 'case_variant_key', 'nested too');
  // A key that is no policy key and has no twin: an upstream field we do not decide on.
  assert.equal(checkRequestBody(Buffer.from('{"model":"gpt-ok","messages":[],"X_Custom":1}'), chat, policy).ok, true);
});

test('case-folded keys: the keys of maps the client names (JSON Schema properties, metadata) may differ only in case and be called Model', () => {
  const tool = { type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { Model: { type: 'string' }, model: { type: 'string' }, Type: { type: 'string' } } } } };
  const body = JSON.stringify({ model: 'gpt-ok', messages: [], tools: [tool], metadata: { Store: 'a', store: 'b' } });
  assert.deepEqual(checkRequestBody(Buffer.from(body), chat, policy), { ok: true, model: 'gpt-ok', stream: false });
  // ...but an exact duplicate is still refused there.
  assert.equal(parseStrictJson('{"metadata":{"a":1,"a":2}}').ok, false);
  // ...and an object that merely sits inside one is no map: its keys are fields again.
  assert.equal(refusal(JSON.stringify({ model: 'gpt-ok', messages: [], tools: [{ ...tool, function: { ...tool.function, parameters: { properties: { p: { Type: 'x' } } } } }] })).code, 'case_variant_key');
});

test('case-folded keys: many-key objects (the set path) fold too', () => {
  const members = Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`);
  assert.equal(parseStrictJson(`{${members.join(',')},"K7":1}`).ok, false);
  assert.deepEqual(parseStrictJson(`{${members.join(',')},"K7":1}`), { ok: false, reason: 'case_variant_key', key: 'K7', other: 'k7' });
  assert.equal(parseStrictJson(`{${members.join(',')},"k40":1}`).ok, true);
});

test('case folding: exactly the non-ASCII characters that a simple case mapping or Go\'s fold turns into an ASCII letter are folded (foldKey, derived from the engine\'s Unicode data)', () => {
  // One ASCII letter: tested by character code, as this runs for each of 1.1 million code points.
  const isAsciiLetter = (s: string) => s.length === 1 && (s.charCodeAt(0) | 0x20) >= 0x61 && (s.charCodeAt(0) | 0x20) <= 0x7a;
  const expected: number[] = [];
  for (let c = 0x80; c <= 0x10ffff; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const ch = String.fromCodePoint(c);
    // JavaScript applies the full case mappings; U+0130's simple lowercase mapping (UnicodeData.txt,
    // what .NET's invariant casing uses) is U+0069, the full one i + U+0307 COMBINING DOT ABOVE.
    const lower = ch.toLowerCase();
    const simpleLower = lower.length === 2 && lower.charCodeAt(1) === 0x307 && lower[0]! >= 'a' && lower[0]! <= 'z' ? lower[0]! : lower;
    if (isAsciiLetter(ch.toUpperCase()) || isAsciiLetter(simpleLower) || isAsciiLetter(goFold(ch))) expected.push(c);
  }
  assert.deepEqual(expected.map((c) => c.toString(16)), ['130', '131', '17f', '212a']);
  for (const c of expected) assert.match(foldKey(String.fromCodePoint(c)), /^[A-Z]$/);
  assert.equal(foldKey('ſtReam\u212aé'), 'STREAMKé');
});

test('policy keys: every key a protocol\'s request checks read is a policy key (bodies whose objects record each read)', () => {
  const read = new Set<string>();
  // A key read by name is a decision on that key; the values read while walking every key of an
  // object (after it was enumerated) are not.
  const enumerated = new WeakSet<object>();
  const watch = (v: unknown): unknown =>
    typeof v !== 'object' || v === null
      ? v
      : new Proxy(v, {
          ownKeys: (t) => (enumerated.add(t), Reflect.ownKeys(t)),
          get: (t, k, r) => (typeof k === 'string' && !Array.isArray(t) && !enumerated.has(t) && read.add(k), watch(Reflect.get(t, k, r))),
        });
  const bodies: [typeof chat, unknown][] = [
    [chat, { model: 'gpt-ok', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'data:,' } }] }], tools: [{ type: 'function', function: { name: 'f' } }], web_search_options: {} }],
    [responses, { model: 'gpt-ok', input: [{ role: 'user', content: [{ type: 'input_text', text: 'x' }] }, { type: 'function_call_output', output: 'y' }], tools: [{ type: 'function', name: 'f' }, { type: 'web_search' }], store: false, previous_response_id: 'r', conversation: 'c', prompt: { id: 'p' }, background: true }],
    [messages, { model: 'claude-ok', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: 'f' } }, { type: 'image', source: { type: 'base64', data: '' } }] }], tools: [{ type: 'web_search_20250305', name: 'w' }], mcp_servers: [] }],
  ];
  for (const [protocol, body] of bodies) protocol.checkRequest(watch(body) as Record<string, unknown>, { ...policy, hostedTools: new Set(['web_search', 'mcp']) });
  const missing = [...read].filter((k) => !POLICY_KEYS.exact.has(k));
  assert.deepEqual(missing, []);
  assert.ok(read.size >= 8, `the checks read keys: ${[...read].join(' ')}`);
});

test('policy keys: a policy key must be lower-case ASCII (policyKeySet)', () => {
  assert.throws(() => policyKeySet(['Model']), /lower-case ASCII/);
});

// ---- the property: accepted ⇒ Go reads what we checked ----

const SEED = fuzzSeed(0x60_f01d);
const BODIES = 3000;
const FIELDS = ['model', 'tools', 'store', 'stream', 'previous_response_id', 'type'];

/** A spelling of `key` that Go may read as it: case flips, K and ſ, a \u escape, or unrelated. */
function spelling(rng: Rng, key: string): string {
  let out = '';
  for (const ch of key) {
    const r = rng.next();
    if (r < 0.08 && ch === 'k') out += '\u212a';
    else if (r < 0.08 && ch === 's') out += '\u017f';
    else if (r < 0.15) out += ch.toUpperCase();
    else out += ch;
  }
  return out;
}

function encodeKey(rng: Rng, key: string): string {
  if (!rng.chance(0.2)) return JSON.stringify(key);
  return `"${[...key].map((ch) => (rng.chance(0.3) ? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}` : JSON.stringify(ch).slice(1, -1))).join('')}"`;
}

function object(rng: Rng, fields: readonly string[], depth: number): { text: string; members: [string, unknown][] } {
  const members: [string, unknown][] = [];
  const n = rng.between(1, 4);
  for (let i = 0; i < n; i++) {
    const key = rng.chance(0.85) ? spelling(rng, rng.pick(fields)) : rng.pick(['x', 'Extra', 'user']);
    let value: unknown = rng.pick(['a', 'b', 1, true, null]);
    if (depth === 0 && rng.chance(0.3)) value = Array.from({ length: rng.between(1, 2) }, () => JSON.parse(object(rng, ['type', 'name'], 1).text));
    members.push([key, value]);
  }
  const text = `{${members.map(([k, v]) => `${encodeKey(rng, k)}:${JSON.stringify(v)}`).join(',')}}`;
  return { text, members };
}

test(`property: whatever parseStrictJson accepts, a Go encoding/json struct reads every policy field as JSON.parse does (seed ${SEED})`, (t) => {
  const rng = mulberry32(SEED);
  let accepted = 0;
  let refused = 0;
  for (let i = 0; i < BODIES; i++) {
    const { text, members } = object(rng, FIELDS, 0);
    const r = parseStrictJson(text, { policyKeys: POLICY_KEYS });
    if (!r.ok) {
      refused++;
      assert.ok(['duplicate_key', 'case_variant_key', 'policy_key_variant'].includes(r.reason), `${r.reason}: ${text}`);
      continue;
    }
    accepted++;
    const js = r.value as Record<string, unknown>;
    for (const field of FIELDS) assert.deepEqual(goFieldValue(members, field), js[field], `Go reads ${field} differently: ${text}`);
    // One level down: objects of an array (tools[].type) are read the same way.
    for (const [, v] of members) {
      if (!Array.isArray(v)) continue;
      for (const o of v as Record<string, unknown>[]) {
        for (const field of ['type', 'name']) assert.deepEqual(goFieldValue(Object.entries(o), field), o[field], text);
      }
    }
  }
  t.diagnostic(`seed ${SEED}: ${accepted} accepted, ${refused} refused`);
  assert.ok(accepted > BODIES * 0.1 && refused > BODIES * 0.1, 'both outcomes must be exercised');
});

// ---- the cost of a body ----

test('bounded parse cost: a body nesting deeper than the limit is refused before it is parsed, naming the limit; at the limit it passes', () => {
  const deep = (n: number) => `{"model":"gpt-ok","messages":[],"x":${'['.repeat(n - 1)}${']'.repeat(n - 1)}}`;
  assert.equal(checkRequestBody(Buffer.from(deep(BODY_LIMITS.maxDepth)), chat, policy).ok, true);
  const r = refusal(deep(BODY_LIMITS.maxDepth + 1));
  assert.equal(r.code, 'body_too_complex');
  assert.match(r.message ?? '', new RegExp(`more than ${BODY_LIMITS.maxDepth} deep`));
  // 16 million nested arrays (the reproduced body): refused at the limit, never parsed.
  assert.deepEqual(parseStrictJson(Buffer.alloc(16_000_000, '['), { limits: BODY_LIMITS }), { ok: false, reason: 'too_deep', limit: BODY_LIMITS.maxDepth });
});

test('bounded parse cost: a body with more objects, arrays, keys and array elements than the limit is refused, naming it (11 million empty objects, 16 million numbers); at the limit it passes', () => {
  const objects = (n: number) => `{"model":"gpt-ok","messages":[],"x":[${Array.from({ length: n }, () => '{}').join(',')}]}`;
  // 3 keys, the top object and the two arrays: 6 nodes; each object after the first adds 2 (itself and its comma).
  const fits = Math.floor((BODY_LIMITS.maxNodes - 6 + 1) / 2);
  assert.equal(checkRequestBody(Buffer.from(objects(fits)), chat, policy).ok, true);
  const r = refusal(objects(fits + 1));
  assert.equal(r.code, 'body_too_complex');
  assert.match(r.message ?? '', new RegExp(`more than ${BODY_LIMITS.maxNodes} objects, arrays, keys and array elements`));
  const huge = Buffer.from(`[${'{},'.repeat(11_000_000)}{}]`);
  assert.deepEqual(parseStrictJson(huge, { limits: BODY_LIMITS }), { ok: false, reason: 'too_many_nodes', limit: BODY_LIMITS.maxNodes });
  // Scalars count as array elements: 16 million numbers are refused like 16 million objects.
  const numbers = Buffer.from(`{"model":"gpt-ok","messages":[],"x":[${'1,'.repeat(16_000_000)}1]}`);
  assert.deepEqual(parseStrictJson(numbers, { limits: BODY_LIMITS }), { ok: false, reason: 'too_many_nodes', limit: BODY_LIMITS.maxNodes });
});

test('bounded parse cost: the scan ends on malformed text (unterminated strings, stray closers) and JSON.parse names the error', () => {
  for (const text of ['{"a', '{"a":"b', '{"a\\"', ']]]}}', '{"a":1,', '"', '{"model":"x","\\']) {
    const r = parseStrictJson(text, { limits: BODY_LIMITS, policyKeys: POLICY_KEYS });
    assert.equal(r.ok, false, text);
    assert.equal(r.ok ? '' : r.reason, 'invalid', text);
  }
});

test('bounded parse cost: every recorded agent request is far inside the limits (depth and nodes measured)', async () => {
  const { readdirSync, readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const dir = join(__dirname, '..', 'fixtures', 'recorded');
  let depth = 0;
  let nodes = 0;
  const walk = (v: unknown, d: number): void => {
    if (typeof v !== 'object' || v === null) return;
    nodes++;
    depth = Math.max(depth, d + 1);
    for (const [, x] of Object.entries(v)) {
      if (!Array.isArray(v)) nodes++;
      walk(x, d + 1);
    }
  };
  for (const f of readdirSync(dir).filter((f) => f !== 'index.json')) {
    const body = (JSON.parse(readFileSync(join(dir, f), 'utf8')) as { body: unknown }).body;
    const before = nodes;
    walk(body, 0);
    assert.ok(nodes - before < BODY_LIMITS.maxNodes / 100, `${f}: ${nodes - before} nodes`);
    assert.equal(parseStrictJson(JSON.stringify(body), { limits: BODY_LIMITS, policyKeys: POLICY_KEYS }).ok, true, f);
  }
  assert.ok(depth * 5 <= BODY_LIMITS.maxDepth, `deepest recorded request: ${depth}`);
});
