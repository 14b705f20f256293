// A small Prometheus registry: counters, gauges and histograms with labels, a cap on series per
// family, expiry of series not updated for a while, and the text exposition format (version
// 0.0.4). Recording costs one Map lookup by a key joined from the label values and one number
// stored; the exposition text is only built when scraped.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { once } from 'node:events';
import { setImmediate as nextTurn } from 'node:timers/promises';

const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
/** Lines built per turn of the event loop while scraping (a few milliseconds of work). */
const SCRAPE_LINES_PER_TURN = 2000;

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** The label value every label takes in a family's overflow series. */
export const OVERFLOW_VALUE = '__overflow__';

type Kind = 'counter' | 'gauge' | 'histogram';

interface HistogramSeries {
  /** Per-bucket counts (not cumulative), one extra slot for +Inf. */
  readonly counts: number[];
  sum: number;
  count: number;
}

/** Label values joined with a separator no validated value can contain. */
function seriesKey(values: readonly string[]): string {
  return values.length === 1 ? values[0]! : values.join('\u0000');
}

/** Escaping of label values: backslash first, then double quote and newline. */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function escapeHelp(help: string): string {
  return help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

export function formatValue(v: number): string {
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  if (Number.isNaN(v)) return 'NaN';
  return String(v);
}

interface Series<S> {
  /** `a="x",b="y"`, escaped once when the series is created: label values never change. */
  readonly labelText: string;
  readonly data: S;
  /** The registry's coarse clock when the series was last updated. */
  touched: number;
}

/**
 * Pure: a series not updated for ttlMs (0: never) is dropped, unless it holds a value that is
 * still true without updates (a gauge that is not zero, such as streams in flight: dropping it
 * would lose a live stream, and its close would then count down from zero).
 */
export function seriesExpired(touched: number, now: number, ttlMs: number, holdsValue: boolean): boolean {
  return ttlMs > 0 && now - touched > ttlMs && !holdsValue;
}

/**
 * How often the coarse clock of a registry with this TTL should tick: a tenth of the TTL, so a
 * series is dropped at most 10% late, but not more often than every 10 ms nor less than every second.
 */
export function clockTickMs(ttlMs: number): number {
  return Math.min(1000, Math.max(10, Math.floor(ttlMs / 10)));
}

/**
 * Runs a registry's coarse clock: `nowMs()` at once (left at 0, it would make the series recorded
 * before the first tick as old as the process), then every clockTickMs. Returns the timer.
 */
export function runCoarseClock(registry: Registry, nowMs: () => number): NodeJS.Timeout {
  const tick = () => registry.tick(nowMs());
  tick();
  return setInterval(tick, clockTickMs(registry.seriesTtlMs)).unref();
}

abstract class Family<S> {
  protected readonly series = new Map<string, Series<S>>();
  /** Registry.now at the last expiry sweep: a family at its cap sweeps at most once per tick. */
  private sweptAt = Number.NaN;

  constructor(
    readonly name: string,
    readonly help: string,
    readonly kind: Kind,
    readonly labelNames: readonly string[],
    private readonly registry: Registry,
    /** The overflow counter is not capped: its labels are the (few) family names. */
    private readonly capped = true,
  ) {}

  protected abstract create(): S;

  /** Whether a series holds a value that stays true without updates (see seriesExpired). */
  protected holdsValue(_data: S): boolean {
    return false;
  }

  /** The series for these label values; past the cap, the family's overflow series. */
  protected get(values: readonly string[]): S {
    if (values.length !== this.labelNames.length) throw new Error(`${this.name}: expected ${this.labelNames.length} label values`);
    const key = seriesKey(values);
    const now = this.registry.now;
    const hit = this.series.get(key);
    if (hit) {
      hit.touched = now;
      return hit.data;
    }
    // The key separator may not appear inside a value, or two label sets could share a key.
    if (values.some((v) => v.includes('\u0000'))) return this.get(values.map((v) => v.replaceAll('\u0000', '\ufffd')));
    if (this.capped && this.series.size >= this.registry.maxSeriesPerFamily && this.sweptAt !== now) this.expire();
    if (this.capped && this.series.size >= this.registry.maxSeriesPerFamily) {
      this.registry.overflowed(this.name);
      const overflow = this.labelNames.map(() => OVERFLOW_VALUE);
      const okey = seriesKey(overflow);
      let o = this.series.get(okey);
      if (!o) {
        // The overflow series itself may exceed the cap by one: it is what tells the truth.
        o = { labelText: this.labelText(overflow), data: this.create(), touched: now };
        this.series.set(okey, o);
      }
      o.touched = now;
      return o.data;
    }
    const created = { labelText: this.labelText(values), data: this.create(), touched: now };
    this.series.set(key, created);
    return created.data;
  }

  /**
   * Drops the series not updated for the registry's TTL. Only capped families with labels
   * expire: a family without labels is one series and cannot grow, and the overflow counter
   * has one series per family name.
   */
  expire(): void {
    const now = this.registry.now;
    this.sweptAt = now;
    if (!this.capped || this.labelNames.length === 0 || this.registry.seriesTtlMs === 0) return;
    for (const [key, s] of this.series) {
      if (seriesExpired(s.touched, now, this.registry.seriesTtlMs, this.holdsValue(s.data))) this.series.delete(key);
    }
  }

  private labelText(values: readonly string[]): string {
    return values.map((v, i) => `${this.labelNames[i]}="${escapeLabelValue(v)}"`).join(',');
  }

  get size(): number {
    return this.series.size;
  }

  protected labels(labelText: string, extra?: string): string {
    if (extra) return labelText === '' ? `{${extra}}` : `{${labelText},${extra}}`;
    return labelText === '' ? '' : `{${labelText}}`;
  }

  /** For Registry: the family's HELP and TYPE lines. */
  exposeHead(out: string[]): void {
    out.push(`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.kind}`);
  }

  /** For Registry: the family's series. */
  seriesList(): IterableIterator<Series<S>> {
    return this.series.values();
  }

  /** For Registry: one series' sample lines. */
  abstract exposeSeries(out: string[], labelText: string, data: S): void;
}

export class Counter extends Family<{ v: number }> {
  protected create() {
    return { v: 0 };
  }
  inc(values: readonly string[], by = 1): void {
    if (!(by >= 0)) throw new Error(`${this.name}: a counter only goes up`);
    this.get(values).v += by;
  }
  exposeSeries(out: string[], labelText: string, data: { v: number }): void {
    out.push(`${this.name}${this.labels(labelText)} ${formatValue(data.v)}`);
  }
}

/** Nano-dollars in a US dollar: money counters add whole nano-dollars, so their sums carry no float noise. */
const NANO_PER_USD = 1e9;

/**
 * A counter of money in USD: each increment is kept as whole nano-dollars (exact sums, no drift
 * from adding floats) and the value is shown rounded to the micro-dollar.
 */
export class UsdCounter extends Family<{ nano: number }> {
  protected create() {
    return { nano: 0 };
  }
  inc(values: readonly string[], usd: number): void {
    if (!(usd >= 0)) throw new Error(`${this.name}: a counter only goes up`);
    this.get(values).nano += Math.round(usd * NANO_PER_USD);
  }
  exposeSeries(out: string[], labelText: string, data: { nano: number }): void {
    // Whole micro-dollars divided once: the shortest decimal form, e.g. 0.3, never 0.30000000000000004.
    out.push(`${this.name}${this.labels(labelText)} ${formatValue(Math.round(data.nano / 1000) / 1e6)}`);
  }
}

export class Gauge extends Family<{ v: number }> {
  protected create() {
    return { v: 0 };
  }
  protected override holdsValue(data: { v: number }): boolean {
    return data.v !== 0;
  }
  set(values: readonly string[], v: number): void {
    this.get(values).v = v;
  }
  add(values: readonly string[], by: number): void {
    this.get(values).v += by;
  }
  exposeSeries(out: string[], labelText: string, data: { v: number }): void {
    out.push(`${this.name}${this.labels(labelText)} ${formatValue(data.v)}`);
  }
}

export class Histogram extends Family<HistogramSeries> {
  private readonly leLabels: readonly string[];
  constructor(name: string, help: string, labelNames: readonly string[], registry: Registry, readonly buckets: readonly number[]) {
    super(name, help, 'histogram', labelNames, registry);
    this.leLabels = buckets.map((b) => `le="${formatValue(b)}"`);
  }
  protected create(): HistogramSeries {
    return { counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
  }
  observe(values: readonly string[], v: number): void {
    const s = this.get(values);
    let i = 0;
    // `!(v <= b)` rather than `v > b`: a NaN belongs in +Inf only, as in the Go client.
    while (i < this.buckets.length && !(v <= this.buckets[i]!)) i++;
    s.counts[i]!++;
    s.sum += v;
    s.count++;
  }
  exposeSeries(out: string[], labelText: string, data: HistogramSeries): void {
    let cumulative = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      cumulative += data.counts[i]!;
      out.push(`${this.name}_bucket${this.labels(labelText, this.leLabels[i])} ${cumulative}`);
    }
    out.push(`${this.name}_bucket${this.labels(labelText, 'le="+Inf"')} ${data.count}`);
    const plain = this.labels(labelText);
    out.push(`${this.name}_sum${plain} ${formatValue(data.sum)}`);
    out.push(`${this.name}_count${plain} ${data.count}`);
  }
}

export class Registry {
  private readonly families: Family<unknown>[] = [];
  private readonly names = new Set<string>();
  private readonly collectors: (() => void)[] = [];
  private readonly overflow: Counter;

  /**
   * Coarse time in milliseconds, advanced by tick(): recording stamps a series with it instead
   * of reading a clock for every observation. Without ticks it stays 0 and nothing expires.
   */
  private clock = 0;

  /**
   * @param maxSeriesPerFamily label sets a family holds before folding new ones into its overflow series
   * @param seriesTtlMs a series not updated for this long leaves the exposition (0: never);
   *   so the cap bounds label sets active at once, not label sets ever seen
   */
  constructor(
    readonly maxSeriesPerFamily: number,
    readonly seriesTtlMs = 0,
  ) {
    if (!Number.isInteger(maxSeriesPerFamily) || maxSeriesPerFamily < 1) throw new Error('maxSeriesPerFamily must be a positive integer');
    if (!(seriesTtlMs >= 0)) throw new Error('seriesTtlMs must be 0 or more');
    this.overflow = this.counter('proxy_metric_series_overflow_total', 'Observations folded into an overflow series because the family reached its series cap.', ['metric'], false);
  }

  /** Names and label names are checked once, here, never on the hot path. */
  private register<F extends Family<unknown>>(family: F): F {
    const { name, kind, labelNames } = family;
    if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name "${name}"`);
    if (this.names.has(name)) throw new Error(`metric "${name}" registered twice`);
    if (kind === 'counter' && !name.endsWith('_total')) throw new Error(`counter "${name}" must end in _total`);
    if (kind !== 'counter' && name.endsWith('_total')) throw new Error(`only counters end in _total ("${name}")`);
    for (const l of labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith('__')) throw new Error(`${name}: invalid label name "${l}"`);
      if (kind === 'histogram' && l === 'le') throw new Error(`${name}: "le" is reserved for histogram buckets`);
    }
    if (new Set(labelNames).size !== labelNames.length) throw new Error(`${name}: duplicate label name`);
    this.names.add(name);
    this.families.push(family);
    return family;
  }

  counter(name: string, help: string, labelNames: readonly string[] = [], capped = true): Counter {
    return this.register(new Counter(name, help, 'counter', labelNames, this, capped));
  }

  /** A counter of US dollars (UsdCounter): exact sums, shown to the micro-dollar. */
  usdCounter(name: string, help: string, labelNames: readonly string[] = []): UsdCounter {
    return this.register(new UsdCounter(name, help, 'counter', labelNames, this, true));
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.register(new Gauge(name, help, 'gauge', labelNames, this));
  }

  histogram(name: string, help: string, labelNames: readonly string[], buckets: readonly number[]): Histogram {
    if (buckets.length === 0 || buckets.some((b, i) => !Number.isFinite(b) || (i > 0 && b <= buckets[i - 1]!))) {
      throw new Error(`${name}: buckets must be finite and strictly increasing`);
    }
    return this.register(new Histogram(name, help, labelNames, this, buckets));
  }

  /** Advances the coarse clock; the caller's timer ticks every clockTickMs(seriesTtlMs). */
  tick(nowMs: number): void {
    this.clock = nowMs;
  }

  /** The coarse clock, for the families. */
  get now(): number {
    return this.clock;
  }

  /** Runs before each exposition: for values read from the process (memory, descriptors). */
  onCollect(collect: () => void): void {
    this.collectors.push(collect);
  }

  overflowed(metric: string): void {
    this.overflow.inc([metric]);
  }

  /** The whole exposition: one HELP and TYPE per family, its samples grouped, final newline. */
  expose(): string {
    let text = '';
    for (const chunk of this.exposeChunks(Infinity)) text += chunk;
    return text;
  }

  /**
   * The exposition in pieces of about `linesPerChunk` lines, each ending in a newline, so that
   * a scrape of a large registry can yield to the event loop between pieces instead of
   * stalling every open stream while it builds megabytes of text.
   */
  *exposeChunks(linesPerChunk: number): Generator<string> {
    for (const c of this.collectors) c();
    let out: string[] = [];
    for (const f of this.families) {
      f.expire();
      f.exposeHead(out);
      for (const s of f.seriesList()) {
        f.exposeSeries(out, s.labelText, s.data);
        if (out.length >= linesPerChunk) {
          yield `${out.join('\n')}\n`;
          out = [];
        }
      }
    }
    if (out.length > 0) yield `${out.join('\n')}\n`;
  }
}

/**
 * GET /metrics. The text is written piece by piece, yielding to the event loop in between, so a
 * scrape of a registry at its series cap delays open streams by milliseconds, not by the
 * hundreds of milliseconds building it in one go would take.
 */
export async function serveMetrics(registry: Registry, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.url !== '/metrics' || req.method !== 'GET') {
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('only GET /metrics and /healthz are served here\n');
    return;
  }
  res.writeHead(200, { 'content-type': EXPOSITION_CONTENT_TYPE, 'cache-control': 'no-store' });
  for (const chunk of registry.exposeChunks(SCRAPE_LINES_PER_TURN)) {
    if (res.destroyed) return;
    if (!res.write(chunk)) await once(res, 'drain');
    await nextTurn();
  }
  res.end();
}
