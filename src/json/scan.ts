// The strict parser's fast path: one pass over the text before JSON.parse runs, bounding the
// document's depth and size and finding the first duplicate or case-folded key. A key with an
// escape or a non-ASCII character sends the key checks to the slow path (./decoded-keys.ts).
//
// The pass is scanDocument, a loop over the bytes that matter (quotes, brackets, commas); each
// rule it applies is a named part with its own tests: where a string ends (stringEnd), what a key
// needs before it can be compared (keyForm), a key read as a policy key (policyVariant), two keys
// compared in place (keysMatch), the keys of the open objects (KeyStack) and the limits on size
// and depth (ShapeBudget).
import { Char } from './chars.ts';
import { MAP_KEYS, type KeyProblem, type PolicyKeys } from './keys.ts';

/** Keys of one object compared pairwise before a Map takes over. */
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

/**
 * Where a string ends: the offset of its closing quote, searching from `from` (just past the
 * opening quote), or -1 when it is unterminated. A quote after an odd run of backslashes is
 * content (the last backslash escapes it); after an even run, the backslashes escape each other
 * and the quote ends the string.
 */
export function stringEnd(text: string, from: number): number {
  let end = text.indexOf('"', from);
  while (end > 0 && text.charCodeAt(end - 1) === Char.BACKSLASH) {
    let b = end - 1;
    while (text.charCodeAt(b) === Char.BACKSLASH) b--;
    if ((end - 1 - b) % 2 === 0) break;
    end = text.indexOf('"', end + 1);
  }
  return end;
}

/**
 * What a key (text[start, end), between its quotes) needs before it can be compared in place:
 * nothing; an ASCII case fold, for its capitals; or decoding, for an escape or a non-ASCII
 * character, which the slow path does once JSON.parse has accepted the text.
 */
export function keyForm(text: string, start: number, end: number): 'as-is' | 'has-capitals' | 'needs-decoding' {
  let capitals = false;
  for (let b = start; b < end; b++) {
    const k = text.charCodeAt(b);
    if (k === Char.BACKSLASH || k >= 0x80) return 'needs-decoding';
    if (k >= 0x41 && k <= 0x5a) capitals = true;
  }
  return capitals ? 'has-capitals' : 'as-is';
}

/**
 * A key with capitals that folds to a policy key without being it (`Tools` for `tools`): a
 * case-insensitive upstream reads it as that key. Policy keys are lower-case ASCII, so a key
 * without capitals is one or folds to none.
 */
export function policyVariant(policy: PolicyKeys, text: string, start: number, end: number): KeyProblem | undefined {
  const written = text.slice(start, end);
  const policyKey = policy.byFold.get(written.toUpperCase());
  return policyKey === undefined ? undefined : { ok: false, reason: 'policy_key_variant', key: written, policyKey };
}

/**
 * Two keys of the same length compared in place, at offsets `a` and `b`: the same characters
 * ('exact'), the same but for the case of ASCII letters ('case'), or different (undefined).
 * Within a map only exact equality counts. Only letters fold: `[` and `{` differ by the case
 * bit alone and are different keys.
 */
export function keysMatch(text: string, a: number, b: number, length: number, inMap: boolean): 'exact' | 'case' | undefined {
  let exact = true;
  for (let j = 0; j < length; j++) {
    const x = text.charCodeAt(a + j);
    const y = text.charCodeAt(b + j);
    if (x === y) continue;
    exact = false;
    const lower = x | 0x20;
    if (inMap || lower !== (y | 0x20) || lower < 0x61 || lower > 0x7a) return undefined;
  }
  return exact ? 'exact' : 'case';
}

/**
 * The keys of every open object, as offsets into the text, innermost object last, so that a new
 * key is compared with its own object's keys only and no key costs an allocation. Up to 32 keys,
 * a new key is compared character by character with those of the same length (keysMatch); past
 * 32, the pairwise comparison would grow quadratically (a hostile body can hold a million keys),
 * and one Map of the object's keys, folded, decides instead. Keys are ASCII here (keyForm sends
 * the others to the slow path), so toUpperCase is the ASCII fold.
 */
