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
// The three files are read again at each new connection and the context is rebuilt only when one
// changed (a rotated certificate, a CA added to or removed from the bundle, Kubernetes' `..data`
// swap), so the change applies from the next connection; connections already open keep theirs.
// A file that cannot be read or a pair that does not match keeps the previous context, logged.
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer, type ServerOptions as HttpsOptions } from 'node:https';
import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import { createSecureContext, type SecureContextOptions, type TLSSocket } from 'node:tls';
import type { LogSink } from './log.ts';

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
 * The TLS material as it is now: read at start-up (a mistake stops start-up, naming the flag),
 * then again for each connection, answering the options when a file changed.
 */
export function tlsFileSource(files: TlsFiles, listener: string, log: LogSink): { readonly initial: ReturnType<typeof tlsServerOptions>; changed(): ReturnType<typeof tlsServerOptions> | undefined } {
  let current: TlsMaterial;
  try {
    current = readMaterial(files);
    createSecureContext(tlsServerOptions(current));
  } catch (err) {
    throw new Error(`--tls-cert ${files.certFile}, --tls-key ${files.keyFile}${files.clientCaFile === undefined ? '' : `, --tls-client-ca ${files.clientCaFile}`}: ${(err as Error).message}; give PEM files: the certificate (chain), its private key and the CA bundle`);
  }
  let failing = false;
  return {
    initial: tlsServerOptions(current),
    changed() {
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
      current = next;
      log({ event: 'tls_reloaded', listener });
      return tlsServerOptions(next);
    },
  };
}

/**
 * An HTTPS server with the listener's HTTP options. `https.Server` serves requests exactly as an
 * `http.Server` does (same events, close and closeIdleConnections), so it stands in for one.
 */
export function createTlsServer(source: ReturnType<typeof tlsFileSource>, options: ServerOptions, handler: (req: IncomingMessage, res: ServerResponse) => void, listener: string, log: LogSink): Server {
  const server = createHttpsServer({ ...options, ...source.initial } as HttpsOptions, handler);
  // Before Node's own 'connection' listener builds the TLS socket, so a change applies to this connection.
  server.prependListener('connection', () => {
    const next = source.changed();
    if (next !== undefined) server.setSecureContext(next);
  });
  server.on('secureConnection', (socket: TLSSocket) => socket.disableRenegotiation());
  // A refused handshake (no client certificate, another CA, expired, an old protocol): one line, no secret.
  server.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
    log({ event: 'tls_refused', listener, client: socket.remoteAddress ?? null, reason: err.code ?? 'ERR_TLS' });
    socket.destroy();
  });
  return server as unknown as Server;
}
