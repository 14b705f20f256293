// The measuring loop of the token-verification benches (scripts/bench-tokens.ts,
// scripts/bench-service-accounts.ts): nanoseconds per verification in one round, and the median
// of a case's rounds.
import type { TokenVerifier } from '../../src/auth/verifier.ts';

/** Nanoseconds per verification over `calls` calls cycling through `list`; every one must verify at once. */
export function verifyRound(verifier: TokenVerifier, list: readonly string[], calls: number, now: number): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) {
    const v = verifier.verify('bot', { token: list[i % list.length]! }, now);
    if (v instanceof Promise || !v.ok) throw new Error(`a bench token was refused: ${v instanceof Promise ? 'a promise' : v.reason}`);
  }
  return Number(process.hrtime.bigint() - start) / calls;
}

/** The median of a case's rounds, whole nanoseconds. */
export const medianNs = (ns: number[]): number => Math.round([...ns].sort((a, b) => a - b)[Math.floor(ns.length / 2)]!);