export class KeyStack {
  private readonly text: string;
  /** Offsets of the keys of every open object, innermost last. */
  private readonly keyStarts: number[] = [];
  private readonly keyEnds: number[] = [];
  /** Per open container: where its keys begin in keyStarts, or -1 for an array. */
  private readonly frames: number[] = [];
  /** Per open container: an object whose keys are names the client chose (a map, MAP_KEYS). */
  private readonly maps: boolean[] = [];
  /** The keys (folded → as written) of each open object past 32 keys, by its frames[] value. */
  private readonly bigObjects = new Map<number, Map<string, string>>();

  constructor(text: string) {
    this.text = text;
  }

  /** Containers open. */
  get depth(): number {
    return this.frames.length;
  }

  openObject(isMap: boolean): void {
    this.frames.push(this.keyStarts.length);
    this.maps.push(isMap);
  }

  openArray(): void {
    this.frames.push(-1);
    this.maps.push(false);
  }

  /** The innermost container closes, and its keys are forgotten (nothing, when none is open). */
  close(): void {
    const from = this.frames.pop();
    this.maps.pop();
    if (from === undefined || from < 0) return;
    this.keyStarts.length = from;
    this.keyEnds.length = from;
    this.bigObjects.delete(from);
  }

  /** The innermost container is an object. */
  inObject(): boolean {
    return (this.frames[this.frames.length - 1] ?? -1) >= 0;
  }

  /** The innermost container is a map (its keys are the client's names). */
  inMap(): boolean {
    return this.maps[this.maps.length - 1] === true;
  }

  /** A key of the innermost object, text[start, end): a duplicate or case variant of an earlier one, or undefined. */
  add(start: number, end: number): KeyProblem | undefined {
    const from = this.frames[this.frames.length - 1] ?? 0;
    const problem = this.keyStarts.length - from < MAX_PAIRWISE_KEYS ? this.pairwiseProblem(from, start, end) : this.bigObjectProblem(from, start, end);
    // Past 32 keys the offsets are never compared again: they keep the count.
    this.keyStarts.push(start);
    this.keyEnds.push(end);
    return problem;
  }

  private pairwiseProblem(from: number, start: number, end: number): KeyProblem | undefined {
    const length = end - start;
    const inMap = this.inMap();
    for (let k = from; k < this.keyStarts.length; k++) {
      const other = this.keyStarts[k]!;
      if (this.keyEnds[k]! - other !== length) continue;
      const match = keysMatch(this.text, start, other, length, inMap);
      if (match === 'exact') return { ok: false, reason: 'duplicate_key', key: this.text.slice(start, end) };
      if (match === 'case') return { ok: false, reason: 'case_variant_key', key: this.text.slice(start, end), other: this.text.slice(other, other + length) };
    }
    return undefined;
  }

  private bigObjectProblem(from: number, start: number, end: number): KeyProblem | undefined {
    const inMap = this.inMap();
    let keys = this.bigObjects.get(from);
    if (!keys) {
      keys = new Map();
      for (let k = from; k < this.keyStarts.length; k++) {
        const earlier = this.text.slice(this.keyStarts[k]!, this.keyEnds[k]!);
        keys.set(inMap ? earlier : earlier.toUpperCase(), earlier);
      }
      this.bigObjects.set(from, keys);
    }
    const written = this.text.slice(start, end);
    const folded = inMap ? written : written.toUpperCase();
    const other = keys.get(folded);
    keys.set(folded, written);
    if (other === undefined) return undefined;
    return other === written ? { ok: false, reason: 'duplicate_key', key: written } : { ok: false, reason: 'case_variant_key', key: written, other };
  }
}

