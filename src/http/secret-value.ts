// A credential's value as everything outside the credential kernel (scripts/kernel.json) holds it:
// opaque. It is kept, passed on and sent; only kernel code reads it, with reveal(), and the build
// refuses a call of reveal() in any other file (scripts/audit-source.mjs). Logged, printed or
// turned into JSON, a Secret shows nothing of its value.

let valueOf: (secret: Secret) => string;

/** A credential's value, held opaque: nothing but reveal() reads it. */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  static {
    valueOf = (secret) => secret.#value;
  }
}

/** The value of `secret`. Kernel code only: the build names any other file that calls it. */
export function reveal(secret: Secret): string {
  return valueOf(secret);
}
