// What comes back from an upstream must not hand a workload our credential, in any form a client
// would decode back into it: literal, in another case, JSON-escaped (`\u0073k-...`, `\/`),
// percent-encoded once or twice, as HTML character references, base64 or base64url (at any byte
// offset, once or twice over), in a header, compressed; and the same of the key without its
// public prefix (`sk-ant-api03-`), and its hex, in any case. Used by both listeners: error bodies
// are read whole, decoded and redacted; the gateway's relayed bodies and streams pass through a
// redactor that holds back at most one partial event.
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { HeldBytes } from './held-bytes.ts';
import { placesOf, secretForms, type Range, type SecretForms } from './secret-forms.ts';
import { UnreadableText } from './spelled-secrets.ts';

const REDACTED = '[REDACTED]';

/**
 * Pure: `body` with every form of every secret replaced; the same Buffer when there is none.
 * Throws UnreadableText for a body too ambiguous to be checked: its caller does not relay it.
 */
export function redactBody(body: Buffer, secrets: readonly string[]): Buffer {
  const forms = secretForms(secrets);
  return forms === undefined ? body : redactForms(body, forms);
}

function redactForms(body: Buffer, forms: SecretForms): Buffer {
  const text = body.toString('latin1');
  const places = placesOf(text, forms);
  return places.length === 0 ? body : replacePlaces(text, places);
}

/** Pure: `text` with each place (in order, apart) replaced by the marker, as latin1 bytes. */
function replacePlaces(text: string, places: readonly Range[]): Buffer {
  let out = '';
  let from = 0;
  for (const [start, end] of places) {
    out += text.slice(from, start) + REDACTED;
    from = end;
  }
  return Buffer.from(out + text.slice(from), 'latin1');
}

const BASE64_RUN = /[A-Za-z0-9+/_-]{12,}={0,2}/g;

/** Whether `text` holds a form; a text too ambiguous to check (UnreadableText) counts as holding one. */
function holdsForm(text: string, forms: SecretForms): boolean {
  try {
    return placesOf(text, forms).length > 0;
  } catch (err) {
    if (err instanceof UnreadableText) return true;
    throw err;
  }
}

/**
 * Pure: whether `text` (read as latin1) carries a secret in any form `redactBody` replaces, or is
 * too ambiguous to be checked. For a caller that cannot redact in place and must refuse instead
 * (an event-stream frame).
 */
export function carriesSecret(text: Buffer, secrets: readonly string[]): boolean {
  const forms = secretForms(secrets);
  return forms !== undefined && holdsForm(text.toString('latin1'), forms);
}

/** Header values found clean, by the forms they were checked against: at most this many a set of secrets, each at most LONGEST_REMEMBERED characters. */
const MAX_CLEAN_VALUES = 256;
const LONGEST_REMEMBERED = 256;
const cleanValues = new WeakMap<SecretForms, Set<string>>();

/**
 * Pure: whether a response header value carries one of `secrets` in a form a client decodes: any
 * of the body forms, or inside a base64 or base64url run once decoded (`Basic ...`, a token echoed
 * in an encoded cookie, so also an escaped form of the secret that was then encoded); a value too
 * ambiguous to be checked counts as carrying one. The secrets' forms are looked up once, for all
 * the values of a response. A value found clean is remembered for its forms (the answer is the
 * same every time: content types, cache rules and server names repeat on every response), so the
 * check of most values is one lookup: the check was 8% of a ref discovery's CPU (issue 44).
 */
