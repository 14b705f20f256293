// git-receive-pack request bodies built by hand, as git writes them or as a hostile client might:
// pkt-lines, commands, capability lists, push certificates, an empty pack. Shared by the reader's
// unit tests, the hostile-body tests through the proxy and the differential test against git.
import { createHash } from 'node:crypto';

export const ZERO = '0'.repeat(40);
/** The capabilities git 2.39 sends on a push over smart HTTP (with the agent). */
export const GIT_CAPS = 'report-status side-band-64k quiet object-format=sha1 agent=git/2.39.5';

/** One pkt-line: 4 lower-case hex digits of length (theirs included), then the data. */
export function pkt(data: string | Buffer, lengthCase: 'lower' | 'upper' = 'lower'): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'latin1') : data;
  const digits = (bytes.length + 4).toString(16).padStart(4, '0');
  return Buffer.concat([Buffer.from(lengthCase === 'upper' ? digits.toUpperCase() : digits, 'latin1'), bytes]);
}

export const FLUSH = Buffer.from('0000', 'latin1');

/** `<old> <new> <ref>` with the capability list after a NUL when given, and git's LF. */
export function commandLine(old: string, next: string, ref: string, caps?: string): string {
  return `${old} ${next} ${ref}${caps === undefined ? '' : `\0${caps}`}\n`;
}

/** An object id from a number, 40 (or 64) hex digits. */
export function oid(n: number, hexSize = 40): string {
  return createHash(hexSize === 64 ? 'sha256' : 'sha1').update(String(n)).digest('hex');
}

/** An empty pack (version 2, no objects) with its trailing checksum, as git sends for a push that needs no objects. */
export function emptyPack(format: 'sha1' | 'sha256' = 'sha1'): Buffer {
  const head = Buffer.from('PACK\0\0\0\x02\0\0\0\0', 'latin1');
  return Buffer.concat([head, createHash(format).update(head).digest()]);
}

/** A push body: the commands (the first with the capabilities), a flush, then the pack. */
export function pushBody(commands: readonly { old: string; new: string; ref: string }[], caps = GIT_CAPS, pack: Buffer = emptyPack()): Buffer {
  return Buffer.concat([...commands.map((c, i) => pkt(commandLine(c.old, c.new, c.ref, i === 0 ? caps : undefined))), FLUSH, pack]);
}

/** A push certificate's pkt-lines (git's send-pack writes one per line), unsigned: the commands after its blank line. */
export function certificateLines(commands: readonly string[], caps = GIT_CAPS, signature = ''): Buffer[] {
  const header = ['certificate version 0.1\n', 'pusher Test <t@example.invalid> 1700000000 +0000\n', 'pushee https://example.invalid/acme/widgets.git\n', 'nonce 1700000000-abc\n', '\n'];
  return [pkt(`push-cert\0${caps}\n`), ...[...header, ...commands, ...(signature ? [signature] : [])].map((l) => pkt(l)), pkt('push-cert-end\n')];
}
