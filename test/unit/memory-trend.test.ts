// The soak's verdict on memory and descriptors (scripts/memory-trend.ts): a trend after warm-up
// against a stated allowance, never a run of rising samples that noise can make.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { judgeTrend, type Sample } from '../../scripts/memory-trend.ts';
import { fuzzSeed, mulberry32, type Rng } from '../support/prng.ts';

const MiB = 1024 * 1024;
const ALLOWANCE = { allowancePerMinute: 1 * MiB };

/** Samples every 15 s from `fromMs` for `minutes`, of `level(atMs)` plus noise (about ±sd, with a far swing now and then). */
function run(rng: Rng, minutes: number, level: (atMs: number) => number, sd: number, fromMs = 60_000): Sample[] {
  const out: Sample[] = [];
  for (let atMs = fromMs; atMs <= fromMs + minutes * 60_000; atMs += 15_000) {
    const noise = (rng.next() + rng.next() + rng.next() + rng.next() - 2) * sd * Math.sqrt(3);
    const swing = rng.chance(0.05) ? (rng.chance(0.5) ? -1 : 1) * 4 * sd : 0;
    out.push({ atMs, value: level(atMs) + noise + swing });
  }
  return out;
}

test('memory trend: the soak run that failed on three rising samples (110.5 MiB at warm-up, then 92.3 -> 104.8 -> 105.9 after the quiet pause) is no climb: too few samples to judge a trend', () => {
  const t = judgeTrend([110.5, 92.3, 104.8, 105.9].map((mib, i) => ({ atMs: 30_000 + i * 15_000, value: mib * MiB })), ALLOWANCE);
  assert.equal(t.judged, false);
  assert.equal(t.climbing, false);
});

test('memory trend: the heap regrowing after the soak\'s quiet pause to its level at warm-up is no climb when that level is the floor (a 6-minute run: 126.3 MiB at warm-up, 104.6 after the pause, 126.2 at the end)', () => {
  const mib = [126.3, 104.6, 111.8, 111.2, 112.6, 119.9, 119.2, 118.6, 120.1, 120.4, 121.2, 123.6, 123.6, 123.6, 122.6, 122.6, 122.7, 122.7, 122.7, 123.2, 126.2];
  const samples = mib.map((m, i) => ({ atMs: 60_000 + i * 15_000, value: m * MiB }));
  const read = judgeTrend(samples, ALLOWANCE);
  assert.ok(read.rise > read.allowed, `read as it came, the regrowth rises past the allowance: +${(read.rise / MiB).toFixed(1)} MiB`);
  const floored = judgeTrend(samples, { ...ALLOWANCE, floor: samples[0]!.value });
  assert.deepEqual([floored.judged, floored.climbing, floored.rise], [true, false, 0]);
  // A leak past the level at warm-up still shows: the same run gaining 3 MiB a minute more.
  const leaking = samples.map((p, i) => ({ atMs: p.atMs, value: p.value + (3 * MiB * i) / 4 }));
  assert.equal(judgeTrend(leaking, { ...ALLOWANCE, floor: leaking[0]!.value }).climbing, true);
});

test('memory trend: a steady rise past the allowance is a climb, one within it is not, and the allowance is stated per minute of the window', () => {
  const steady = (perMinute: number) => Array.from({ length: 37 }, (_, i) => ({ atMs: 60_000 + i * 15_000, value: 100 * MiB + (perMinute * i) / 4 }));
  const over = judgeTrend(steady(1.2 * MiB), ALLOWANCE);
  assert.deepEqual([over.judged, over.climbing], [true, true]);
  assert.equal(Math.round(over.allowed / MiB), 9, 'nine minutes at 1 MiB a minute');
  assert.equal(Math.round((over.rise / MiB) * 10) / 10, 10.8);
  assert.equal(judgeTrend(steady(0.8 * MiB), ALLOWANCE).climbing, false);
});

test('memory trend: a leak of 3 MiB a minute under noise of 4 MiB is a climb over nine minutes; noise alone, flat, falling or a step while the heap settles, never is (200 seeded runs of each)', () => {
  const seed = fuzzSeed(0x5eed);
  const rng = mulberry32(seed);
  const base = 100 * MiB;
  const counts = { leak: 0, flat: 0, falling: 0, step: 0, short: 0 };
  for (let i = 0; i < 200; i++) {
    if (judgeTrend(run(rng, 9, (t) => base + (3 * MiB * t) / 60_000, 4 * MiB), ALLOWANCE).climbing) counts.leak++;
    if (judgeTrend(run(rng, 9, () => base, 4 * MiB), ALLOWANCE).climbing) counts.flat++;
    if (judgeTrend(run(rng, 9, (t) => base - (2 * MiB * t) / 60_000, 4 * MiB), ALLOWANCE).climbing) counts.falling++;
    if (judgeTrend(run(rng, 9, (t) => base + (t < 120_000 ? 0 : 8 * MiB), 2 * MiB), ALLOWANCE).climbing) counts.step++;
    if (judgeTrend(run(rng, 1, () => base, 4 * MiB), ALLOWANCE).climbing) counts.short++;
  }
  assert.deepEqual(counts, { leak: 200, flat: 0, falling: 0, step: 0, short: 0 }, `seed ${seed}`);
});
