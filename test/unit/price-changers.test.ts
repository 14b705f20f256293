// The values that change the price of a call, one table per protocol (src/gateway/protocols/pricing.ts):
// a test per row, in every form the value can take; what admission makes of them under a money
// budget (unpricedCallReason), a model without a price, and a bot token asking past the file's
// ceiling (mint-token's check and the gateway's refusal).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ApiName } from '../../src/gateway/protocols/protocol.ts';
import { POLICY_KEYS } from '../../src/gateway/check-call.ts';
import { admissionVerdict, effectivePolicy } from '../../src/limits/admission.ts';
import { aboveCeilingReason, hostedToolFeesWarning, tokenCeiling, unpricedCallReason, unpricedWarning, type LimitsPolicy } from '../../src/limits/policy.ts';
import { callPriceChange, OUTPUT_MULTIPLIERS, outputMultiple, PRICE_CHANGERS, priceChange } from '../../src/gateway/protocols/pricing.ts';
import { worstCase } from '../../src/limits/worst-case.ts';

const user = { role: 'user', content: 'hi' };
const chat = (extra: Record<string, unknown>) => ({ model: 'gpt-x', messages: [user], ...extra });
const messages = (extra: Record<string, unknown>) => ({ max_tokens: 8, messages: [user], ...extra });
const ttl1h = { type: 'ephemeral', ttl: '1h' };

interface RowCase {
  readonly api: ApiName;
  readonly field: string;
  /** What the test proves, for its name. */
  readonly says: string;
  /** Requests (bodies, or headers for a header row) this row prices. */
  readonly priced: readonly unknown[];
  /** Requests this row refuses, each with what the refusal must show. */
  readonly refused: readonly (readonly [unknown, RegExp])[];
}

