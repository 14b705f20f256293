import { test } from 'node:test';
import assert from 'node:assert/strict';
import { costUsd, parsePrices, type ModelPrice, type PriceTable, type TokenCounts } from '../../src/limits/prices.ts';

const FILE = 'prices.json';
const parse = (doc: unknown): PriceTable => parsePrices(typeof doc === 'string' ? doc : JSON.stringify(doc), FILE);
const price = (input: number, output: number, cached?: number, reasoning?: number, cacheWrite?: number): ModelPrice => ({ input, output, cached, reasoning, cacheWrite });
const tokens = (input: number | null, output: number | null, cached: number | null = null, reasoning: number | null = null, cacheWrite: number | null = null): TokenCounts => ({ input, output, cached, reasoning, cache_write: cacheWrite });

// ---- parsePrices ----

test('parsePrices reads a valid file: input and output required, cached and reasoning optional', () => {
  const prices = parse({
    'gpt-4o': { input: 2.5, cached: 1.25, output: 10 },
    o3: { input: 2, output: 8, cached: 0.5, reasoning: 16 },
    'free-model': { input: 0, output: 0 },
  });
  assert.deepEqual(prices.get('openai', 'gpt-4o'), price(2.5, 10, 1.25));
  assert.deepEqual(prices.get('any', 'o3'), price(2, 8, 0.5, 16));
  assert.deepEqual(prices.get('local', 'free-model'), price(0, 0));
  assert.equal(prices.get('openai', 'gpt-5'), undefined);
  assert.equal(parse({}).get('openai', 'gpt-4o'), undefined);
});

test('parsePrices reads prices per provider and model, with cache writes priced apart', () => {
  const prices = parse({
    providers: {
      openai: { 'gpt-5': { input: 1.25, cached: 0.125, output: 10 } },
      anthropic: { 'claude-sonnet-4-5': { input: 3, cached: 0.3, cache_write: 3.75, output: 15 } },
    },
  });
  assert.deepEqual(prices.get('anthropic', 'claude-sonnet-4-5'), price(3, 15, 0.3, undefined, 3.75));
  assert.deepEqual(prices.get('openai', 'gpt-5'), price(1.25, 10, 0.125));
  assert.equal(prices.get('openai', 'claude-sonnet-4-5'), undefined, 'a price belongs to its provider');
  assert.throws(() => parse({ providers: { openai: { m: { input: 1, output: 1, cache: 1 } } } }), /prices\.json: providers\.openai\.m\.cache: unknown field/);
  assert.throws(() => parse({ providers: { openai: [] } }), /prices\.json: providers\.openai: must be an object of model ID to prices/);
  assert.throws(() => parse({ providers: {}, 'gpt-4o': { input: 1, output: 1 } }), /prices\.json: gpt-4o: unknown field next to "providers"/);
});

test('parsePrices: an unknown field is an error naming the model and the field', () => {
  assert.throws(() => parse({ 'gpt-4o': { input: 1, output: 2, cache: 0.5 } }), (err: Error) => {
    assert.match(err.message, /^prices\.json: gpt-4o\.cache: unknown field/);
    return true;
  });
});

test('parsePrices: a negative price is an error naming the field', () => {
  assert.throws(() => parse({ m: { input: -1, output: 2 } }), /^Error: prices\.json: m\.input: must be a non-negative number/);
  assert.throws(() => parse({ m: { input: 1, output: 2, cached: -0.5 } }), /prices\.json: m\.cached: must be a non-negative number/);
  assert.throws(() => parse({ m: { input: 1, output: 2, reasoning: -3 } }), /prices\.json: m\.reasoning: must be a non-negative number/);
});

test('parsePrices: a non-number (string, null, boolean, non-finite) is an error naming the field', () => {
  assert.throws(() => parse({ m: { input: '2.5', output: 10 } }), /prices\.json: m\.input: must be a non-negative number/);
  assert.throws(() => parse({ m: { input: 2.5, output: null } }), /prices\.json: m\.output: must be a non-negative number/);
  assert.throws(() => parse({ m: { input: 2.5, output: 10, cached: true } }), /prices\.json: m\.cached: must be a non-negative number/);
  assert.throws(() => parse({ m: { input: 2.5, output: 10, reasoning: [1] } }), /prices\.json: m\.reasoning: must be a non-negative number/);
  // 1e999 is valid JSON that parses to Infinity.
  assert.throws(() => parse('{"m": {"input": 1e999, "output": 1}}'), /prices\.json: m\.input: must be a non-negative number/);
});

