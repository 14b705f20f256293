// The strict parser's fast path: one pass over the text before JSON.parse runs, bounding the
// document's depth and size and finding the first duplicate or case-folded key. A key with an
// escape or a non-ASCII character sends the key checks to the slow path (./decoded-keys.ts).
import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE } from './chars.ts';
import { MAP_KEYS, type KeyProblem, type PolicyKeys } from './keys.ts';

/** Keys of one object compared pairwise before a Set takes over. */
const MAX_PAIRWISE_KEYS = 32;

/** The most a document may hold before it is parsed: see parseStrictJson (./strict.ts). */
export interface JsonLimits {
  /** Containers open at once. */
  readonly maxDepth: number;
  /** Objects, arrays, keys and array elements after the first, in the whole document. */
  readonly maxNodes: number;
}

/** A document over its limits: see JsonLimits. */
export type ShapeProblem =
  | { readonly ok: false; readonly reason: 'too_deep'; readonly limit: number }
  | { readonly ok: false; readonly reason: 'too_many_nodes'; readonly limit: number };

function isMapKey(text: string, start: number, end: number): boolean {
  const len = end - start;
  return len >= 5 && len <= 17 && MAP_KEYS.has(text.slice(start, end));
}

/**
 * One pass over the text, before it is parsed: the depth and node count against the limits
 * (stopping at the first breach), and the first key problem. It runs on every gateway request
 * body, so it is one loop without allocations per key: strings are skipped with String#indexOf,
 * the keys of each open object are kept as offsets, and a new key is compared character by
 * character (ASCII case folded) only with keys of the same length. A key with an escape or a
 * non-ASCII character is rare (JSON.stringify escapes only quotes, backslashes and controls):
 * the first one leaves the key checks to decodedKeyProblem, once the text has parsed. The text
 * may be malformed here: an unterminated string ends the scan, and JSON.parse says why.
 */
export function scanDocument(text: string, limits: JsonLimits | undefined, policy: PolicyKeys | undefined): { shape?: ShapeProblem; key?: KeyProblem; slow: boolean } {
  const maxDepth = limits?.maxDepth ?? Infinity;
  const maxNodes = limits?.maxNodes ?? Infinity;
  // keyStarts/keyEnds: offsets of the keys of every open object, innermost last; frames[d]
  // is where object d's keys begin in them (-1 for an array); maps[d]: object d is a map.
  const keyStarts: number[] = [];
  const keyEnds: number[] = [];
  const frames: number[] = [];
  const maps: boolean[] = [];
  /** The keys (folded → as written) of each open object with many keys, by its frames[] value. */
  const bigObjects = new Map<number, Map<string, string>>();
  let key: KeyProblem | undefined;
  let slow = false;
  let nodes = 0;
  let expectKey = false;
  /** The last key read names a map, and its value has not started yet. */
  let mapKeyPending = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i + 1;
      let end = text.indexOf('"', start);
      // A quote preceded by an odd run of backslashes is content.
      let escaped = false;
      while (end > 0 && text.charCodeAt(end - 1) === BACKSLASH) {
        let b = end - 1;
        while (text.charCodeAt(b) === BACKSLASH) b--;
        if ((end - 1 - b) % 2 === 0) break;
        escaped = true;
        end = text.indexOf('"', end + 1);
      }
      if (end === -1) break; // unterminated: JSON.parse will refuse it
      if (!expectKey) {
        mapKeyPending = false;
        i = end + 1;
        continue;
      }
      expectKey = false;
      i = end + 1;
      if (++nodes > maxNodes) return { shape: { ok: false, reason: 'too_many_nodes', limit: maxNodes }, slow };
      mapKeyPending = isMapKey(text, start, end);
      if (key !== undefined || slow) continue;
      let upper = false;
      for (let b = start; b < end; b++) {
        const k = text.charCodeAt(b);
        if (k === BACKSLASH || k >= 0x80) escaped = true;
        else if (k >= 0x41 && k <= 0x5a) upper = true;
      }
      if (escaped) {
        slow = true;
        continue;
      }
      const inMap = maps[maps.length - 1] === true;
      if (upper && policy !== undefined && !inMap) {
        const policyKey = policy.byFold.get(text.slice(start, end).toUpperCase());
        if (policyKey !== undefined) {
          key = { ok: false, reason: 'policy_key_variant', key: text.slice(start, end), policyKey };
          continue;
        }
      }
      const from = frames[frames.length - 1] ?? 0;
      // Past a few dozen keys the pairwise comparison would grow quadratically (a hostile
      // body can hold a million keys): large objects are checked by one Map instead.
      if (keyStarts.length - from >= MAX_PAIRWISE_KEYS) {
        let keys = bigObjects.get(from);
        if (!keys) {
          keys = new Map();
          for (let k = from; k < keyStarts.length; k++) {
            const earlier = text.slice(keyStarts[k]!, keyEnds[k]!);
            keys.set(inMap ? earlier : earlier.toUpperCase(), earlier);
          }
          bigObjects.set(from, keys);
        }
        const written = text.slice(start, end);
        const folded = inMap ? written : written.toUpperCase();
        const other = keys.get(folded);
        if (other !== undefined) key = other === written ? { ok: false, reason: 'duplicate_key', key: written } : { ok: false, reason: 'case_variant_key', key: written, other };
        keys.set(folded, written);
        // A placeholder keeps the count; its offsets are never compared again.
        keyStarts.push(start);
        keyEnds.push(end);
        continue;
      }
      const len = end - start;
      for (let k = from; k < keyStarts.length && key === undefined; k++) {
        const other = keyStarts[k]!;
        if (keyEnds[k]! - other !== len) continue;
        let exact = true;
        let same = true;
        for (let j = 0; j < len; j++) {
          const a = text.charCodeAt(start + j);
          const b = text.charCodeAt(other + j);
          if (a === b) continue;
          exact = false;
          const la = a | 0x20;
          // Letters equal but for case; within a map, only exact equality counts.
          if (inMap || la !== (b | 0x20) || la < 0x61 || la > 0x7a) {
            same = false;
            break;
          }
        }
        if (same) key = exact ? { ok: false, reason: 'duplicate_key', key: text.slice(start, end) } : { ok: false, reason: 'case_variant_key', key: text.slice(start, end), other: text.slice(other, other + len) };
      }
      keyStarts.push(start);
      keyEnds.push(end);
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++nodes > maxNodes) return { shape: { ok: false, reason: 'too_many_nodes', limit: maxNodes }, slow };
      if (frames.length >= maxDepth) return { shape: { ok: false, reason: 'too_deep', limit: maxDepth }, slow };
      const isObject = c === OPEN_BRACE;
      frames.push(isObject ? keyStarts.length : -1);
      maps.push(isObject && mapKeyPending);
      mapKeyPending = false;
      expectKey = isObject;
      i++;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      const from = frames.pop();
      maps.pop();
      if (from !== undefined && from >= 0) {
        keyStarts.length = from;
        keyEnds.length = from;
        bigObjects.delete(from);
      }
      mapKeyPending = false;
      i++;
    } else if (c === COMMA) {
      const inObject = (frames[frames.length - 1] ?? -1) >= 0;
      // In an array, a comma starts another element: counted, so that an array of millions of
      // numbers is bounded like one of millions of objects.
      if (!inObject && ++nodes > maxNodes) return { shape: { ok: false, reason: 'too_many_nodes', limit: maxNodes }, slow };
      expectKey = inObject;
      mapKeyPending = false;
      i++;
    } else {
      i++;
    }
  }
  return { key, slow };
}
