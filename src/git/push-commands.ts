// The command list at the head of a git-receive-pack request body, read as git's own
// receive-pack reads it (builtin/receive-pack.c read_head_info, pkt-line.c), so that what the
// proxy decides on is what the host would apply. Pure: bytes in, in pieces of any size (a
// resumable state machine, one pkt-line held at a time), a verdict out once enough has come.
//
// How git reads it:
// - pkt-lines: 4 hex digits of length (either case) counting themselves, then the data;
//   `0000` flush ends the list; a length of 1 to 3 or one from 65524 up is fatal; a line
//   beginning `ERR ` is fatal; one trailing LF of a line is dropped (not inside a certificate);
// - `shallow <id>` lines are not commands (anything after the id is ignored);
// - on any other line the part before the first NUL is the line, and the part between the first
//   and the second NUL is a capability list: report-status, side-band-64k, object-format=...
//   turn on wherever they appear;
// - a `push-cert` line opens a certificate: its lines, each up to its first NUL and joined as
//   they come (a line without LF runs into the next), until `push-cert-end\n` or a flush (which
//   also ends the list); the certificate's commands are its lines after the first blank line,
//   up to the last line that opens a signature. git applies them whether it asked for a
//   certificate or not, and together with any commands outside it;
// - a command is `<old-id> SP <new-id> SP <name>`, the ids in the hash of the object format
//   (40 hex digits for sha1, 64 for sha256; either case), the name everything after.
//
// Stricter than git, each refused: `0001` and `0002` (git ends the list there too), lines longer
// than MAX_LINE_BYTES, more than MAX_COMMANDS commands, more than MAX_HEAD_BYTES before the
// decision, and anything after the list (and the push options, when asked for) that is not the
// start of a pack (`PACK`) or the end of the body: no second list can follow the first.
import type { RefCommand } from './ref-rules.ts';

/** A pkt-line's whole length, its 4 digits included (git allows 65523). */
export const MAX_LINE_BYTES = 4096;
/** Commands in one push (git sets no limit). */
export const MAX_COMMANDS = 1000;
/** Bytes of the body read before the decision: the list, the push options, the pack's first 4 bytes. */
export const MAX_HEAD_BYTES = 256 * 1024;

export interface PushCapabilities {
  readonly reportStatus: boolean;
  readonly reportStatusV2: boolean;
  /** side-band-64k: the only side band receive-pack answers in. */
  readonly sideBand: boolean;
  /** Push options follow the list (when the host advertised them: it reads them as options, else as the pack). */
  readonly pushOptions: boolean;
}

export interface PushHead {
  readonly commands: readonly RefCommand[];
  readonly capabilities: PushCapabilities;
  /** The commands came from a push certificate. */
  readonly certified: boolean;
}

export type PushHeadVerdict =
  | { readonly kind: 'more' }
  | { readonly kind: 'read'; readonly head: PushHead }
  | {
      readonly kind: 'unreadable';
      readonly reason: string;
      /** What the lines read so far asked for (how to answer). */
      readonly capabilities: PushCapabilities;
    };

const PKT_FLUSH = 0;
const PKT_DELIM = 1;
const PKT_RESPONSE_END = 2;
const HEX_SIZE: Readonly<Record<string, number>> = { sha1: 40, sha256: 64 };
const SIGNATURE_STARTS = ['-----BEGIN PGP SIGNATURE-----', '-----BEGIN PGP MESSAGE-----', '-----BEGIN SIGNED MESSAGE-----', '-----BEGIN SSH SIGNATURE-----'];
const PACK_MAGIC = 'PACK';

/** One hex digit's value in either case, or -1 (git's hexval: nothing else, no sign, no space). */
function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

const isHexText = (text: string) => /^[0-9a-fA-F]*$/.test(text);
/** git's isspace: space, TAB, LF, CR. */
const isGitSpace = (c: string | undefined) => c === ' ' || c === '\t' || c === '\n' || c === '\r';

/**
 * git's parse_feature_value: the value of `feature` in a capability list ('' when it has none),
 * or undefined. A match counts at the start of what is left to search or after a space, and
 * must be followed by the end, a space or `=`; the value ends at a space, TAB or LF.
 */
export function featureValue(list: string, feature: string): string | undefined {
  let from = 0;
  while (from < list.length) {
    const found = list.indexOf(feature, from);
    if (found < 0) return undefined;
    if (found === from || isGitSpace(list[found - 1])) {
      const after = found + feature.length;
      if (after === list.length || isGitSpace(list[after])) return '';
      if (list[after] === '=') {
        const rest = list.slice(after + 1);
        const end = rest.search(/[ \t\n]/);
        return end < 0 ? rest : rest.slice(0, end);
      }
    }
    from = found + 1;
  }
  return undefined;
}

