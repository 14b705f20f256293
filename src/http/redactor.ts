// A call's secrets as the relays hold them: a Redactor, made by the kernel code that produced the
// credential, which scrubs every form of them from what an upstream sends back (redact.ts,
// headers.ts) and never hands their values out.
import { scrubResponseHeaders } from './headers.ts';
import { carriesSecret, headerCarriesSecret, redactBody, StreamRedactor } from './redact.ts';
import { fixedSecretList } from './secret-forms.ts';
import { reveal, type Secret } from './secret-value.ts';

/**
 * The redactor of a call's secrets: `headers` the upstream's response headers as relayed
 * (scrubResponseHeaders); `body` a whole body, every form of every secret replaced (redactBody:
 * throws UnreadableText for one too ambiguous to check); `carries` whether bytes carry a secret in
 * any form (carriesSecret), for a relay that must refuse instead of redact; `stream` a redactor
 * of a body relayed chunk by chunk, `events` for an event stream (StreamRedactor); `textCheck`
 * whether a string carries a secret in any form, bare or in base64 (headerCarriesSecret), for a
 * text replaced whole (a span's attribute). Its members are documented here: esbuild keeps a
 * comment inside a class body in the bundle.
 */
export class Redactor {
  readonly #secrets: readonly string[];

  constructor(secrets: readonly Secret[]) {
    this.#secrets = fixedSecretList(secrets.map(reveal));
  }

  headers(rawHeaders: readonly string[]): string[] {
    return scrubResponseHeaders(rawHeaders, this.#secrets);
  }

  body(body: Buffer): Buffer {
    return redactBody(body, this.#secrets);
  }

  carries(bytes: Buffer): boolean {
    return carriesSecret(bytes, this.#secrets);
  }

  stream(events: boolean): StreamRedactor {
    return new StreamRedactor(this.#secrets, events);
  }

  textCheck(): (text: string) => boolean {
    return headerCarriesSecret(this.#secrets);
  }
}

/** The redactor of a call that sent no credential (yet): nothing to scrub. */
export const NO_SECRETS = new Redactor([]);
