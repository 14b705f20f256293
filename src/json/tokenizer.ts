// A JSON tokenizer over chunks, for readers that see a document in pieces or must not hold it
// twice: it finds strings (with escapes that may straddle chunks), keys and container nesting,
// and skips string contents with indexOf, so most bytes cost nothing. Its sinks decide what the
// tokens mean: the strict parser's decoded-key check (./decoded-keys.ts) and the gateway's
// telemetry capture (gateway/json-capture.ts).
import { Char } from './chars.ts';

/** The tokenizer's callbacks. Offsets are into the chunk being pushed. */
export interface TokenSink {
  /** An object or array opens (`{` or `[`) at `at`. */
  open(opensObject: boolean, at: number): void;
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
export class JsonTokenizer {
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
        if (c === Char.COMMA || c === Char.CLOSE_BRACE || c === Char.CLOSE_BRACKET || c === Char.SPACE || c === Char.LF || c === Char.CR || c === Char.TAB) {
          this.inBareScalar = false;
          this.sink.scalarEnd(i);
          this.expectKey = false;
        } else {
          i++;
          continue;
        }
      }
      if (c === Char.QUOTE) {
        this.inString = true;
        this.stringIsKey = this.expectKey;
        if (!this.stringIsKey) this.sink.scalarStart(i);
        i++;
      } else if (c === Char.OPEN_BRACE || c === Char.OPEN_BRACKET) {
        const opensObject = c === Char.OPEN_BRACE;
        this.stack.push(opensObject);
        this.sink.open(opensObject, i);
        this.expectKey = opensObject;
        i++;
      } else if (c === Char.CLOSE_BRACE || c === Char.CLOSE_BRACKET) {
        this.stack.pop();
        this.sink.close(i + 1);
        this.expectKey = false;
        i++;
      } else if (c === Char.COLON) {
        this.expectKey = false;
        i++;
      } else if (c === Char.COMMA) {
        this.expectKey = this.stack[this.stack.length - 1] === true;
        i++;
      } else if (c === Char.SPACE || c === Char.LF || c === Char.CR || c === Char.TAB) {
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
    let quote = chunk.indexOf(Char.QUOTE, i);
    let backslash = chunk.indexOf(Char.BACKSLASH, i);
    while (backslash !== -1 && (quote === -1 || backslash < quote)) {
      if (backslash + 1 >= chunk.length) {
        this.escapePending = true;
        this.takeKeyBytes(chunk, from, chunk.length);
        return chunk.length;
      }
      i = backslash + 2;
      if (quote !== -1 && quote < i) quote = chunk.indexOf(Char.QUOTE, i);
      backslash = chunk.indexOf(Char.BACKSLASH, i);
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
export function decodeKey(raw: Buffer): string {
  const text = raw.toString('utf8');
  return raw.indexOf(Char.BACKSLASH) === -1 ? text : (JSON.parse(`"${text}"`) as string);
}
