// Byte-level peeks the protocol readers use to decide whether an event is worth a JSON.parse,
// and the lenient readers of what they then parse: a value that is not what was expected is
// null, never an error (the relay forwards the bytes whatever this file thinks of them).
import { Char } from '../../json/chars.ts';
import { isObject, type JsonObject } from '../../json/keys.ts';

export function quotedKey(name: string): Buffer {
  return Buffer.from(`"${name}"`);
}

/**
 * Pre-check before JSON.parse: does the raw JSON contain `"key": value` with a value that starts
 * as `accepts` requires? A false positive (the key quoted inside a string) only costs a parse.
 * There is no false negative unless the key is spelled with \u escapes, which no server does.
 */
export function mayHaveValue(json: Buffer, key: Buffer, accepts: (json: Buffer, valueStart: number) => boolean): boolean {
  for (let keyAt = json.indexOf(key); keyAt !== -1; keyAt = json.indexOf(key, keyAt + 1)) {
    const colonAt = skipWhitespace(json, keyAt + key.length);
    if (json[colonAt] === Char.COLON && accepts(json, skipWhitespace(json, colonAt + 1))) return true;
  }
  return false;
}

function skipWhitespace(json: Buffer, from: number): number {
  let at = from;
  while (json[at] === Char.SPACE || json[at] === Char.TAB || json[at] === Char.LF || json[at] === Char.CR) at++;
  return at;
}

export function startsObject(json: Buffer, valueStart: number): boolean {
  return json[valueStart] === Char.OPEN_BRACE;
}

export function startsString(json: Buffer, valueStart: number): boolean {
  return json[valueStart] === Char.QUOTE;
}

export function startsNonEmptyString(json: Buffer, valueStart: number): boolean {
  return json[valueStart] === Char.QUOTE && json[valueStart + 1] !== Char.QUOTE;
}

/**
 * A value test that passes when the value starts with one of `prefixes` (say, quoted event
 * types): built once per list, so that no closure is made per event.
 */
export function startsWithOneOf(prefixes: readonly Buffer[]): (json: Buffer, valueStart: number) => boolean {
  return (json, at) => {
    for (const p of prefixes) {
      if (json.length >= at + p.length && json.compare(p, 0, p.length, at, at + p.length) === 0) return true;
    }
    return false;
  };
}

export function startsNonEmptyArray(json: Buffer, valueStart: number): boolean {
  return json[valueStart] === Char.OPEN_BRACKET && json[skipWhitespace(json, valueStart + 1)] !== Char.CLOSE_BRACKET;
}

/**
 * An event or answer as an object, or null when it is not JSON or not an object. Lenient on
 * purpose: it reads a copy of what the relay forwards (usage, model, how the call ended), and
 * nothing it reads changes what is forwarded. Request bodies, which the proxy judges, go through
 * the strict reader, parseStrictJson.
 */
export function parseObjectLoose(bytes: Buffer): JsonObject | null {
  try {
    const value: unknown = JSON.parse(bytes.toString('utf8'));
    return isObject(value) ? value : null;
  } catch {
    return null;
  }
}

/** A token count as the upstream reported it, or null when it is not a count. */
export function tokenCount(value: unknown): number | null {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null;
}
