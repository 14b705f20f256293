// The bench's output: a table on stdout, bench.json, and bench.svg (drawn by hand) with the
// ratios against going direct and against nginx, and every figure against its target.

export interface Target {
  /** As printed, e.g. '< 100 MiB'. */
  text: string;
  /** The figure the target is about, and the bound; pass is `value op limit`. */
  value: number;
  limit: number;
  op: '<' | '>=';
}

export interface Row {
  id: string;
  label: string;
  unit: string;
  direct?: number;
  proxy?: number;
  /** The bare node:http + https.request proxy (floor-proxy.mjs): what Node itself costs. */
  floor?: number;
  /** A baseline bundle (BENCH_BASELINE): the code before a change, in the same run. */
  base?: number;
  nginx?: number;
  /** BENCH_ROUNDS: the ratios of each round (proxy over direct, floor, base, nginx), for their range. */
  roundRatios?: Partial<Record<Versus, number[]>>;
  better: 'higher' | 'lower';
  /** Show proxy − direct (latencies). */
  added?: boolean;
  digits?: number;
  target?: Target;
  /** Why a target could not be judged (e.g. no nginx). */
  targetNote?: string;
}

export interface Verdict {
  pass: boolean | null;
  text: string;
}

export function verdict(row: Row): Verdict {
  if (!row.target) return { pass: null, text: row.targetNote ?? '' };
  const t = row.target;
  if (!Number.isFinite(t.value) || !Number.isFinite(t.limit)) return { pass: null, text: `${t.text} (n/a)` };
  return { pass: t.op === '<' ? t.value < t.limit : t.value >= t.limit, text: t.text };
}

const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && b !== 0 ? a / b : undefined);

