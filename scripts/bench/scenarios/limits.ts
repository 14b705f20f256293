// What admission costs a model call (issue 20): admit() and the charge after it, with no limits,
// with the in-process store, and with Redis on loopback (a real redis-server started here), in
// the same run and taking turns. Goals: in process ≤ 20 µs a call; Redis ≤ +0.3 ms at p50.
import { LocalLimits, type LimitsStore } from '../../../src/limits/admission.ts';
import { RedisLimits } from '../../../src/limits/redis-store.ts';
import { RespClient } from '../../../src/store/resp.ts';
import { startRedis } from '../../../test/support/redis-server.ts';
import type { Row } from '../report.ts';
import type { ScenarioResult } from '../context.ts';

const POLICY = { concurrent: 1000, requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000, runBudgetUsd: 1_000_000, workflowBudgetUsdPerDay: 1_000_000 };
const IDENTITIES = 50;

interface Percentiles {
  p50: number;
  p99: number;
}

/** Microseconds per admit + charge, `calls` times, over IDENTITIES instances and runs. */
async function measure(store: LimitsStore | undefined, calls: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const who = { instanceId: `bot-${i % IDENTITIES}`, workflow: 'bench', runId: `run-${i % IDENTITIES}` };
    const t = performance.now();
    if (store) {
      const admitted = await store.admit(who, 30_000, Date.now());
      if (!admitted.ok) throw new Error(`refused: ${admitted.kind}`);
      admitted.reservation.release({ tokens: 8000, costUsd: 0.01 });
    }
    times.push((performance.now() - t) * 1000);
  }
  return times;
}

const pct = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;

export async function limits(o: { calls: number; rounds: number }): Promise<ScenarioResult & { table: Record<string, Percentiles> }> {
  const redis = await startRedis();
  const errors: string[] = [];
  const client = new RespClient({ address: { host: '127.0.0.1', port: redis.port }, tls: false, password: undefined, onState: () => {} });
  try {
    for (let waited = 0; !client.up; waited += 5) {
      if (waited > 5000) throw new Error('redis-server did not accept a connection within 5 s');
      await new Promise((r) => setTimeout(r, 5));
    }
    const stores: [string, LimitsStore | undefined][] = [
      ['none', undefined],
      ['local', new LocalLimits(POLICY)],
      ['redis', new RedisLimits(POLICY, client, 'closed', { onError: (e) => errors.push(e) })],
    ];
    const samples: Record<string, number[]> = { none: [], local: [], redis: [] };
    // Rounds take turns so that machine noise hits every store alike.
    for (let round = 0; round < o.rounds; round++) {
      for (const [name, store] of stores) {
        samples[name]!.push(...(await measure(store, Math.ceil(o.calls / o.rounds))));
        await client.command(['PING']); // the charges are sent without waiting: let the last ones land
        if (errors.length > 0) throw new Error(`the limits store failed during the run: ${errors[0]}`);
      }
    }
    const table: Record<string, Percentiles> = {};
    for (const [name, times] of Object.entries(samples)) {
      times.sort((a, b) => a - b);
      table[name] = { p50: pct(times, 0.5), p99: pct(times, 0.99) };
    }
    const none = table.none!;
    const local = table.local!;
    const remote = table.redis!;
    const rows: Row[] = [
      { id: 'limits-local-p50', label: 'limits admit+charge, in process, p50', unit: 'µs', direct: none.p50, proxy: local.p50, better: 'lower', added: true, digits: 1, target: { text: '+≤ 20 µs', value: local.p50 - none.p50, limit: 20, op: '<' } },
      { id: 'limits-local-p99', label: 'limits admit+charge, in process, p99', unit: 'µs', direct: none.p99, proxy: local.p99, better: 'lower', added: true, digits: 1 },
      { id: 'limits-redis-p50', label: 'limits admit+charge, Redis loopback, p50', unit: 'ms', direct: none.p50 / 1000, proxy: remote.p50 / 1000, better: 'lower', added: true, digits: 3, target: { text: '+≤ 0.3 ms', value: (remote.p50 - none.p50) / 1000, limit: 0.3, op: '<' } },
      { id: 'limits-redis-p99', label: 'limits admit+charge, Redis loopback, p99', unit: 'ms', direct: none.p99 / 1000, proxy: remote.p99 / 1000, better: 'lower', added: true, digits: 3 },
    ];
    return { rows, data: { calls: o.calls, rounds: o.rounds, identities: IDENTITIES, microseconds: table }, table };
  } finally {
    client.close();
    await redis.close();
  }
}
