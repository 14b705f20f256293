// One JSON line per event on stdout. Every event is a named type, discriminated by `event`:
// run/log-events.ts has LogEvent, the union of every line the proxy writes; a listener's own
// events are in log-events.ts here. A module's sink (LogSink<E>) takes only the events it may
// write, so a misspelt event name or a field its type does not name is a type error: the types
// are the allowlist of what a line holds, never headers, bodies, queries or credentials. The
// lines reach their file descriptor through asyncLineWriter below and line-writer.ts's write.
import { writeOut, writeOutSync } from './line-writer.ts';

export type LogValue = string | number | boolean | null | undefined | readonly LogValue[] | { readonly [k: string]: LogValue };
/** A log line's fields, each a JSON value: what the sink writes (every event type must be one). */
export type LogRecord = { readonly [field: string]: LogValue };
/** Where a module's log events go; E: the union of the named event types it may write. */
export type LogSink<E extends LogRecord> = (event: E) => void;

/** How much a line matters, least first: `--log-level` writes its level and those after it. */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface LineOptions<E extends LogRecord> {
  readonly now?: () => Date;
  /** The level of each record (every line is `info` without it). */
  readonly levelOf?: (record: E) => LogLevel;
  /** Records below this level are not written. */
  readonly minimum?: LogLevel;
  /**
   * Where a request's line goes when it may be made later (LineWriter.writeLater): without it,
   * every line is made as its record is written.
   */
  readonly later?: (make: () => string) => void;
}

// A field whose value is null, as JSON.stringify writes it. Inside a string every quote is
// escaped, so `,"` before a bare name and `":null` after it only ever stand for a field.
const NULL_FIELD = /,"[a-z_]+":null(?=[,}])/g;

/** Each field's opening in a line (`,"name":`), written once per name. */
const fieldOpenings = new Map<string, string>();
function fieldOpening(name: string): string {
  let opening = fieldOpenings.get(name);
  if (opening === undefined) {
    opening = `,${JSON.stringify(name)}:`;
    if (fieldOpenings.size < 1024) fieldOpenings.set(name, opening);
  }
  return opening;
}

/**
 * Pure: a record's fields (`,"name":value` each) as JSON.stringify writes them, those null or
 * undefined left out, inside an object too (NULL_FIELD). Field by field: half the time of
 * stringifying the record and then a pass of NULL_FIELD over the whole line.
 */
export function recordFields(record: LogRecord): string {
  let out = '';
  for (const name in record) {
    const value: unknown = record[name];
    if (value === null || value === undefined) continue;
    let json: string | undefined;
    if (typeof value === 'string') json = JSON.stringify(value);
    else if (typeof value === 'number') json = Number.isFinite(value) ? String(value) : undefined; // JSON's null: left out
    else if (typeof value === 'boolean') json = value ? 'true' : 'false';
    else json = JSON.stringify(value)?.replace(NULL_FIELD, '');
    if (json !== undefined) out += fieldOpening(name) + json;
  }
  return out;
}

/**
 * Writes records as JSON lines: `time` and `level` first, so that lines sort and read naturally;
 * a field that is null or undefined is left out (what it means is in docs/operations.md). `write`
 * is told whether the line may wait to share a write with others (LineWriter.write): a request's
 * record may, any other event goes out at once. With `later`, a request's line is made there
 * (LineWriter.writeLater), with its time taken now.
 */
export function jsonLineSink<E extends LogRecord = LogRecord>(write: (line: string, batched: boolean) => void, options: LineOptions<E> = {}): LogSink<E> {
  const { now = () => new Date(), levelOf: levelOfRecord = () => 'info', minimum = 'debug', later } = options;
  const least = LOG_LEVELS.indexOf(minimum);
  // Lines made together share their time's text when they share its millisecond.
  let lastMs = Number.NaN;
  let lastIso = '';
  const iso = (time: Date): string => {
    const ms = time.getTime();
    if (ms !== lastMs) {
      lastMs = ms;
      lastIso = time.toISOString();
    }
    return lastIso;
  };
  const line = (record: E, level: LogLevel, time: Date) => `{"time":"${iso(time)}","level":"${level}"${recordFields(record)}}\n`;
  return (record) => {
    const level = levelOfRecord(record);
    if (LOG_LEVELS.indexOf(level) < least) return;
    const time = now();
    const request = record.event === 'request';
    if (request && later !== undefined) return later(() => line(record, level, time));
    write(line(record, level, time), request);
  };
}

/** The path part of a request target for the access log: never the query, bounded in length. */
export function pathForLog(target: string): string {
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  return path.length > 512 ? `${path.slice(0, 512)}…` : path;
}

/** Milliseconds with microsecond precision, for duration fields. */
export function elapsedMs(startedAt: number, now: number): number {
  return Math.round((now - startedAt) * 1000) / 1000;
}

/**
 * How long a request's line may wait for others to share its write. A write is a hand-over to
 * libuv's thread pool, a system call and a wake-up of the log's reader, whatever it carries: at
 * one call at a time a write per line cost about 150 µs of the event loop a call on two shared
 * cores (npm run profile, issue 44), more than all the gateway's own steps, and a write every
 * 10 ms still about 6% of a call's CPU against one every 100 ms.
 */
export const LOG_BATCH_MS = 100;

