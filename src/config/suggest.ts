// "Did you mean": the known name closest to a mistyped one, for flags and config-file fields.

/** Pure: the edit distance (insertions, deletions, substitutions, adjacent swaps) between two names. */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * Pure: the known name a mistyped one most likely meant, or undefined: the same name in another
 * case (`baseURL` for `baseUrl`), else the closest within a third of its length (at least 1, at
 * most 3 edits), when only one is that close.
 */
export function didYouMean(given: string, known: Iterable<string>): string | undefined {
  const names = [...known];
  const sameCase = names.find((n) => n.toLowerCase() === given.toLowerCase());
  if (sameCase !== undefined) return sameCase;
  const limit = Math.min(3, Math.max(1, Math.floor(given.length / 3)));
  let best: string | undefined;
  let bestDistance = Infinity;
  let tie = false;
  for (const n of names) {
    const dist = distance(given.toLowerCase(), n.toLowerCase());
    if (dist < bestDistance) [best, bestDistance, tie] = [n, dist, false];
    else if (dist === bestDistance) tie = true;
  }
  return bestDistance <= limit && !tie ? best : undefined;
}

/** ` (did you mean X?)`, or nothing. */
export function suggestion(given: string, known: Iterable<string>, prefix = ''): string {
  const match = didYouMean(given, known);
  return match === undefined ? '' : ` (did you mean ${prefix}${match}?)`;
}
