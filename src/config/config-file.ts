// Start-up configuration files (hosts file, providers file, price table) are strict JSON; every
// error names the file and the field so that the operator fixes it from the message alone.
import { isObject } from '../json/keys.ts';
import { parseStrictJson } from '../json/strict.ts';
import { jsonSyntaxError } from '../json/syntax-error.ts';
import type { SecretRef } from './secret.ts';
import { suggestion } from './suggest.ts';

export type FieldFailure = (field: string, why: string) => never;

/** An environment variable name, as a `...Env` field gives one. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The file's JSON and a `fail` that names the file and a field. A key given twice in one object
 * is a mistake too: which of the two counts would be a guess.
 */
export function parseConfigJson(text: string, fileName: string): { doc: unknown; fail: FieldFailure } {
  const fail: FieldFailure = (field, why) => {
    throw new Error(`${fileName}: ${field}: ${why}`);
  };
  const parsed = parseStrictJson(text);
  if (parsed.ok) return { doc: parsed.value, fail };
  switch (parsed.reason) {
    case 'duplicate_key':
      return fail('(file)', `the key "${parsed.key}" appears twice in one object; keep one`);
    case 'case_variant_key':
      return fail('(file)', `the keys "${parsed.other}" and "${parsed.key}" in one object differ only in case; keep one, spelled as documented`);
    case 'invalid': {
      // By line and column (JSON.parse gives a byte position, or quotes the whole text).
      const at = jsonSyntaxError(text);
      return fail('(file)', `not valid JSON (${at ? `line ${at.line}, column ${at.column}: ${at.problem}` : parsed.message})`);
    }
    default:
      return fail('(file)', `not valid JSON (${parsed.reason})`);
  }
}

export interface EntryReader {
  readonly entry: Record<string, unknown>;
  /** `where.field`, for a failure. */
  at(field: string): string;
  /** A non-empty string field, or undefined when absent. */
  str(field: string): string | undefined;
  /** A field naming an environment variable, or undefined when absent. */
  envName(field: string): string | undefined;
  /** Exactly one of `envField` (a variable) and `fileField` (a file path): where a secret is read from. */
  secretRef(envField: string, fileField: string): SecretRef;
}

/** Reads one entry of a file's list (`hosts[2]`): an object whose fields are all in `known`. */
export function entryReader(entry: unknown, where: string, known: ReadonlySet<string>, fail: FieldFailure): EntryReader {
  if (!isObject(entry)) return fail(where, 'must be an object');
  const at = (f: string) => `${where}.${f}`;
  for (const k of Object.keys(entry)) if (!known.has(k)) fail(at(k), `unknown field${suggestion(k, known)}`);
  const str = (f: string): string | undefined => {
    const v = entry[f];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v === '') return fail(at(f), 'must be a non-empty string');
    return v;
  };
  const envName = (f: string): string | undefined => {
    const v = str(f);
    if (v !== undefined && !ENV_NAME.test(v)) fail(at(f), 'must be an environment variable name');
    return v;
  };
  const secretRef = (envField: string, fileField: string): SecretRef => {
    const env = envName(envField);
    const file = str(fileField);
    if ((env === undefined) === (file === undefined)) return fail(at(envField), `exactly one of ${envField} and ${fileField} is required`);
    return env !== undefined ? { env } : { file: file! };
  };
  return { entry, at, str, envName, secretRef };
}
