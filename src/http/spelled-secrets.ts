// Finds a secret spelled out one character at a time, each character either as itself (in any
// case) or in a form a decoder reads back as it, mixed freely: JSON-escaped (`\u0073`, `\/`),
// percent-encoded once or twice (`%73`, `%2573`), or an HTML character reference (`&#115;`,
// `&#x073`, `&sol;`, with or without the `;`). Text is read as latin1: one character per byte.
//
// A small backtracking matcher rather than one regular expression. The expression that says the
// same (every character of the secret an alternation of its forms, case-insensitive) takes V8
// about 0.3 ms per character of the secret to compile, twice (once to bytecode, again to machine
// code on its second use): 60 ms for a 220-character cloud access token, 200 ms with the HTML
// references, paid on the event loop, so by every request in flight, at each credential
// rotation. Here an expression for the first eight bytes only (a millisecond or two) finds where
// a spelling may start, natively, and the matcher reads the rest from there.
//
// It finds what that expression finds, in the same order: at each position, the secrets in the
// order given, and for each character its forms in the order listed in `formEnds` (a longer form
// before a shorter one that begins the same way), the first whole spelling winning; the scan goes
// on after it. Only a secret with `;`, `&`, `%`, `\` or NUL has characters with two forms at one
// place; for those, a search that backtracks often keeps the (character, place) pairs that led
// nowhere, and a text that would still take over STEPS_PER_CHARACTER steps a character is
// refused, where the expression could take exponential time.

/**
 * A text that reads as a secret too many ways to be checked within STEPS_PER_CHARACTER: whoever
 * asked treats it as holding the secret (fail closed).
 */
export class UnreadableText extends Error {
  constructor() {
    super(`the text reads as the credential too many ways to be checked (over ${STEPS_PER_CHARACTER} steps a character)`);
    this.name = 'UnreadableText';
  }
}

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

/** Each latin1 character folded (`fold`), by its code. */
const FOLDED = Uint16Array.from({ length: 256 }, (_, c) => fold(c));

