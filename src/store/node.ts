// One node of the store (a Redis or a sentinel): its address, a connection to it (TCP, or TLS
// whose certificate is always verified), and what its replies say about it rather than about the
// command (a replica now, unable to write, its role). The AUTH command is made here, so that the
// client and the sentinels' connections (resp.ts, sentinel.ts) pass the password on unread.
import { readFileSync } from 'node:fs';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { reveal, type Secret } from '../http/secret-value.ts';

/** A node of the store: a Redis, or a sentinel. */
export interface StoreAddress {
  readonly host: string;
  readonly port: number;
}

/** TLS to the store (rediss://): the server's certificate verified, against this CA bundle or the system's. */
export interface StoreTls {
  /** Read on every connection, so a rotated bundle is used from the next reconnect on. */
  readonly caFile: string | undefined;
}

/** Pure: host:port, an IPv6 address in brackets. */
export const showAddress = (a: StoreAddress): string => (a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`);

/**
 * A connection to one node, TCP or TLS. TLS verifies the certificate (never turned off) for the
 * host's name, or for its address when the host is one (an address is not a server name, RFC 6066).
 * Throws when the CA file cannot be read (the connection fails, naming it).
 */
export function openSocket(at: StoreAddress, tls: StoreTls | false): { socket: Socket; ready: 'connect' | 'secureConnect' } {
  if (tls === false) return { socket: netConnect({ host: at.host, port: at.port }), ready: 'connect' };
  let ca: Buffer | undefined;
  try {
    ca = tls.caFile === undefined ? undefined : readFileSync(tls.caFile);
  } catch {
    throw new Error(`--limits-store-ca-file ${tls.caFile} cannot be read`);
  }
  const socket = tlsConnect({ host: at.host, port: at.port, ca, rejectUnauthorized: true, servername: isIP(at.host) === 0 ? at.host : undefined });
  return { socket, ready: 'secureConnect' };
}

/**
 * Pure: what an error reply (its message) says about the node rather than the command. READONLY: it is a
 * replica now (a failover demoted it): the connection is dropped, and the next one goes to the
 * master. NOREPLICAS, LOADING, MASTERDOWN: it cannot take writes or answer now. Either way the
 * command may be sent again later (a charge waits in the backlog), unlike a script's own error.
 */
export function nodeStateError(message: string): 'replica' | 'unavailable' | undefined {
  const code = /^[A-Z]+/.exec(message)?.[0];
  return code === 'READONLY' ? 'replica' : code === 'NOREPLICAS' || code === 'LOADING' || code === 'MASTERDOWN' ? 'unavailable' : undefined;
}

/** Pure: the role a ROLE reply names (`master`, `slave`, `sentinel`), or undefined when it is not a ROLE reply. */
export function roleOf(reply: unknown): string | undefined {
  return Array.isArray(reply) && typeof reply[0] === 'string' ? reply[0] : undefined;
}

/** The AUTH command for a user (or the default one) and its password: the one place a store's or a sentinel's password is read. */
export function authCommand(user: string | undefined, password: Secret): string[] {
  return user === undefined ? ['AUTH', reveal(password)] : ['AUTH', user, reveal(password)];
}
