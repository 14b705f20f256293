// Credentials are read when a request needs them, never cached from start-up: from an
// environment variable, or from a file that is re-read whenever it changes (mounted secrets
// rotate by replacing the file, or the symlink in front of it).
import { readFileSync } from 'node:fs';
import { Secret } from '../http/secret-value.ts';
import type { SecretRead, SecretRef, SecretSource } from '../http/secret-source.ts';
import { fileStamp } from './file-stamp.ts';

export type { SecretRead, SecretRef, SecretSource };

// Visible ASCII only: anything else (spaces, CR, LF, NUL, non-ASCII) could split or corrupt
// the Authorization header we build from it, so such a value is never sent.
const HEADER_SAFE = /^[\x21-\x7e]+$/;
const TRAILING_NEWLINES = /[\r\n]+$/;

/** Pure: the rule a credential value meets before it is used: visible ASCII only, not empty. */
export function isVisibleAscii(value: string): boolean {
  return HEADER_SAFE.test(value);
}

/** Pure: trailing CR/LF is what `echo` and editors leave in secret files; strip it, then judge. */
export function sanitizeSecret(raw: string | undefined): SecretRead {
  if (raw === undefined) return { ok: false, reason: 'missing' };
  const value = raw.replace(TRAILING_NEWLINES, '');
  if (value === '') return { ok: false, reason: 'missing' };
  if (!isVisibleAscii(value)) return { ok: false, reason: 'invalid' };
  return { ok: true, value: new Secret(value) };
}

/**
 * Pure: a password that never goes into a header (the limits store's AUTH is a length-prefixed
 * RESP string), so any bytes but the trailing newlines a file leaves are kept; empty is missing.
 */
export function sanitizePassword(raw: string | undefined): SecretRead {
  const value = raw?.replace(TRAILING_NEWLINES, '');
  return value ? { ok: true, value: new Secret(value) } : { ok: false, reason: 'missing' };
}

export function envSecret(env: NodeJS.ProcessEnv, name: string): SecretSource {
  return { read: () => sanitizeSecret(env[name]), ref: { env: name } };
}

/** Pure: a source's place as an operator reads it: `the file /run/key` or `the variable NAME`. */
export function describeSecretRef(ref: SecretRef): string {
  return 'file' in ref ? `the file ${ref.file}` : `the variable ${ref.env}`;
}

/**
 * A file secret costs one stat() per read; the file itself is read again only when its stamp
 * (file-stamp.ts) changed.
 */
export function fileSecret(path: string, judge: (raw: string) => SecretRead = sanitizeSecret): SecretSource {
  let stamp = '';
  let cached: SecretRead = { ok: false, reason: 'missing' };
  return {
    ref: { file: path },
    read(): SecretRead {
      let next: string;
      try {
        next = fileStamp(path);
        if (next === stamp) return cached;
        cached = judge(readFileSync(path, 'utf8'));
      } catch {
        stamp = '';
        return { ok: false, reason: 'missing' };
      }
      stamp = next;
      return cached;
    },
  };
}

export function secretSource(env: NodeJS.ProcessEnv, ref: SecretRef): SecretSource {
  return 'env' in ref ? envSecret(env, ref.env) : fileSecret(ref.file);
}

/** A fixed value from configuration (e.g. a username that is not secret). */
export function literalSecret(value: string): SecretSource {
  const read = sanitizeSecret(value);
  return { read: () => read };
}
