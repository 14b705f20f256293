// Strict JSON for the decisions the proxy makes on JSON it did not write.
//
// 1. parseStrictJson: JSON.parse, plus a refusal of duplicate object keys. JSON.parse keeps the
//    last of two equal keys; other parsers keep the first, and case-insensitive ones (Go's
//    encoding/json) read `MODEL` as `model`. The gateway forwards the original bytes, so a body
//    like {"model":"allowed","model":"secret"} must not be judged on one reading and executed
//    on the other: a duplicate key anywhere, or two keys equal under case folding, is refused.
//    Keys are compared by their decoded value ("gpt-te\u0073t" equals "gpt-test"). Limits on
//    depth and size are checked before JSON.parse runs.
// 2. JsonCapture: reads the values at a few paths (e.g. response.usage) out of a JSON document
//    that arrives in pieces and may be megabytes long, keeping only those values in memory.
//
// Both find only strings, keys and container boundaries: string contents are skipped with
// indexOf, so most bytes cost nothing. parseStrictJson runs its own one-pass scanner
// (scanDocument, safe on malformed text), JsonCapture a tokenizer over chunks; a document with an
// escaped or non-ASCII key sends parseStrictJson to that tokenizer too, once JSON.parse has
// accepted it.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;
/** Keys of one object compared pairwise before a Set takes over. */
const MAX_PAIRWISE_KEYS = 32;

/** The tokenizer's callbacks. Offsets are into the chunk being pushed. */
interface TokenSink {
  /** An object or array opens (`{` or `[`) at `at`. */
  open(isObject: boolean, at: number): void;
  /** The innermost container closes; `end` is just past its closing byte. */
  close(end: number): void;
  /** A key of the innermost object, complete, as raw bytes between the quotes (escapes kept). */
  key(raw: Buffer): void;
  /** A string, number or literal value starts at `at` (`"`, digit, `-`, t, f, n). */
  scalarStart(at: number): void;
  /** The scalar value that started last ends just before `end`. */
  scalarEnd(end: number): void;
}

/**
 * A JSON tokenizer over chunks. It tracks only what the sinks need: strings (with escapes that
 * may straddle chunks), keys, and container nesting.
 */
class JsonTokenizer {
  private readonly sink: TokenSink;
  /** One entry per open container: true for an object. */
  private readonly stack: boolean[] = [];
  /** The next string is a key: inside an object, after `{` or `,`. */
  private expectKey = false;
  private inString = false;
  private stringIsKey = false;
  /** The previous chunk ended inside a string right after a backslash. */
  private escapePending = false;
  /** Bytes of a key whose closing quote has not arrived yet. */
  private keyParts: Buffer[] = [];
  private keyBytes = 0;
  private readonly maxKeyBytes: number;
  /** Inside a number or literal (true, false, null). */
  private inBareScalar = false;

  constructor(sink: TokenSink, maxKeyBytes: number) {
    this.sink = sink;
    this.maxKeyBytes = maxKeyBytes;
  }

