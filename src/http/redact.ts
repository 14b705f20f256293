// What comes back from an upstream must not hand a workload our credential, in any form a client
// would decode back into it: literal, in another case, JSON-escaped (`\u0073k-...`, `\/`),
// percent-encoded once or twice, as HTML character references, base64 or base64url (at any byte
// offset, once or twice over), in a header, compressed; and the same of the key without its
// public prefix (`sk-ant-api03-`), and its hex, in any case. Used by both listeners: error bodies
// are read whole, decoded and redacted; the gateway's relayed bodies and streams pass through a
// redactor that holds back at most one partial event.
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { HeldBytes } from './held-bytes.ts';
import { LONGEST_CHAR_FORM, SpelledSecrets, UnreadableText } from './spelled-secrets.ts';

const REDACTED = '[REDACTED]';

/**
 * A key's public prefix: one to four leading segments, each a lowercase letter and up to nine
 * lowercase letters or digits, ended by `-`, `_` or `.`: `sk-`, `sk-proj-`, `sk-ant-api03-`,
 * `ghp_`, `github_pat_`, `glpat-`, `xoxb-`, `ya29.`. One rule for every vendor, not a list: the
 * keys come from operators. Such a prefix is the same for every key of its kind, so an upstream
 * may echo a key without it (`...` after `sk-proj-`); what follows is the key's secret part.
 * The rule takes as many segments as match: a random part that happens to open with one (`ab-`)
 * loses it too, and the tail is shorter. That tail is inside every echo of the key without any
 * of its leading segments, which is what is looked for; the few characters left beside the
 * marker then cannot give the key back.
 */
const PUBLIC_PREFIX = /^(?:[a-z][a-z0-9]{0,9}[-_.]){1,4}/;

/** A tail shorter than this is not looked for on its own: a short fragment could be found by chance, in text that is not the key (20 characters of base64url are 120 bits). */
const SHORTEST_TAIL = 20;

/**
 * Pure: `secret` without its public prefix (PUBLIC_PREFIX), when it has one and what is left is
 * at least SHORTEST_TAIL characters; otherwise undefined (the secret is looked for whole only).
 *
 * Only this tail, not any long piece of the key: a piece that is not the whole secret part does
 * not give the credential back (what is left of the key is still to be guessed), a provider that
 * shows a masked key shows fewer characters than that (`sk-proj-****abcd`), and looking for
 * every piece of 20 characters would multiply the forms (each piece at each base64 offset, once
 * and twice over, spelled out) and the work paid on every relayed byte, and redact the public
 * parts of a key as well.
 */
export function keyTail(secret: string): string | undefined {
  const prefix = PUBLIC_PREFIX.exec(secret);
  if (prefix === null) return undefined;
  const tail = secret.slice(prefix[0].length);
  return tail.length >= SHORTEST_TAIL ? tail : undefined;
}

/** What a set of secrets is looked for as (textsOf). */
type Texts = {
  /** Spelled out (any case, escaped): each secret's tail, or the secret itself when it has none. */
  readonly spelled: readonly string[];
  /** Base64-encoded (once or twice, at each offset): each secret and its tail. */
  readonly encoded: readonly string[];
  /** As written in any case: the hex of each secret and of its tail. */
  readonly hex: readonly string[];
  /** The secrets that have a tail: looked for again, spelled out, in a text where a tail may have been found. */
  readonly withTail: readonly string[];
};

/**
 * Pure: the texts that stand for `secrets`. A secret's tail (keyTail) is looked for in every form
 * the secret is. Spelled out, the tail alone is looked for, not the secret beside it: a
 * spelling of the secret holds one of its tail, so the secret is looked for only in a text where
 * one was found; a second search over every relayed byte would cost as much again as the first
 * (twice the time over JSON-escaped text).
 *
 * The hex of each (its UTF-8 bytes, two digits a byte) is looked for as written, in any case
 * (lower, upper, mixed), by sampling like the base64 forms: no encoder escapes a digit or a
 * letter, so a spelled-out search, paid on every relayed byte, would find nothing more. Base64
 * of the hex is not looked for in a text body (in a header value, and in an event-stream frame's
 * base64 fields, which are decoded, it is). A tail's hex is inside the whole secret's hex; both
 * are looked for, so that the marker replaces the whole secret's hex, prefix included.
 */
