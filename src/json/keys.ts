// Keys as the strict parser compares them: folded as a case-insensitive reader folds them, the
// keys a policy reads, the objects whose keys are names the client chose, and what is wrong with
// a key when something is.

/** A problem with one key of a document: see parseStrictJson (./strict.ts). */
export type KeyProblem =
  | { readonly ok: false; readonly reason: 'duplicate_key'; readonly key: string }
  /** Two keys of one object that differ only in case (`model` and `MODEL`). */
  | { readonly ok: false; readonly reason: 'case_variant_key'; readonly key: string; readonly other: string }
  /** A key that folds to a policy key without being it (`Tools` for `tools`). */
  | { readonly ok: false; readonly reason: 'policy_key_variant'; readonly key: string; readonly policyKey: string };

/**
 * Non-ASCII letters that a case-insensitive reader takes for an ASCII one: Go's encoding/json
 * folds U+212A KELVIN SIGN to k and U+017F LONG S to s (its simple case folding); readers that
 * compare upper- or lower-cased keys (.NET's OrdinalIgnoreCase, toUpperCase/toLowerCase) also
 * turn U+0131 DOTLESS I into I and U+0130 CAPITAL I WITH DOT into i. No other code point's
 * simple case mapping or fold is an ASCII letter.
 */
const NON_ASCII_FOLDS: ReadonlyMap<number, string> = new Map([
  [0x212a, 'K'],
  [0x17f, 'S'],
  [0x131, 'I'],
  [0x130, 'I'],
]);

/**
 * A key as a case-insensitive reader compares it: ASCII letters upper-cased, the non-ASCII
 * letters above turned into the ASCII letter they are read as, anything else kept. Two keys with
 * the same fold may be read as one field by such a reader.
 */
export function foldKey(key: string): string {
  let out = '';
  for (const ch of key) {
    const c = ch.codePointAt(0)!;
    if (c >= 0x61 && c <= 0x7a) out += String.fromCharCode(c - 0x20);
    else out += c < 0x80 ? ch : (NON_ASCII_FOLDS.get(c) ?? ch);
  }
  return out;
}

/**
 * Keys whose object is a map of names the client chose (JSON Schema's properties, metadata,
 * headers), not fields of the API: no upstream matches them to a field, so they may differ only
 * in case, and may be called `model` or `Type`. Duplicates are refused there all the same.
 */
export const MAP_KEYS: ReadonlySet<string> = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'metadata', 'headers', 'logit_bias']);

/** Policy keys, with the fold of each (built once per set, see policyKeySet). */
export interface PolicyKeys {
  readonly exact: ReadonlySet<string>;
  readonly byFold: ReadonlyMap<string, string>;
}

export function policyKeySet(keys: Iterable<string>): PolicyKeys {
  const exact = new Set(keys);
  for (const k of exact) if (k !== k.toLowerCase() || /[^\x20-\x7e]/.test(k)) throw new Error(`policy key "${k}" must be lower-case ASCII`);
  return { exact, byFold: new Map([...exact].map((k) => [foldKey(k), k])) };
}

/** A parsed JSON object. */
export type JsonObject = Record<string, unknown>;

/** A JSON object, as opposed to an array, null or a scalar. */
export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
