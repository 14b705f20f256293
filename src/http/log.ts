// One JSON line per event on stdout. Every event is a named type, discriminated by `event`:
// run/log-events.ts has LogEvent, the union of every line the proxy writes; a listener's own
// events are in log-events.ts here. A module's sink (LogSink<E>) takes only the events it may
// write, so a misspelt event name or a field its type does not name is a type error: the types
// are the allowlist of what a line holds, never headers, bodies, queries or credentials. The
// lines reach their file descriptor through line-writer.ts.

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
}

// A field whose value is null, as JSON.stringify writes it. Inside a string every quote is
// escaped, so `,"` before a bare name and `":null` after it only ever stand for a field.
const NULL_FIELD = /,"[a-z_]+":null(?=[,}])/g;

/**
 * Writes records as JSON lines: `time` and `level` first, so that lines sort and read naturally;
 * a field that is null or undefined is left out (what it means is in docs/operations.md). `write`
 * is told whether the line may wait to share a write with others (LineWriter.write): a request's
 * record may, any other event goes out at once.
 */
export function jsonLineSink<E extends LogRecord = LogRecord>(write: (line: string, batched: boolean) => void, options: LineOptions<E> = {}): LogSink<E> {
  const { now = () => new Date(), levelOf: levelOfRecord = () => 'info', minimum = 'debug' } = options;
  const least = LOG_LEVELS.indexOf(minimum);
  return (record) => {
    const level = levelOfRecord(record);
    if (LOG_LEVELS.indexOf(level) < least) return;
    // Spliced rather than spread into a new object: one copy less on every request.
    const fields = JSON.stringify(record).replace(NULL_FIELD, '');
    write(`{"time":"${now().toISOString()}","level":"${level}"${fields === '{}' ? '' : ','}${fields.slice(1)}\n`, record.event === 'request');
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

/** A value from the request shown in a message or the log: printable ASCII, at most 128 characters. */
export function bounded(value: string): string {
  const clean = value.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > 128 ? `${clean.slice(0, 128)}…` : clean;
}