function textsOf(secrets: readonly string[]): Texts {
  const tails = secrets.map(keyTail);
  const encoded = [...new Set(secrets.flatMap((s, i) => [s, tails[i] ?? s]))];
  return {
    spelled: [...new Set(secrets.map((s, i) => tails[i] ?? s))],
    encoded,
    hex: [...new Set(encoded.map((t) => Buffer.from(t, 'utf8').toString('hex')))],
    withTail: secrets.filter((_, i) => tails[i] !== undefined),
  };
}

/**
 * Pure: the base64 and base64url text that `bytes` become inside a longer encoded string, for each
 * of the three byte offsets they can start at. A character of base64 carries six bits: those that
 * also carry a bit of a neighbouring byte (the first one or two, the last one or two) depend on
 * what surrounds the secret and are left out; what remains appears, unchanged, wherever the bytes
 * are encoded at that offset. Empty strings are left out.
 */
export function base64Forms(bytes: Buffer): string[] {
  const forms = new Set<string>();
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    const stable = encoded.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + bytes.length)) / 6));
    if (stable === '') continue;
    forms.add(stable);
    forms.add(stable.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return [...forms];
}

/** An encoded form shorter than this is not looked for: it would be found by chance in base64 data (12 characters are 72 bits). */
const SHORTEST_ENCODED_FORM = 12;

/**
 * Pure: the encoded forms of one secret: base64 and base64url at each offset, and the same of each
 * of those (a secret encoded twice).
 *
 * Doubly encoded text is found by its own precomputed forms, not by decoding runs of base64 found
 * in a body and looking inside: a run starts wherever the characters before it happen to be in
 * the alphabet (`key=c2st...`), so decoding it means four alignments of every run in every chunk
 * of every answer, paid per byte relayed. The 36 doubly encoded forms are computed once per
 * secret and found by the same sampling search as the 6 single ones, which costs per byte what it
 * costs for one form. Three times over or more is not looked for in a text body (an event-stream
 * frame's fields are decoded once more: eventstream.ts).
 */
function encodedForms(secret: string): string[] {
  const once = base64Forms(Buffer.from(secret, 'utf8'));
  const twice = once.flatMap((form) => base64Forms(Buffer.from(form, 'latin1')));
  return [...new Set([...once, ...twice])].filter((form) => form.length >= SHORTEST_ENCODED_FORM);
}

/** Characters of an encoded form that an encoder escapes (`\/`, `%2B`, `&#x2F;`); letters, digits, `-` and `_` it never does. */
const ESCAPABLE_IN_ENCODED = /[+/]/;

type Range = readonly [start: number, end: number];

/** The length of the grams the sampling search looks up. */
const GRAM = 3;
/** An ASCII letter in lower case, any other character as it is. */
const lowerCode = (c: number): number => (c >= 0x41 && c <= 0x5a ? c | 0x20 : c);
/** Three characters as one number, letters in lower case (a gram of a form in any case is found, and checked after). */
const gramAt = (text: string, at: number): number => (lowerCode(text.charCodeAt(at)) << 16) | (lowerCode(text.charCodeAt(at + 1)) << 8) | lowerCode(text.charCodeAt(at + 2));

/** Whether `text` at `at` holds `lowered` (ASCII, in lower case), in any case. */
function holdsInAnyCase(text: string, at: number, lowered: string): boolean {
  if (at + lowered.length > text.length) return false;
  for (let i = 0; i < lowered.length; i++) if (lowerCode(text.charCodeAt(at + i)) !== lowered.charCodeAt(i)) return false;
  return true;
}

