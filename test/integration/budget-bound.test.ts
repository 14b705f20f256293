// A run's budget holds however its calls end. A fake provider bills what a real one would: a
// non-streamed call's whole generation even after its client left, a stream's input as soon as its
// first event went out. The gateway must charge at least that, and stop admitting the run once it
// is spent, so that what the provider bills passes the budget by no more than the stated bound.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, test } from 'node:test';
import { LocalLimits } from '../../src/limits/admission.ts';
import { parseLimitsFile } from '../../src/limits/policy.ts';
import { parsePrices } from '../../src/limits/prices.ts';
import { estimateTokens } from '../../src/limits/admission.ts';
import { startHttpsFake, type HttpsFake } from '../support/https-fake.ts';
import { startGatewayInProcess, TEST_MODEL } from '../support/harness.ts';
import { makeTestPki, type TestPki } from '../support/tls.ts';

const PRICE = { input: 3, output: 15 }; // USD per million tokens
const usdOf = (input: number, output: number) => (input * PRICE.input + output * PRICE.output) / 1e6;
const MAX_TOKENS = 8000;
const STREAM_INPUT = 4000; // what a stream's message_start reports (the provider counts the real input)

let pki: TestPki;
let upstream: HttpsFake;
/** What the provider bills, call by call. */
let billed: number[] = [];
/** Resolved when the upstream has the next call. */
let arrived: () => void = () => {};

before(async () => {
  pki = makeTestPki();
  upstream = await startHttpsFake(pki, (_req, res, recorded) => {
    const body = JSON.parse(recorded.body.toString()) as { stream?: boolean };
    const input = estimateTokens(recorded.body.length);
    if (!body.stream) {
      // The whole generation is billed, whether or not anyone still listens; the answer never comes in time.
      billed.push(usdOf(input, MAX_TOKENS));
      arrived();
      return;
    }
    billed.push(usdOf(STREAM_INPUT, 3));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: TEST_MODEL, content: [], stop_reason: null, usage: { input_tokens: STREAM_INPUT, output_tokens: 1 } } })}\n\n`);
    res.write(`event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n`);
    res.write(`event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abc"}}\n\n`, () => arrived());
  });
});
after(async () => {
  await upstream.close();
  pki.cleanup();
});

/** One call that its client cuts: a non-streamed one once the upstream has it, a stream after its first events. */
function cutCall(port: number, stream: boolean): Promise<number | 'cut'> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ model: TEST_MODEL, max_tokens: MAX_TOKENS, stream, messages: [{ role: 'user', content: 'go' }] });
    const reached = new Promise<void>((r) => (arrived = r));
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/messages', agent: false, headers: { 'content-type': 'application/json', 'x-instance-id': 'bot-b', 'x-run-id': 'run-b' } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      } else res.on('data', () => {});
    });
    req.on('error', () => {});
    req.end(body);
    void reached.then(() => {
      req.destroy();
      resolve('cut');
    });
  });
}

test('budget: however its calls end (non-streamed calls cut while the provider generates, streams cut after their first event), a run stops being admitted once spent, is charged at least what the provider bills, and the bill passes the budget by no more than one call (chargeFor, worstCase)', { timeout: 30_000 }, async () => {
  billed = [];
  const budget = 0.2;
  const limits = new LocalLimits(parseLimitsFile(JSON.stringify({ perInstance: { concurrent: 1 }, perRun: { budgetUsd: budget } }), 'limits.json'));
  const prices = parsePrices(JSON.stringify({ providers: { anthropic: { [TEST_MODEL]: PRICE } } }), 'prices.json');
  const gw = await startGatewayInProcess({ baseUrl: `https://127.0.0.1:${upstream.port}`, pki, kind: 'anthropic', limits, prices });
  try {
    const outcomes: (number | 'cut')[] = [];
    for (let i = 0; i < 12; i++) {
      const outcome = await cutCall(gw.port, i % 2 === 1);
      outcomes.push(outcome);
      // The next call starts once this one is over for the gateway (recorded, charged, released).
      await gw.records.nth(outcomes.length);
      if (outcome === 402) break;
    }
    const records = gw.records.all;
    const charged = records.reduce((s, r) => s + (r.charged_usd ?? 0), 0);
    const bill = billed.reduce((s, b) => s + b, 0);
    assert.equal(outcomes.at(-1), 402, `the run is refused once spent: ${JSON.stringify(outcomes)}`);
    assert.ok(records.at(-1)!.limit === 'run_budget');
    assert.ok(charged + 1e-9 >= bill, `charged $${charged} at least what the provider billed, $${bill}`);
    const largest = Math.max(...billed);
    assert.ok(bill <= budget + largest + 1e-9, `billed $${bill} within the budget $${budget} plus one call ($${largest})`);
    // The figures the stream reported are charged, never less.
    for (const r of records.filter((x) => x.stream && x.attempts > 0)) assert.ok(r.charged_usd! >= usdOf(STREAM_INPUT, 0), JSON.stringify(r));
    // A call cut before its answer is charged its worst case (its max_tokens at the output price).
    for (const r of records.filter((x) => !x.stream && x.attempts === 1)) assert.ok(r.charged_usd! >= usdOf(0, MAX_TOKENS), JSON.stringify(r));
  } finally {
    await gw.close();
  }
});

