// The level of every line the proxy writes (--log-level picks the least that is written). Pure.
// `error`: something failed that an operator must look at (a provider or git host failing, a
// credential, a file or the store broken, a bug); `warn`: refused, cut by the client or a cap, or
// degraded but still serving; `info`: what happened as it should; `debug`: detail nobody needs
// unless they are chasing something.
import type { LogLevel } from '../http/log.ts';
import type { LogEvent } from './log-events.ts';

type Leveled<K extends LogEvent['event']> = LogLevel | ((event: Extract<LogEvent, { event: K }>) => LogLevel);

/** A request record: `info` when it went as it should, else by who failed (docs/operations.md, Logs). */
export function requestLevel(record: { readonly status: number; readonly error: string | null | undefined }): LogLevel {
  const { status, error } = record;
  if (error === null || error === undefined) return 'info';
  if (status >= 500) return 'error';
  // The client left, a forced shutdown cut it, or a rule or the upstream refused it (4xx).
  if (error === 'client_aborted' || error === 'shutdown' || status === 0 || status >= 400) return 'warn';
  // Answered 2xx (or 1xx/3xx) and then cut or failed by the upstream: a reset, a stall, an error event.
  return 'error';
}

/** Every event's level: a missing event name is a type error. */
const EVENT_LEVELS: { readonly [K in LogEvent['event']]: Leveled<K> } = {
  request: (e) => requestLevel(e),
  listening: 'info',
  warning: 'warn',
  config_error: 'error',
  keys_reloaded: 'info',
  workload_policy_reloaded: 'info',
  sa_keys_loaded: 'info',
  sa_keys_failed: 'error',
  tls_reloaded: 'info',
  tls_reload_failed: 'error',
  tls_refused: 'warn',
  connection_refused: 'warn',
  pipelined_dropped: 'debug',
  credential_refresh_failed: 'error',
  credential_error: 'error',
  limits_store: (e) => (e.state === 'down' || e.state === 'lost' ? 'error' : 'info'),
  websocket_closed: 'info',
  limits_charges: (e) => (e.state === 'waiting' ? 'warn' : 'info'),
  tracing: 'info',
  traces_export: (e) => (e.state === 'failing' ? 'warn' : 'info'),
  handler_error: 'error',
  uncaught_exception: 'error',
  unhandled_rejection: 'error',
  shutdown: 'info',
};

/** Pure: the level of a line. */
export function logLevel(event: LogEvent): LogLevel {
  const level = EVENT_LEVELS[event.event] as Leveled<LogEvent['event']>;
  return typeof level === 'string' ? level : level(event as never);
}