test('parsePrices: a missing input or output price is an error naming the field', () => {
  assert.throws(() => parse({ m: { output: 10 } }), /prices\.json: m\.input: must be a non-negative number/);
  assert.throws(() => parse({ m: { input: 2.5 } }), /prices\.json: m\.output: must be a non-negative number/);
  assert.throws(() => parse({ ok: { input: 1, output: 1 }, m: { input: 2.5, cached: 1 } }), /prices\.json: m\.output:/);
});

test('parsePrices: an entry or a file that is not an object is an error naming it', () => {
  for (const entry of [5, 'cheap', null, [1, 2], true]) {
    assert.throws(() => parse({ 'gpt-4o': entry }), /^Error: prices\.json: gpt-4o: must be an object$/, JSON.stringify(entry));
  }
  for (const doc of ['[]', '[{"input": 1, "output": 1}]', '"prices"', '42', 'null']) {
    assert.throws(() => parse(doc), /^Error: prices\.json: \(file\): must be an object: /, doc);
  }
});

test('parsePrices: invalid JSON is an error naming the file', () => {
  for (const text of ['', '{', '{"m": {"input": 1, "output": 1},}', "{'m': {}}"]) {
    assert.throws(() => parse(text), /^Error: prices\.json: \(file\): not valid JSON \(/, JSON.stringify(text));
  }
});

// ---- costUsd ----

test('costUsd: input includes cached tokens and output includes reasoning tokens, each token priced once', () => {
  // (1000 - 200) * 2 + 200 * 0.5 + (500 - 100) * 8 + 100 * 16 = 1600 + 100 + 3200 + 1600 = 6500 per million
  assert.equal(costUsd(price(2, 8, 0.5, 16), tokens(1000, 500, 200, 100)), 0.0065);
});

test('costUsd: cached and reasoning tokens default to the input and output prices', () => {
  // 1000 * 2 + 500 * 8 = 6000 per million, however the tokens split
  assert.equal(costUsd(price(2, 8), tokens(1000, 500, 200, 100)), 0.006);
  assert.equal(costUsd(price(2, 8), tokens(1000, 500)), 0.006);
  // Only one of them priced: cached at 0.5, reasoning at the output price.
  // 800 * 2 + 200 * 0.5 + 500 * 8 = 1600 + 100 + 4000 = 5700 per million
  assert.equal(costUsd(price(2, 8, 0.5), tokens(1000, 500, 200, 100)), 0.0057);
});

test('costUsd: null cached or reasoning counts are zero', () => {
  // 1000 * 2 + 500 * 8 = 6000 per million
  assert.equal(costUsd(price(2, 8, 0.5, 16), tokens(1000, 500, null, null)), 0.006);
  assert.equal(costUsd(price(2, 8, 0.5, 16), tokens(0, 0, 0, 0)), 0);
});

test('costUsd: a null input or output count gives undefined, never a guess', () => {
  assert.equal(costUsd(price(2, 8), tokens(null, 500)), undefined);
  assert.equal(costUsd(price(2, 8), tokens(1000, null)), undefined);
  assert.equal(costUsd(price(2, 8), tokens(null, null, 10, 10)), undefined);
});

test('costUsd: cached above input and reasoning above output are clamped to them', () => {
  // cached 300 of input 100 → all 100 input tokens at the cached price: 100 * 0.5 = 50 per million
  assert.equal(costUsd(price(2, 8, 0.5, 16), tokens(100, 0, 300, null)), 0.00005);
  // reasoning 90 of output 40 → all 40 at the reasoning price: 40 * 16 = 640 per million
  assert.equal(costUsd(price(2, 8, 0.5, 16), tokens(0, 40, null, 90)), 0.00064);
  // Never negative.
  assert.ok(costUsd(price(2, 8, 0.5, 16), tokens(10, 10, 1000, 1000))! > 0);
});

test('costUsd: cache writes are part of the input, priced at cache_write (default: the input price)', () => {
  // (1000 - 200 - 300) * 3 + 200 * 0.3 + 300 * 3.75 + 100 * 15 = 1500 + 60 + 1125 + 1500 = 4185 per million
  assert.equal(costUsd(price(3, 15, 0.3, undefined, 3.75), tokens(1000, 100, 200, null, 300)), 0.004185);
  // 800 * 3 + 200 * 0.3 + 100 * 15 = 2400 + 60 + 1500 = 3960 per million
  assert.equal(costUsd(price(3, 15, 0.3), tokens(1000, 100, 200, null, 300)), 0.00396);
});
