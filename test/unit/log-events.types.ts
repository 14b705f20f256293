// Compile-time checks of the log events (the type check, npm test's first step, covers this file;
// log-events.test.ts imports its list of names). If an event lost its type (LogSink widened back
// to any record, a member dropped from LogEvent or one added without its name here), a line
// below stops compiling: an `@ts-expect-error` that no longer finds its error is an error too.
import type { LogRecord, LogSink } from '../../src/http/log.ts';
import type { LogEvent } from '../../src/run/log-events.ts';

/** Every event name the proxy writes: exactly LogEvent's, in the order docs/operations.md lists them. */
export const LOG_EVENT_NAMES = [
  'request',
  'listening',
  'warning',
  'config_error',
  'keys_reloaded',
  'workload_policy_reloaded',
  'sa_keys_loaded',
  'sa_keys_failed',
  'tls_reloaded',
  'tls_reload_failed',
  'tls_refused',
  'connection_refused',
  'pipelined_dropped',
  'credential_refresh_failed',
  'credential_error',
  'websocket_closed',
  'limits_store',
  'limits_charges',
  'tracing',
  'traces_export',
  'handler_error',
  'uncaught_exception',
  'unhandled_rejection',
  'shutdown',
] as const;

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;

/** The type checks themselves: each line fails to compile when what it names is not so. */
export type LogEventChecks = [
  // The list above and the union name the same events, none missing on either side.
  Expect<Equal<(typeof LOG_EVENT_NAMES)[number], LogEvent['event']>>,
  // An event name is a literal, never `string`: the union stays discriminated.
  Expect<Equal<string extends LogEvent['event'] ? true : false, false>>,
  // Every event's fields are JSON values the sink can write (no functions, buffers, class instances).
  Expect<LogEvent extends LogRecord ? true : false>,
];

/** Never called: the calls the type check must refuse, each naming why. */
export function refusedByTheTypeCheck(log: LogSink<LogEvent>): void {
  // @ts-expect-error a misspelt event name
  log({ event: 'listenning', listener: 'metrics', address: '127.0.0.1:9464', version: '1' });
  // @ts-expect-error a field the event does not carry (a credential has no field to go in)
  log({ event: 'shutdown', signal: 'SIGTERM', phase: 'done', authorization: 'Bearer x' });
  // @ts-expect-error a field of another event with the same name (config_error of a key file has no status)
  log({ event: 'config_error', listener: 'git', message: 'unreadable', status: 401 });
  // @ts-expect-error a value of the wrong kind (a count, not a word)
  log({ event: 'limits_charges', state: 'settled', pending: 'none', settled: 1, dropped: 0 });
  // @ts-expect-error a field the event must carry is missing
  log({ event: 'tls_refused', listener: 'git', client: null, refused: 1 });
  // @ts-expect-error an event without a name
  log({ listener: 'git', message: 'no event' });
}
