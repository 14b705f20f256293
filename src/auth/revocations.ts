// Stopping a run or a leaked token before it expires. Bot and workload tokens are stateless; a
// deny list names runs, instances or single tokens (their `jti`) that both listeners refuse from
// the next request on. It is a file (a mounted volume every replica reads), re-read whenever it
// changes; `node proxy.js revoke` writes it. An entry lives as long as the tokens it stops can
// (--max-token-lifetime), so the list stays small.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileStamp } from '../config/file-stamp.ts';
import { isObject } from '../json/keys.ts';
import { parseStrictJson } from '../json/strict.ts';
import type { WorkloadIdentity } from './identity.ts';

export interface Revocation {
  readonly run_id?: string;
  readonly instance_id?: string;
  readonly token_id?: string;
  /** Unix seconds after which no token it names can still be valid. */
  readonly until: number;
}

const KEYS = ['run_id', 'instance_id', 'token_id'] as const;


/** Pure: the entries of a deny-list file; a malformed one is an error naming the entry. */
export function parseRevocations(text: string): Revocation[] {
  const parsed = parseStrictJson(text);
  if (!parsed.ok || !isObject(parsed.value) || !Array.isArray(parsed.value.revoked)) throw new Error('must be {"revoked": [...]}');
  return parsed.value.revoked.map((raw: unknown, i: number) => {
    if (!isObject(raw) || typeof raw.until !== 'number') throw new Error(`revoked[${i}] must have "until" (unix seconds)`);
    const named = KEYS.filter((k) => raw[k] !== undefined);
    if (named.length !== 1 || typeof raw[named[0]!] !== 'string' || Object.keys(raw).length !== 2) throw new Error(`revoked[${i}] must name exactly one of run_id, instance_id, token_id`);
    return raw as unknown as Revocation;
  });
}

/** Pure: why a verified identity is revoked at `nowSec` (a fixed phrase), or undefined. */
export function revokedReason(entries: readonly Revocation[], who: WorkloadIdentity, nowSec: number): string | undefined {
  for (const e of entries) {
    if (e.until < nowSec) continue;
    if (e.run_id !== undefined && e.run_id === who.runId) return 'its run was revoked';
    if (e.instance_id !== undefined && e.instance_id === who.instanceId) return 'its instance was revoked';
    if (e.token_id !== undefined && e.token_id === who.tokenId) return 'the token was revoked';
  }
  return undefined;
}

/** The deny list as the listeners read it: one stat() per check, the file read again when it changed. */
export function revocationList(path: string, onError: (message: string) => void): { reason(who: WorkloadIdentity, nowSec: number): string | undefined } {
  let stamp = '';
  let entries: Revocation[] = [];
  return {
    reason(who, nowSec) {
      try {
        let next: string;
        try {
          next = fileStamp(path);
        } catch (err) {
          // No file yet: nothing is revoked (revoke creates it).
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
          stamp = 'absent';
          entries = [];
          return undefined;
        }
        if (next !== stamp) {
          entries = parseRevocations(readFileSync(path, 'utf8'));
          stamp = next;
        }
      } catch (err) {
        // An unreadable list refuses every token (fail closed) until it is fixed.
        onError(`--revocations ${path}: ${(err as Error).message}`);
        return 'the revocation list cannot be read';
      }
      return revokedReason(entries, who, nowSec);
    },
  };
}

/** Adds an entry to the deny-list file (created if absent), dropping expired ones; written atomically. */
export function addRevocation(path: string, entry: Revocation, nowSec: number): number {
  let entries: Revocation[] = [];
  try {
    entries = parseRevocations(readFileSync(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`--revocations ${path}: ${(err as Error).message}`);
  }
  const kept = [...entries.filter((e) => e.until >= nowSec), entry];
  writeFileSync(`${path}.tmp`, `${JSON.stringify({ revoked: kept }, null, 2)}\n`);
  renameSync(`${path}.tmp`, path);
  return kept.length;
}
