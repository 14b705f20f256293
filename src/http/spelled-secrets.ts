// Finds a secret spelled out one character at a time, each character either as itself (in any
// case) or in a form a decoder reads back as it, mixed freely: JSON-escaped (`\u0073`, `\/`),
// percent-encoded once or twice (`%73`, `%2573`), or an HTML character reference (`&#115;`,
// `&#x073`, `&sol;`, with or without the `;`). Text is read as latin1: one character per byte.
//
// A small backtracking matcher rather than a regular expression. The expression that says the
// same (every character of the secret an alternation of its forms, case-insensitive) takes V8
// about 0.3 ms per character of the secret to compile, twice (once to bytecode, again to machine
// code on its second use): 60 ms for a 220-character cloud access token, 200 ms with the HTML
// references, paid on the event loop, so by every request in flight, at each credential
// rotation. The matcher costs nothing to set up and scans at about the speed of the expression.
//
// It finds what that expression finds, in the same order: at each position, the secrets in the
// order given, and for each character its forms in the order listed in `formEnds` (a longer form
// before a shorter one that begins the same way), the first whole spelling winning; the scan goes
// on after it. A (character, position) pair that led nowhere is not tried again, so no text makes
// it backtrack more than once per pair, where the expression could take exponential time.

/** The longest text one character of a secret takes in any of its forms (`\u00XX`, `&#x000000002f;`, `&DiacriticalGrave;`). */
export const LONGEST_CHAR_FORM = 20;

/**
 * The named HTML references of ASCII characters (HTML5's list: a decoder reads each back as the
 * character; any other is numeric). Matched in any case and with or without the `;`, as the
 * legacy names are decoded.
 */
const NAMED_REFERENCES: Readonly<Record<string, readonly string[]>> = {
  '&': ['amp'], '<': ['lt'], '>': ['gt'], '"': ['quot'], "'": ['apos'], '_': ['lowbar', 'UnderBar'], '/': ['sol'], '+': ['plus'],
  '.': ['period'], ':': ['colon'], '=': ['equals'], '#': ['num'], '!': ['excl'], '$': ['dollar'], '%': ['percnt'], '(': ['lpar'],
  ')': ['rpar'], '*': ['ast', 'midast'], ',': ['comma'], ';': ['semi'], '?': ['quest'], '@': ['commat'], '[': ['lsqb', 'lbrack'],
  ']': ['rsqb', 'rbrack'], '\\': ['bsol'], '^': ['Hat'], '`': ['grave', 'DiacriticalGrave'], '{': ['lcub', 'lbrace'], '}': ['rcub', 'rbrace'],
  '|': ['verbar', 'vert', 'VerticalLine'], '\t': ['Tab'], '\n': ['NewLine'],
};

const BACKSLASH = 0x5c;
const PERCENT = 0x25;
const AMPERSAND = 0x26;
const HASH = 0x23;
const SEMICOLON = 0x3b;
const ZERO = 0x30;
const X = 0x58;
/** Leading zeros a numeric reference may have (`&#00000000115;`). */
const MAX_ZEROS = 8;

/**
 * A character as a case-insensitive regular expression compares it (ECMAScript's Canonicalize
 * without the u flag), for latin1 text and the three characters outside latin1 that compare equal
 * to one in it: a-z and à-þ but ÷ are their upper case; ÿ and Ÿ are Ÿ; µ, Μ and μ are Μ; ß, whose
 * upper case is two characters, is itself.
 */
function fold(c: number): number {
  if ((c >= 0x61 && c <= 0x7a) || (c >= 0xe0 && c <= 0xfe && c !== 0xf7)) return c - 0x20;
  if (c === 0xff) return 0x178;
  if (c === 0xb5 || c === 0x3bc) return 0x39c;
  return c;
}

/** What the forms of one byte of a secret are made of, folded for comparison. */
type ByteForms = {
  readonly folded: number;
  /** Two hex digits (`\u00XX`, `%XX`, `%25XX`). */
  readonly hex2: string;
  /** Decimal and hex without padding (`&#115`, `&#x73`). */
  readonly decimal: string;
  readonly hex: string;
  /** `\/`, `\"`, `\\`. */
  readonly backslashed: boolean;
  readonly names: readonly string[];
};

const foldedText = (s: string): string => String.fromCharCode(...[...s].map((ch) => fold(ch.charCodeAt(0))));

const BYTE_FORMS: readonly ByteForms[] = Array.from({ length: 256 }, (_, b) => {
  const ch = String.fromCharCode(b);
  return {
    folded: fold(b),
    hex2: foldedText(b.toString(16).padStart(2, '0')),
    decimal: String(b),
    hex: foldedText(b.toString(16)),
    backslashed: ch === '/' || ch === '"' || ch === '\\',
    names: (NAMED_REFERENCES[ch] ?? []).map(foldedText),
  };
});

