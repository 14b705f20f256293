// 1. Pack upload: a large chunked POST to git-receive-pack (a command list, then the pack),
// checked byte for byte upstream; direct, the floor, proxy, with BENCH_BASELINE another build of
// the proxy, and nginx take turns, round after round. The proxies' (and nginx's) peak RSS is
// taken per upload: the kernel's high-water mark is reset before each one.
import { allPaths, type Ctx, type ScenarioResult } from '../context.ts';
import type { Target } from '../loadgen-proc.ts';
import { peakRssBytes, resetPeakRss, rssBytes } from '../procs.ts';
import { median, MiB } from '../shared.ts';

export async function pack(ctx: Ctx): Promise<ScenarioResult> {
  const { packMiB: mib, packRounds: rounds } = ctx.cfg;
  const targets = allPaths(ctx.git);
  const pidOf: Record<string, number | undefined> = { proxy: ctx.proxy.pid, floor: ctx.floor.pid, base: ctx.base?.pid, nginx: ctx.nginx?.pid };
  const speed: Record<string, number[]> = {};
  const peak: Record<string, number[]> = {};
  const idle: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pidOf)) if (pid) idle[name] = rssBytes(pid) / MiB;
  let peakMethod = 'VmHWM after resetting it (clear_refs 5)';

  const one = async (t: Target, size = mib) => {
    const pid = pidOf[t.name];
    let sampled = 0;
    let sampler: NodeJS.Timeout | undefined;
    if (pid && !resetPeakRss(pid)) {
      peakMethod = 'VmRSS sampled every 10 ms (clear_refs not permitted)';
      sampler = setInterval(() => (sampled = Math.max(sampled, rssBytes(pid))), 10);
    }
    const r = await ctx.lg.call<{ ms: number; bytes: number }>('upload', { target: t, mib: size, seed: ctx.seed });
    clearInterval(sampler);
    if (size !== mib) return;
    (speed[t.name] ??= []).push(mib / (r.ms / 1000));
    if (pid) (peak[t.name] ??= []).push(Math.max(sampled, sampler ? 0 : peakRssBytes(pid)) / MiB);
  };

  // Warm-up, not counted: JIT, the upstreams' and proxies' first connections.
  for (const t of targets) await one(t, Math.max(8, Math.round(mib / 8)));
  for (let r = 0; r < rounds; r++) {
    for (const t of r % 2 === 0 ? targets : [...targets].reverse()) {
      ctx.say(`pack upload ${mib} MiB, round ${r + 1}/${rounds}: ${t.name}`);
      await one(t);
    }
  }
  const max = (xs: number[] | undefined) => (xs ? Math.max(...xs) : undefined);
  const med = (xs: number[] | undefined) => (xs ? median(xs) : undefined);
  const d = med(speed.direct)!;
  const p = med(speed.proxy)!;
  const proxyPeak = max(peak.proxy)!;
  return {
    rows: [
      {
        id: 'pack.throughput',
        label: `pack upload ${mib} MiB, median of ${rounds}`,
        unit: 'MiB/s',
        direct: d,
        proxy: p,
        floor: med(speed.floor),
        base: med(speed.base),
        nginx: med(speed.nginx),
        better: 'higher',
        digits: 0,
        target: { text: '>= 0.95x direct', value: p / d, limit: 0.95, op: '>=' },
      },
      {
        id: 'pack.peak_rss',
        label: 'pack upload: peak RSS of the proxy',
        unit: 'MiB',
        proxy: proxyPeak,
        floor: max(peak.floor),
        base: max(peak.base),
        nginx: max(peak.nginx),
        better: 'lower',
        digits: 1,
        target: { text: '< 100 MiB', value: proxyPeak, limit: 100, op: '<' },
      },
    ],
    data: { mib, rounds, body: 'a command list, then chunked 1 MiB writes, verified byte for byte upstream', mib_per_s: speed, peak_rss_mib: peak, peak_rss_method: peakMethod, idle_rss_mib_before: idle },
  };
}