const CASES: readonly RowCase[] = [
  {
    api: 'chat_completions',
    field: 'stream_options.include_usage',
    says: 'a stream asking for its usage, or no stream, is priced; a stream without it is refused',
    priced: [chat({}), chat({ stream: false }), chat({ stream: true, stream_options: { include_usage: true } })],
    refused: [
      [chat({ stream: true }), /^"stream_options\.include_usage": "absent" leaves the stream without its usage/],
      [chat({ stream: true, stream_options: { include_usage: false } }), /"stream_options\.include_usage": false/],
      [chat({ stream: true, stream_options: 'yes' }), /"absent"/],
    ],
  },
  {
    api: 'chat_completions',
    field: 'service_tier',
    says: '"auto", "default", "flex", null or none is priced; "priority", "fast", "scale" and a number are refused',
    priced: [chat({}), chat({ service_tier: 'auto' }), chat({ service_tier: 'default' }), chat({ service_tier: 'flex' }), chat({ service_tier: null })],
    refused: [
      [chat({ service_tier: 'priority' }), /^"service_tier": "priority" bills at other rates/],
      [chat({ service_tier: 'fast' }), /"service_tier": "fast"/],
      [chat({ service_tier: 'scale' }), /"service_tier": "scale"/],
      [chat({ service_tier: 1 }), /"service_tier": 1 /],
    ],
  },
  {
    api: 'chat_completions',
    field: 'modalities',
    says: '["text"] or none is priced; audio output is refused',
    priced: [chat({ modalities: ['text'] }), chat({ modalities: null })],
    refused: [
      [chat({ modalities: ['text', 'audio'] }), /^"modalities": \["text","audio"\] asks for audio output/],
      [chat({ modalities: 'audio' }), /"modalities": "audio"/],
    ],
  },
  {
    api: 'chat_completions',
    field: 'audio',
    says: 'none or null is priced; an audio output setting is refused',
    priced: [chat({ audio: null })],
    refused: [[chat({ audio: { voice: 'alloy', format: 'wav' } }), /^"audio": \{"voice":"alloy","format":"wav"\} asks for audio output/]],
  },
  {
    api: 'chat_completions',
    field: 'messages[].content[].type',
    says: 'text and image parts are priced; an input_audio part is refused',
    priced: [chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'data:,' } }] }] })],
    refused: [[chat({ messages: [user, { role: 'user', content: [{ type: 'input_audio', input_audio: { data: '', format: 'wav' } }] }] }), /^"messages\[\]\.content\[\]\.type": "input_audio" sends audio/]],
  },
  {
    api: 'responses',
    field: 'service_tier',
    says: '"auto", "default", "flex" or none is priced; "priority" and "scale" are refused',
    priced: [{ model: 'gpt-x', input: 'hi' }, { model: 'gpt-x', input: 'hi', service_tier: 'flex' }],
    refused: [
      [{ model: 'gpt-x', input: 'hi', service_tier: 'priority' }, /"service_tier": "priority"/],
      [{ model: 'gpt-x', input: 'hi', service_tier: 'scale' }, /"service_tier": "scale"/],
    ],
  },
  {
    api: 'messages',
    field: 'service_tier',
    says: '"auto", "standard_only" or none is priced; "priority" and a number are refused',
    priced: [messages({ service_tier: 'auto' }), messages({ service_tier: 'standard_only' })],
    refused: [
      [messages({ service_tier: 'priority' }), /^"service_tier": "priority" asks for a capacity tier/],
      [messages({ service_tier: 2 }), /"service_tier": 2 /],
    ],
  },
  {
    api: 'messages',
    field: 'speed',
    says: '"standard" or none is priced; fast mode and a number are refused',
    priced: [messages({}), messages({ speed: 'standard' })],
    refused: [
      [messages({ speed: 'fast' }), /^"speed": "fast" \(fast mode\) is billed at a multiple of the rates the budget counts; leave it out or send "standard"$/],
      [messages({ speed: 1 }), /"speed": 1 /],
    ],
  },
  {
    api: 'messages',
    field: 'inference_geo',
    says: '"global" or none is priced; US-only inference and any other region are refused',
    priced: [messages({ inference_geo: 'global' })],
    refused: [
      [messages({ inference_geo: 'us' }), /^"inference_geo": "us" bills at a multiple .*1\.1 times/],
      [messages({ inference_geo: 'eu' }), /"inference_geo": "eu"/],
    ],
  },
  {
    api: 'messages',
    field: 'anthropic_beta',
    says: 'other betas are priced; context-1m in an array (Bedrock, Vertex), in a comma-separated string, in any case, or a beta that is not a string is refused',
    priced: [messages({ anthropic_beta: ['interleaved-thinking-2025-05-14'] }), messages({ anthropic_beta: 'claude-code-20250219, interleaved-thinking-2025-05-14' }), messages({ anthropic_beta: [] })],
    refused: [
      [messages({ anthropic_beta: ['interleaved-thinking-2025-05-14', 'context-1m-2025-08-07'] }), /^"anthropic_beta": "context-1m-2025-08-07" bills long prompts at other rates/],
      [messages({ anthropic_beta: 'interleaved-thinking-2025-05-14, context-1m-2025-08-07' }), /"anthropic_beta": "context-1m-2025-08-07"/],
      [messages({ anthropic_beta: ['Context-1M-2025-08-07'] }), /"anthropic_beta": "Context-1M-2025-08-07"/],
      [messages({ anthropic_beta: [{ name: 'context-1m-2025-08-07' }] }), /"anthropic_beta": \{"name":"context-1m-2025-08-07"\}/],
      [messages({ anthropic_beta: 7 }), /"anthropic_beta": 7 /],
    ],
  },
  {
    api: 'messages',
    field: 'anthropic-beta',
    says: 'the header\'s other betas are priced; context-1m in it, alone or in a list, is refused',
    priced: [{}, { 'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14' }],
    refused: [
      [{ 'anthropic-beta': 'claude-code-20250219,context-1m-2025-08-07' }, /^the anthropic-beta header's "context-1m-2025-08-07" bills long prompts at other rates.*; leave the context-1m beta out$/],
      [{ 'anthropic-beta': ['claude-code-20250219', 'context-1m-2025-08-07'] }, /header's "context-1m-2025-08-07"/],
    ],
  },
  {
    api: 'messages',
    field: 'cache_control.ttl',
    says: 'a 5-minute cache is priced, and a ttl in the model\'s own tool arguments is not read; "1h" at the top level, in system, message, tool use, tool result and tool blocks, a ttl that is not a string, or a cache_control that is not an object is refused',
    priced: [
      messages({ system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }] }),
      messages({ cache_control: { type: 'ephemeral', ttl: '5m' } }),
      messages({ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'write', input: { cache_control: ttl1h } }] }] }),
    ],
    refused: [
      [messages({ cache_control: ttl1h }), /^"cache_control\.ttl": "1h" asks for a 1-hour cache, whose writes bill at twice the input rate/],
      [messages({ system: [{ type: 'text', text: 's', cache_control: ttl1h }] }), /"cache_control\.ttl": "1h"/],
      [messages({ messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: ttl1h }] }] }), /"cache_control\.ttl": "1h"/],
      [messages({ messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: 'r', cache_control: ttl1h }] }] }] }), /"cache_control\.ttl": "1h"/],
      [messages({ tools: [{ name: 'f', input_schema: { type: 'object' }, cache_control: ttl1h }] }), /"cache_control\.ttl": "1h"/],
      [messages({ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: {}, cache_control: ttl1h }] }] }), /"cache_control\.ttl": "1h"/],
      [messages({ cache_control: { type: 'ephemeral', ttl: 3600 } }), /"cache_control\.ttl": 3600 /],
      [messages({ cache_control: 'ephemeral' }), /"cache_control\.ttl": "ephemeral"/],
    ],
  },
];