/** Whether `text` at `at` holds `folded` (already folded), in any case. */
function holdsFolded(text: string, at: number, folded: string): boolean {
  if (at + folded.length > text.length) return false;
  for (let i = 0; i < folded.length; i++) if (fold(text.charCodeAt(at + i)) !== folded.charCodeAt(i)) return false;
  return true;
}

/**
 * A reference's end: after its `;` when one follows (tried first), and before it. The end before a
 * `;` leads anywhere only when the next byte of the secret is a `;` (nothing else is spelled
 * starting with one), so it is left out otherwise: the spelling found is the same, with no
 * branch to come back to.
 */
function referenceEnds(text: string, end: number, next: number, ends: Int32Array, count: number): number {
  const semicolon = text.charCodeAt(end) === SEMICOLON;
  if (semicolon) ends[count++] = end + 1;
  if (!semicolon || next === SEMICOLON) ends[count++] = end;
  return count;
}

/** `&#` then up to eight zeros then `digits` (any case), taking as many zeros as are there first. */
function numericEnds(text: string, from: number, digits: string, next: number, ends: Int32Array, count: number): number {
  let zeros = 0;
  while (zeros < MAX_ZEROS && text.charCodeAt(from + zeros) === ZERO) zeros++;
  for (let z = zeros; z >= 0; z--) if (holdsFolded(text, from + z, digits)) count = referenceEnds(text, from + z + digits.length, next, ends, count);
  return count;
}

/**
 * Where each form of byte `b` that starts at `at` ends, in the order they are tried, into `ends`;
 * returns how many. `next` is the secret's byte after `b` (-1 after the last). ASCII: itself, `\u00XX`, `%25XX`, `%XX`, `\` + itself for / " \, `&#` decimal,
 * `&#x` hex, the named references. Any other byte (of a UTF-8 sequence): itself, `%25XX`, `%XX`.
 */
function formEnds(text: string, at: number, b: number, next: number, ends: Int32Array): number {
  const c = text.charCodeAt(at);
  const forms = BYTE_FORMS[b]!;
  let count = 0;
  if (fold(c) === forms.folded) ends[count++] = at + 1;
  if (c === BACKSLASH && b < 0x80) {
    if (fold(text.charCodeAt(at + 1)) === 0x55 /* U */ && text.charCodeAt(at + 2) === ZERO && text.charCodeAt(at + 3) === ZERO && holdsFolded(text, at + 4, forms.hex2)) ends[count++] = at + 6;
  }
  if (c === PERCENT) {
    if (text.charCodeAt(at + 1) === 0x32 && text.charCodeAt(at + 2) === 0x35 && holdsFolded(text, at + 3, forms.hex2)) ends[count++] = at + 5;
    if (holdsFolded(text, at + 1, forms.hex2)) ends[count++] = at + 3;
  }
  if (b >= 0x80) return count;
  if (c === BACKSLASH && forms.backslashed && text.charCodeAt(at + 1) === b) ends[count++] = at + 2;
  if (c === AMPERSAND) {
    if (text.charCodeAt(at + 1) === HASH) {
      count = numericEnds(text, at + 2, forms.decimal, next, ends, count);
      if (fold(text.charCodeAt(at + 2)) === X) count = numericEnds(text, at + 3, forms.hex, next, ends, count);
    }
    for (const name of forms.names) if (holdsFolded(text, at + 1, name)) count = referenceEnds(text, at + 1 + name.length, next, ends, count);
  }
  return count;
}

/** The most ends one byte's forms can have at one place: itself, four escapes, (9 zero counts, with and without `;`) twice, three names twice. */
const MOST_ENDS = 1 + 4 + 2 * 9 * 2 + 3 * 2;

/** How many bytes of a secret the expression that finds where a spelling may start spells out. */
const OPENING_BYTES = 4;

/**
 * The source of an expression matching any form of byte `b`, case-insensitive with the i flag:
 * the forms `formEnds` reads, in the same order; the references only with `references`.
 */
function formsSource(b: number, references: boolean): string {
  const forms = BYTE_FORMS[b]!;
  const itself = `\\x${b.toString(16).padStart(2, '0')}`;
  const sources = [itself];
  if (b < 0x80) sources.push(`\\\\u00${forms.hex2}`);
  sources.push(`%(?:25)?${forms.hex2}`);
  if (b < 0x80 && forms.backslashed) sources.push(`\\\\${itself}`);
  if (b < 0x80 && references) sources.push(`&#(?:0{0,${MAX_ZEROS}}${forms.decimal}|x0{0,${MAX_ZEROS}}${forms.hex});?`, ...forms.names.map((name) => `&${name};?`));
  return `(?:${sources.join('|')})`;
}

