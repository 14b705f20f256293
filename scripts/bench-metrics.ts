// `npm run bench:metrics`: what the metrics cost, in process, without sockets (seconds, one core):
//
//   1. recording one request record (a streamed completion with usage: 8 series updated), the
//      median of 7 rounds of 1,000,000 records cycling through 200 identities;
//   2. the size of one scrape after a flood of 2,500 distinct identities over 3 models and 10
//      workflows with --metrics-max-series 2000: every family labelled by identity is then at its
//      cap, which is the largest scrape bot churn can produce.
import { createProxyMetrics } from '../src/metrics/proxy-metrics.ts';
import type { ModelRequestRecord } from '../src/gateway/record.ts';
import { modelRecord } from '../test/support/records.ts';

const MODELS = ['gpt-4o', 'gpt-4o-mini', 'o3'];
const WORKFLOWS = Array.from({ length: 10 }, (_, i) => `workflow-${i}`);
const PRICE = { input: 2.5, cached: 1.25, output: 10, reasoning: undefined, cacheWrite: undefined };
const PRICES = { get: () => PRICE };
const CAP = 2000;
const DEFAULT_TTL_MS = 3_600_000;

/** Request i: a streamed completion with full usage, of identity bot-i. */
function record(i: number, over: Partial<ModelRequestRecord> = {}): ModelRequestRecord {
  return modelRecord({
    request_id: `req-${i}`,
    model: MODELS[i % MODELS.length]!,
    stream: true,
    duration_ms: 100 + (i % 5000),
    ttft_ms: 20 + (i % 900),
    input_tokens: 1200,
    output_tokens: 300,
    reasoning_tokens: 40,
    cached_tokens: 200,
    usage_complete: true,
    finish_reason: 'stop',
    instance_id: `bot-${i}`,
    workflow: WORKFLOWS[i % WORKFLOWS.length]!,
    run_id: `run-${i}`,
    bytes_in: 2000,
    bytes_out: 9000,
    ...over,
  });
}

const newMetrics = () => createProxyMetrics({ maxSeriesPerFamily: CAP, runIdLabel: false, prices: PRICES, seriesTtlMs: DEFAULT_TTL_MS });

function recordingCostNs(): number {
  const metrics = newMetrics();
  const pool = Array.from({ length: 200 }, (_, i) => record(i));
  const N = 1_000_000;
  const round = () => {
    const start = process.hrtime.bigint();
    for (let i = 0; i < N; i++) metrics.model(pool[i % pool.length]!);
    return Number(process.hrtime.bigint() - start) / N;
  };
  round(); // warm-up: series created, code optimised
  const rounds = Array.from({ length: 7 }, round).sort((a, b) => a - b);
  return rounds[3]!;
}

function scrapeAtCap(): { lines: number; bytes: number; ms: number } {
  const metrics = newMetrics();
  // Each record puts a series in every model family: an interrupted stream (status 200, so also
  // "usage incomplete") with partial usage, a retried 429 and a first token.
  for (let i = 0; i < 2500; i++) metrics.model(record(i, { interrupted: 'client', usage_complete: false, retries: 1, rate_limited: 1 }));
  const start = performance.now();
  const text = metrics.registry.expose();
  const ms = performance.now() - start;
  return { lines: text.split('\n').length - 1, bytes: Buffer.byteLength(text), ms };
}

const ns = recordingCostNs();
const scrape = scrapeAtCap();
process.stdout.write(
  [
    `recording one request record: ${(ns / 1000).toFixed(3)} µs (median of 7 rounds of 1,000,000; 200 identities)`,
    `scrape after 2,500 identities over ${MODELS.length} models × ${WORKFLOWS.length} workflows, cap ${CAP}: ` +
      `${scrape.lines.toLocaleString('en')} lines, ${scrape.bytes.toLocaleString('en')} bytes (${(scrape.bytes / 1024 / 1024).toFixed(1)} MiB), built in ${scrape.ms.toFixed(0)} ms`,
  ].join('\n') + '\n',
);
