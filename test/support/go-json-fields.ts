// A model of how Go's encoding/json (v1, the decoder of Ollama's OpenAI layer and of most Go
// OpenAI-compatible relays) fills a struct field from a JSON object, for tests: a key names a
// field when it is the field's name exactly or equal to it under Go's case folding (bytes.
// EqualFold: ASCII case, and the Unicode simple-fold orbits, of which only K/k/U+212A KELVIN SIGN
// and S/s/U+017F LONG S hold an ASCII letter), and every key that names the field assigns it, so
// the last one wins. Small and slow on purpose: it is the model, not the code.

/** Go's fold of a key, as far as it can make the key equal to an ASCII field name. */
export function goFold(key: string): string {
  let out = '';
  for (const ch of key) {
    if (ch >= 'a' && ch <= 'z') out += ch.toUpperCase();
    else if (ch === '\u212a') out += 'K';
    else if (ch === '\u017f') out += 'S';
    else out += ch;
  }
  return out;
}

/**
 * The value Go decodes into the struct field named `field` from the object whose members are
 * `members` (in document order, duplicates kept), or undefined when no key names the field.
 */
export function goFieldValue(members: readonly (readonly [string, unknown])[], field: string): unknown {
  let value: unknown;
  const folded = goFold(field);
  for (const [key, v] of members) if (key === field || goFold(key) === folded) value = v;
  return value;
}
