// 4b. Open streams: a fresh proxy (its own upstream port), warmed up, its idle RSS taken; then
// N streams opened through it, each getting a chunk a second, and its RSS taken while they are
// all open. N is 10,000 unless the open-files limit cannot hold two sockets per stream.
import type { Ctx, ScenarioResult } from '../context.ts';
import { cpuSeconds, launchProxy, maxOpenFiles, openFiles, rssBytes } from '../procs.ts';
import { median, MiB } from '../shared.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function sampleRss(pid: number, ms: number, every = 250): Promise<number[]> {
  const out: number[] = [];
  for (const end = performance.now() + ms; performance.now() < end; await sleep(every)) out.push(rssBytes(pid));
  return out;
}

export async function openStreams(ctx: Ctx): Promise<ScenarioResult> {
  const c = ctx.cfg;
  const port = await ctx.up.call<number>('newModelServer');
  const proxy = await launchProxy({ env: { ...ctx.proxyEnv, UPSTREAM_BASE_URL: `https://127.0.0.1:${port}/v1` }, ...ctx.proxyArgs });
  const target = { ...ctx.model.proxy, port: proxy.ports.model! };
  try {
    ctx.say('open streams: warming up a fresh proxy');
    await ctx.lg.call('openStreams', { target, count: Math.min(500, c.openStreams), intervalMs: 1000, concurrency: 128, rampLimitMs: c.openRampLimitMs });
    await sleep(1500);
    await ctx.lg.call('closeStreams');
    await sleep(1500);
    const idleSamples = await sampleRss(proxy.pid, 1000);
    const idle = median(idleSamples);
    const fdIdle = openFiles(proxy.pid);
    const fdLimit = maxOpenFiles(proxy.pid);
    const wanted = Math.min(c.openStreams, Math.floor((fdLimit - fdIdle - 32) / 2));
    ctx.say(`open streams: opening ${wanted} (proxy open-files limit ${fdLimit}, ${fdIdle} in use)`);
    const { openMs, opened: n, abandoned } = await ctx.lg.call<{ openMs: number; opened: number; abandoned: number }>('openStreams', {
      target,
      count: wanted,
      intervalMs: 1000,
      concurrency: 256,
      rampLimitMs: c.openRampLimitMs,
    });
    if (abandoned) ctx.say(`open streams: only ${n} of ${wanted} open after ${c.openRampLimitMs} ms; measuring those`);
    await sleep(2100); // every stream has had at least two chunks
    const cpu0 = cpuSeconds(proxy.pid);
    const openSamples = await sampleRss(proxy.pid, c.openHoldMs);
    const cpu = (cpuSeconds(proxy.pid) - cpu0) / (c.openHoldMs / 1000);
    const st = await ctx.lg.call<{ open: number; minChunks: number; chunks: number; failures: number }>('streamsStatus');
    const upStats = await ctx.up.call<{ streamsOpen: number }>('stats');
    const fdOpen = openFiles(proxy.pid);
    await ctx.lg.call('closeStreams');
    if (st.open !== n || st.failures > 0 || st.minChunks < 2 || upStats.streamsOpen < n) {
      throw new Error(`open streams: ${st.open}/${n} open at the client, ${upStats.streamsOpen} at the upstream, ${st.failures} failed, fewest chunks ${st.minChunks}`);
    }
    const open = median(openSamples);
    const perStream = (open - idle) / n / 1024;
    return {
      rows: [
        {
          id: 'open.rss_per_stream',
          label: `${n.toLocaleString('en-US')} open streams: proxy RSS per stream`,
          unit: 'KiB',
          proxy: perStream,
          better: 'lower',
          digits: 1,
          target: { text: '< 40 KiB', value: perStream, limit: 40, op: '<' },
        },
        { id: 'open.rss_idle', label: 'open streams: proxy RSS before (idle, warmed up)', unit: 'MiB', proxy: idle / MiB, better: 'lower', digits: 1 },
        { id: 'open.rss_open', label: `open streams: proxy RSS with ${n.toLocaleString('en-US')} open`, unit: 'MiB', proxy: open / MiB, better: 'lower', digits: 1 },
      ],
      data: {
        streams: n,
        requested: c.openStreams,
        wanted_within_fd_limit: wanted,
        abandoned_at_ramp_limit: abandoned,
        fd_limit: fdLimit,
        fds_idle: fdIdle,
        fds_open: fdOpen,
        open_all_ms: Math.round(openMs),
        idle_rss_mib: idle / MiB,
        open_rss_mib: open / MiB,
        open_rss_samples_mib: openSamples.map((x) => +(x / MiB).toFixed(1)),
        kib_per_stream: perStream,
        proxy_cpu_cores_at_one_chunk_per_s: cpu,
      },
    };
  } finally {
    await ctx.lg.call('closeStreams').catch(() => {});
    await proxy.stop();
  }
}
