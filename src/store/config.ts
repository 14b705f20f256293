// The shared store's settings (--limits-store, --limits-store-password-file): where it is, and the
// password to give it.
import { fileSecret, sanitizePassword, type SecretSource } from '../config/secret.ts';

/** Pure: `redis://HOST:PORT` or `rediss://HOST:PORT` (TLS), nothing else (a password comes from a file). */
export function parseStoreUrl(text: string): { host: string; port: number; tls: boolean } {
  const m = /^(rediss?):\/\/([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})\/?$/.exec(text);
  if (!m || Number(m[3]) > 65535) throw new Error(`--limits-store: "${text}" must be memory, redis://HOST:PORT or rediss://HOST:PORT (a password goes in --limits-store-password-file)`);
  return { host: m[2]!.replace(/^\[|\]$/g, ''), port: Number(m[3]), tls: m[1] === 'rediss' };
}

/**
 * The limits store's password: read again on every connection, so a rotated file is used from the
 * next reconnect on; a file that is missing or empty at start-up stops it, naming the flag.
 */
export function storePassword(file: string | undefined): SecretSource | undefined {
  if (file === undefined) return undefined;
  const source = fileSecret(file, sanitizePassword);
  if (!source.read().ok) throw new Error(`--limits-store-password-file: ${file} cannot be read, or is empty`);
  return source;
}
