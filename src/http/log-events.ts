// The log events a listener writes itself (server.ts, connections.ts, tls-listener.ts,
// lifecycle.ts): connections and handshakes refused, TLS files re-read, a handler that threw.
// Each is a named type; a listener's sink takes only these, so a misspelt event name or a field
// not named here is a type error. None carries a request's data: a listener's name, a client's
// address, counts, a reason code, an error's name and message.

/** The TLS files changed but cannot be used (half-written, mismatched): the last good ones stay. Once until they heal. */
export type TlsReloadFailedEvent = { readonly event: 'tls_reload_failed'; readonly listener: string; readonly reason: string };

/** The TLS files changed and were taken; with a new client CA, connections under the old one are closed. */
export type TlsReloadedEvent = { readonly event: 'tls_reloaded'; readonly listener: string; readonly client_ca_changed: boolean };

/** Handshakes refused (no or another client certificate, an old protocol, too slow): at most one line an interval, `refused` counting them. */
export type TlsRefusedEvent = { readonly event: 'tls_refused'; readonly listener: string; readonly client: string | null; readonly reason: string; readonly refused: number };

/** A client closed its connection with pipelined requests still queued behind the one served. */
export type PipelinedDroppedEvent = { readonly event: 'pipelined_dropped'; readonly listener: string; readonly requests: number };

/** Connections refused by a cap (all of a listener's, or one client's): at most one line an interval. */
export type ConnectionRefusedEvent = {
  readonly event: 'connection_refused';
  readonly listener: string;
  readonly reason: 'total' | 'per_client';
  readonly client: string;
  readonly refused: number;
  readonly cap: number;
};

/** A handler threw: a bug, never a request's fault; the error's name and message, no request data. */
export type HandlerErrorEvent = { readonly event: 'handler_error'; readonly listener: string; readonly error: string; readonly detail: string };

/** Every event a listener writes itself. */
export type HttpLogEvent = TlsReloadFailedEvent | TlsReloadedEvent | TlsRefusedEvent | PipelinedDroppedEvent | ConnectionRefusedEvent | HandlerErrorEvent;
