// `npm run bench:limits`: only the limits rows of `npm run bench` (admission cost with no limits,
// the in-process store and Redis on loopback, in the same run), printed as a markdown table.
// BENCH_LIMITS_CALLS sets the calls per store (default 20000).
import { limits } from './bench/scenarios/limits.ts';

const calls = Number(process.env.BENCH_LIMITS_CALLS ?? 20_000);
async function main(): Promise<void> {
  const { table } = await limits({ calls, rounds: 5 });
  console.log(`${calls} calls per store in 5 rounds taking turns, 50 identities, node ${process.version}`);
  console.log('| store | admit + charge p50 µs | p99 µs | p50 added |');
  console.log('|---|---:|---:|---:|');
  for (const [name, label] of [['none', 'no limits'], ['local', 'in process'], ['redis', 'Redis on loopback']] as const) {
    const row = table[name]!;
    console.log(`| ${label} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} | ${name === 'none' ? '' : `+${(row.p50 - table.none!.p50).toFixed(1)} µs`} |`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
