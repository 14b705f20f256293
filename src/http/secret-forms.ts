// What redaction looks for, built once per set of secrets: each secret and its tail (the key
// without its public prefix), spelled out in any mix of escaped characters (spelled-secrets.ts),
// base64 and base64url at each byte offset once and twice over, and the hex of each in any case;
// and where in a text any of them is. redact.ts replaces what is found, in bodies, streams and
// headers.
import { LONGEST_CHAR_FORM, SpelledSecrets } from './spelled-secrets.ts';

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

export type Range = readonly [start: number, end: number];

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
 * forms are 220 characters or more: one lookup per 218 bytes relayed. #forms: the forms as
 * written, then those found in any case, in lower case; #anyCase: where the latter begin in
 * #forms; #places: per gram, where it is in the forms, as pairs (form, offset). (The members'
 * comments are here and in their bodies: esbuild keeps a comment before a class member in the
 * bundle.)
 */
class SampledForms {
  readonly #forms: readonly string[];
  readonly #anyCase: number;
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

  find(text: string, found: Range[]): void {
    // Every place a form occurs in `text`, added to `found` (a place may be added twice).
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
export type SecretForms = {
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

/** Sets of secrets whose forms are kept, the least recently used dropped first (a minted token rotates every hour). */
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
export function secretForms(secrets: readonly string[]): SecretForms | undefined {
  return builtFor.get(builtFor.has(secrets) ? secrets : fixedSecretList(secrets));
}

/** Pure: a list's key, each secret after its length: joined with a separator, `a\0b` and `a`, `b` were one key. */
function setKey(secrets: readonly string[]): string {
  let key = '';
  for (const s of secrets) key += `${s.length}:${s}`;
  return key;
}

/** The lists fixedSecretList made, and their forms, for as long as a list lives. */
const builtFor = new WeakMap<readonly string[], SecretForms | undefined>();

/** The lists fixedSecretList made, by setKey: the last MAX_BUILT used. */
const fixedLists = new Map<string, readonly string[]>();

/**
 * A copy of `secrets` that cannot change, its forms found once and then looked up by identity: a
 * Redactor's list, asked for its forms by every check of its call. The same secrets give the same
 * list: a list per call (a copy, a WeakMap entry) cost about 10 µs of CPU a model call (issue 44).
 */
export function fixedSecretList(secrets: readonly string[]): readonly string[] {
  const key = setKey(secrets);
  let fixed = fixedLists.get(key);
  if (fixed === undefined) {
    fixed = Object.freeze([...secrets]);
    builtFor.set(fixed, formsOf(fixed));
  } else fixedLists.delete(key); // used again: the newest
  fixedLists.set(key, fixed);
  if (fixedLists.size > MAX_BUILT) fixedLists.delete(fixedLists.keys().next().value!);
  return fixed;
}

/** Pure: the forms of `secrets` (secretForms), built. */
function formsOf(secrets: readonly string[]): SecretForms | undefined {
  const usable = secrets.filter((s) => s.length > 0);
  if (usable.length === 0) return undefined;
  const texts = textsOf(usable);
  const encoded = [...new Set(texts.encoded.flatMap(encodedForms))];
  const escapedForms = [...texts.spelled.map((s) => Buffer.from(s, 'utf8')), ...encoded.filter((f) => ESCAPABLE_IN_ENCODED.test(f)).map((f) => Buffer.from(f, 'latin1'))];
  const asWritten = encoded.filter((f) => !ESCAPABLE_IN_ENCODED.test(f));
  // The hex of a secret under 6 bytes is shorter than an encoded form may be (the secret itself is looked for).
  const hex = texts.hex.filter((h) => h.length >= SHORTEST_ENCODED_FORM);
  const sampled = [...asWritten, ...hex];
  const withTail = texts.withTail.map((s) => Buffer.from(s, 'utf8'));
  return {
    spelled: new SpelledSecrets(escapedForms),
    sampled: sampled.length > 0 ? new SampledForms(asWritten, hex) : undefined,
    withTail: withTail.length === 0 ? undefined : new SpelledSecrets(withTail),
    longest: Math.max(...[...escapedForms, ...withTail].map((bytes) => bytes.length * LONGEST_CHAR_FORM), ...sampled.map((f) => f.length)),
    shortest: Math.min(...escapedForms.map((bytes) => bytes.length), ...sampled.map((f) => f.length)),
  };
}

/** Pure: where any form occurs in `text`, in order, overlapping places joined. */
export function placesOf(text: string, forms: SecretForms): Range[] {
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
