// 5. Start-up: spawn to `listening`, the bundle against a bare `node -e` that listens (what
// Node.js itself costs), taking turns; medians.
import type { Ctx, ScenarioResult } from '../context.ts';
import { launchBareNode, launchProxy } from '../procs.ts';
import { median } from '../shared.ts';

export async function startup(ctx: Pick<Ctx, 'cfg' | 'proxyEnv' | 'proxyArgs'>): Promise<ScenarioResult> {
  const bare: number[] = [];
  const first: number[] = [];
  const all: number[] = [];
  for (let i = 0; i < ctx.cfg.startups; i++) {
    bare.push(await launchBareNode());
    const p = await launchProxy({ env: ctx.proxyEnv, ...ctx.proxyArgs });
    first.push(p.firstListeningMs);
    all.push(p.allListeningMs);
    await p.stop();
  }
  const m = median(all);
  return {
    rows: [
      {
        id: 'startup.ms',
        label: `start-up to listening, median of ${ctx.cfg.startups}`,
        unit: 'ms',
        direct: median(bare),
        proxy: m,
        better: 'lower',
        added: true,
        digits: 1,
        target: { text: '< 100 ms', value: m, limit: 100, op: '<' },
      },
    ],
    data: {
      what: `ms from spawn() to the last listening line (${ctx.proxyArgs.listeners.join(', ')}); "direct" is node -e listening on a port`,
      bare_node_ms: bare,
      proxy_first_listening_ms: first,
      proxy_all_listening_ms: all,
      median_ms: { bare_node: median(bare), proxy_first: median(first), proxy_all: m },
    },
  };
}