test('budget: with perCall.holdWorstCase, what is left of a run\'s budget is held by its calls in progress, each for its worst case; another call is refused as transient (429 with Retry-After), not as spent (admissionVerdict)', { timeout: 30_000 }, async () => {
  billed = [];
  const limits = new LocalLimits(parseLimitsFile(JSON.stringify({ perInstance: { concurrent: 4 }, perRun: { budgetUsd: 0.1 }, perCall: { holdWorstCase: true } }), 'limits.json'));
  const prices = parsePrices(JSON.stringify({ providers: { anthropic: { [TEST_MODEL]: PRICE } } }), 'prices.json');
  const gw = await startGatewayInProcess({ baseUrl: `https://127.0.0.1:${upstream.port}`, pki, kind: 'anthropic', limits, prices });
  try {
    // A call whose worst case ($0.12) is above what is left holds all of it while it runs.
    const holder = new Promise<void>((resolve) => {
      const reached = new Promise<void>((r) => (arrived = r));
      const req = request({ host: '127.0.0.1', port: gw.port, method: 'POST', path: '/v1/messages', agent: false, headers: { 'content-type': 'application/json', 'x-instance-id': 'bot-h', 'x-run-id': 'run-h' } }, () => {});
      req.on('error', () => {});
      req.end(JSON.stringify({ model: TEST_MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: 'go' }] }));
      void reached.then(async () => {
        const r = await new Promise<{ status: number; retry: string | undefined; body: string }>((done) => {
          const second = request({ host: '127.0.0.1', port: gw.port, method: 'POST', path: '/v1/messages', agent: false, headers: { 'content-type': 'application/json', 'x-instance-id': 'bot-h2', 'x-run-id': 'run-h' } }, (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c));
            res.on('end', () => done({ status: res.statusCode!, retry: res.headers['retry-after'] as string | undefined, body }));
          });
          second.end(JSON.stringify({ model: TEST_MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'go' }] }));
        });
        assert.equal(r.status, 429);
        assert.equal(r.retry, '1');
        assert.match(JSON.parse(r.body).error.message, /held by its calls in progress/);
        req.destroy();
        resolve();
      });
    });
    await holder;
    const recs = [await gw.records.nth(1), await gw.records.nth(2)];
    assert.deepEqual(recs.map((r) => r.limit).sort(), [null, 'run_budget_held']);
  } finally {
    await gw.close();
  }
});

test('budget: a client that leaves while the gateway waits to retry after a 429 (which the provider did not bill) is charged nothing (GatewayCall.waitToRetry, chargeFor)', { timeout: 30_000 }, async () => {
  const limits = new LocalLimits(parseLimitsFile(JSON.stringify({ perInstance: { concurrent: 1 }, perRun: { budgetUsd: 1 } }), 'limits.json'));
  const prices = parsePrices(JSON.stringify({ providers: { anthropic: { [TEST_MODEL]: PRICE } } }), 'prices.json');
  const gw = await startGatewayInProcess({ baseUrl: `https://127.0.0.1:${upstream.port}`, pki, kind: 'anthropic', limits, prices, deps: { retry: { maxRetries: 2, budgetMs: 60_000, baseDelayMs: 30_000 } } });
  try {
    let answered!: () => void;
    const refusedOnce = new Promise<void>((r) => (answered = r));
    upstream.script((_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '30' });
      res.end('{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}', () => answered());
    });
    const req = request({ host: '127.0.0.1', port: gw.port, method: 'POST', path: '/v1/messages', agent: false, headers: { 'content-type': 'application/json', 'x-instance-id': 'bot-429', 'x-run-id': 'run-429' } }, () => {});
    req.on('error', () => {});
    req.end(JSON.stringify({ model: TEST_MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: 'go' }] }));
    await refusedOnce; // the gateway now waits 30 s to try again
    req.destroy();
    const rec = await gw.records.nth(1);
    assert.deepEqual([rec.status, rec.attempts, rec.rate_limited, rec.charged_usd], [0, 1, 1, 0], JSON.stringify(rec));
  } finally {
    await gw.close();
  }
});