/**
 * Finds a set of long strings (the encoded forms, as written; the hex forms, in any case) in text
 * read as latin1, looking at a fraction of it. Every form is at least `shortest` characters long,
 * so any place where one occurs covers a whole gram starting at a multiple of `step` =
 * `shortest - GRAM + 1`: only those grams are looked up (letters in lower case), and each place
 * the gram has in a form is checked, with `startsWith` or in any case. A 168-character key's
 * forms are 220 characters or more: one lookup per 218 bytes relayed.
 */
class SampledForms {
  /** The forms as written, then those found in any case, in lower case. */
  readonly #forms: readonly string[];
  /** Where the forms found in any case begin in #forms. */
  readonly #anyCase: number;
  /** Per gram: where it is in the forms, as pairs (form, offset). */
  readonly #places = new Map<number, number[]>();
  readonly #step: number;

  constructor(asWritten: readonly string[], anyCase: readonly string[]) {
    const forms = [...asWritten, ...anyCase.map((f) => f.toLowerCase())];
    this.#forms = forms;
    this.#anyCase = asWritten.length;
    this.#step = Math.min(...forms.map((f) => f.length)) - GRAM + 1;
    forms.forEach((form, f) => {
      for (let i = 0; i + GRAM <= form.length; i++) {
        const gram = gramAt(form, i);
        const places = this.#places.get(gram);
        if (places === undefined) this.#places.set(gram, [f, i]);
        else places.push(f, i);
      }
    });
  }

