// Strict JSON for the decisions the proxy makes on JSON it did not write.
//
// parseStrictJson: JSON.parse, plus a refusal of duplicate object keys. JSON.parse keeps the
// last of two equal keys; other parsers keep the first, and case-insensitive ones (Go's
// encoding/json) read `MODEL` as `model`. The gateway forwards the original bytes, so a body
// like {"model":"allowed","model":"secret"} must not be judged on one reading and executed on
// the other: a duplicate key anywhere, or two keys equal under case folding, is refused. Keys
// are compared by their decoded value ("gpt-te\u0073t" equals "gpt-test"). Limits on depth and
// size are checked before JSON.parse runs.
//
// The parts, one file each: the key rules (keys.ts: folding, policy keys, map objects); the
// one-pass scanner every document goes through (scan.ts, safe on malformed text: strings
// skipped with indexOf, so most bytes cost nothing); and, for a document with an escaped or
// non-ASCII key, once JSON.parse has accepted it, the decoded-key check (decoded-keys.ts) over
// the chunked tokenizer (tokenizer.ts).
import { decodedKeyProblem } from './decoded-keys.ts';
import type { KeyProblem, PolicyKeys } from './keys.ts';
import { scanDocument, type JsonLimits, type ShapeProblem } from './scan.ts';

export interface StrictJsonOptions {
  /** Checked before JSON.parse runs; none when absent (files the operator wrote, tokens). */
  readonly limits?: JsonLimits;
  /**
   * Keys a policy reads, lower-case: a key that folds to one of them without being it (`MODEL`,
   * `Tools`, `ſtream`) is refused, since a case-insensitive upstream reads it as that key.
   */
  readonly policyKeys?: PolicyKeys;
}

export type StrictJson =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly reason: 'invalid'; readonly message: string }
  | KeyProblem
  | ShapeProblem;

/**
 * JSON.parse, refusing documents in which one object has two keys that are equal, or equal
 * under case folding (foldKey): JSON.parse keeps the last of two equal keys, other parsers the
 * first, and case-insensitive readers (Go's encoding/json, ASP.NET) either; the gateway forwards
 * the original bytes, so no upstream may read another value than the one checked. With
 * `policyKeys`, a key folding to one of them without being it is refused too. With `limits`, the
 * document's depth and size are checked by a scan before JSON.parse runs, so that what a body
 * costs to parse is bounded. `message` is JSON.parse's own; keys are decoded, and callers bound
 * them before showing them. A request body comes as bytes, a configuration file as text: neither
 * is converted twice.
 */
export function parseStrictJson(json: Buffer | string, options: StrictJsonOptions = {}): StrictJson {
  const text = typeof json === 'string' ? json : json.toString('utf8');
  const scan = scanDocument(text, options.limits, options.policyKeys);
  if (scan.shape) return scan.shape;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: 'invalid', message: (err as Error).message };
  }
  const problem = scan.slow ? decodedKeyProblem(typeof json === 'string' ? Buffer.from(json) : json, options.policyKeys) : scan.key;
  return problem ?? { ok: true, value };
}