/** A chat completion cut by its client once the provider has it (the provider generates, and bills, `n` choices regardless). */
function cutChat(port: number, body: Record<string, unknown>, run: string): Promise<number | 'cut'> {
  return new Promise((resolve) => {
    const reached = new Promise<void>((r) => (arrived = r));
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', agent: false, headers: { 'content-type': 'application/json', 'x-instance-id': `bot-${run}`, 'x-run-id': run } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', () => {});
    req.end(JSON.stringify({ model: TEST_MODEL, messages: [{ role: 'user', content: 'go' }], ...body }));
    void reached.then(() => {
      req.destroy();
      resolve('cut');
    });
  });
}

test('budget: n choices: a chat completion\'s n multiplies what a call cut before its usage is charged (16 choices of 1,000 tokens: $0.16, not $0.01), and under a money budget n above 1 is refused 400 price_not_counted and never forwarded (outputMultiple, worstCase)', { timeout: 30_000 }, async () => {
  const N = 16;
  const MAX = 1000;
  const price = { input: 1, output: 10 };
  let forwarded = 0;
  upstream.script((_req, _res, recorded) => {
    // The provider generates n choices and bills them whether or not its client stays.
    forwarded++;
    const body = JSON.parse(recorded.body.toString()) as { n?: number; max_completion_tokens: number };
    billed.push((estimateTokens(recorded.body.length) * price.input + (body.n ?? 1) * body.max_completion_tokens * price.output) / 1e6);
    arrived();
  });
  const prices = parsePrices(JSON.stringify({ providers: { openai: { [TEST_MODEL]: price } } }), 'prices.json');
  // Tokens limits only: no money budget, so n is forwarded and its worst case counted.
  const tokensOnly = await startGatewayInProcess({ baseUrl: `https://127.0.0.1:${upstream.port}`, pki, limits: new LocalLimits(parseLimitsFile(JSON.stringify({ perInstance: { tokensPerMinute: 10_000_000 } }), 'limits.json')), prices });
  // The security review's case: a $0.05 budget, one call at a time, each held at its worst case.
  const money = await startGatewayInProcess({ baseUrl: `https://127.0.0.1:${upstream.port}`, pki, limits: new LocalLimits(parseLimitsFile(JSON.stringify({ perInstance: { concurrent: 1 }, perRun: { budgetUsd: 0.05 }, perCall: { holdWorstCase: true } }), 'limits.json')), prices });
  try {
    billed = [];
    assert.equal(await cutChat(tokensOnly.port, { n: N, max_completion_tokens: MAX }, 'run-n'), 'cut');
    const rec = await tokensOnly.records.nth(1);
    assert.equal(rec.charge_basis, 'worst_case');
    assert.ok(rec.charged_usd! + 1e-9 >= billed[0]!, `charged $${rec.charged_usd}, at least the $${billed[0]} billed for ${N} choices`);
    assert.equal(rec.charged_usd, Math.round(billed[0]! * 1e6) / 1e6);
    const seen = forwarded;
    const refused = await cutChat(money.port, { n: N, max_completion_tokens: MAX }, 'run-n-money');
    assert.equal(refused, 400);
    const refusal = await money.records.nth(1);
    assert.deepEqual([refusal.status, refusal.error, refusal.limit], [400, 'price_not_counted', 'unpriced_call']);
    assert.equal(forwarded, seen, 'never forwarded');
  } finally {
    await Promise.all([tokensOnly.close(), money.close()]);
  }
});
