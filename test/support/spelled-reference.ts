// The reference model of src/http/spelled-secrets.ts: the regular expression the redactor used
// before the matcher replaced it (it took V8 about 0.3 ms per character of a secret to compile,
// twice). It says what "spelled out" means in the language every reader knows, so a fuzz test can
// check that the matcher finds the same places: each character of the secret an alternation of
// its forms, in the order tried, case-insensitive, the secrets one alternation after another. It
// keeps its own copy of the named references, so that the two do not share a mistake.

const NAMED_REFERENCES: Readonly<Record<string, readonly string[]>> = {
  '&': ['amp'], '<': ['lt'], '>': ['gt'], '"': ['quot'], "'": ['apos'], '_': ['lowbar', 'UnderBar'], '/': ['sol'], '+': ['plus'],
  '.': ['period'], ':': ['colon'], '=': ['equals'], '#': ['num'], '!': ['excl'], '$': ['dollar'], '%': ['percnt'], '(': ['lpar'],
  ')': ['rpar'], '*': ['ast', 'midast'], ',': ['comma'], ';': ['semi'], '?': ['quest'], '@': ['commat'], '[': ['lsqb', 'lbrack'],
  ']': ['rsqb', 'rbrack'], '\\': ['bsol'], '^': ['Hat'], '`': ['grave', 'DiacriticalGrave'], '{': ['lcub', 'lbrace'], '}': ['rcub', 'rbrace'],
  '|': ['verbar', 'vert', 'VerticalLine'], '\t': ['Tab'], '\n': ['NewLine'],
};

/** The alternation of one byte's forms: itself, `\u00XX`, `%XX` or `%25XX`, `\` + itself for / " \, numeric and named references. */
function charForms(byte: number): string {
  const ch = String.fromCharCode(byte);
  const literal = /[A-Za-z0-9]/.test(ch) ? ch : `\\x${byte.toString(16).padStart(2, '0')}`;
  const hex = byte.toString(16).padStart(2, '0');
  const percent = `%(?:25)?${hex}`;
  if (byte >= 0x80) return `(?:${literal}|${percent})`;
  const forms = [literal, `\\\\u00${hex}`, percent];
  if (ch === '/' || ch === '"' || ch === '\\') forms.push(`\\\\${literal}`);
  forms.push(`&#(?:0{0,8}${byte}|x0{0,8}${byte.toString(16)});?`);
  for (const name of NAMED_REFERENCES[ch] ?? []) forms.push(`&${name};?`);
  return `(?:${forms.join('|')})`;
}

/** Every place the expression finds one of `secrets` (as bytes) spelled out in `text`, in order. */
export function spelledByExpression(secrets: readonly Uint8Array[], text: string): Array<[number, number]> {
  const re = new RegExp(secrets.map((bytes) => [...bytes].map(charForms).join('')).join('|'), 'gi');
  const found: Array<[number, number]> = [];
  for (let m = re.exec(text); m !== null; m = re.exec(text)) found.push([m.index, m.index + m[0].length]);
  return found;
}

/** Every form of one byte, as text: for a test to spell a secret with (references with and without `;`, zeros, any case left to the caller). */
export function formsOf(byte: number): string[] {
  const ch = String.fromCharCode(byte);
  const hex = byte.toString(16).padStart(2, '0');
  const percent = [`%${hex}`, `%25${hex}`];
  if (byte >= 0x80) return [ch, ...percent];
  const forms = [ch, `\\u00${hex}`, ...percent];
  if (ch === '/' || ch === '"' || ch === '\\') forms.push(`\\${ch}`);
  forms.push(`&#${byte};`, `&#${byte}`, `&#00${byte};`, `&#x${byte.toString(16)};`, `&#x0${byte.toString(16)}`);
  for (const name of NAMED_REFERENCES[ch] ?? []) forms.push(`&${name};`, `&${name}`);
  return forms;
}