/** What the forms of one byte of a secret are made of, folded for comparison. */
type ByteForms = {
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
 * Where each form of byte `b` that starts at `at` ends, in the order they are tried, into `ends`
 * from `base` on; returns how many. `next` is the secret's byte after `b` (-1 after the last). ASCII: itself, `\u00XX`, `%25XX`, `%XX`, `\` + itself for / " \, `&#` decimal,
 * `&#x` hex, the named references. Any other byte (of a UTF-8 sequence): itself, `%25XX`, `%XX`.
 */
function formEnds(text: string, at: number, b: number, next: number, ends: Int32Array, base: number): number {
  const c = text.charCodeAt(at);
  const forms = BYTE_FORMS[b]!;
  let count = base;
  if (fold(c) === FOLDED[b]) ends[count++] = at + 1;
  if (c === BACKSLASH && b < 0x80) {
    if (fold(text.charCodeAt(at + 1)) === 0x55 /* U */ && text.charCodeAt(at + 2) === ZERO && text.charCodeAt(at + 3) === ZERO && holdsFolded(text, at + 4, forms.hex2)) ends[count++] = at + 6;
  }
  if (c === PERCENT) {
    if (text.charCodeAt(at + 1) === 0x32 && text.charCodeAt(at + 2) === 0x35 && holdsFolded(text, at + 3, forms.hex2)) ends[count++] = at + 5;
    if (holdsFolded(text, at + 1, forms.hex2)) ends[count++] = at + 3;
  }
  if (b >= 0x80) return count - base;
  if (c === BACKSLASH && forms.backslashed && text.charCodeAt(at + 1) === b) ends[count++] = at + 2;
  if (c === AMPERSAND) {
    if (text.charCodeAt(at + 1) === HASH) {
      count = numericEnds(text, at + 2, forms.decimal, next, ends, count);
      if (fold(text.charCodeAt(at + 2)) === X) count = numericEnds(text, at + 3, forms.hex, next, ends, count);
    }
    for (const name of forms.names) if (holdsFolded(text, at + 1, name)) count = referenceEnds(text, at + 1 + name.length, next, ends, count);
  }
  return count - base;
}

/** The most ends one byte's forms can have at one place: itself, four escapes, (9 zero counts, with and without `;`) twice, three names twice. */
const MOST_ENDS = 1 + 4 + 2 * 9 * 2 + 3 * 2;

/** How many bytes of a secret the expression that finds where a spelling may start spells out. */
const OPENING_BYTES = 8;

/**
 * Backtracks a search may make per byte of the secret before it starts keeping the (byte, place)
 * pairs that led nowhere: a secret with one `&`, `%` or `\` backtracks once per place, and needs
 * none; only a run of bytes whose forms overlap (`;;;;`) can make the count grow with the ways to
 * read the text, and that is what the kept pairs stop.
 */
const BACKTRACKS_BEFORE_MEMO_PER_BYTE = 4;

/**
 * The steps (a byte of a secret compared at a place; FORMS_STEPS where its forms are read) one scan may take per character of the text,
 * beyond a secret's worth: a text that reads as a secret so many ways that more would be needed
 * (only a secret with runs of `;`, `&`, `%` or `\` allows it) is refused, fail closed, rather
 * than read: `find` throws UnreadableText, and the answer that holds it is not relayed. Ordinary
 * text takes none, and a near miss of the secret about one.
 */
const STEPS_PER_CHARACTER = 16;
/** Reading a byte's forms at an escape counts as this many steps: it costs about that much more than a comparison. */
const FORMS_STEPS = 4;

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
 * Pure: an expression that finds where a spelling of one of `secrets` may start: its first eight
 * bytes spelled out. Eight bytes' worth compiles in a millisecond or two, lets the engine skip
 * through text that holds none at about the speed of the whole expression, and makes a text that
 * repeats a secret's opening, to make the matcher run, pay one search per eight bytes.
 */
function openingsOf(secrets: readonly Uint8Array[], references: boolean): RegExp {
  const sources = secrets.map((s) => [...s.subarray(0, OPENING_BYTES)].map((b) => formsSource(b, references)).join(''));
  return new RegExp([...new Set(sources)].join('|'), 'gi');
}

/**
 * One set of secrets to find spelled out, each as its bytes. #openings and #referencedOpenings:
 * where a spelling may start, without HTML references (for text that holds none: twice as fast)
 * and with them; #referenceStart: `&#`, or `&` when a secret has a byte with a named reference
 * (`&amp;`). (The members' comments are here and in their bodies: esbuild keeps a comment before
 * a class member in the bundle.)
 */
export class SpelledSecrets {
  readonly #secrets: readonly Uint8Array[];
  readonly #openings: RegExp;
  readonly #referencedOpenings: RegExp;
  readonly #referenceStart: string;
  readonly #longest: number;

  constructor(secrets: readonly Uint8Array[]) {
    this.#secrets = secrets;
    this.#openings = openingsOf(secrets, false);
    this.#referencedOpenings = openingsOf(secrets, true);
    this.#referenceStart = secrets.some((s) => s.some((b) => BYTE_FORMS[b]!.names.length > 0)) ? '&' : '&#';
    this.#longest = Math.max(...secrets.map((s) => s.length));
  }

  find(text: string, found: Array<readonly [number, number]>): void {
    // Every place a secret is spelled out in `text` (latin1), in order, each scan going on after the last place found.
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

/**
 * The state of one scan of a text. A search walks the secret byte by byte; a character other than
 * `\`, `%` and `&` can only be the byte itself (every other form starts with one of those), so it
 * is compared and passed. Where a byte has two forms (only for a secret with `;`, `%`, `\`, `&`
 * or NUL), the place is a branch, kept on a stack; a search that fails goes back to the deepest
 * branch with a form left, or gives up. Past BACKTRACKS_BEFORE_MEMO_PER_BYTE per byte of the
 * secret, the (byte, place) pairs found to lead nowhere are kept for the rest of that search and
 * not tried again, so no text makes it try more than every pair once. #stepsLeft: the steps left
 * to this scan (STEPS_PER_CHARACTER); #branchDepth to #branchEnds: the branches, each its byte,
 * where its forms start, how many of them were tried, and where each ends (MOST_ENDS a branch).
 */
class Search {
  readonly #text: string;
  #stepsLeft: number;
  readonly #branchDepth: Int32Array;
  readonly #branchAt: Int32Array;
  readonly #branchTried: Int32Array;
  readonly #branchCount: Int32Array;
  readonly #branchEnds: Int32Array;

  constructor(text: string, longest: number) {
    this.#text = text;
    this.#stepsLeft = STEPS_PER_CHARACTER * (text.length + longest * LONGEST_CHAR_FORM);
    this.#branchDepth = new Int32Array(longest);
    this.#branchAt = new Int32Array(longest);
    this.#branchTried = new Int32Array(longest);
    this.#branchCount = new Int32Array(longest);
    this.#branchEnds = new Int32Array(longest * MOST_ENDS);
  }

  spelledAt(bytes: Uint8Array, start: number): number {
    // Where the first spelling of `secret` that starts at `start` ends (in the order the forms are tried), or -1.
    const text = this.#text;
    const last = bytes.length - 1;
    const branchDepth = this.#branchDepth;
    const branchAt = this.#branchAt;
    const branchTried = this.#branchTried;
    const branchCount = this.#branchCount;
    const branchEnds = this.#branchEnds;
    let branches = 0;
    let backtracks = 0;
    let deadEnds: Set<number> | undefined;
    // A (byte, place) pair as one number, for deadEnds.
    const places = text.length + 1;
    let depth = 0;
    let at = start;
    for (let steps = 1; ; steps++) {
      if (steps > this.#stepsLeft) throw new UnreadableText();
      // One byte: passed as itself, or through its forms (a branch when it has two).
      const c = text.charCodeAt(at);
      let passed = false;
      if (c !== BACKSLASH && c !== PERCENT && c !== AMPERSAND) {
        passed = fold(c) === FOLDED[bytes[depth]!];
        if (passed) at++;
      } else if (deadEnds === undefined || !deadEnds.has(depth * places + at)) {
        steps += FORMS_STEPS - 1;
        // The ends go where this byte's branch is kept, if it is one.
        const count = formEnds(text, at, bytes[depth]!, depth === last ? -1 : bytes[depth + 1]!, branchEnds, branches * MOST_ENDS);
        const first = branchEnds[branches * MOST_ENDS]!;
        if (count > 1) {
          branchDepth[branches] = depth;
          branchAt[branches] = at;
          branchTried[branches] = 1;
          branchCount[branches] = count;
          branches++;
        }
        passed = count > 0;
        if (passed) at = first;
      }
      if (passed) {
        if (depth === last) return this.#took(steps, at);
        depth++;
        continue;
      }
      // Back to the deepest branch with a form left; those with none lead nowhere.
      for (;;) {
        if (branches === 0) return this.#took(steps, -1);
        const b = branches - 1;
        if (branchTried[b]! < branchCount[b]!) {
          at = branchEnds[b * MOST_ENDS + branchTried[b]!]!;
          branchTried[b]!++;
          depth = branchDepth[b]!;
          break;
        }
        if (deadEnds !== undefined) deadEnds.add(branchDepth[b]! * places + branchAt[b]!);
        branches--;
      }
      if (++backtracks > BACKTRACKS_BEFORE_MEMO_PER_BYTE * bytes.length) deadEnds ??= new Set();
      if (depth === last) return this.#took(steps, at);
      depth++;
    }
  }

  #took(steps: number, found: number): number {
    // Counts a search's steps against the scan's, and returns what it found.
    this.#stepsLeft -= steps;
    return found;
  }
}
