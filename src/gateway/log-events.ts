// The log events the model gateway writes during a call, beside its access record
// (ModelRequestRecord, record.ts): each a named type, so that a misspelt event name or a field
// not named here is a type error. They name the provider and why, never a credential's value.
import type { HttpLogEvent } from '../http/log-events.ts';
import type { CredentialSource } from './credentials/source.ts';

/** The upstream answered 401 or 403 to the gateway's own credential: the operator must check the provider's key (relay.ts). */
export type ProviderKeyRefusedEvent = {
  readonly event: 'config_error';
  readonly listener: 'model';
  readonly provider: string;
  readonly status: number;
  readonly message: string;
};

/** The provider's credential could not be produced for a call (a token endpoint down, a file unreadable): the reason only (prepare-upstream.ts). */
export type CredentialErrorEvent = {
  readonly event: 'credential_error';
  readonly listener: 'model';
  readonly provider: string;
  readonly credential: CredentialSource['type'];
  readonly reason: string;
};

/**
 * A Responses WebSocket connection ended (responses-socket.ts): its handshake and each of its turns
 * have their own `request` records; this is the connection's one line. `reason`: why it ended (the
 * first cause: client_closed, upstream_closed, idle, draining, shutdown, token_refused, a frame
 * refused as client_<reason> or upstream_<reason>, ...); the close codes each peer sent, if any.
 */
export type SocketClosedEvent = {
  readonly event: 'websocket_closed';
  readonly listener: 'model';
  readonly request_id: string;
  readonly provider: string;
  readonly instance_id: string | null;
  readonly workflow: string | null;
  readonly run_id: string | null;
  readonly turns: number;
  readonly duration_ms: number;
  readonly reason: string;
  readonly client_close: number | null;
  readonly upstream_close: number | null;
};

/** Every event a gateway call may write: its own, and the listener's (a step that threw) through the same sink. */
export type GatewayLogEvent = ProviderKeyRefusedEvent | CredentialErrorEvent | SocketClosedEvent | HttpLogEvent;