  /** Every place a form occurs in `text`, added to `found` (a place may be added twice). */
  find(text: string, found: Range[]): void {
    for (let at = 0; at + GRAM <= text.length; at += this.#step) {
      const places = this.#places.get(gramAt(text, at));
      if (places === undefined) continue;
      for (let i = 0; i < places.length; i += 2) {
        const f = places[i]!;
        const form = this.#forms[f]!;
        const start = at - places[i + 1]!;
        if (start >= 0 && (f < this.#anyCase ? text.startsWith(form, start) : holdsInAnyCase(text, start, form))) found.push([start, start + form.length]);
      }
    }
  }
}

/** What redaction looks for, built once per set of secrets. */
type SecretForms = {
  /** Each secret's tail (the secret, when it has none), and any encoded form an encoder escapes, spelled out with each character in any of its forms (any case). */
  readonly spelled: SpelledSecrets;
  /** The other encoded forms, as written, and the hex forms, in any case. */
  readonly sampled: SampledForms | undefined;
  /**
   * The secrets that have a tail, spelled out: looked for in a text where a spelled form was
   * found (it may be a tail), so that the marker replaces the whole secret, its prefix too. The
   * prefix is public: this is for a clean answer, not for safety.
   */
  readonly withTail: SpelledSecrets | undefined;
  /** The longest text any form can take. */
  readonly longest: number;
  /** The shortest: each byte of a secret is at least one character in every form. */
  readonly shortest: number;
};

/** Built forms by secret set, the least recently used dropped first (a minted token rotates every hour). */
const built = new Map<string, SecretForms>();
const MAX_BUILT = 32;

/**
 * The forms of `secrets` to look for, built once per set (and kept for the last 32 sets);
 * undefined when there is no secret. Each secret stands for the texts of `textsOf`: itself, its
 * tail, and the hex of those. Text is read as latin1 (one character per byte) and
 * compared in any case: secrets are long random strings, so a match in another case is the
 * secret, never chance. A secret is found spelled out in any mix of its characters' forms
 * (spelled-secrets.ts). Encoded forms of letters, digits, `-` and `_` are found as written, by
 * sampling. Those are every doubly encoded form, and every form of a secret of ASCII characters
 * other than `>`, `?`, `~` and DEL (only those, or a non-ASCII byte, give base64 a `+` or `/`).
 * A form with `+` or `/`, which encoders escape, is looked for spelled out instead.
 */
function secretForms(secrets: readonly string[]): SecretForms | undefined {
  const usable = secrets.filter((s) => s.length > 0);
  if (usable.length === 0) return undefined;
  const key = usable.join('\u0000');
  let forms = built.get(key);
  if (forms !== undefined) {
    built.delete(key);
    built.set(key, forms);
    return forms;
  }
  const texts = textsOf(usable);
  const encoded = [...new Set(texts.encoded.flatMap(encodedForms))];
  const escapedForms = [...texts.spelled.map((s) => Buffer.from(s, 'utf8')), ...encoded.filter((f) => ESCAPABLE_IN_ENCODED.test(f)).map((f) => Buffer.from(f, 'latin1'))];
  const asWritten = encoded.filter((f) => !ESCAPABLE_IN_ENCODED.test(f));
  // The hex of a secret under 6 bytes is shorter than an encoded form may be (the secret itself is looked for).
  const hex = texts.hex.filter((h) => h.length >= SHORTEST_ENCODED_FORM);
  const sampled = [...asWritten, ...hex];
  const withTail = texts.withTail.map((s) => Buffer.from(s, 'utf8'));
  forms = {
    spelled: new SpelledSecrets(escapedForms),
    sampled: sampled.length > 0 ? new SampledForms(asWritten, hex) : undefined,
    withTail: withTail.length === 0 ? undefined : new SpelledSecrets(withTail),
    longest: Math.max(...[...escapedForms, ...withTail].map((bytes) => bytes.length * LONGEST_CHAR_FORM), ...sampled.map((f) => f.length)),
    shortest: Math.min(...escapedForms.map((bytes) => bytes.length), ...sampled.map((f) => f.length)),
  };
  built.set(key, forms);
  if (built.size > MAX_BUILT) built.delete(built.keys().next().value!);
  return forms;
}

/** Pure: where any form occurs in `text`, in order, overlapping places joined. */
function placesOf(text: string, forms: SecretForms): Range[] {
  const found: Range[] = [];
  // Most header values (a date, a length, a content type) are shorter than any form: not scanned.
  if (text.length < forms.shortest) return found;
  forms.spelled.find(text, found);
  // A place may be a tail: the whole secrets are looked for too (their places hold the tails'), only then.
  if (found.length > 0) forms.withTail?.find(text, found);
  forms.sampled?.find(text, found);
  if (found.length < 2) return found;
  found.sort((a, b) => a[0] - b[0]);
  const joined: Range[] = [found[0]!];
  for (const [start, end] of found.slice(1)) {
    const last = joined[joined.length - 1]!;
    if (start < last[1]) joined[joined.length - 1] = [last[0], Math.max(last[1], end)];
    else joined.push([start, end]);
  }
  return joined;
}

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

/**
 * Pure: whether a response header value carries one of `secrets` in a form a client decodes: any
 * of the body forms, or inside a base64 or base64url run once decoded (`Basic ...`, a token echoed
 * in an encoded cookie, so also an escaped form of the secret that was then encoded); a value too
 * ambiguous to be checked counts as carrying one. The secrets' forms are looked up once, for all
 * the values of a response.
 */
export function headerCarriesSecret(secrets: readonly string[]): (value: string) => boolean {
  const forms = secretForms(secrets);
  if (forms === undefined) return () => false;
  return (value) => {
    if (holdsForm(value, forms)) return true;
    for (const run of value.match(BASE64_RUN) ?? []) {
      const decoded = Buffer.from(run.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('latin1');
      if (holdsForm(decoded, forms)) return true;
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

  /** `events`: the body is an event stream, cut at blank lines. */
  constructor(secrets: readonly string[], events: boolean) {
    this.#forms = secretForms(secrets);
    this.#window = this.#forms?.longest ?? 0;
    this.#events = events;
  }

  /** The bytes to relay now (possibly none). */
  push(chunk: Buffer): Buffer {
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

  /** At the end of the body: whatever is still held, redacted. */
  end(): Buffer {
    const rest = this.#held.take();
    return this.#forms === undefined ? rest : redactForms(rest, this.#forms);
  }
}
