// A listener serving TLS (--tls-cert, --tls-key) and, with --tls-client-ca, mutual TLS: every
// client presents a certificate that chains to that CA bundle, or the handshake fails. Plain HTTP
// stays the default; this file is used only when the flags are given.
//
// The settings, and why:
//   minVersion TLSv1.2   nothing older; Node negotiates TLS 1.3 whenever the client offers it
//   renegotiation        none: TLS 1.3 has none, and on a TLS 1.2 connection disableRenegotiation()
//                        turns a client's attempt into an error that closes the connection
//   requestCert +        with a client CA, a client without a certificate, with one from another
//   rejectUnauthorized   CA, expired or not yet valid, fails the handshake (no request is read);
//                        the identity (the SPIFFE ID) is read after, per request (auth/spiffe.ts)
//   ALPN http/1.1        the listeners speak HTTP/1.1 only
//   ciphers              Node's defaults (forward-secret AEAD suites first)
//   handshakeTimeout     the header timeout, at most 10 s: --header-timeout starts only once the
//                        handshake is done, and Node's default (120 s) let a peer that sends
//                        nothing hold a socket that long
// The listener counts a connection against its caps when it arrives, before the handshake
// (server.ts), so handshakes in progress are capped as plain connections are.
// The three files are checked again (their inode, size and times, at most once a second) when a
// connection arrives or a request begins, and read again only when one changed (a rotated
// certificate, a CA added to or removed from the bundle, Kubernetes' `..data` swap); the context
// is rebuilt and applies from the next connection. When the client CA bundle changed, the
// connections opened under the previous one are closed: at once when idle, else once the request
// they are serving is answered (with `Connection: close`), so a CA removed from the bundle ends
// its clients' connections within about a second of traffic, not when they choose to hang up.
// A file that cannot be read or a pair that does not match keeps the previous context, logged.
import { readFileSync, statSync } from 'node:fs';
import { createServer as createHttpsServer, type ServerOptions as HttpsOptions } from 'node:https';
import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createSecureContext, type SecureContextOptions, type TLSSocket } from 'node:tls';
import { LogInterval } from './connection-caps.ts';
import type { LogSink } from './log.ts';
import type { HttpLogEvent } from './log-events.ts';

/** The longest a client may take to complete its TLS handshake (less when --header-timeout is less). */
const HANDSHAKE_LIMIT_MS = 10_000;
/** The files' inode, size and time are looked at most this often. */
const TLS_RECHECK_MS = 1000;
/**
 * A file whose time is this recent is compared by its bytes even when its inode, size and time
 * look unchanged: the kernel stamps files with a coarse clock (a few ms), so a rewrite of the
 * same size within one tick of the last look would otherwise go unseen.
 */
const TLS_SETTLE_MS = 2000;

export interface TlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** The CA bundle client certificates must chain to; undefined: no client certificate asked. */
  readonly clientCaFile: string | undefined;
}

interface TlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer | undefined;
}

/** Pure: the server's TLS settings for the material (see the file comment for each). */
export function tlsServerOptions(material: TlsMaterial): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean; ALPNProtocols: string[] } {
  const mutual = material.ca !== undefined;
  return {
    cert: material.cert,
    key: material.key,
    ...(mutual ? { ca: material.ca } : {}),
    minVersion: 'TLSv1.2',
    requestCert: mutual,
    rejectUnauthorized: mutual,
    ALPNProtocols: ['http/1.1'],
  };
}

function readMaterial(files: TlsFiles): TlsMaterial {
  return { cert: readFileSync(files.certFile), key: readFileSync(files.keyFile), ca: files.clientCaFile === undefined ? undefined : readFileSync(files.clientCaFile) };
}

const sameBytes = (a: Buffer | undefined, b: Buffer | undefined): boolean => (a === undefined || b === undefined ? a === b : a.equals(b));

/**
 * What the files look like without reading them: inode, size, modification and change times each
 * (or the error; the change time, set by the kernel on every write, catches a rewrite that put the
 * modification time back), and whether one was modified lately.
 */
function stampFiles(files: TlsFiles, wallMs: number): { readonly text: string; readonly recent: boolean } {
  let text = '';
  let recent = false;
  for (const path of [files.certFile, files.keyFile, files.clientCaFile]) {
    if (path === undefined) continue;
    try {
      const s = statSync(path, { bigint: true });
      text += `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs} `;
      if (wallMs - Number(s.mtimeNs / 1_000_000n) < TLS_SETTLE_MS) recent = true;
    } catch (err) {
      text += `${(err as NodeJS.ErrnoException).code ?? 'unreadable'} `;
    }
  }
  return { text, recent };
}

/** A change of the TLS material: the options to serve with, and whether the client CA bundle is among what changed. */
export interface TlsChange {
  readonly options: ReturnType<typeof tlsServerOptions>;
  readonly clientCaChanged: boolean;
}

export interface TlsSource {
  readonly initial: ReturnType<typeof tlsServerOptions>;
  /** Asked for each connection and request: the new material when a file changed since the last look, else undefined. */
  changed(): TlsChange | undefined;
}

/**
 * The TLS material as it is now: read at start-up (a mistake stops start-up, naming the flag),
 * then looked at again at most once a second (`clock`, monotonic ms) and read when it changed.
 */
