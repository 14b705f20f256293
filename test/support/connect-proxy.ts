// A corporate egress proxy on loopback, for tests: it answers CONNECT, tunnels bytes both ways,
// and records what it received before the tunnel opened (the request head, verbatim) and every
// byte that went through each tunnel, so that tests can assert that nothing but the CONNECT line,
// Host and Proxy-Authorization ever reached it in the clear. Its misbehaviours are modes.
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface ConnectRecord {
  /** The request line, e.g. `CONNECT 127.0.0.1:4443 HTTP/1.1`. */
  readonly requestLine: string;
  /** The header lines as received, in order (names lower-cased). */
  readonly headers: readonly (readonly [string, string])[];
  /** The whole head as received. */
  readonly rawHead: string;
  /** Whether the tunnel was opened. */
  opened: boolean;
  /** Every byte the client sent through the tunnel (TLS records), for leak checks. */
  readonly tunnelled: Buffer[];
}

export type ConnectMode =
  /** Tunnel every target `allow` accepts (403 otherwise). */
  | { readonly kind: 'tunnel'; readonly allow?: (target: string) => boolean; readonly requireAuthorization?: string }
  /** Answer every CONNECT with this status and a small body, then close. */
  | { readonly kind: 'refuse'; readonly status: number }
  /** Answer 200 with bytes after the blank line (a body or garbage), then tunnel. */
  | { readonly kind: 'extra-bytes' };

export interface ConnectProxy {
  readonly port: number;
  readonly url: string;
  readonly records: ConnectRecord[];
  setMode(mode: ConnectMode): void;
  close(): Promise<void>;
}

export async function startConnectProxy(initial: ConnectMode = { kind: 'tunnel' }): Promise<ConnectProxy> {
  let mode = initial;
  const records: ConnectRecord[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      client.off('data', onData);
      client.pause();
      const rawHead = head.subarray(0, end + 4).toString('latin1');
      const rest = head.subarray(end + 4);
      const [requestLine = '', ...lines] = rawHead.slice(0, -4).split('\r\n');
      const headers = lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const);
      const record: ConnectRecord = { requestLine, headers, rawHead, opened: false, tunnelled: rest.length > 0 ? [Buffer.from(rest)] : [] };
      records.push(record);
      answer(client, record, rest);
    };
    client.on('data', onData);
  });

  const answer = (client: Socket, record: ConnectRecord, rest: Buffer): void => {
    const m = /^CONNECT ([^ ]+) HTTP\/1\.1$/.exec(record.requestLine);
    const refuse = (status: number): void => void client.end(`HTTP/1.1 ${status} Refused\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\nnot allowed`);
    if (mode.kind === 'refuse') return refuse(mode.status);
    if (m === null) return refuse(400);
    const target = m[1]!;
    if (mode.kind === 'tunnel') {
      if (mode.allow && !mode.allow(target)) return refuse(403);
      const auth = record.headers.find(([n]) => n === 'proxy-authorization')?.[1];
      if (mode.requireAuthorization !== undefined && auth !== mode.requireAuthorization) {
        return void client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="egress"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      }
    }
    const colon = target.lastIndexOf(':');
    const upstream = connect({ host: target.slice(0, colon).replace(/^\[|\]$/g, ''), port: Number(target.slice(colon + 1)) });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.once('connect', () => {
      record.opened = true;
      client.write(`HTTP/1.1 200 Connection established\r\n\r\n${mode.kind === 'extra-bytes' ? 'HTTP/1.1 200 OK\r\n\r\n' : ''}`);
      if (rest.length > 0) upstream.write(rest);
      client.on('data', (c: Buffer) => record.tunnelled.push(Buffer.from(c)));
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
  };

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    records,
    setMode: (next) => void (mode = next),
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