/** The line of `<old> SP <new> SP <name>` (bytes in a latin1 string) as git's queue_command reads it, or undefined. */
function commandOf(line: string, hexSize: number): RefCommand | undefined {
  const old = line.slice(0, hexSize);
  const next = line.slice(hexSize + 1, 2 * hexSize + 1);
  if (old.length !== hexSize || next.length !== hexSize || !isHexText(old) || !isHexText(next)) return undefined;
  if (line[hexSize] !== ' ' || line[2 * hexSize + 1] !== ' ') return undefined;
  return { old: old.toLowerCase(), new: next.toLowerCase(), ref: line.slice(2 * hexSize + 2) };
}

/** Where a certificate's signature starts (parse_signed_buffer: the last line that opens one), else its length. */
function signatureStart(cert: string): number {
  let match = cert.length;
  for (let at = 0; at < cert.length; ) {
    if (SIGNATURE_STARTS.some((s) => cert.startsWith(s, at))) match = at;
    const eol = cert.indexOf('\n', at);
    at = eol < 0 ? cert.length : eol + 1;
  }
  return match;
}

/** The certificate's command lines: after its first blank line, up to its signature (queue_commands_from_cert). */
function certificateLines(cert: string): string[] | undefined {
  const blank = cert.indexOf('\n\n');
  if (blank < 0) return undefined;
  const lines: string[] = [];
  const end = signatureStart(cert);
  for (let at = blank + 2; at < end; ) {
    const eol = cert.indexOf('\n', at);
    const stop = eol < 0 || eol >= end ? end : eol;
    lines.push(cert.slice(at, stop));
    at = stop === end ? end : stop + 1;
  }
  return lines;
}

type Phase = 'list' | 'certificate' | 'options' | 'pack';

/**
 * Reads a receive-pack body's head: push the body's bytes as they come, then `end()` if the
 * body ends first. The verdict is `more` until the list (with the push options, when asked for)
 * and the pack's first 4 bytes are read, or the body ended after them; then `read`, or
 * `unreadable` with the reason. Once it is not `more`, it never changes.
 */
export class PushHeadReader {
  #phase: Phase = 'list';
  #verdict: PushHeadVerdict = { kind: 'more' };
  #read = 0;
  /** The pkt-line being read: its length as its 4 digits come, then its data. */
  #length = 0;
  #lengthDigits = 0;
  #line: Buffer | undefined;
  #lineFill = 0;
  #packStart = '';
  readonly #lines: string[] = [];
  readonly #shallow: string[] = [];
  readonly #formats = new Set<string>();
  #cert = '';
  #commands: readonly RefCommand[] = [];
  #caps: PushCapabilities = { reportStatus: false, reportStatusV2: false, sideBand: false, pushOptions: false };