  push(chunk: Buffer): void {
    let i = 0;
    const n = chunk.length;
    while (i < n) {
      if (this.inString) {
        i = this.continueString(chunk, i);
        continue;
      }
      const c = chunk[i]!;
      if (this.inBareScalar) {
        if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
          this.inBareScalar = false;
          this.sink.scalarEnd(i);
          this.expectKey = false;
        } else {
          i++;
          continue;
        }
      }
      if (c === QUOTE) {
        this.inString = true;
        this.stringIsKey = this.expectKey;
        if (!this.stringIsKey) this.sink.scalarStart(i);
        i++;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        const isObject = c === OPEN_BRACE;
        this.stack.push(isObject);
        this.sink.open(isObject, i);
        this.expectKey = isObject;
        i++;
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        this.stack.pop();
        this.sink.close(i + 1);
        this.expectKey = false;
        i++;
      } else if (c === COLON) {
        this.expectKey = false;
        i++;
      } else if (c === COMMA) {
        this.expectKey = this.stack[this.stack.length - 1] === true;
        i++;
      } else if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
        i++;
      } else {
        // A number or a literal: it runs until a delimiter.
        this.inBareScalar = true;
        this.sink.scalarStart(i);
        i++;
      }
    }
  }

  /** At the end of the input: a number at the very end has no delimiter after it. */
  end(atLength: number): void {
    if (this.inBareScalar) {
      this.inBareScalar = false;
      this.sink.scalarEnd(atLength);
    }
  }

  /** Scans string content from `from`; returns where scanning goes on. */
  private continueString(chunk: Buffer, from: number): number {
    let i = from;
    if (this.escapePending) {
      this.escapePending = false;
      i++; // the escaped byte (for \uXXXX the hex digits are plain content)
    }
    let quote = chunk.indexOf(QUOTE, i);
    let backslash = chunk.indexOf(BACKSLASH, i);
    while (backslash !== -1 && (quote === -1 || backslash < quote)) {
      if (backslash + 1 >= chunk.length) {
        this.escapePending = true;
        this.takeKeyBytes(chunk, from, chunk.length);
        return chunk.length;
      }
      i = backslash + 2;
      if (quote !== -1 && quote < i) quote = chunk.indexOf(QUOTE, i);
      backslash = chunk.indexOf(BACKSLASH, i);
    }
    if (quote === -1) {
      this.takeKeyBytes(chunk, from, chunk.length);
      return chunk.length;
    }
    this.inString = false;
    this.expectKey = false;
    if (this.stringIsKey) {
      this.takeKeyBytes(chunk, from, quote);
      const raw = this.keyParts.length === 1 ? this.keyParts[0]! : Buffer.concat(this.keyParts);
      this.keyParts = [];
      this.keyBytes = 0;
      this.sink.key(raw);
    } else {
      this.sink.scalarEnd(quote + 1);
    }
    return quote + 1;
  }

  private takeKeyBytes(chunk: Buffer, from: number, to: number): void {
    if (!this.stringIsKey || to <= from) return;
    // A key longer than the cap is cut: it can match no wanted path, and in a whole-document
    // scan (parseStrictJson) the cap is the document's length, so nothing is cut there.
    const room = this.maxKeyBytes - this.keyBytes;
    if (room <= 0) return;
    const part = chunk.subarray(from, Math.min(to, from + room));
    this.keyParts.push(part);
    this.keyBytes += part.length;
  }
}

/** A key's decoded value: raw bytes when there is no escape, else JSON's own decoding. */
function decodeKey(raw: Buffer): string {
  const text = raw.toString('utf8');
  return raw.indexOf(BACKSLASH) === -1 ? text : (JSON.parse(`"${text}"`) as string);
}

/**
 * Non-ASCII letters that a case-insensitive reader takes for an ASCII one: Go's encoding/json
 * folds U+212A KELVIN SIGN to k and U+017F LONG S to s (its simple case folding); readers that
 * compare upper- or lower-cased keys (.NET's OrdinalIgnoreCase, toUpperCase/toLowerCase) also
 * turn U+0131 DOTLESS I into I and U+0130 CAPITAL I WITH DOT into i. No other code point's
 * simple case mapping or fold is an ASCII letter.
 */
const NON_ASCII_FOLDS: ReadonlyMap<number, string> = new Map([
  [0x212a, 'K'],
  [0x17f, 'S'],
  [0x131, 'I'],
  [0x130, 'I'],
]);

/**
 * A key as a case-insensitive reader compares it: ASCII letters upper-cased, the non-ASCII
 * letters above turned into the ASCII letter they are read as, anything else kept. Two keys with
 * the same fold may be read as one field by such a reader.
 */
export function foldKey(key: string): string {
  let out = '';
  for (const ch of key) {
    const c = ch.codePointAt(0)!;
    if (c >= 0x61 && c <= 0x7a) out += String.fromCharCode(c - 0x20);
    else out += c < 0x80 ? ch : (NON_ASCII_FOLDS.get(c) ?? ch);
  }
  return out;
}

/**
 * Keys whose object is a map of names the client chose (JSON Schema's properties, metadata,
 * headers), not fields of the API: no upstream matches them to a field, so they may differ only
 * in case, and may be called `model` or `Type`. Duplicates are refused there all the same.
 */
const MAP_KEYS: ReadonlySet<string> = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'metadata', 'headers', 'logit_bias']);

/** The most a document may hold before it is parsed: see parseStrictJson. */
export interface JsonLimits {
  /** Containers open at once. */
  readonly maxDepth: number;
  /** Objects, arrays, keys and array elements after the first, in the whole document. */
  readonly maxNodes: number;
}

export interface StrictJsonOptions {
  /** Checked before JSON.parse runs; none when absent (files the operator wrote, tokens). */
  readonly limits?: JsonLimits;
  /**
   * Keys a policy reads, lower-case: a key that folds to one of them without being it (`MODEL`,
   * `Tools`, `ſtream`) is refused, since a case-insensitive upstream reads it as that key.
   */
  readonly policyKeys?: PolicyKeys;
}

