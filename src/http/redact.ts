// What comes back from an upstream must not hand a workload our credential, in any form a client
// would decode back into it: literal, in another case, JSON-escaped (`\u0073k-...`, `\/`),
// percent-encoded, base64 in a header, compressed. Used by both listeners: error bodies are read
// whole, decoded and redacted; the gateway's relayed bodies and streams pass through a
// redactor that holds back at most one partial event.
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';

const REDACTED = '[REDACTED]';

/** Per character of a secret: the forms a decoder turns back into it. */
function charForms(byte: number): string {
  const ch = String.fromCharCode(byte);
  const literal = /[A-Za-z0-9]/.test(ch) ? ch : `\\x${byte.toString(16).padStart(2, '0')}`;
  if (byte >= 0x80) return literal; // a UTF-8 byte of a non-ASCII secret: only as itself
  const hex = byte.toString(16).padStart(2, '0');
  const forms = [literal, `\\\\u00${hex}`, `%${hex}`];
  if (ch === '/') forms.push('\\\\/');
  return `(?:${forms.join('|')})`;
}

const patterns = new Map<string, RegExp>();

/**
 * Pure: a regular expression (global, case-insensitive) matching any of `secrets` with each
 * character literal, JSON-escaped or percent-encoded, over text read as latin1 (one character per
 * byte). Secrets are long random strings: a match in another case is the secret, never chance.
 * Undefined when there is no secret. Built once per set.
 */
function secretPattern(secrets: readonly string[]): RegExp | undefined {
  const usable = secrets.filter((s) => s.length > 0);
  if (usable.length === 0) return undefined;
  const key = usable.join('\u0000');
  let re = patterns.get(key);
  if (!re) {
    re = new RegExp(usable.map((s) => [...Buffer.from(s, 'utf8')].map(charForms).join('')).join('|'), 'gi');
    patterns.set(key, re);
  }
  return re;
}

/** The longest text one secret's encoded form can take (each byte as `\u00XX`). */
function longestForm(secrets: readonly string[]): number {
  return Math.max(0, ...secrets.map((s) => Buffer.byteLength(s) * 6));
}

/** Pure: `body` with every form of every secret replaced; the same Buffer when there is none. */
export function redactBody(body: Buffer, secrets: readonly string[]): Buffer {
  const re = secretPattern(secrets);
  if (re === undefined) return body;
  const text = body.toString('latin1');
  re.lastIndex = 0;
  if (!re.test(text)) return body;
  re.lastIndex = 0;
  return Buffer.from(text.replace(re, REDACTED), 'latin1');
}

const BASE64_RUN = /[A-Za-z0-9+/_-]{12,}={0,2}/g;

/**
 * Pure: whether a response header value carries a secret in a form a client decodes: any of the
 * body forms, percent-encoded as a whole, or inside a base64 or base64url run (`Basic ...`, a
 * token echoed in an encoded cookie).
 */
export function headerCarriesSecret(value: string, secrets: readonly string[]): boolean {
  const re = secretPattern(secrets);
  if (re === undefined) return false;
  const found = (text: string) => {
    re.lastIndex = 0;
    return re.test(text);
  };
  if (found(value)) return true;
  for (const run of value.match(BASE64_RUN) ?? []) {
    const decoded = Buffer.from(run.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('latin1');
    if (found(decoded)) return true;
  }
  return false;
}

/** The codings of a Content-Encoding value, in the order applied, identity left out. */
function codingsOf(contentEncoding: string | undefined): string[] {
  return (contentEncoding ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
}

/** Pure: the body is sent as is (no Content-Encoding, or only identity). */
export function isIdentity(contentEncoding: string | undefined): boolean {
  return codingsOf(contentEncoding).length === 0;
}

export type DecodedBody = { readonly ok: true; readonly body: Buffer } | { readonly ok: false; readonly reason: 'unsupported_encoding' | 'corrupt' | 'too_large' };

/**
 * Pure: an upstream body without its Content-Encoding (`gzip`, `x-gzip`, `deflate`, `br`, in
 * any combination, undone last-applied first), never more than `max` bytes decoded: a small
 * compressed body can expand a thousandfold. An encoding the proxy cannot undo is refused rather
 * than relayed unread.
 */
export function decodeBody(body: Buffer, contentEncoding: string | undefined, max: number): DecodedBody {
  let out = body;
  for (const coding of codingsOf(contentEncoding).reverse()) {
    const options = { maxOutputLength: max };
    try {
      if (coding === 'gzip' || coding === 'x-gzip') out = gunzipSync(out, options);
      else if (coding === 'deflate') out = inflateSync(out, options);
      else if (coding === 'br') out = brotliDecompressSync(out, options);
      else return { ok: false, reason: 'unsupported_encoding' };
    } catch (err) {
      return { ok: false, reason: (err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError ? 'too_large' : 'corrupt' };
    }
  }
  return { ok: true, body: out };
}

/** A partial event held back beyond this is let through, all but the tail a secret could still end in. */
const MAX_HELD_BYTES = 64 * 1024;
const EVENT_END = Buffer.from('\n\n');

/**
 * Redacts a relayed body chunk by chunk. A secret may be split across chunks, so the bytes after
 * the last complete event (for a stream; for a plain body, the last `longestForm` bytes) are held
 * until the rest arrives: a stream whose upstream writes whole events, as every provider does,
 * is relayed without delay. No form of a secret spans an event boundary (none holds a blank line).
 */
export class StreamRedactor {
  readonly #secrets: readonly string[];
  readonly #window: number;
  readonly #events: boolean;
  #held: Buffer = Buffer.alloc(0);

  /** `events`: the body is an event stream, cut at blank lines. */
  constructor(secrets: readonly string[], events: boolean) {
    this.#secrets = secrets;
    this.#window = longestForm(secrets);
    this.#events = events;
  }

  /** The bytes to relay now (possibly none). */
  push(chunk: Buffer): Buffer {
    const text = redactBody(this.#held.length === 0 ? chunk : Buffer.concat([this.#held, chunk]), this.#secrets);
    let cut = this.#events ? text.lastIndexOf(EVENT_END) + EVENT_END.length : 0;
    if (cut === EVENT_END.length - 1) cut = 0; // no complete event
    // A secret's form ends within the window: anything before it is safe to let through.
    if (text.length - cut > (this.#events ? MAX_HELD_BYTES : this.#window)) cut = Math.max(cut, text.length - this.#window);
    this.#held = text.subarray(cut);
    return text.subarray(0, cut);
  }

  /** At the end of the body: whatever is still held. */
  end(): Buffer {
    const rest = this.#held;
    this.#held = Buffer.alloc(0);
    return rest;
  }
}
