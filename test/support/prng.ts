// A small deterministic PRNG for the fuzz tests: the same seed gives the same cases on every
// machine, so a failure reproduces. Set FUZZ_SEED=<number> to explore other sequences; each
// fuzz test prints the seed it used in its name.

export interface Rng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** An integer in [min, max]. */
  between(min: number, max: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
}

/** mulberry32 (Tommy Ettinger, public domain): 32 bits of state, good enough to fuzz with. */
export function mulberry32(seed: number): Rng {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number): number => Math.floor(next() * n);
  return {
    next,
    int,
    between: (min, max) => min + int(max - min + 1),
    chance: (p) => next() < p,
    pick: (items) => items[int(items.length)]!,
  };
}

/** The seed for a fuzz test: FUZZ_SEED from the environment when set, else the test's default. */
export function fuzzSeed(defaultSeed: number): number {
  const fromEnv = process.env.FUZZ_SEED;
  if (fromEnv === undefined || fromEnv === '') return defaultSeed;
  const seed = Number(fromEnv);
  if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer, got ${JSON.stringify(fromEnv)}`);
  return seed >>> 0;
}
