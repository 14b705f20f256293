// The CONNECT tunnel through the egress proxy: a TCP connection to it, the CONNECT head
// (egress.ts), its answer read and framed, then the bare socket handed back for the upstream's
// TLS to run inside it (forward.ts). The egress proxy sees the target host:port and its own
// credential, nothing else: the upstream request, its credential and its answer are inside TLS.
import { connect, type Socket } from 'node:net';
import type { SecretSource } from './secret-source.ts';
import { reveal } from './secret-value.ts';
import { connectRequestHead, egressProxyFor, readConnectAnswer, type EgressProxy, type EgressSettings } from './egress.ts';

/** How to reach one upstream through the egress proxy. */
export interface TunnelRoute {
  readonly proxy: EgressProxy;
  /** --egress-proxy-auth-file, read again for every tunnel (it rotates like every secret file). */
  readonly authorization: SecretSource | undefined;
  /** The egress proxy's TCP connect plus its CONNECT answer (the upstream's TLS handshake has its own timer). */
  readonly connectTimeoutMs: number;
}

/** The egress settings as start-up read them, handed to everything that opens an HTTPS connection. */
export interface Egress {
  readonly settings: EgressSettings;
  readonly authorization: SecretSource | undefined;
  readonly connectTimeoutMs: number;
}

/** Pure: the tunnel to reach host:port by, or undefined (no egress proxy, or NO_PROXY names the upstream: direct). */
export function tunnelRouteFor(egress: Egress | undefined, host: string, port: number): TunnelRoute | undefined {
  const proxy = egress === undefined ? undefined : egressProxyFor(egress.settings, host, port);
  return proxy === undefined ? undefined : { proxy, authorization: egress!.authorization, connectTimeoutMs: egress!.connectTimeoutMs };
}

/** Pure: the tunnel to reach an https: URL by (its host unbracketed, port 443 unless named), or undefined (direct, or not https). */
export function tunnelRouteForUrl(egress: Egress | undefined, url: URL): TunnelRoute | undefined {
  return url.protocol === 'https:' ? tunnelRouteFor(egress, url.hostname.replace(/^\[|\]$/g, ''), Number(url.port || 443)) : undefined;
}

/**
 * A failure of the egress proxy, not of the upstream: its message names the egress proxy and what
 * it did (never a credential, never its answer's text), and is what the client is told (502).
 */
export class EgressError extends Error {
  override readonly name = 'EgressError';
  readonly code = 'ERR_EGRESS_PROXY';
}

/** Opens a tunnel to host:port; `done` gets the socket, paused, with no byte of the upstream read yet. */
export function openTunnel(route: TunnelRoute, host: string, port: number, done: (err: Error | null, socket?: Socket) => void): void {
  const { proxy } = route;
  const target = `${host}:${port}`;
  let head: string;
  try {
    const auth = route.authorization?.read();
    if (auth !== undefined && !auth.ok) throw new EgressError(`the egress proxy credential (--egress-proxy-auth-file) is ${auth.reason === 'missing' ? 'missing or empty' : 'not a valid header value'}; the operator must fix it`);
    head = connectRequestHead(host, port, auth?.ok ? reveal(auth.value) : undefined);
  } catch (err) {
    return done(err instanceof EgressError ? err : new EgressError(`${(err as Error).message} (egress proxy ${proxy.label})`));
  }
  const socket = connect({ host: proxy.host, port: proxy.port, noDelay: true });
  let received: Buffer = Buffer.alloc(0);
  let settled = false;
  const finish = (err: EgressError | null) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('error', onError);
    socket.off('close', onClose);
    if (err !== null) {
      socket.destroy();
      return done(err);
    }
    socket.pause();
    done(null, socket);
  };
  const onData = (chunk: Buffer) => {
    received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
    const answer = readConnectAnswer(received);
    if (answer.kind === 'incomplete') return;
    if (answer.kind === 'malformed') return finish(new EgressError(`the egress proxy ${proxy.label} answered CONNECT ${target} with ${answer.why}`));
    if (answer.status < 200 || answer.status > 299) {
      const hint = answer.status === 407 ? ' (it wants a credential: --egress-proxy-auth-file)' : '';
      return finish(new EgressError(`the egress proxy ${proxy.label} answered ${answer.status} to CONNECT ${target}${hint}; the operator must check the egress proxy`));
    }
    if (answer.extraBytes > 0) return finish(new EgressError(`the egress proxy ${proxy.label} sent ${answer.extraBytes} bytes after its ${answer.status} answer to CONNECT ${target}, before the upstream could have spoken; the tunnel was not used`));
    finish(null);
  };
  const onError = (err: NodeJS.ErrnoException) => finish(new EgressError(`the egress proxy ${proxy.label} could not be reached (${err.code ?? err.message})`));
  const onClose = () => finish(new EgressError(`the egress proxy ${proxy.label} closed the connection before answering CONNECT ${target}`));
  const timer = route.connectTimeoutMs > 0 ? setTimeout(() => finish(new EgressError(`the egress proxy ${proxy.label} did not answer CONNECT ${target} within ${route.connectTimeoutMs / 1000} s`)), route.connectTimeoutMs) : undefined;
  socket.on('data', onData);
  socket.on('error', onError);
  socket.on('close', onClose);
  socket.write(head);
}