export function tlsFileSource(files: TlsFiles, listener: string, log: LogSink<HttpLogEvent>, clock: () => number = () => performance.now()): TlsSource {
  let seen = stampFiles(files, Date.now());
  let current: TlsMaterial;
  try {
    current = readMaterial(files);
    createSecureContext(tlsServerOptions(current));
  } catch (err) {
    throw new Error(`--tls-cert ${files.certFile}, --tls-key ${files.keyFile}${files.clientCaFile === undefined ? '' : `, --tls-client-ca ${files.clientCaFile}`}: ${(err as Error).message}; give PEM files: the certificate (chain), its private key and the CA bundle`);
  }
  let lookedAt = clock();
  let failing = false;
  return {
    initial: tlsServerOptions(current),
    changed() {
      const now = clock();
      if (now - lookedAt < TLS_RECHECK_MS) return undefined;
      lookedAt = now;
      const stamp = stampFiles(files, Date.now());
      if (stamp.text === seen.text && !seen.recent) return undefined;
      seen = stamp;
      let next: TlsMaterial;
      try {
        next = readMaterial(files);
        if (sameBytes(next.cert, current.cert) && sameBytes(next.key, current.key) && sameBytes(next.ca, current.ca)) return undefined;
        createSecureContext(tlsServerOptions(next));
      } catch (err) {
        // Half-written or mismatched: keep serving with what worked, say so once until it heals.
        if (!failing) log({ event: 'tls_reload_failed', listener, reason: (err as NodeJS.ErrnoException).code ?? (err as Error).message });
        failing = true;
        return undefined;
      }
      failing = false;
      const clientCaChanged = !sameBytes(next.ca, current.ca);
      current = next;
      log({ event: 'tls_reloaded', listener, client_ca_changed: clientCaChanged });
      return { options: tlsServerOptions(next), clientCaChanged };
    },
  };
}

/**
 * The plain socket a TLS socket was made from (the one the server's 'connection' event gave),
 * so that what was learnt of it on arrival (its address, the bundle it arrived under) is found
 * again after the handshake, or after a failed one, when the TLS socket no longer has an
 * address. Node keeps it as `_parent` (test/integration/tls-listener.test.ts checks that it does).
 */
export function wrappedSocket(socket: TLSSocket): Socket | undefined {
  const parent = (socket as unknown as { _parent?: unknown })._parent;
  return parent !== null && typeof parent === 'object' && 'remoteAddress' in parent ? (parent as Socket) : undefined;
}

/** Pure: how long a TLS handshake may take: the header timeout (0: none), at most HANDSHAKE_LIMIT_MS. */
export function handshakeTimeoutMs(headerMs: number | undefined): number {
  return headerMs === undefined || headerMs <= 0 ? HANDSHAKE_LIMIT_MS : Math.min(headerMs, HANDSHAKE_LIMIT_MS);
}

/** A connection as it arrived: its client's address and the client CA bundle it is verified under. */
interface Arrival {
  readonly client: string | null;
  readonly bundle: number;
}

/** A connection past its handshake: the bundle that verified it, and the requests it is serving. */
interface Verified {
  readonly bundle: number;
  requests: number;
}

/**
 * An HTTPS server with the listener's HTTP options. `https.Server` serves requests exactly as an
 * `http.Server` does (same events, close and closeIdleConnections), so it stands in for one.
 */
export function createTlsServer(source: TlsSource, options: ServerOptions, handler: (req: IncomingMessage, res: ServerResponse) => void, listener: string, log: LogSink<HttpLogEvent>): Server {
  // Which client CA bundle is in force: a connection verified under an earlier one is closed.
  let bundle = 0;
  const arrivals = new WeakMap<Socket, Arrival>();
  const verified = new Map<TLSSocket, Verified>();
  const refusals = new LogInterval();

  const refresh = (): void => {
    const change = source.changed();
    if (change === undefined) return;
    server.setSecureContext(change.options);
    if (!change.clientCaChanged) return;
    bundle++;
    // Verified under the previous bundle: idle ones now, the others once their request is answered.
    for (const [socket, conn] of verified) if (conn.requests === 0) socket.destroy();
  };

  const serve = (req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket as TLSSocket;
    const conn = verified.get(socket);
    if (conn !== undefined) {
      // Counted before the look at the files, so that a change found now lets this request finish.
      conn.requests++;
      res.once('close', () => {
        conn.requests--;
        if (conn.requests === 0 && conn.bundle !== bundle) socket.destroySoon();
      });
    }
    refresh();
    if (conn === undefined || conn.bundle !== bundle) res.setHeader('connection', 'close');
    handler(req, res);
  };

  const server = createHttpsServer({ ...options, ...source.initial, handshakeTimeout: handshakeTimeoutMs(options.headersTimeout) } as HttpsOptions, serve);
  // Before Node's own 'connection' listener builds the TLS socket, so a change applies to this connection.
  server.prependListener('connection', (socket: Socket) => {
    if (socket.destroyed) return; // refused by a connection cap (server.ts), already logged there
    refresh();
    arrivals.set(socket, { client: socket.remoteAddress ?? null, bundle });
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    socket.disableRenegotiation();
    const arrival = wrappedSocket(socket);
    const bundleAtArrival = arrival === undefined ? undefined : arrivals.get(arrival)?.bundle;
    // Its handshake began under a bundle since replaced (or its arrival is unknown): not trusted.
    if (bundleAtArrival !== bundle) return void socket.destroy();
    verified.set(socket, { bundle, requests: 0 });
    socket.once('close', () => verified.delete(socket));
  });
  // A refused handshake (no client certificate, another CA, expired, an old protocol, none within
  // the handshake timeout): a line naming the client, at most one per interval, no secret.
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
    socket.destroy();
    const raw = wrappedSocket(socket);
    const arrival = raw === undefined ? undefined : arrivals.get(raw);
    if (raw?.destroyed === true && arrival === undefined) return; // refused by a cap on arrival
    const refused = refusals.note(performance.now());
    if (refused === undefined) return;
    log({ event: 'tls_refused', listener, client: arrival?.client ?? null, reason: err.code ?? 'ERR_TLS', refused });
  });
  return server as unknown as Server;
}