for (const c of CASES) {
  test(`price changers, ${c.api}: ${c.field}: ${c.says}`, () => {
    const where = PRICE_CHANGERS[c.api].find((row) => row.field === c.field)!.in;
    for (const request of c.priced) assert.equal(priceChange(c.api, where, request), undefined, JSON.stringify(request));
    for (const [request, shows] of c.refused) {
      const change = priceChange(c.api, where, request);
      assert.equal(change?.field, c.field, JSON.stringify(request));
      assert.match(change!.message, shows);
    }
  });
}

test('price changers: every row of every protocol\'s table has its test, and a body without any of the fields is priced on every protocol', () => {
  const rows = Object.entries(PRICE_CHANGERS).flatMap(([api, table]) => table.map((row) => `${api} ${row.field}`));
  assert.deepEqual(rows.sort(), CASES.map((c) => `${c.api} ${c.field}`).sort());
  for (const api of Object.keys(PRICE_CHANGERS) as ApiName[]) {
    assert.equal(priceChange(api, 'body', chat({})), undefined, api);
    assert.equal(priceChange(api, 'header', {}), undefined, api);
  }
});

test('price changers: the recorded agents\' requests (Claude Code direct, Bedrock, Vertex, Foundry; Codex; opencode) change no price, so a money budget refuses none of them', () => {
  const apiOf = (file: string, url: string): ApiName => (file.startsWith('codex') ? 'responses' : file.startsWith('opencode') ? 'chat_completions' : /messages|invoke|Predict/.test(url) ? 'messages' : 'chat_completions');
  let seen = 0;
  for (const dir of ['recorded', 'recorded-cloud']) {
    const path = join(__dirname, '..', 'fixtures', dir);
    for (const f of readdirSync(path).filter((f) => f !== 'index.json')) {
      const rec = JSON.parse(readFileSync(join(path, f), 'utf8')) as { url?: string; headers?: Record<string, string>; body?: unknown };
      if (typeof rec.body !== 'object' || rec.body === null) continue;
      const api = apiOf(f, rec.url ?? '');
      assert.equal(priceChange(api, 'body', rec.body), undefined, f);
      assert.equal(priceChange(api, 'header', rec.headers ?? {}), undefined, f);
      seen++;
    }
  }
  assert.ok(seen >= 10, `recorded requests read: ${seen}`);
});