export function headerCarriesSecret(secrets: readonly string[]): (value: string) => boolean {
  const forms = secretForms(secrets);
  if (forms === undefined) return () => false;
  let clean = cleanValues.get(forms);
  if (clean === undefined) cleanValues.set(forms, (clean = new Set()));
  const known = clean;
  return (value) => {
    if (known.has(value)) return false;
    if (holdsForm(value, forms)) return true;
    for (const run of value.match(BASE64_RUN) ?? []) {
      const decoded = Buffer.from(run.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('latin1');
      if (holdsForm(decoded, forms)) return true;
    }
    if (value.length <= LONGEST_REMEMBERED) {
      if (known.size >= MAX_CLEAN_VALUES) known.clear();
      known.add(value);
    }
    return false;
  };
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
const NO_BYTES = Buffer.alloc(0);
const LF = 0x0a;
const CR = 0x0d;

/**
 * Where the last event in `bytes` ends (just after its blank line, `\n\n`, or `\r\n\r\n` as
 * sse-starlette ends lines by default), or 0 when none does. Found from the end, a line feed at a
 * time: a chunk of whole events ends with one.
 */
function lastEventEnd(bytes: Buffer): number {
  for (let at = bytes.length - 1; at > 0; ) {
    const lf = bytes.lastIndexOf(LF, at);
    if (lf < 1) return 0;
    if (bytes[lf - 1] === LF || (bytes[lf - 1] === CR && lf >= 3 && bytes[lf - 2] === LF && bytes[lf - 3] === CR)) return lf + 1;
    at = lf - 1;
  }
  return 0;
}

/** The blank lines that end an event, as LF and CRLF writers end lines. */
const BLANK_LINES = [Buffer.from('\n\n'), Buffer.from('\r\n\r\n')];

/** Whether an event's blank line begins in what is `held` and ends in `chunk` (compared in place, nothing joined). */
function blankLineAcross(held: HeldBytes, chunk: Buffer): boolean {
  for (const mark of BLANK_LINES) {
    for (let k = 1; k < mark.length; k++) {
      // The mark's first k bytes end what is held, the rest start the chunk.
      if (k > held.length || mark.length - k > chunk.length) continue;
      let same = true;
      for (let i = 0; i < mark.length && same; i++) same = (i < k ? held.byteFromEnd(k - i) : chunk[i - k]) === mark[i];
      if (same) return true;
    }
  }
  return false;
}

/**
 * Redacts a relayed body chunk by chunk. A secret may be split across chunks, so the bytes after
 * the last complete event (for a stream; for a plain body, the longest text a form can take) are held
 * until the rest arrives: a stream whose upstream writes whole events, as every provider does,
 * is relayed without delay, whether its lines end in LF or CRLF. No form of a secret spans an event
 * boundary (none holds a blank line).
 *
 * What is held (HeldBytes: one buffer that doubles as it fills) is looked at only when
 * something can be let through: for a stream, when a chunk ends an event or more than
 * MAX_HELD_BYTES (or twice the window, for a secret whose window is larger) are held; for a plain
 * body, when twice the window is held, so that each scan lets through at least as much as it
 * keeps. An upstream that writes a byte at a time then costs a few bytes' work per byte and holds
 * at most twice what it sent, where joining and scanning what is held at every push cost the
 * whole window per byte.
 */
export class StreamRedactor {
  readonly #forms: SecretForms | undefined;
  readonly #window: number;
  readonly #events: boolean;
  readonly #held = new HeldBytes();

  constructor(secrets: readonly string[], events: boolean) {
    // `events`: the body is an event stream, cut at blank lines.
    this.#forms = secretForms(secrets);
    this.#window = this.#forms?.longest ?? 0;
    this.#events = events;
  }

  push(chunk: Buffer): Buffer {
    // The bytes to relay now (possibly none).
    if (chunk.length === 0) return NO_BYTES;
    const alone = this.#held.length === 0;
    const chunkEnd = this.#events ? lastEventEnd(chunk) : 0;
    const endsEvent = this.#events && (chunkEnd > 0 || blankLineAcross(this.#held, chunk));
    this.#held.add(chunk);
    const size = this.#held.length;
    const due = this.#events ? endsEvent || size > Math.max(MAX_HELD_BYTES, 2 * this.#window) : size >= 2 * this.#window;
    if (!due) return NO_BYTES;
    const body = this.#held.bytes();
    let cut = !this.#events ? 0 : alone ? chunkEnd : lastEventEnd(body);
    // A form that starts before the window is complete: anything before it is safe to let through.
    if (body.length - cut > (this.#events ? MAX_HELD_BYTES : this.#window)) cut = Math.max(cut, body.length - this.#window);
    if (this.#forms === undefined || cut === 0) {
      this.#held.keep(body.subarray(cut));
      return body.subarray(0, cut);
    }
    // What is held stays as it came: a form is matched once, whole, never a part of it that a
    // decoder would read as complete (`&#115` before its `;` arrives).
    const text = body.toString('latin1');
    const places = placesOf(text, this.#forms);
    for (const [start, end] of places) if (start < cut && end > cut) cut = start; // a form across the window's edge is held whole
    const before = places.filter(([, end]) => end <= cut);
    this.#held.keep(body.subarray(cut));
    return before.length === 0 ? body.subarray(0, cut) : replacePlaces(text.slice(0, cut), before);
  }

  end(): Buffer {
    // At the end of the body: whatever is still held, redacted.
    const rest = this.#held.take();
    return this.#forms === undefined ? rest : redactForms(rest, this.#forms);
  }
}
