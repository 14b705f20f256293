// Summarises a V8 .cpuprofile (node --cpu-prof): self time by function, and by script.
//   tsx scripts/bench/profile-summary.ts bench-results/CPU.....cpuprofile [top]
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export function summarise(file: string, top = 25): string {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const fn = new Map<string, number>();
  const script = new Map<string, number>();
  let idle = 0;
  for (const [id, us] of self) {
    const f = byId.get(id)!.callFrame;
    if (f.functionName === '(idle)') idle += us;
    const where = f.url ? f.url.replace(/^.*\/(dist|lib)\//, '$1/').replace(/^node:/, 'node:') : '';
    const key = `${f.functionName || '(anonymous)'}  ${where}${f.url ? `:${f.lineNumber + 1}` : ''}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    const s = f.url ? (f.url.includes('dist/proxy.js') ? 'dist/proxy.js' : f.url.startsWith('node:') ? 'node: internals (JS)' : f.url) : `(${f.functionName})`;
    script.set(s, (script.get(s) ?? 0) + us);
  }
  const busy = total - idle;
  const pct = (us: number) => `${((us / busy) * 100).toFixed(1).padStart(5)}%`;
  const lines = [`${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(2)} s busy (percentages of busy time)`, '', 'self time by function:'];
  for (const [k, us] of [...fn].filter(([k]) => !k.startsWith('(idle)')).sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`${pct(us)}  ${(us / 1000).toFixed(0).padStart(6)} ms  ${k}`);
  lines.push('', 'self time by script:');
  for (const [k, us] of [...script].filter(([k]) => k !== '((idle))').sort((a, b) => b[1] - a[1]).slice(0, 12)) lines.push(`${pct(us)}  ${(us / 1000).toFixed(0).padStart(6)} ms  ${k}`);
  return lines.join('\n');
}

if (require.main === module) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    console.error('usage: tsx scripts/bench/profile-summary.ts FILE.cpuprofile [top]');
    process.exit(2);
  }
  console.log(summarise(file, Number(top ?? 25)));
}