test('price changers: every body key the tables read is a policy key, so a case variant of it is refused before it is read', () => {
  const read = new Set<string>();
  const enumerated = new WeakSet<object>();
  const watch = (v: unknown): unknown =>
    typeof v !== 'object' || v === null
      ? v
      : new Proxy(v, {
          ownKeys: (t) => (enumerated.add(t), Reflect.ownKeys(t)),
          get: (t, k, r) => (typeof k === 'string' && !Array.isArray(t) && !enumerated.has(t) && read.add(k), watch(Reflect.get(t, k, r))),
        });
  const body = { model: 'm', service_tier: 'auto', speed: 'standard', inference_geo: 'global', anthropic_beta: ['b'], modalities: ['text'], audio: null, cache_control: { type: 'ephemeral', ttl: '5m' }, messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { ttl: '5m' } }] }] };
  for (const api of Object.keys(PRICE_CHANGERS) as ApiName[]) priceChange(api, 'body', watch(structuredClone(body)));
  assert.deepEqual([...read].filter((k) => !POLICY_KEYS.exact.has(k)), []);
  for (const key of ['service_tier', 'speed', 'inference_geo', 'anthropic_beta', 'cache_control', 'ttl', 'modalities', 'audio']) assert.ok(read.has(key), `${key} is read`);
});

// ---- the output multipliers: values that make the provider generate (and bill) the output more than once ----

test('output multipliers: chat completions "n": absent, null or 1 is once; a whole number up to 128 multiplies the output and is a price change; any other value counts as 128 (outputMultiple)', () => {
  for (const body of [chat({}), chat({ n: null }), chat({ n: 1 })]) assert.deepEqual(outputMultiple('chat_completions', body), { factor: 1 }, JSON.stringify(body));
  const sixteen = outputMultiple('chat_completions', chat({ n: 16 }));
  assert.equal(sixteen.factor, 16);
  assert.equal(sixteen.change?.field, 'n');
  assert.match(sixteen.change!.message, /^"n": 16 makes the provider generate and bill that many choices.*; send 1 or leave it out/);
  for (const n of [0, -1, 1.5, 129, '16', [2], true]) {
    const m = outputMultiple('chat_completions', chat({ n }));
    assert.deepEqual([m.factor, m.change?.field], [128, 'n'], `n: ${JSON.stringify(n)} is not a factor the API takes: counted at its most`);
  }
  assert.equal(outputMultiple('chat_completions', chat({ n: 128 })).factor, 128);
});

test('output multipliers: every row has its test; Responses and Messages have none (one answer per call), so "n" there multiplies nothing', () => {
  const rows = Object.entries(OUTPUT_MULTIPLIERS).flatMap(([api, table]) => table.map((row) => `${api} ${row.field}`));
  assert.deepEqual(rows, ['chat_completions n']);
  for (const api of ['responses', 'messages'] as const) assert.deepEqual(outputMultiple(api, { n: 16 }), { factor: 1 });
});

test('worstCase: the output part is multiplied by the output factor (n choices), the input is not; without a limit the assumed output is multiplied', () => {
  const price = { input: 1, output: 10, cached: undefined, reasoning: undefined, cacheWrite: undefined };
  const one = worstCase(400, 1000, 128_000, price);
  const sixteen = worstCase(400, 1000, 128_000, price, 16);
  assert.deepEqual([one.inputTokens, one.outputTokens], [100, 1000]);
  assert.deepEqual([sixteen.inputTokens, sixteen.outputTokens], [100, 16_000]);
  assert.equal(Math.round(sixteen.usd * 1e6), 100 + 160_000, '$0.16 for 16 choices of 1,000 tokens at $10/M, not $0.01');
  assert.equal(worstCase(400, undefined, 128_000, price, 2).outputTokens, 256_000);
});

