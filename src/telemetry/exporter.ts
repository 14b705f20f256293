// The batching span exporter (the shape of OpenTelemetry's BatchSpanProcessor): finished spans
// wait in a bounded queue and leave in batches, one export at a time, on a timer or when a batch
// is full. Nothing here is on a request's path: adding a span is a push or, with the queue full,
// a count of the span dropped; the exports run on timers. A collector that is down, slow or
// throttling (429, 503) gets the batch again after a wait (its Retry-After, or a doubling backoff
// with jitter) within a bound, and the spans that arrive meanwhile queue or are dropped and
// counted; a request never waits for it. At shutdown what is queued is sent within the time left.
import { exportOutcome, type ExportOutcome, type OtlpSpan } from './otlp.ts';

/** One POST of a JSON body to the collector (src/http/otlp-client.ts), its answer as exportOutcome reads it. */
export type SendBatch = (body: string, timeoutMs: number) => Promise<{ readonly status: number; readonly retryAfter?: string; readonly body?: string; readonly error?: string }>;

export interface ExporterOptions {
  readonly maxQueue: number;
  readonly maxBatch: number;
  /** How long a span may wait for a batch to fill. */
  readonly delayMs: number;
  readonly exportTimeoutMs: number;
  /** The first wait before a batch is sent again, doubled each time up to maxBackoffMs. */
  readonly backoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Sends of one batch before it is dropped. */
  readonly maxSends?: number;
  readonly random?: () => number;
}

/** Why spans were not exported: the queue was full, the collector refused or never took them, the shutdown left no time. */
export type DropReason = 'queue_full' | 'export_failed' | 'shutdown';

export interface ExporterCounts {
  readonly exported: number;
  readonly dropped: Readonly<Record<DropReason, number>>;
}

/** The exporter's state changes, for the log: exports failing (the reason, never a header), and taken again. */
export type ExporterEvent = { readonly state: 'failing'; readonly reason: string } | { readonly state: 'recovered' };

export class SpanExporter {
  readonly #queue: OtlpSpan[] = [];
  readonly #dropped: Record<DropReason, number> = { queue_full: 0, export_failed: 0, shutdown: 0 };
  #exported = 0;
  #timer: NodeJS.Timeout | undefined;
  #exporting: Promise<void> | undefined;
  #failing = false;
  /** At shutdown: the clock value after which nothing more is sent. */
  #deadline = Infinity;
  #stopped = false;
  /** Ends a wait between two sends of a batch early: the shutdown's flush has begun. */
  #wake: (() => void) | undefined;

  constructor(
    private readonly encode: (spans: readonly OtlpSpan[]) => string,
    private readonly send: SendBatch,
    private readonly options: ExporterOptions,
    private readonly onEvent: (event: ExporterEvent) => void = () => {},
  ) {}

  /** Takes a finished request's spans: queued, or counted as dropped when the queue is full. Never waits. */
  add(spans: readonly OtlpSpan[]): void {
    for (const span of spans) {
      if (this.#stopped) this.#dropped.shutdown++;
      else if (this.#queue.length >= this.options.maxQueue) this.#dropped.queue_full++;
      else this.#queue.push(span);
    }
    if (this.#queue.length >= this.options.maxBatch) this.#schedule(0);
    else if (this.#queue.length > 0) this.#schedule(this.options.delayMs);
  }

  counts(): ExporterCounts {
    return { exported: this.#exported, dropped: { ...this.#dropped } };
  }

  /** Sends what is queued within `withinMs` (the shutdown's grace left); what is left then is dropped and counted. */
  async flush(withinMs: number): Promise<void> {
    this.#deadline = performance.now() + Math.max(0, withinMs);
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#wake?.();
    await this.#exporting;
    while (this.#queue.length > 0 && performance.now() < this.#deadline) await this.#exportBatch();
    this.#dropped.shutdown += this.#queue.splice(0).length;
  }

  /** Stops the timer: the process (or a test's proxy) is going. */
  stop(): void {
    this.#stopped = true;
    this.#deadline = 0;
    clearTimeout(this.#timer);
    this.#wake?.();
  }

  #schedule(ms: number): void {
    if (this.#exporting !== undefined || this.#stopped) return;
    if (this.#timer !== undefined && ms > 0) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#exporting = this.#exportBatch().finally(() => {
        this.#exporting = undefined;
        if (this.#queue.length > 0) this.#schedule(this.#queue.length >= this.options.maxBatch ? 0 : this.options.delayMs);
      });
    }, ms);
    this.#timer.unref();
  }

  /** Sends one batch, again after a wait while the collector asks for it, within maxSends and the deadline. */
  async #exportBatch(): Promise<void> {
    const batch = this.#queue.splice(0, this.options.maxBatch);
    const body = this.encode(batch);
    const { exportTimeoutMs, backoffMs = 1000, maxBackoffMs = 30_000, maxSends = 5, random = Math.random } = this.options;
    let wait = backoffMs;
    for (let sent = 1; ; sent++) {
      const timeout = Math.min(exportTimeoutMs, this.#deadline - performance.now());
      const outcome: ExportOutcome = timeout <= 0 ? { kind: 'drop', reason: 'shutdown' } : exportOutcome(await this.send(body, timeout).catch((err: Error) => ({ status: 0, error: err.message })), Date.now(), maxBackoffMs);
      if (outcome.kind === 'ok') {
        this.#exported += batch.length - Math.min(outcome.rejected, batch.length);
        this.#dropped.export_failed += Math.min(outcome.rejected, batch.length);
        return this.#state(undefined);
      }
      // While the shutdown flushes, a batch is sent again at once, within the time left.
      const delay = this.#stopped ? 0 : outcome.kind === 'retry' ? (outcome.afterMs ?? wait * (0.5 + random() / 2)) : Infinity;
      if (sent >= maxSends || outcome.kind === 'drop') {
        if (outcome.reason === 'shutdown') this.#dropped.shutdown += batch.length;
        else this.#dropped.export_failed += batch.length;
        return this.#state(outcome.reason);
      }
      this.#state(outcome.reason);
      if (delay > 0) await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        timer.unref();
        this.#wake = () => (clearTimeout(timer), resolve());
      });
      this.#wake = undefined;
      wait = Math.min(wait * 2, maxBackoffMs);
    }
  }

  /** Logs a change only: the first failure, and the first success after failures. */
  #state(failure: string | undefined): void {
    if ((failure !== undefined) === this.#failing) return;
    this.#failing = failure !== undefined;
    this.onEvent(failure === undefined ? { state: 'recovered' } : { state: 'failing', reason: failure });
  }
}