/** Policy keys, with the fold of each (built once per set, see policyKeySet). */
export interface PolicyKeys {
  readonly exact: ReadonlySet<string>;
  readonly byFold: ReadonlyMap<string, string>;
}

export function policyKeySet(keys: Iterable<string>): PolicyKeys {
  const exact = new Set(keys);
  for (const k of exact) if (k !== k.toLowerCase() || /[^\x20-\x7e]/.test(k)) throw new Error(`policy key "${k}" must be lower-case ASCII`);
  return { exact, byFold: new Map([...exact].map((k) => [foldKey(k), k])) };
}

export type StrictJson =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly reason: 'invalid'; readonly message: string }
  | { readonly ok: false; readonly reason: 'duplicate_key'; readonly key: string }
  /** Two keys of one object that differ only in case (`model` and `MODEL`). */
  | { readonly ok: false; readonly reason: 'case_variant_key'; readonly key: string; readonly other: string }
  /** A key that folds to a policy key without being it (`Tools` for `tools`). */
  | { readonly ok: false; readonly reason: 'policy_key_variant'; readonly key: string; readonly policyKey: string }
  | { readonly ok: false; readonly reason: 'too_deep'; readonly limit: number }
  | { readonly ok: false; readonly reason: 'too_many_nodes'; readonly limit: number };

type KeyProblem = Extract<StrictJson, { reason: 'duplicate_key' | 'case_variant_key' | 'policy_key_variant' }>;
type ShapeProblem = Extract<StrictJson, { reason: 'too_deep' | 'too_many_nodes' }>;

/**
 * JSON.parse, refusing documents in which one object has two keys that are equal, or equal
 * under case folding (foldKey): JSON.parse keeps the last of two equal keys, other parsers the
 * first, and case-insensitive readers (Go's encoding/json, ASP.NET) either; the gateway forwards
 * the original bytes, so no upstream may read another value than the one checked. With
 * `policyKeys`, a key folding to one of them without being it is refused too. With `limits`, the
 * document's depth and size are checked by a scan before JSON.parse runs, so that what a body
 * costs to parse is bounded. `message` is JSON.parse's own; keys are decoded, and callers bound
 * them before showing them. A request body comes as bytes, a configuration file as text: neither
 * is converted twice.
 */
export function parseStrictJson(json: Buffer | string, options: StrictJsonOptions = {}): StrictJson {
  const text = typeof json === 'string' ? json : json.toString('utf8');
  const scan = scanDocument(text, options);
  if (scan.shape) return scan.shape;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: 'invalid', message: (err as Error).message };
  }
  const problem = scan.slow ? decodedKeyProblem(typeof json === 'string' ? Buffer.from(json) : json, options.policyKeys) : scan.key;
  return problem ?? { ok: true, value };
}

/** A JSON object, as opposed to an array, null or a scalar. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

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
function scanDocument(text: string, options: StrictJsonOptions): { shape?: ShapeProblem; key?: KeyProblem; slow: boolean } {
  const maxDepth = options.limits?.maxDepth ?? Infinity;
  const maxNodes = options.limits?.maxNodes ?? Infinity;
  const policy = options.policyKeys;
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

/** The general case: keys decoded (escapes resolved), folded and compared as strings. */
function decodedKeyProblem(bytes: Buffer, policy: PolicyKeys | undefined): KeyProblem | undefined {
  /** Per open container: its keys (fold → as written), undefined for an array; and whether it is a map. */
  const frames: { keys: Map<string, string> | undefined; map: boolean }[] = [];
  let pendingKey: string | undefined;
  let problem: KeyProblem | undefined;
  const tokenizer = new JsonTokenizer(
    {
      open: (isObject) => {
        frames.push({ keys: isObject ? new Map() : undefined, map: isObject && pendingKey !== undefined && MAP_KEYS.has(pendingKey) });
        pendingKey = undefined;
      },
      close: () => void frames.pop(),
      key: (raw) => {
        const written = decodeKey(raw);
        pendingKey = written;
        if (problem !== undefined) return;
        const frame = frames[frames.length - 1]!;
        const folded = frame.map ? written : foldKey(written);
        const policyKey = frame.map ? undefined : policy?.byFold.get(folded);
        if (policyKey !== undefined && policyKey !== written) {
          problem = { ok: false, reason: 'policy_key_variant', key: written, policyKey };
          return;
        }
        const other = frame.keys!.get(folded);
        if (other === undefined) frame.keys!.set(folded, written);
        else problem = other === written ? { ok: false, reason: 'duplicate_key', key: written } : { ok: false, reason: 'case_variant_key', key: written, other };
      },
      scalarStart: () => void (pendingKey = undefined),
      scalarEnd: () => {},
    },
    bytes.length,
  );
  tokenizer.push(bytes);
  return problem;
}