/**
 * The document's size and depth against the limits, without limits when there are none: every
 * node (an object, an array, a key, an array element after the first) is counted as it is met,
 * and a container's depth is checked as it opens, so the first breach stops the scan.
 */
export class ShapeBudget {
  private readonly maxDepth: number;
  private readonly maxNodes: number;
  private nodes = 0;

  constructor(limits: JsonLimits | undefined) {
    this.maxDepth = limits?.maxDepth ?? Infinity;
    this.maxNodes = limits?.maxNodes ?? Infinity;
  }

  /** One more node: the problem once there are more than maxNodes. */
  node(): ShapeProblem | undefined {
    return ++this.nodes > this.maxNodes ? { ok: false, reason: 'too_many_nodes', limit: this.maxNodes } : undefined;
  }

  /** A container opens with `depth` already open: a node, and too deep at maxDepth open ones. */
  open(depth: number): ShapeProblem | undefined {
    return this.node() ?? (depth >= this.maxDepth ? { ok: false, reason: 'too_deep', limit: this.maxDepth } : undefined);
  }
}

function isMapKey(text: string, start: number, end: number): boolean {
  const len = end - start;
  return len >= 5 && len <= 17 && MAP_KEYS.has(text.slice(start, end));
}

/**
 * One pass over the text, before it is parsed: the depth and node count against the limits
 * (stopping at the first breach), and the first key problem. It runs on every gateway request
 * body, so it is one loop without allocations per key: strings are skipped with String#indexOf,
 * the keys of each open object are kept as offsets (KeyStack). A key with an escape or a
 * non-ASCII character is rare (JSON.stringify escapes only quotes, backslashes and controls):
 * the first one leaves the key checks to decodedKeyProblem, once the text has parsed (`slow`).
 * The text may be malformed here: an unterminated string ends the scan, and JSON.parse says why.
 */
export function scanDocument(text: string, limits: JsonLimits | undefined, policy: PolicyKeys | undefined): { shape?: ShapeProblem; key?: KeyProblem; slow: boolean } {
  const budget = new ShapeBudget(limits);
  const keys = new KeyStack(text);
  let key: KeyProblem | undefined;
  let slow = false;
  /** Inside an object, after `{` or `,`: the next string is a key. */
  let expectKey = false;
  /** The last key read names a map, and its value has not started yet. */
  let mapKeyPending = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === Char.QUOTE) {
      const start = i + 1;
      const end = stringEnd(text, start);
      if (end === -1) break; // unterminated: JSON.parse will refuse it
      i = end + 1;
      if (!expectKey) {
        mapKeyPending = false;
        continue;
      }
      expectKey = false;
      const shape = budget.node();
      if (shape) return { shape, slow };
      mapKeyPending = isMapKey(text, start, end);
      if (key !== undefined || slow) continue;
      const form = keyForm(text, start, end);
      if (form === 'needs-decoding') slow = true;
      else if (form === 'has-capitals' && policy !== undefined && !keys.inMap()) key = policyVariant(policy, text, start, end) ?? keys.add(start, end);
      else key = keys.add(start, end);
    } else if (c === Char.OPEN_BRACE || c === Char.OPEN_BRACKET) {
      const shape = budget.open(keys.depth);
      if (shape) return { shape, slow };
      if (c === Char.OPEN_BRACE) keys.openObject(mapKeyPending);
      else keys.openArray();
      expectKey = c === Char.OPEN_BRACE;
      mapKeyPending = false;
      i++;
    } else if (c === Char.CLOSE_BRACE || c === Char.CLOSE_BRACKET) {
      keys.close();
      mapKeyPending = false;
      i++;
    } else if (c === Char.COMMA) {
      expectKey = keys.inObject();
      // In an array, a comma starts another element: counted, so that an array of millions of
      // numbers is bounded like one of millions of objects.
      const shape = expectKey ? undefined : budget.node();
      if (shape) return { shape, slow };
      mapKeyPending = false;
      i++;
    } else {
      i++;
    }
  }
  return { key, slow };
}
