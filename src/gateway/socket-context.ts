// What a Responses API WebSocket needs of the gateway (socket-handshake.ts, responses-socket.ts),
// and what its handshake hands its connection.
import type { Socket } from 'node:net';
import type { HeldBodies } from '../http/held-bodies.ts';
import type { Redactor } from '../http/redactor.ts';
import type { LimitsStore } from '../limits/admission.ts';
import type { SendPolicy } from './attempts.ts';
import type { BotAuth } from './authenticate.ts';
import type { CallContext } from './call.ts';
import type { CallPolicy } from './check-call.ts';
import type { Provider } from './providers.ts';
import type { RelayContext } from './relay.ts';

/** What the metrics are told of WebSocket connections (the turns are counted from their records). */
export interface SocketMetrics {
  opened(provider: string): void;
  closed(provider: string): void;
  /** A peer's frames refused (a protocol violation, a binary message), by side and reason. */
  refused(side: 'client' | 'upstream', reason: string): void;
}

/** What a WebSocket connection needs of the gateway. */
export interface SocketContext extends CallContext, RelayContext {
  readonly auth: BotAuth;
  readonly policy: CallPolicy;
  readonly send: SendPolicy;
  readonly limits: LimitsStore | undefined;
  /** The largest message either way, and every frame of it: the body-size limit. */
  readonly maxBodyBytes: number;
  readonly heldBodies: HeldBodies;
  /** The provider that speaks WebSocket mode (at most one: the upgrade names no model), if any. */
  readonly socketProvider: Provider | undefined;
  readonly sockets?: SocketMetrics;
  /** How long a peer has to answer a close frame. */
  readonly socketCloseMs: number;
}

/** What the handshake hands the connection: the provider's socket and what came after its 101, the secrets to redact. */
export interface OpenedSocket {
  readonly upstream: Socket;
  readonly head: Buffer;
  readonly redactor: Redactor;
  readonly provider: Provider;
}
