// The encodings a test echoes a secret in, and an oracle that reads a secret back out of what a
// client received, written apart from src/http/redact.ts (it decodes, where the redactor matches
// precomputed forms), so that the two do not share a mistake.

/** The secret base64- (or base64url-) encoded after `before` and before `after`: at byte offset `before.length % 3`. */
export const base64Of = (secret: string, before = '', after = '', encoding: 'base64' | 'base64url' = 'base64'): string => Buffer.from(`${before}${secret}${after}`, 'latin1').toString(encoding);

/** Each byte as an HTML character reference: decimal, hex, or hex without the closing `;`, in turn. */
export const htmlReferencesOf = (secret: string): string => [...Buffer.from(secret)].map((b, i) => [`&#${b};`, `&#x${b.toString(16)};`, `&#X${b.toString(16).toUpperCase()}`][i % 3]).join('');

/** Each byte percent-encoded twice (`%2573` for `s`). */
export const doublePercentOf = (secret: string): string => [...Buffer.from(secret)].map((b) => `%25${b.toString(16).padStart(2, '0')}`).join('');

/** JSON, percent (twice) and HTML escapes undone, until nothing changes. */
function unescape(text: string): string {
  const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
  for (;;) {
    const next = text
      .replace(/\\u([0-9a-fA-F]{4})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
      .replace(/\\(["\\/])/g, '$1')
      .replace(/%([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
      .replace(/&#[xX]([0-9a-fA-F]+);?/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
      .replace(/&#(\d+);?/g, (_, d: string) => String.fromCharCode(Number(d)))
      .replace(/&(amp|lt|gt|quot|apos);/g, (_, n: string) => named[n]!);
    if (next === text) return text;
    text = next;
  }
}

/** Every text a client could decode `text` into: itself unescaped, and each run of base64 decoded at each alignment, once and twice. */
function readings(text: string, depth = 0): string[] {
  const plain = unescape(text);
  const out = [plain];
  if (depth === 2) return out;
  for (const run of plain.match(/[A-Za-z0-9+/_-]{8,}/g) ?? []) {
    for (let align = 0; align < 4; align++) out.push(...readings(Buffer.from(run.slice(align), 'base64').toString('latin1'), depth + 1));
  }
  return out;
}

/**
 * A piece of `secret` (`piece` characters long, any case) that a client can read back from
 * `received` by undoing escapes and decoding base64 or base64url runs, once or twice, at any
 * alignment; undefined when there is none. Redaction leaves at most a few bits of the secret's
 * first and last byte in an encoded run (the characters that also carry neighbouring bytes).
 */
export function recoverablePiece(received: Buffer | string, secret: string, piece = 8): string | undefined {
  const all = readings(typeof received === 'string' ? received : received.toString('latin1')).map((r) => r.toLowerCase());
  for (let i = 0; i + piece <= secret.length; i++) {
    const p = secret.slice(i, i + piece).toLowerCase();
    if (all.some((r) => r.includes(p))) return p;
  }
  return undefined;
}