/**
 * Pure: an expression that finds where a spelling of one of `secrets` may start: the first four
 * bytes spelled out. Four bytes' worth is quick to compile (under a millisecond) and long enough
 * for the engine to skip ahead through text that holds none; the matcher reads the rest.
 */
function openingsOf(secrets: readonly Uint8Array[], references: boolean): RegExp {
  const sources = secrets.map((s) => [...s.subarray(0, OPENING_BYTES)].map((b) => formsSource(b, references)).join(''));
  return new RegExp([...new Set(sources)].join('|'), 'gi');
}

/** One set of secrets to find spelled out, each as its bytes. */
export class SpelledSecrets {
  readonly #secrets: readonly Uint8Array[];
  /** Where a spelling may start: without HTML references, for text that holds none (twice as fast), and with them. */
  readonly #openings: RegExp;
  readonly #referencedOpenings: RegExp;
  /** `&#`, or `&` when a secret has a byte with a named reference (`&amp;`). */
  readonly #referenceStart: string;
  readonly #longest: number;

  constructor(secrets: readonly Uint8Array[]) {
    this.#secrets = secrets;
    this.#openings = openingsOf(secrets, false);
    this.#referencedOpenings = openingsOf(secrets, true);
    this.#referenceStart = secrets.some((s) => s.some((b) => BYTE_FORMS[b]!.names.length > 0)) ? '&' : '&#';
    this.#longest = Math.max(...secrets.map((s) => s.length));
  }

  /** Every place a secret is spelled out in `text` (latin1), in order, each scan going on after the last place found. */
  find(text: string, found: Array<readonly [number, number]>): void {
    const openings = text.includes(this.#referenceStart) ? this.#referencedOpenings : this.#openings;
    let search: Search | undefined;
    openings.lastIndex = 0;
    for (let m = openings.exec(text); m !== null; m = openings.exec(text)) {
      const at = m.index;
      openings.lastIndex = at + 1;
      search ??= new Search(text, this.#longest);
      for (const secret of this.#secrets) {
        const end = search.spelledAt(secret, at);
        if (end < 0) continue;
        found.push([at, end]);
        openings.lastIndex = end;
        break;
      }
    }
  }
}

/** The state of one scan: the backtracking stack, and the (byte, place) pairs known to lead nowhere. */
class Search {
  readonly #text: string;
  /** Per depth: where that byte's form starts, and how many of its forms were tried. */
  readonly #at: Int32Array;
  readonly #tried: Int32Array;
  readonly #ends = new Int32Array(MOST_ENDS);
  #deadEnds: Set<number> | undefined;
  #secret: Uint8Array | undefined;

  constructor(text: string, longest: number) {
    this.#text = text;
    this.#at = new Int32Array(longest);
    this.#tried = new Int32Array(longest);
  }

  /**
   * Where the first spelling of `secret` that starts at `start` ends, or -1. A place where a byte
   * has two forms (only for a secret with `;`, `%`, `\`, `&` or NUL) is a branch: from the first
   * one on, the (byte, place) pairs that led nowhere are kept, for this secret and text.
   */
  spelledAt(secret: Uint8Array, start: number): number {
    if (this.#secret !== secret) {
      this.#secret = secret;
      this.#deadEnds = undefined;
    }
    const text = this.#text;
    const at = this.#at;
    const tried = this.#tried;
    const ends = this.#ends;
    const last = secret.length - 1;
    let branched = false;
    let depth = 0;
    at[0] = start;
    tried[0] = 0;
    for (;;) {
      const here = at[depth]!;
      const count = tried[depth]! === 0 && this.#isDeadEnd(depth, here) ? 0 : formEnds(text, here, secret[depth]!, depth === last ? -1 : secret[depth + 1]!, ends);
      if (count > 1) branched = true;
      if (tried[depth]! < count) {
        const end = ends[tried[depth]!]!;
        tried[depth]!++;
        if (depth === last) return end;
        depth++;
        at[depth] = end;
        tried[depth] = 0;
        continue;
      }
      if (depth === 0) return -1;
      // Every form of this byte here was tried: the pair leads nowhere, whatever came before it.
      if (branched) (this.#deadEnds ??= new Set()).add(depth * (text.length + 1) + here);
      depth--;
    }
  }

  #isDeadEnd(depth: number, at: number): boolean {
    return this.#deadEnds !== undefined && this.#deadEnds.has(depth * (this.#text.length + 1) + at);
  }
}