  push(chunk: Buffer): PushHeadVerdict {
    for (let at = 0; at < chunk.length && this.#verdict.kind === 'more'; ) {
      const taken = this.#phase === 'pack' ? this.#takePackStart(chunk, at) : this.#takeLine(chunk, at);
      this.#read += taken;
      at += taken;
      if (this.#read > MAX_HEAD_BYTES && this.#verdict.kind === 'more') this.#refuse(`the command list and push options are longer than ${MAX_HEAD_BYTES} bytes`);
    }
    return this.#verdict;
  }

  /** The body ended: a list not yet whole is malformed (git dies at that EOF); after the list, a push with no pack. */
  end(): Exclude<PushHeadVerdict, { kind: 'more' }> {
    if (this.#verdict.kind !== 'more') return this.#verdict;
    if (this.#phase === 'pack' && this.#packStart === '') return this.#finish();
    return this.#refuse('the body ended before the command list did');
  }

  #refuse(reason: string): Exclude<PushHeadVerdict, { kind: 'more' }> {
    const verdict = { kind: 'unreadable' as const, reason, capabilities: this.#caps };
    this.#verdict = verdict;
    return verdict;
  }

  /** Refuses the list as its commands are parsed: false, for #parseCommands to return. */
  #notCommands(reason: string): false {
    this.#refuse(reason);
    return false;
  }

  #takePackStart(chunk: Buffer, at: number): number {
    const n = Math.min(PACK_MAGIC.length - this.#packStart.length, chunk.length - at);
    this.#packStart += chunk.toString('latin1', at, at + n);
    if (!PACK_MAGIC.startsWith(this.#packStart)) this.#refuse('what follows the command list is neither a pack nor the end of the body');
    else if (this.#packStart === PACK_MAGIC) this.#finish();
    return n;
  }

  /** Takes bytes of the current pkt-line; a whole one is handled at once. */
  #takeLine(chunk: Buffer, at: number): number {
    if (this.#line === undefined) {
      // A length digit at a time: a byte that is none is refused at once, not after three more.
      const digit = hexDigit(chunk[at]!);
      if (digit < 0) return (this.#refuse('a pkt-line length is not 4 hex digits'), 1);
      this.#length = this.#length * 16 + digit;
      if (++this.#lengthDigits < 4) return 1;
      const length = this.#length;
      this.#length = 0;
      this.#lengthDigits = 0;
      if (length === PKT_FLUSH) return (this.#flush(), 1);
      if (length === PKT_DELIM || length === PKT_RESPONSE_END) return (this.#refuse(`a ${length === PKT_DELIM ? 'delim' : 'response-end'} pkt-line (0001, 0002) in a push`), 1);
      if (length < 4) return (this.#refuse(`a pkt-line length of ${length}`), 1);
      if (length > MAX_LINE_BYTES) return (this.#refuse(`a pkt-line of ${length} bytes, more than ${MAX_LINE_BYTES}`), 1);
      this.#line = Buffer.allocUnsafe(length - 4);
      this.#lineFill = 0;
      if (length === 4) this.#lineDone();
      return 1;
    }
    const n = Math.min(this.#line.length - this.#lineFill, chunk.length - at);
    chunk.copy(this.#line, this.#lineFill, at, at + n);
    this.#lineFill += n;
    if (this.#lineFill === this.#line.length) this.#lineDone();
    return n;
  }

  #lineDone(): void {
    const data = this.#line!.toString('latin1');
    this.#line = undefined;
    if (data.startsWith('ERR ')) return void this.#refuse('an ERR pkt-line');
    if (this.#phase === 'certificate') return this.#certificateLine(data);
    if (this.#phase === 'options') return; // a push option: nothing git applies to a ref
    this.#listLine(data.endsWith('\n') ? data.slice(0, -1) : data);
  }

  #listLine(line: string): void {
    if (line.length > 8 && line.startsWith('shallow ')) return void this.#shallow.push(line.slice(8));
    const nul = line.indexOf('\0');
    const text = nul < 0 ? line : line.slice(0, nul);
    if (nul >= 0) {
      const second = line.indexOf('\0', nul + 1);
      this.#capabilities(line.slice(nul + 1, second < 0 ? line.length : second));
    }
    if (text === 'push-cert') this.#phase = 'certificate';
    else if (this.#lines.push(text) > MAX_COMMANDS) this.#refuse(`more than ${MAX_COMMANDS} commands`);
  }

  #certificateLine(data: string): void {
    const nul = data.indexOf('\0');
    const text = nul < 0 ? data : data.slice(0, nul);
    if (text === 'push-cert-end\n') this.#phase = 'list';
    else this.#cert += text;
  }

  #capabilities(list: string): void {
    const has = (name: string) => featureValue(list, name) !== undefined;
    const c = this.#caps;
    this.#caps = {
      reportStatus: c.reportStatus || has('report-status'),
      reportStatusV2: c.reportStatusV2 || has('report-status-v2'),
      sideBand: c.sideBand || has('side-band-64k'),
      pushOptions: c.pushOptions || has('push-options'),
    };
    this.#formats.add(featureValue(list, 'object-format') ?? 'sha1');
  }

  #flush(): void {
    if (this.#phase === 'options') return void (this.#phase = 'pack');
    // A flush inside a certificate ends the certificate and the list together.
    if (!this.#parseCommands()) return;
    if (this.#commands.length === 0) return void this.#finish();
    this.#phase = this.#caps.pushOptions ? 'options' : 'pack';
  }

  /** The commands, once the whole list is in (the object format is only known then); false when refused. */
  #parseCommands(): boolean {
    if (this.#formats.size > 1) return this.#notCommands(`the capability lists name different object formats (${[...this.#formats].join(', ')})`);
    const format = this.#formats.values().next().value ?? 'sha1';
    const hexSize = HEX_SIZE[format];
    if (hexSize === undefined) return this.#notCommands(`object-format=${format} is no format git knows`);
    if (this.#shallow.some((id) => !isHexText(id.slice(0, hexSize)) || id.length < hexSize)) return this.#notCommands('a shallow line without an object id');
    let lines = this.#lines;
    if (this.#cert !== '') {
      const certified = certificateLines(this.#cert);
      if (certified === undefined) return this.#notCommands('a push certificate without the blank line that ends its header');
      lines = [...lines, ...certified];
      if (lines.length > MAX_COMMANDS) return this.#notCommands(`more than ${MAX_COMMANDS} commands`);
    }
    const commands: RefCommand[] = [];
    for (const line of lines) {
      const command = commandOf(line, hexSize);
      if (command === undefined) return this.#notCommands(`a line that is not "<old id> <new id> <ref>" (${format})`);
      commands.push(command);
    }
    this.#commands = commands;
    return true;
  }

  #finish(): Exclude<PushHeadVerdict, { kind: 'more' }> {
    const verdict = { kind: 'read' as const, head: { commands: this.#commands, capabilities: this.#caps, certified: this.#cert !== '' } };
    this.#verdict = verdict;
    return verdict;
  }
}