// ---- admission: what a money budget makes of it ----

const MONEY: LimitsPolicy = { concurrent: 0, requestsPerMinute: 0, tokensPerMinute: 0, runBudgetUsd: 1, workflowBudgetUsdPerDay: 0 };
const NO_MONEY: LimitsPolicy = { ...MONEY, runBudgetUsd: 0 };
const pricedCall = { model: 'gpt-x', priced: true };

test('unpricedCallReason: under a money budget a model without a price is refused, naming the model and the price file, unless the operator allows unpriced models (--allow-unpriced-models); without a money limit nothing is refused', () => {
  const reason = unpricedCallReason(MONEY, { model: 'gpt-typo', priced: false });
  assert.match(reason ?? '', /^the model "gpt-typo" has no price in the gateway's price table \(MODEL_PRICES_FILE\), so the budget cannot count its calls; .*--allow-unpriced-models/);
  assert.equal(unpricedCallReason({ ...MONEY, unpricedModels: 'allowed' }, { model: 'gpt-typo', priced: false }), undefined);
  assert.equal(unpricedCallReason(NO_MONEY, { model: 'gpt-typo', priced: false }), undefined);
  assert.match(unpricedCallReason({ ...NO_MONEY, ceilings: { runBudgetUsd: 5 } }, { model: 'gpt-typo', priced: false }) ?? '', /gpt-typo/, 'a ceiling a token may ask up to is a money limit');
  assert.match(unpricedCallReason(effectivePolicy(NO_MONEY, { budgetUsd: 2 }), { model: 'gpt-typo', priced: false }) ?? '', /gpt-typo/, "the token's own budget is one");
  assert.match(unpricedCallReason(MONEY, { model: 'x\u0000"y', priced: false }) ?? '', /the model "x\?"y"/, 'the model name is bounded');
});

test('unpricedCallReason: under a money budget "n" above 1 is refused, naming the choices it bills; without a money limit it passes and only multiplies the worst case', () => {
  const change = outputMultiple('chat_completions', chat({ n: 16 })).change;
  assert.match(unpricedCallReason(MONEY, { ...pricedCall, priceChange: change }) ?? '', /^"n": 16 makes the provider generate and bill that many choices/);
  assert.equal(unpricedCallReason(NO_MONEY, { ...pricedCall, priceChange: change }), undefined);
});

test('unpricedCallReason: under a money budget the body\'s price change is refused with its message, then the anthropic-beta header\'s (Messages routes only: the OpenAI routes do not forward it) (callPriceChange)', () => {
  const change = priceChange('messages', 'body', messages({ speed: 'fast' }));
  const beta = { 'anthropic-beta': 'context-1m-2025-08-07' };
  const reason = (api: ApiName, body: typeof change, headers: Record<string, string>, policy = MONEY) => unpricedCallReason(policy, { ...pricedCall, ...(callPriceChange(api, body, headers) ? { priceChange: callPriceChange(api, body, headers) } : {}) });
  assert.equal(reason('messages', change, beta), change!.message, 'the body first');
  assert.match(reason('messages', undefined, beta) ?? '', /anthropic-beta header's "context-1m-2025-08-07"/);
  assert.equal(reason('chat_completions', undefined, beta), undefined);
  assert.equal(reason('messages', undefined, { 'anthropic-beta': 'claude-code-20250219' }), undefined);
  assert.equal(reason('messages', change, beta, NO_MONEY), undefined, 'no money limit: nothing is mischarged');
});

test('unpricedWarning: start-up names the models without a price and says whether their calls are refused (the default) or let through uncounted (--allow-unpriced-models)', () => {
  const models = [{ provider: 'openai', model: 'gpt-x' }, { provider: 'local', model: 'qwen3-coder' }];
  const priced = (p: string) => p === 'openai';
  assert.match(unpricedWarning(MONEY, models, priced) ?? '', /their calls are refused \(400 price_not_counted\) until they are priced there .*: local\/qwen3-coder$/);
  assert.match(unpricedWarning({ ...MONEY, unpricedModels: 'allowed' }, models, priced) ?? '', /--allow-unpriced-models lets their calls through, counting tokens only and spending no budget: local\/qwen3-coder$/);
  assert.equal(unpricedWarning(NO_MONEY, models, priced), undefined);
});

test('hostedToolFeesWarning: start-up says that a money budget does not count the per-use fees of the hosted tools the operator allowed', () => {
  assert.match(hostedToolFeesWarning(MONEY, new Set(['web_search'])) ?? '', /--allow-hosted-tools allows web_search: .* is not counted/);
  assert.equal(hostedToolFeesWarning(MONEY, new Set()), undefined);
  assert.equal(hostedToolFeesWarning(NO_MONEY, new Set(['web_search'])), undefined);
});

// ---- a token asking past the file's ceiling ----

test('aboveCeilingReason: mint-token refuses a token asking more than the --limits file\'s ceiling (its max, else its value), naming each flag, the ceiling and the field; within it, or with no ceiling, it passes', () => {
  const file: LimitsPolicy = { ...MONEY, runBudgetUsd: 5, concurrent: 4, requestsPerMinute: 0 };
  assert.match(aboveCeilingReason(file, { budgetUsd: 20 }, 'limits.json') ?? '', /^mint-token: --budget-usd 20 is above the ceiling 5 of limits\.json \(perRun\.budgetUsd\); the gateway would apply the ceiling/);
  const both = aboveCeilingReason(file, { budgetUsd: 6, concurrent: 9 }, 'limits.json') ?? '';
  assert.match(both, /--budget-usd 6 .*; --max-concurrent 9 is above the ceiling 4 of limits\.json \(perInstance\.concurrent\)/);
  assert.equal(aboveCeilingReason(file, { budgetUsd: 5, concurrent: 4 }, 'limits.json'), undefined);
  assert.equal(aboveCeilingReason(file, { requestsPerMinute: 1e6 }, 'limits.json'), undefined, 'no limit in the file: no ceiling');
  const withMax: LimitsPolicy = { ...file, ceilings: { runBudgetUsd: 50 } };
  assert.equal(aboveCeilingReason(withMax, { budgetUsd: 20 }, 'limits.json'), undefined, 'up to max');
  assert.match(aboveCeilingReason(withMax, { budgetUsd: 60 }, 'limits.json') ?? '', /--budget-usd 60 is above the ceiling 50/);
  assert.deepEqual([tokenCeiling(file, 'runBudgetUsd'), tokenCeiling(withMax, 'runBudgetUsd'), tokenCeiling(file, 'requestsPerMinute')], [5, 50, undefined]);
});

test('limits: a run whose token asked more than the file\'s ceiling is refused naming both: "the token asked $X; the file\'s ceiling $Y applies" (effectivePolicy, admissionVerdict)', () => {
  const idle = { inFlight: 0, requestsLastMinute: 0, tokensLastMinute: 0, runSpentUsd: 1, workflowSpentUsdToday: 0 };
  const capped = admissionVerdict(effectivePolicy(MONEY, { budgetUsd: 20 }), idle, 10, 0);
  assert.equal(capped.ok, false);
  assert.match((capped as { message: string }).message, /^this run's budget is spent: \$1\.00 of \$1\.00 \(the token asked \$20\.00; the file's ceiling \$1\.00 applies\); the run must stop/);
  const within = admissionVerdict(effectivePolicy(MONEY, { budgetUsd: 0.5 }), { ...idle, runSpentUsd: 0.5 }, 10, 0);
  assert.doesNotMatch((within as { message: string }).message, /the token asked/, 'a token within the ceiling got what it asked');
});
