// Whether a figure sampled over a run (a process's resident memory, its open descriptors) climbs,
// judged on its trend after warm-up against a stated allowance, so that noise cannot fake a climb:
// npm run soak judges memory and descriptors with it.
//
// The trend is the median of the slopes between every pair of samples (the Theil-Sen estimator):
// one sample far off (a collection just before it, the heap regrowing after a pause in traffic)
// moves it little, where a straight fit would follow it and "rose at every one of the last three
// samples" took three samples of noise for a climb (92.3 -> 104.8 -> 105.9 MiB, while RSS under
// load fell from 110.5 overall). A climb is a trend that rises more than the allowance over the
// window, by more than three times what the samples' own scatter about the trend could make of
// it: a short or noisy run is too short to judge, and says so, rather than failing.

/** A figure at a moment of the run. */
export interface Sample {
  readonly atMs: number;
  readonly value: number;
}

export interface TrendOptions {
  /** What the figure may rise per minute of the window without counting as a climb. */
  readonly allowancePerMinute: number;
  /**
   * Fewer samples than this say nothing of a trend (default 20: five minutes of the soak's 15 s
   * samples). Fewer make the scatter itself too uncertain: of 4,000 runs of noise alone, 12
   * samples called 0.7% of them a climb, 20 samples 0.03 to 0.07%, 25 or more none.
   */
  readonly minSamples?: number;
  /**
   * A sample below this counts as this (default: none): the level the figure had before
   * something the run itself did let it fall, so that its regrowth to where it was is no climb.
   */
  readonly floor?: number;
}

export interface Trend {
  /** False when there are too few samples to judge (the other figures are then still given). */
  readonly judged: boolean;
  readonly climbing: boolean;
  /** The trend's rise over the window (its slope times the window's length), in the figure's unit. */
  readonly rise: number;
  /** The allowance over the window. */
  readonly allowed: number;
  /** What the samples' scatter about the trend could make of the rise (one standard error). */
  readonly noise: number;
  readonly spanMs: number;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** Pure: the trend of `samples` (in time order or not) against the allowance. */
export function judgeTrend(samples: readonly Sample[], opts: TrendOptions): Trend {
  const floor = opts.floor ?? -Infinity;
  const pts = samples.map((p) => ({ atMs: p.atMs, value: Math.max(p.value, floor) })).sort((a, b) => a.atMs - b.atMs);
  const spanMs = pts.length > 0 ? pts[pts.length - 1]!.atMs - pts[0]!.atMs : 0;
  const allowed = (opts.allowancePerMinute * spanMs) / 60_000;
  const slopes: number[] = [];
  for (let i = 0; i < pts.length; i++) {
    for (let j = i + 1; j < pts.length; j++) {
      if (pts[j]!.atMs > pts[i]!.atMs) slopes.push((pts[j]!.value - pts[i]!.value) / (pts[j]!.atMs - pts[i]!.atMs));
    }
  }
  if (pts.length < Math.max(3, opts.minSamples ?? 20) || slopes.length === 0) return { judged: false, climbing: false, rise: slopes.length > 0 ? median(slopes) * spanMs : 0, allowed, noise: NaN, spanMs };
  const slope = median(slopes);
  const intercept = median(pts.map((p) => p.value - slope * p.atMs));
  // The scatter about the trend, robustly (1.4826 times the median absolute residual is the
  // standard deviation for normal noise), and what it makes of the slope over this window.
  const sigma = 1.4826 * median(pts.map((p) => Math.abs(p.value - intercept - slope * p.atMs)));
  const meanT = pts.reduce((n, p) => n + p.atMs, 0) / pts.length;
  const spread = Math.sqrt(pts.reduce((n, p) => n + (p.atMs - meanT) ** 2, 0));
  const noise = (sigma / spread) * spanMs;
  const rise = slope * spanMs;
  return { judged: true, climbing: rise > allowed + 3 * noise, rise, allowed, noise, spanMs };
}
