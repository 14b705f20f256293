// `npm run bench:metrics`: what the metrics cost, in process, without sockets (seconds, one core):
//
//   1. recording one request record (a streamed completion with usage: 8 series updated), the
//      median of 7 rounds of 1,000,000 records cycling through 200 identities;
//   2. the size of one scrape after a flood of 2,500 distinct identities over 3 models and 10
//      workflows with --metrics-max-series 2000: every family labelled by identity is then at its
//      cap, which is the largest scrape bot churn can produce;
//   3. the series a fleet keeps: 500 pods (service-account identities, namespace/pod) over 10
//      workflows and 3 models, each pod's calls a mix of answered, retried after a 429 and cut
//      streams, with and without --metrics-drop-instance-id; then 250 pods and 20 workflows, so
//      that the series each pod and each workflow adds are differences of two measurements.
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

/** Series per family (a histogram's label sets, not its bucket lines) after a fleet's calls. */
function fleetSeries(pods: number, workflows: number, dropInstanceId: boolean, cap = CAP): { total: number; model: number; overflowed: number } {
  const metrics = createProxyMetrics({ maxSeriesPerFamily: cap, runIdLabel: false, dropInstanceId, prices: PRICES, seriesTtlMs: DEFAULT_TTL_MS });
  for (let pod = 0; pod < pods; pod++) {
    const who = { instance_id: `team-${pod % 7}/agent-${pod}`, workflow: `workflow-${pod % workflows}` };
    for (const [m, model] of MODELS.entries()) {
      metrics.model(record(pod * 10 + m, { ...who, model }));
      metrics.model(record(pod * 10 + m, { ...who, model, retries: 1, rate_limited: 1 }));
      metrics.model(record(pod * 10 + m, { ...who, model, interrupted: 'client', usage_complete: false }));
    }
  }
  const series = new Set<string>();
  let overflowed = 0;
  for (const line of metrics.registry.expose().split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('proxy_metric_series_overflow_total')) overflowed += Number(line.split(' ')[1]);
    const name = line.slice(0, line.search(/[{ ]/)).replace(/_(bucket|sum|count)$/, '');
    series.add(`${name}${line.slice(name.length).replace(/_(bucket|sum|count)\b/, '').replace(/,?le="[^"]*"/, '').split(' ')[0]}`);
  }
  const model = [...series].filter((s) => s.startsWith('model_gateway_')).length;
  return { total: series.size, model, overflowed };
}

function fleet(): string[] {
  const out: string[] = [];
  for (const drop of [false, true]) {
    const at500 = fleetSeries(500, 10, drop);
    // Uncapped, so that the differences are what each pod and each workflow adds.
    const [all500, all250, wf20] = [fleetSeries(500, 10, drop, 1e9), fleetSeries(250, 10, drop, 1e9), fleetSeries(500, 20, drop, 1e9)];
    const flag = drop ? 'with --metrics-drop-instance-id' : 'without the flag';
    out.push(
      `fleet of 500 pods, 10 workflows, 3 models, ${flag}: ${at500.total.toLocaleString('en')} series (${at500.model.toLocaleString('en')} model_gateway_*), ${at500.overflowed.toLocaleString('en')} observations folded into overflow at cap ${CAP}; ` +
        `uncapped ${all500.total.toLocaleString('en')}: per pod ${((all500.model - all250.model) / 250).toFixed(1)} series (500 against 250 pods), per workflow ${((wf20.model - all500.model) / 10).toFixed(1)} (20 against 10 workflows)`,
    );
  }
  return out;
}

const ns = recordingCostNs();
const scrape = scrapeAtCap();
const fleetLines = fleet();
process.stdout.write(
  [
    `recording one request record: ${(ns / 1000).toFixed(3)} µs (median of 7 rounds of 1,000,000; 200 identities)`,
    `scrape after 2,500 identities over ${MODELS.length} models × ${WORKFLOWS.length} workflows, cap ${CAP}: ` +
      `${scrape.lines.toLocaleString('en')} lines, ${scrape.bytes.toLocaleString('en')} bytes (${(scrape.bytes / 1024 / 1024).toFixed(1)} MiB), built in ${scrape.ms.toFixed(0)} ms`,
    ...fleetLines,
  ].join('\n') + '\n',
);
