// Sizes and durations of `npm run bench`; BENCH_QUICK=1 shrinks everything for development,
// BENCH_SMOKE=1 further, to a few seconds a scenario: what .ci/run runs to prove every scenario
// still works end to end (its figures are too small to mean much, and nothing asserts a speed).
// Each figure can be set on its own (BENCH_PACK_MIB=128, ...). BENCH_ONLY=pack,refs runs a
// subset (startup, limits, pack, refs, model, messages, responses, streams, open).
const SMOKE = process.env.BENCH_SMOKE === '1';
const QUICK = SMOKE || process.env.BENCH_QUICK === '1';

function num(name: string, full: number, quick: number, smoke: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return SMOKE ? smoke : QUICK ? quick : full;
  const v = Number(raw);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number, not ${raw}`);
  return v;
}

export const SCENARIOS = ['startup', 'limits', 'pack', 'refs', 'model', 'messages', 'responses', 'streams', 'open'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export function loadConfig() {
  const only = (process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const o of only) if (!(SCENARIOS as readonly string[]).includes(o)) throw new Error(`BENCH_ONLY: unknown scenario ${o} (${SCENARIOS.join(', ')})`);
  return {
    quick: QUICK,
    smoke: SMOKE,
    run: (name: ScenarioName) => only.length === 0 || only.includes(name),
    /** BENCH_ROUNDS=N: pack, refs, model, messages and streams N times over; medians and the RSS trend. */
    rounds: num('BENCH_ROUNDS', 1, 1, 1),
    /** BENCH_BASELINE=file: a second bundle measured as `base` beside the proxy (before and after a change, in one run). */
    baseline: process.env.BENCH_BASELINE || undefined,
    /** BENCH_CPU_PROF=1: the main proxy runs with --cpu-prof; the profile lands in bench-results/. */
    cpuProf: process.env.BENCH_CPU_PROF === '1',
    startups: num('BENCH_STARTUPS', 10, 5, 2),
    packMiB: num('BENCH_PACK_MIB', 512, 64, 8),
    packRounds: num('BENCH_PACK_ROUNDS', 3, 1, 1),
    refsConns: num('BENCH_REFS_CONNS', 64, 64, 16),
    refsSliceMs: num('BENCH_REFS_SLICE_MS', 1000, 500, 300),
    refsRounds: num('BENCH_REFS_ROUNDS', 5, 2, 1),
    refsWarmupMs: num('BENCH_REFS_WARMUP_MS', 1000, 300, 100),
    refsSequential: num('BENCH_REFS_SEQUENTIAL', 2000, 300, 50),
    limitsCalls: num('BENCH_LIMITS_CALLS', 20_000, 5000, 500),
    modelCalls: num('BENCH_MODEL_CALLS', 2000, 300, 50),
    modelWarmup: num('BENCH_MODEL_WARMUP', 200, 50, 10),
    modelRate: num('BENCH_MODEL_RATE', 1000, 1000, 100),
    modelSliceMs: num('BENCH_MODEL_SLICE_MS', 1000, 500, 300),
    modelRounds: num('BENCH_MODEL_ROUNDS', 5, 2, 1),
    streams: num('BENCH_STREAMS', 2000, 200, 50),
    streamIntervalMs: num('BENCH_STREAM_INTERVAL_MS', 50, 50, 50),
    streamDurationMs: num('BENCH_STREAM_DURATION_MS', 10_000, 3000, 1000),
    /** Opening the streams may take this long; streams not open by then are given up and counted. */
    streamRampLimitMs: num('BENCH_STREAM_RAMP_LIMIT_MS', 20_000, 10_000, 10_000),
    /** Rounds per path; rounds alternate direct, proxy, proxy, direct, ... */
    streamRounds: num('BENCH_STREAM_ROUNDS', 2, 1, 1),
    openStreams: num('BENCH_OPEN_STREAMS', 10_000, 1000, 200),
    openHoldMs: num('BENCH_OPEN_HOLD_MS', 5000, 2000, 500),
    openRampLimitMs: num('BENCH_OPEN_RAMP_LIMIT_MS', 90_000, 30_000, 20_000),
  };
}
export type Config = ReturnType<typeof loadConfig>;
