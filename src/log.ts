// One JSON line per event on stdout. Field names are fixed here so that tests and log queries
// can rely on them. Callers pass only fields from the allowlists below: never headers,
// bodies, queries or credentials.

export type LogValue = string | number | boolean | null | undefined | readonly LogValue[] | { readonly [k: string]: LogValue };
export type LogRecord = { readonly [field: string]: LogValue };
export type LogSink = (record: LogRecord) => void;

/** Writes records as JSON lines; `time` first so that lines sort and read naturally. */
export function jsonLineSink(write: (line: string) => void, now: () => Date = () => new Date()): LogSink {
  return (record) => write(`${JSON.stringify({ time: now().toISOString(), ...record })}\n`);
}

/** Milliseconds with microsecond precision, for duration fields. */
export function elapsedMs(startedAt: number, now: number): number {
  return Math.round((now - startedAt) * 1000) / 1000;
}
