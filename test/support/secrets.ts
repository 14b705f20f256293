// Secrets in tests: a Redactor of plain strings, and a value with every Secret in it revealed, so
// that a test compares what the kernel code made with the text it expects (a Secret compares
// equal to any other: its value is a private field).
import { Redactor } from '../../src/http/redactor.ts';
import { reveal, Secret } from '../../src/http/secret-value.ts';

/** A Redactor of these secrets. */
export function redactorOf(...secrets: string[]): Redactor {
  return new Redactor(secrets.map((s) => new Secret(s)));
}

/** Revealed<T>: T with each Secret in it as its string. */
export type Revealed<T> = T extends Secret ? string : T extends readonly (infer E)[] ? Revealed<E>[] : T extends object ? { [K in keyof T]: Revealed<T[K]> } : T;

/** `value` with every Secret in it (in arrays and plain objects, at any depth) replaced by its value. */
export function revealed<T>(value: T): Revealed<T> {
  if (value instanceof Secret) return reveal(value) as Revealed<T>;
  if (Array.isArray(value)) return value.map(revealed) as Revealed<T>;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, revealed(v)])) as Revealed<T>;
  }
  return value as Revealed<T>;
}
