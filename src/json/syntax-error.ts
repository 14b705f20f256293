// Where a configuration file stops being JSON, as line and column: JSON.parse says it by byte
// position, or quotes the whole text, depending on the error. Pure: a small recursive-descent
// check of the grammar (RFC 8259) that only locates the first error; JSON.parse still does the
// parsing. Used for files the operator wrote, never on the request path.

export interface JsonSyntaxError {
  /** 1-based line and column (in UTF-16 units, as an editor counts most text) of the error. */
  readonly line: number;
  readonly column: number;
  /** What is wrong there, in a few words. */
  readonly problem: string;
}

/** Deeper than this is reported rather than recursed into (a configuration file is shallow). */
const MAX_DEPTH = 512;

class SyntaxAt extends Error {
  constructor(
    readonly offset: number,
    readonly problem: string,
  ) {
    super(problem);
  }
}

/** Pure: the first syntax error of `text` as JSON, or undefined when it is valid JSON. */
export function jsonSyntaxError(text: string): JsonSyntaxError | undefined {
  try {
    checkDocument(text);
    return undefined;
  } catch (err) {
    if (!(err instanceof SyntaxAt)) throw err;
    return { ...lineAndColumn(text, err.offset), problem: err.problem };
  }
}

/** Pure: the 1-based line and column of an offset. */
function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: offset - lineStart + 1 };
}

function describe(text: string, i: number): string {
  return i >= text.length ? 'the end of the file' : JSON.stringify(text[i]);
}

function checkDocument(text: string): void {
  let i = 0;
  const fail = (problem: string, at = i): never => {
    throw new SyntaxAt(at, problem);
  };
  const skipSpace = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const string = () => {
    const open = i++;
    for (;;) {
      if (i >= text.length) fail('a string that is never closed (its opening quote is here)', open);
      const c = text.charCodeAt(i);
      if (c === 0x22) return void i++;
      if (c < 0x20) fail('a control character inside a string (write a line break as \\n)');
      if (c === 0x5c) {
        const e = text[i + 1];
        if (e === 'u') {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) fail('\\u must be followed by four hex digits');
          i += 6;
        } else if (e !== undefined && '"\\/bfnrt'.includes(e)) i += 2;
        else fail(`${describe(text, i + 1)} cannot follow a backslash`);
      } else i++;
    }
  };
  const number = () => {
    const m = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (!m || m[0] === '-') fail(`unexpected ${describe(text, i)}`);
    i += m![0].length;
  };
  const value = (depth: number): void => {
    skipSpace();
    if (depth > MAX_DEPTH) fail(`nested deeper than ${MAX_DEPTH} levels`);
    const c = text[i];
    if (c === '{') return object(depth);
    if (c === '[') return array(depth);
    if (c === '"') return string();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return number();
    for (const word of ['true', 'false', 'null']) {
      if (text.startsWith(word, i)) return void (i += word.length);
    }
    fail(i >= text.length ? 'the file ends where a value should be' : `unexpected ${describe(text, i)} where a value should be (strings need double quotes)`);
  };
  const object = (depth: number) => {
    i++;
    skipSpace();
    if (text[i] === '}') return void i++;
    for (;;) {
      skipSpace();
      if (text[i] === '}') fail('a comma before "}" (JSON allows no trailing comma)');
      if (text[i] !== '"') fail(`a key in double quotes expected, not ${describe(text, i)}`);
      string();
      skipSpace();
      if (text[i] !== ':') fail(`":" expected after the key, not ${describe(text, i)}`);
      i++;
      value(depth + 1);
      skipSpace();
      if (text[i] === '}') return void i++;
      if (text[i] !== ',') fail(`"," or "}" expected after a value, not ${describe(text, i)}`);
      i++;
    }
  };
  const array = (depth: number) => {
    i++;
    skipSpace();
    if (text[i] === ']') return void i++;
    for (;;) {
      skipSpace();
      if (text[i] === ']') fail('a comma before "]" (JSON allows no trailing comma)');
      value(depth + 1);
      skipSpace();
      if (text[i] === ']') return void i++;
      if (text[i] !== ',') fail(`"," or "]" expected after a value, not ${describe(text, i)}`);
      i++;
    }
  };
  skipSpace();
  if (i >= text.length) fail('the file is empty');
  value(0);
  skipSpace();
  if (i < text.length) fail(`more text after the JSON value: ${describe(text, i)}`);
}
