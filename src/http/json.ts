// Strict JSON for the decisions the proxy makes on JSON it did not write.
//
// 1. parseStrictJson: JSON.parse, plus a refusal of duplicate object keys. JSON.parse keeps the
//    last of two equal keys; other parsers keep the first. The gateway forwards the original
//    bytes, so a body like {"model":"allowed","model":"secret"} must not be judged on one
//    reading and executed on the other: a duplicate key anywhere is refused. Keys are compared
//    by their decoded value ("gpt-te\u0073t" equals "gpt-test").
// 2. JsonCapture: reads the values at a few paths (e.g. response.usage) out of a JSON document
//    that arrives in pieces and may be megabytes long, keeping only those values in memory.
//
// Both scan JSON assumed well-formed (parseStrictJson runs JSON.parse first; JsonCapture
// JSON.parses each value it keeps), finding only strings, keys and container boundaries: string
// contents are skipped with indexOf, so most bytes cost nothing. parseStrictJson runs its own
// one-pass scanner (findDuplicateKey), JsonCapture a tokenizer over chunks; a document with an
// escaped key sends parseStrictJson to that tokenizer too.

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

export type StrictJson =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly reason: 'invalid'; readonly message: string }
  | { readonly ok: false; readonly reason: 'duplicate_key'; readonly key: string };

/**
 * JSON.parse, refusing documents in which any object has the same key twice. `message` is
 * JSON.parse's own; `key` names the duplicate (decoded), and callers bound it before showing it.
 * A request body comes as bytes, a configuration file as text: neither is converted twice.
 */
export function parseStrictJson(json: Buffer | string): StrictJson {
  const text = typeof json === 'string' ? json : json.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: 'invalid', message: (err as Error).message };
  }
  const duplicate = findDuplicateKey(text, json);
  return duplicate === undefined ? { ok: true, value } : { ok: false, reason: 'duplicate_key', key: duplicate };
}

/** A JSON object, as opposed to an array, null or a scalar. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The first key that appears twice in one object of a well-formed JSON text, decoded. This runs
 * on every gateway request body, so it is one loop without allocations per key: strings are
 * skipped with String#indexOf, the keys of each open object are kept as offsets, and a new key
 * is compared character by character only with keys of the same length. A key with an escape
 * is rare (JSON.stringify escapes only quotes, backslashes and controls): the first one sends
 * the document, as parseStrictJson got it, to decodedDuplicateKey.
 */
function findDuplicateKey(text: string, json: Buffer | string): string | undefined {
  // keyStarts/keyEnds: offsets of the keys of every open object, innermost last; frames[d]
  // is where object d's keys begin in them (-1 for an array).
  const keyStarts: number[] = [];
  const keyEnds: number[] = [];
  const frames: number[] = [];
  /** The key set of each open object with many keys, by its frames[] value. */
  const bigObjects = new Map<number, Set<string>>();
  let expectKey = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i + 1;
      let end = text.indexOf('"', start);
      // A quote preceded by an odd run of backslashes is content.
      let escaped = false;
      while (text.charCodeAt(end - 1) === BACKSLASH) {
        let b = end - 1;
        while (text.charCodeAt(b) === BACKSLASH) b--;
        if ((end - 1 - b) % 2 === 0) break;
        escaped = true;
        end = text.indexOf('"', end + 1);
      }
      if (expectKey) {
        for (let b = start; b < end && !escaped; b++) escaped = text.charCodeAt(b) === BACKSLASH;
        if (escaped) return decodedDuplicateKey(typeof json === 'string' ? Buffer.from(json) : json);
        const from = frames[frames.length - 1]!;
        // Past a few dozen keys the pairwise comparison would grow quadratically (a hostile
        // body can hold a million keys): large objects are checked by one Set instead.
        if (keyStarts.length - from >= MAX_PAIRWISE_KEYS) {
          let keys = bigObjects.get(from);
          if (!keys) {
            keys = new Set();
            for (let k = from; k < keyStarts.length; k++) keys.add(text.slice(keyStarts[k]!, keyEnds[k]!));
            bigObjects.set(from, keys);
          }
          const key = text.slice(start, end);
          if (keys.has(key)) return key;
          keys.add(key);
          // A placeholder keeps the count; its offsets are never compared again.
          keyStarts.push(start);
          keyEnds.push(end);
          expectKey = false;
          i = end + 1;
          continue;
        }
        const len = end - start;
        for (let k = from; k < keyStarts.length; k++) {
          const other = keyStarts[k]!;
          if (keyEnds[k]! - other !== len) continue;
          let same = true;
          for (let j = 0; j < len; j++) {
            if (text.charCodeAt(start + j) !== text.charCodeAt(other + j)) {
              same = false;
              break;
            }
          }
          if (same) return text.slice(start, end);
        }
        keyStarts.push(start);
        keyEnds.push(end);
        expectKey = false;
      }
      i = end + 1;
    } else if (c === OPEN_BRACE) {
      frames.push(keyStarts.length);
      expectKey = true;
      i++;
    } else if (c === OPEN_BRACKET) {
      frames.push(-1);
      i++;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      const from = frames.pop()!;
      if (from >= 0) {
        keyStarts.length = from;
        keyEnds.length = from;
        bigObjects.delete(from);
      }
      i++;
    } else if (c === COMMA) {
      expectKey = frames[frames.length - 1]! >= 0;
      i++;
    } else {
      i++;
    }
  }
  return undefined;
}

/** The general case: keys decoded (escapes resolved) and compared as strings. */
function decodedDuplicateKey(bytes: Buffer): string | undefined {
  const keySets: (Set<string> | undefined)[] = [];
  let duplicate: string | undefined;
  const tokenizer = new JsonTokenizer(
    {
      open: (isObject) => void keySets.push(isObject ? new Set() : undefined),
      close: () => void keySets.pop(),
      key: (raw) => {
        if (duplicate !== undefined) return;
        const keys = keySets[keySets.length - 1]!;
        const key = decodeKey(raw);
        if (keys.has(key)) duplicate = key;
        else keys.add(key);
      },
      scalarStart: () => {},
      scalarEnd: () => {},
    },
    bytes.length,
  );
  tokenizer.push(bytes);
  return duplicate;
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
