// The shape of a credential as the code that sends it asks for one: where it comes from and what a
// read of it gave. Types only, here beside Secret so that src/http (the lowest layer, which sends
// credentials) need not import src/config (which reads them from the environment and files).
import type { Secret } from './secret-value.ts';

/** Where a secret is read from, for messages that tell the operator what to fix (never the value). */
export type SecretRef = { readonly env: string } | { readonly file: string };

/** A secret as read: its value opaque (only kernel code reveals it), or why there is none. */
export type SecretRead =
  | { readonly ok: true; readonly value: Secret }
  | { readonly ok: false; readonly reason: 'missing' | 'invalid' };

/** A secret read when a request needs it (never cached from start-up, so a rotated file is seen). */
export interface SecretSource {
  read(): SecretRead;
  readonly ref?: SecretRef;
}
