// Start-up configuration files (hosts file, price table) are strict JSON; every error names the
// file and the field so that the operator fixes it from the message alone.

export type FieldFailure = (field: string, why: string) => never;

export function parseConfigJson(text: string, fileName: string): { doc: unknown; fail: FieldFailure } {
  const fail: FieldFailure = (field, why) => {
    throw new Error(`${fileName}: ${field}: ${why}`);
  };
  try {
    return { doc: JSON.parse(text), fail };
  } catch (err) {
    return fail('(file)', `not valid JSON (${(err as Error).message})`);
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
