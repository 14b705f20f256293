// A reference JSON parser for tests, with a choice of what a duplicate key means: 'last' keeps
// the last value (JSON.parse, most JavaScript), 'first' keeps the first (several Go, Rust and
// Python parsers configured strictly, some proxies). The gateway must never accept a body that
// the two policies read differently. Small and slow on purpose: it is the model, not the code.
export type DuplicatePolicy = 'first' | 'last';

/** `onDuplicate` is told of every key that repeats within one object. */
export function parseWithPolicy(text: string, policy: DuplicatePolicy, onDuplicate?: (key: string) => void): unknown {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at ${i}`);
  };
  const value = (): unknown => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const out: Record<string, unknown> = {};
      const seen = new Set<string>();
      ws();
      if (text[i] === '}') {
        i++;
        return out;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('key expected');
        const key = string();
        ws();
        if (text[i++] !== ':') fail('colon expected');
        const v = value();
        if (seen.has(key)) onDuplicate?.(key);
        if (!seen.has(key) || policy === 'last') Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
        seen.add(key);
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') {
          i++;
          return out;
        } else fail('comma or } expected');
      }
    }
    if (c === '[') {
      i++;
      const out: unknown[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return out;
      }
      for (;;) {
        out.push(value());
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') {
          i++;
          return out;
        } else fail('comma or ] expected');
      }
    }
    if (c === '"') return string();
    const m = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i));
    if (!m) return fail('value expected');
    i += m[0].length;
    return JSON.parse(m[0]);
  };
  const string = (): string => {
    const start = i;
    i++;
    while (text[i] !== '"') {
      if (i >= text.length) fail('unterminated string');
      i += text[i] === '\\' ? 2 : 1;
    }
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const v = value();
  ws();
  if (i !== text.length) fail('trailing text');
  return v;
}
