// What a push is told, and what the host told it, in git's report-status: the answer for a push
// the proxy refuses (as receive-pack itself answers one a hook declined, which is what git
// shows its user), and the host's own report read from its answer for the record, without
// changing a byte of it. Pure.
import { MAX_COMMANDS, type PushCapabilities } from './push-commands.ts';
import type { RefCommand } from './ref-rules.ts';

/** A side-band pkt-line's data (its band byte included) is at most 65520 - 4 bytes (LARGE_PACKET_MAX). */
const SIDE_BAND_DATA = 65515;
/** Lines of explanation on band 2 before the rest is counted. */
const MAX_EXPLAINED = 20;
/** The host's report is read up to this many bytes; past them, what was read stays. */
const MAX_REPORT_BYTES = 1024 * 1024;
/** A host's reason, as recorded, at most. */
const MAX_REASON = 200;

const pkt = (data: Buffer): Buffer => Buffer.concat([Buffer.from((data.length + 4).toString(16).padStart(4, '0'), 'latin1'), data]);
const pktText = (text: string): Buffer => pkt(Buffer.from(text, 'latin1'));
const FLUSH = Buffer.from('0000', 'latin1');

/** A ref name for a report line: the bytes as pushed, unless they would break the line. */
const reportRef = (ref: string) => ref.replace(/[\n\0]/g, '?');

/**
 * Pure: the answer to a refused push, as receive-pack gives it (HTTP 200,
 * application/x-git-receive-pack-result): `unpack ok`, then `ng <ref> <reason>` for every
 * command (nothing is applied), in side band 1 when the client asked for side-band-64k, with
 * `explanation` on band 2 (git prints it as `remote: ...`). Undefined when the client asked for
 * no report: then only a plain refusal can be given.
 */
export function refusalReport(capabilities: PushCapabilities, commands: readonly RefCommand[], reasons: readonly (string | undefined)[], whole: string, explanation: readonly string[]): Buffer | undefined {
  if (!capabilities.reportStatus && !capabilities.reportStatusV2) return undefined;
  const report = Buffer.concat([
    pktText(commands.length === 0 ? `unpack ${whole}\n` : 'unpack ok\n'),
    ...commands.map((c, i) => pktText(`ng ${reportRef(c.ref)} ${(reasons[i] ?? whole).replace(/\n/g, ' ')}\n`)),
    FLUSH,
  ]);
  if (!capabilities.sideBand) return report;
  const parts = explanation.map((line) => pkt(Buffer.concat([Buffer.from([2]), Buffer.from(`${line}\n`, 'utf8')])));
  for (let at = 0; at < report.length; at += SIDE_BAND_DATA - 1) parts.push(pkt(Buffer.concat([Buffer.from([1]), report.subarray(at, at + SIDE_BAND_DATA - 1)])));
  return Buffer.concat([...parts, FLUSH]);
}

/** Pure: the band-2 lines that say why a push was refused: the reasons, the first MAX_EXPLAINED of them. */
export function refusalExplanation(host: string, reasons: readonly (string | undefined)[]): string[] {
  const given = reasons.filter((r): r is string => r !== undefined);
  const lines = [`git-auth-proxy: push refused, nothing was sent to ${host}:`, ...given.slice(0, MAX_EXPLAINED).map((r) => `git-auth-proxy:   ${r}`)];
  if (given.length > MAX_EXPLAINED) lines.push(`git-auth-proxy:   and ${given.length - MAX_EXPLAINED} more`);
  return lines;
}

/** What the host reported: its unpack status and each ref's `ok` or `ng <reason>`, in its order. */
export interface HostReport {
  readonly unpack: string | undefined;
  readonly refs: readonly { readonly ref: string; readonly status: string }[];
  /** The answer was not a report git could read (or passed the bytes read): what came before stays. */
  readonly unreadable: boolean;
}

/** pkt-lines out of a byte stream, leniently: a length that is not 4 hex digits stops it. */
class PktSplitter {
  #held = Buffer.alloc(0);
  broken = false;

  /** The complete pkt-lines' data (null for a flush or another special length) in `chunk` and what was held. */
  push(chunk: Buffer): (Buffer | null)[] {
    const out: (Buffer | null)[] = [];
    let buf = this.#held.length === 0 ? chunk : Buffer.concat([this.#held, chunk]);
    while (!this.broken && buf.length >= 4) {
      const text = buf.toString('latin1', 0, 4);
      if (!/^[0-9a-fA-F]{4}$/.test(text)) {
        this.broken = true;
        break;
      }
      const length = parseInt(text, 16);
      if (length < 4) {
        out.push(null);
        buf = buf.subarray(4);
        continue;
      }
      if (buf.length < length) break;
      out.push(buf.subarray(4, length));
      buf = buf.subarray(length);
    }
    this.#held = Buffer.from(buf);
    return out;
  }
}

/**
 * Reads the host's report-status from its answer to a push, as the bytes go by to the client:
 * inside band 1 when the push asked for side-band-64k. Bounded: past MAX_REPORT_BYTES, or on
 * anything that is not a report, it stops and keeps what it read.
 */
export class HostReportReader {
  readonly #outer = new PktSplitter();
  readonly #inner: PktSplitter | undefined;
  #bytes = 0;
  #unpack: string | undefined;
  readonly #refs: { ref: string; status: string }[] = [];
  #unreadable = false;

  constructor(sideBand: boolean) {
    this.#inner = sideBand ? new PktSplitter() : undefined;
  }

  push(chunk: Buffer): void {
    if (this.#unreadable || this.#bytes > MAX_REPORT_BYTES) return;
    this.#bytes += chunk.length;
    for (const data of this.#outer.push(chunk)) {
      if (data === null || this.#inner === undefined) {
        if (data) this.#line(data);
        continue;
      }
      if (data[0] === 1) for (const line of this.#inner.push(data.subarray(1))) if (line) this.#line(line);
    }
    if (this.#outer.broken || this.#inner?.broken) this.#unreadable = true;
  }

  #line(data: Buffer): void {
    const line = data.toString('utf8').replace(/\n$/, '');
    if (line.startsWith('unpack ')) this.#unpack = line.slice(7, 7 + MAX_REASON);
    else if (this.#refs.length >= MAX_COMMANDS) return;
    else if (line.startsWith('ok ')) this.#refs.push({ ref: line.slice(3), status: 'ok' });
    else if (line.startsWith('ng ')) {
      const space = line.indexOf(' ', 3);
      this.#refs.push({ ref: space < 0 ? line.slice(3) : line.slice(3, space), status: `ng ${space < 0 ? '' : line.slice(space + 1, space + 1 + MAX_REASON)}`.trimEnd() });
    }
  }

  get report(): HostReport {
    return { unpack: this.#unpack, refs: this.#refs, unreadable: this.#unreadable };
  }
}