function fmt(v: number | undefined, digits: number): string {
  if (v === undefined || !Number.isFinite(v)) return '';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** What the proxy's figures are divided by, in the ratio columns. */
export type Versus = 'direct' | 'floor' | 'base' | 'nginx';
export const VERSUS: readonly Versus[] = ['direct', 'floor', 'base', 'nginx'];

/** The ratio cell: proxy over `vs`; in rounds, the median of the rounds' ratios and their range. */
function ratioCell(r: Row, vs: Versus): string {
  const range = r.roundRatios?.[vs];
  if (range && range.length > 1) {
    const sorted = [...range].sort((a, b) => a - b);
    const mid = sorted[Math.floor((sorted.length - 1) / 2)]!;
    return `${fmt(mid, 2)}x (${fmt(sorted[0], 2)}-${fmt(sorted[sorted.length - 1], 2)})`;
  }
  const v = ratio(r.proxy, r[vs]);
  return v === undefined ? '' : `${fmt(v, 2)}x`;
}

export function table(rows: Row[]): string {
  const cols = VERSUS.filter((k) => rows.some((r) => r[k] !== undefined));
  const head = ['figure', 'unit', 'direct', ...cols.filter((k) => k !== 'direct'), 'proxy', ...cols.map((k) => `proxy/${k}`), 'added', 'over floor', 'target', ''];
  const body = rows.map((r) => {
    const d = r.digits ?? 2;
    const v = verdict(r);
    const added = r.added && r.direct !== undefined && r.proxy !== undefined ? r.proxy - r.direct : undefined;
    const overFloor = r.added && r.floor !== undefined && r.proxy !== undefined ? r.proxy - r.floor : undefined;
    const signed = (x: number | undefined) => (x !== undefined ? `${x >= 0 ? '+' : ''}${fmt(x, 3)}` : '');
    return [
      r.label,
      r.unit,
      fmt(r.direct, d),
      ...cols.filter((k) => k !== 'direct').map((k) => fmt(r[k], d)),
      fmt(r.proxy, d),
      ...cols.map((k) => ratioCell(r, k)),
      signed(added),
      signed(overFloor),
      v.text,
      v.pass === null ? '' : v.pass ? 'pass' : 'MISS',
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const left = new Set([0, 1, head.length - 2, head.length - 1]);
  const line = (cells: string[]) => cells.map((c, i) => (left.has(i) ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

// ---- SVG ---------------------------------------------------------------------------------

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Two panels, both on a log scale around 1:
 *  - ratios: proxy/direct (and proxy/nginx) for every figure that has both; the row says whether
 *    higher or lower is better, and the bar is green when the proxy is no worse;
 *  - targets: every figure divided by its target, turned so that left of the line always passes.
 */
export function svg(rows: Row[], title: string, subtitle: string): string {
  const W = 1160;
  const labelW = 330;
  const plotX0 = labelW + 10;
  const plotW = 500;
  /** Right of the plot: the figures of the targets panel. */
  const noteX = plotX0 + plotW + 40;
  const rowH = 22;
  const lo = Math.log2(1 / 16);
  const hi = Math.log2(16);
  const xOf = (v: number) => plotX0 + ((Math.min(hi, Math.max(lo, Math.log2(v))) - lo) / (hi - lo)) * plotW;
  const out: string[] = [];
  let y = 0;
  const text = (x: number, yy: number, s: string, extra = '') => out.push(`<text x="${x.toFixed(1)}" y="${yy.toFixed(1)}" ${extra}>${esc(s)}</text>`);

  const axis = (top: number, bottom: number, caption: string) => {
    for (const v of [1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8, 16]) {
      const x = xOf(v);
      out.push(`<line x1="${x.toFixed(1)}" y1="${top}" x2="${x.toFixed(1)}" y2="${bottom}" stroke="${v === 1 ? '#333' : '#ddd'}" stroke-width="${v === 1 ? 1.5 : 1}"/>`);
      text(x, bottom + 14, v >= 1 ? `${v}` : `1/${1 / v}`, 'text-anchor="middle" class="tick"');
    }
    text(plotX0 + plotW / 2, bottom + 30, caption, 'text-anchor="middle" class="tick"');
  };

  y = 24;
  text(10, y, title, 'class="title"');
  y += 18;
  text(10, y, subtitle, 'class="tick"');
  y += 26;

  // Panel 1: ratios.
  const ratioRows = rows.filter((r) => ratio(r.proxy, r.direct) !== undefined || ratio(r.proxy, r.floor) !== undefined || ratio(r.proxy, r.nginx) !== undefined);
  text(10, y, 'How the proxy compares (log scale; 1 = the same)', 'class="head"');
  out.push(`<rect x="${noteX}" y="${y - 11}" width="10" height="10" fill="#4a7ebb"/>`);
  text(noteX + 14, y - 2, 'proxy / direct', 'class="tick"');
  out.push(`<rect x="${noteX + 100}" y="${y - 11}" width="10" height="10" fill="#d9822b"/>`);
  text(noteX + 114, y - 2, 'proxy / nginx', 'class="tick"');
  out.push(`<rect x="${noteX + 200}" y="${y - 11}" width="10" height="10" fill="#8a5cb8"/>`);
  text(noteX + 214, y - 2, 'proxy / floor', 'class="tick"');
  y += 10;
  const top1 = y;
  for (const r of ratioRows) {
    const bars: [number | undefined, string][] = [
      [ratio(r.proxy, r.direct), '#4a7ebb'],
      [ratio(r.proxy, r.floor), '#8a5cb8'],
      [ratio(r.proxy, r.nginx), '#d9822b'],
    ];
    const n = bars.filter(([v]) => v !== undefined).length;
    const h = rowH + (n - 1) * 8;
    text(labelW, y + h / 2 + 4, `${r.label} (${r.better === 'higher' ? 'higher' : 'lower'} is better)`, 'text-anchor="end" class="label"');
    let by = y + 3;
    const bh = (h - 6) / n;
    for (const [v, color] of bars) {
      if (v === undefined) continue;
      const x1 = xOf(1);
      const x2 = xOf(v);
      const worse = r.better === 'higher' ? v < 1 : v > 1;
      out.push(`<rect x="${Math.min(x1, x2).toFixed(1)}" y="${by.toFixed(1)}" width="${Math.max(1, Math.abs(x2 - x1)).toFixed(1)}" height="${(bh - 2).toFixed(1)}" fill="${color}" opacity="${worse ? 1 : 0.55}"/>`);
      text(Math.max(x1, x2) + 4, by + bh / 2 + 2, `${v.toFixed(2)}x${v > 16 || v < 1 / 16 ? ' (off scale)' : ''}`, 'class="val"');
      by += bh;
    }
    y += h;
  }
  axis(top1, y, 'ratio, log scale (bars are darker where the proxy does worse than the comparison)');
  y += 52;

  // Panel 2: targets.
  const targetRows = rows.filter((r) => r.target);
  text(10, y, 'Targets: figure relative to its target (left of 1 = pass)', 'class="head"');
  y += 10;
  const top2 = y;
  for (const r of targetRows) {
    const t = r.target!;
    const v = verdict(r);
    // A figure at or below zero (an "added" latency the proxy did not add) passes a "<" target
    // by any margin: drawn at the left edge of the scale.
    const rel = t.op === '<' ? (t.value <= 0 ? 1 / 16 : t.value / t.limit) : t.limit / t.value;
    text(labelW, y + rowH / 2 + 4, r.label, 'text-anchor="end" class="label"');
    if (v.pass !== null && Number.isFinite(rel) && rel > 0) {
      const x1 = xOf(1 / 16);
      const x2 = xOf(rel);
      out.push(`<rect x="${x1}" y="${y + 4}" width="${Math.max(1, x2 - x1).toFixed(1)}" height="${rowH - 8}" fill="${v.pass ? '#3a9a4a' : '#c63d3d'}"/>`);
      if (rel > 16) text(x2 + 3, y + rowH / 2 + 4, '>', 'class="val"');
      text(noteX, y + rowH / 2 + 4, `${fmtShort(t.value)} vs ${t.text}: ${v.pass ? 'pass' : 'MISS'}`, `class="val" style="fill:${v.pass ? '#1f6a2b' : '#a02020'}"`);
    } else {
      text(xOf(1 / 16) + 4, y + rowH / 2 + 4, `${t.text}: not measured`, 'class="val"');
    }
    y += rowH;
  }
  axis(top2, y, 'figure / target (for "at least" targets: target / figure), log scale');
  y += 44;

  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y}" viewBox="0 0 ${W} ${y}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<style>.title{font-size:16px;font-weight:bold}.head{font-size:13px;font-weight:bold}.label{font-size:11px;fill:#222}.tick{font-size:10px;fill:#555}.val{font-size:10px;fill:#111}</style>
<rect width="100%" height="100%" fill="#fff"/>
${out.join('\n')}
</svg>
`;
}

function fmtShort(v: number): string {
  const a = Math.abs(v);
  return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 1 ? v.toFixed(2) : v.toFixed(3);
}