/**
 * Captures the values at the given dotted paths (object keys only, e.g. "response.usage") from
 * a JSON document pushed in pieces. Memory: the wanted values, each up to maxValueBytes (a value
 * over that is dropped), plus one key up to 256 bytes; never the rest of the document.
 */
export class JsonCapture {
  private readonly wanted: ReadonlySet<string>;
  /** Every proper prefix of a wanted path: the containers worth following. */
  private readonly prefixes: ReadonlySet<string>;
  private readonly maxValueBytes: number;
  private readonly tokenizer: JsonTokenizer;
  /** Path of each open container when it is on the way to a wanted path, else null. */
  private readonly paths: (string | null)[] = [];
  /** The path the next value will have, when wanted or on the way, else null. */
  private nextPath: string | null = '';
  /** Capture in progress: the path, the container depth it started at, the bytes so far. */
  private capturing: { path: string; depth: number; parts: Buffer[]; bytes: number; tooLarge: boolean } | undefined;
  private chunk: Buffer = Buffer.alloc(0);
  private chunkFrom = 0;
  private readonly values = new Map<string, unknown>();

  constructor(paths: readonly string[], maxValueBytes = 64 * 1024) {
    this.wanted = new Set(paths);
    const prefixes = new Set<string>(['']);
    for (const p of paths) {
      const parts = p.split('.');
      for (let k = 1; k < parts.length; k++) prefixes.add(parts.slice(0, k).join('.'));
    }
    this.prefixes = prefixes;
    this.maxValueBytes = maxValueBytes;
    this.tokenizer = new JsonTokenizer(
      {
        open: (_isObject, at) => {
          const path = this.nextPath;
          if (path !== null && this.wanted.has(path) && !this.capturing) this.startCapture(path, at);
          this.paths.push(path !== null && this.prefixes.has(path) ? path : null);
          this.nextPath = null;
        },
        close: (end) => {
          this.paths.pop();
          if (this.capturing && this.capturing.depth === this.paths.length) this.endCapture(end);
          this.nextPath = null;
        },
        key: (raw) => {
          const parent = this.paths[this.paths.length - 1];
          if (parent === null || parent === undefined) {
            this.nextPath = null;
            return;
          }
          const path = parent === '' ? decodeKey(raw) : `${parent}.${decodeKey(raw)}`;
          this.nextPath = this.wanted.has(path) || this.prefixes.has(path) ? path : null;
        },
        scalarStart: (at) => {
          const path = this.nextPath;
          if (path !== null && this.wanted.has(path) && !this.capturing) this.startCapture(path, at);
          this.nextPath = null;
        },
        scalarEnd: (end) => {
          if (this.capturing && this.capturing.depth === this.paths.length) this.endCapture(end);
        },
      },
      256,
    );
  }

  push(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.chunk = bytes;
    this.chunkFrom = 0;
    this.tokenizer.push(bytes);
    if (this.capturing) this.keep(bytes.subarray(this.chunkFrom));
  }

  /** The captured values, parsed; a path that was absent, too large or not JSON is missing. */
  finish(): ReadonlyMap<string, unknown> {
    this.tokenizer.end(this.chunk.length);
    return this.values;
  }

  private startCapture(path: string, at: number): void {
    this.capturing = { path, depth: this.paths.length, parts: [], bytes: 0, tooLarge: false };
    this.chunkFrom = at;
  }

  private keep(bytes: Buffer): void {
    const c = this.capturing!;
    if (c.tooLarge) return;
    if (c.bytes + bytes.length > this.maxValueBytes) {
      c.tooLarge = true;
      c.parts = [];
      return;
    }
    // Copied: the chunk belongs to the relay and may be reused once this call returns.
    c.parts.push(Buffer.from(bytes));
    c.bytes += bytes.length;
  }

  private endCapture(end: number): void {
    const c = this.capturing!;
    this.keep(this.chunk.subarray(this.chunkFrom, end));
    this.capturing = undefined;
    this.chunkFrom = end;
    if (c.tooLarge) return;
    try {
      this.values.set(c.path, JSON.parse(Buffer.concat(c.parts, c.bytes).toString('utf8')));
    } catch {
      // not JSON after all: the value stays missing
    }
  }
}