export interface LineWriter {
  /**
   * `batched`: the line may wait up to LOG_BATCH_MS to share a write (the access log, a line per
   * request); otherwise it goes out at the next turn of the event loop, with every line before it.
   */
  write(line: string, batched?: boolean): void;
  /**
   * A line that may wait, given as what makes it: made at the end of this turn of the loop with
   * the others of the turn, in order (before any line written after it, and before a drain or
   * flushSync), then written as `write(line, true)`. Made together, the access log's lines of a
   * turn cost a ref discovery about 6% less CPU than each made in its request's own steps (npm run
   * profile, issue 44). A line whose making throws is counted as dropped.
   */
  writeLater(make: () => string): void;
  /** Lines dropped because the reader fell more than the buffer limit behind. */
  dropped(): number;
  /** Resolves once everything written so far is out: before a normal exit. */
  drain(): Promise<void>;
  /** Writes whatever is pending, synchronously: for an immediate exit (order not guaranteed). */
  flushSync(): void;
}

/** The size of the blocks pending lines are encoded into: a batch of the access log is a few of them. */
const BLOCK_BYTES = 64 * 1024;

/**
 * Lines waiting for their write, as UTF-8 bytes: each line is encoded as it is written, so that no
 * string waits for the batch. Held as strings for up to LOG_BATCH_MS, a batch's lines (and the
 * pieces each was built from) outlived the young generation's collections and were copied and
 * promoted by them: about 12 µs of CPU a ref discovery (npm run profile, issue 44).
 */
class PendingBytes {
  #blocks: Buffer[] = [];
  #block: Buffer | undefined;
  #used = 0;
  /** Bytes pending. */
  length = 0;

  add(line: string): void {
    // A UTF-16 unit is at most three bytes of UTF-8: the block has room for the line, whatever it holds.
    const room = line.length * 3;
    if (this.#block === undefined || this.#block.length - this.#used < room) {
      if (this.#block !== undefined && this.#used > 0) this.#blocks.push(this.#block.subarray(0, this.#used));
      this.#block = Buffer.allocUnsafe(Math.max(BLOCK_BYTES, room));
      this.#used = 0;
    }
    const written = this.#block.write(line, this.#used);
    this.#used += written;
    this.length += written;
  }

  /** Everything pending, in one Buffer, and nothing pending after (the blocks taken are never written to again). */
  take(): Buffer {
    if (this.#block !== undefined && this.#used > 0) this.#blocks.push(this.#block.subarray(0, this.#used));
    const all = this.#blocks.length === 1 ? this.#blocks[0]! : Buffer.concat(this.#blocks);
    this.#blocks = [];
    this.#block = undefined;
    this.#used = 0;
    this.length = 0;
    return all;
  }
}

/**
 * Log lines for a file descriptor that never block the event loop. On Linux a write to a pipe
 * from process.stdout is synchronous, so a slow log collector would stall every request. Here
 * lines go out in asynchronous writes (libuv's thread pool), in order, one write at a time: the
 * access log's lines at most one write every LOG_BATCH_MS, any other line at the next turn of the
 * loop. If the reader falls more than `maxPendingBytes` behind, new lines are dropped and counted
 * instead of growing memory without bound.
 */
export function asyncLineWriter(fd: number, maxPendingBytes: number, out: typeof writeOut = writeOut): LineWriter {
  const pending = new PendingBytes();
  let writing = false;
  /** A line that may not wait is pending: the next write goes at the next turn, not at the batch's time. */
  let prompt = false;
  let dropped = 0;
  const drained: (() => void)[] = [];
  let batchTimer: NodeJS.Timeout | undefined;
  let soon: NodeJS.Immediate | undefined;
  const soonFlush = (): void => {
    soon = undefined;
    if (prompt) flush(); // else a write since took the line that asked for this turn
  };
  /** The next write, when nothing is being written: at the next turn for a prompt line, else at the batch's time. */
  const schedule = (): void => {
    if (prompt) soon ??= setImmediate(soonFlush);
    else batchTimer ??= setTimeout(flush, LOG_BATCH_MS);
  };
  const flush = (): void => {
    clearTimeout(batchTimer);
    batchTimer = undefined;
    if (writing || pending.length === 0) return;
    writing = true;
    prompt = false;
    out(fd, pending.take(), () => {
      writing = false;
      if (pending.length === 0) for (const d of drained.splice(0)) d();
      else if (drained.length > 0) flush(); // someone waits for everything to be out
      else schedule();
    });
  };

  const add = (line: string, batched: boolean): void => {
    if (pending.length + line.length > maxPendingBytes) {
      dropped++;
      return;
    }
    pending.add(line);
    if (!batched) prompt = true;
    if (!writing) schedule();
  };
  /** Lines given as what makes them (writeLater), not made yet; `making`: the end of their turn, when they are made unless something made them sooner. */
  let unmade: (() => string)[] = [];
  let making: NodeJS.Immediate | undefined;
  const turnEnded = (): void => {
    making = undefined;
    makeLines();
  };
  const makeLines = (): void => {
    if (unmade.length === 0) return;
    const makes = unmade;
    unmade = [];
    for (const make of makes) {
      let line: string;
      try {
        line = make();
      } catch {
        dropped++;
        continue;
      }
      add(line, true);
    }
  };

  return {
    write(line, batched = false) {
      makeLines();
      add(line, batched);
    },
    writeLater(make) {
      unmade.push(make);
      making ??= setImmediate(turnEnded);
    },
    dropped: () => dropped,
    drain() {
      makeLines();
      if (!writing && pending.length === 0) return Promise.resolve();
      return new Promise((resolve) => {
        drained.push(resolve);
        flush();
      });
    },
    flushSync() {
      makeLines();
      if (pending.length === 0) return;
      writeOutSync(fd, pending.take());
    },
  };
}

/** A value from the request shown in a message or the log: printable ASCII, at most 128 characters. */
export function bounded(value: string): string {
  const clean = value.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > 128 ? `${clean.slice(0, 128)}…` : clean;
}
