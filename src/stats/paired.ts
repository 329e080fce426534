import { z } from 'zod';
import { stat } from '../util/json.js';
import tCdf from '@stdlib/stats-base-dists-t-cdf';
import tQuantile from '@stdlib/stats-base-dists-t-quantile';
import { seededBits } from './random.js';

/** One task's success rates under two configurations, and its family for clustering. */
export interface PairedTask {
  task: string;
  a: number;
  b: number;
  family?: string;
}

export const PairedComparisonSchema = z.strictObject({
  /** Tasks (or clusters, when clustered) in the test. */
  t: z.number().int(),
  meanDiff: stat(),
  ciLo: stat(),
  ciHi: stat(),
  tStat: stat(),
  df: z.number().int(),
  p: stat(),
  /** Sign-flip permutation p-value of the same mean difference, as a cross-check. */
  permutationP: stat(),
  permutationMethod: z.enum(['exact', 'monte-carlo']),
  clustered: z.boolean(),
});
export type PairedComparison = z.infer<typeof PairedComparisonSchema>;

/**
 * Paired t-test on per-task differences a - b (df = T - 1), with a two-sided p and a CI of the
 * mean difference. With `cluster`, tasks of one family are averaged first and the test runs over
 * families, because tasks from one origin are not independent.
 */
export function pairedCompare(
  tasks: PairedTask[],
  options: { level?: number; cluster?: boolean; permutations?: number; seed?: number } = {},
): PairedComparison {
  const level = options.level ?? 0.95;
  let diffs = tasks.map((t) => t.a - t.b);
  if (options.cluster) {
    const groups = new Map<string, number[]>();
    for (const t of tasks) {
      const key = t.family ?? t.task;
      groups.set(key, [...(groups.get(key) ?? []), t.a - t.b]);
    }
    diffs = [...groups.keys()].sort().map((k) => {
      const g = groups.get(k)!;
      return g.reduce((x, y) => x + y, 0) / g.length;
    });
  }
  const T = diffs.length;
  if (T < 2)
    throw new RangeError(
      `a paired comparison needs at least 2 ${options.cluster ? 'families' : 'common tasks'}, have ${T}`,
    );
  const mean = diffs.reduce((x, y) => x + y, 0) / T;
  const sd = Math.sqrt(diffs.reduce((acc, d) => acc + (d - mean) ** 2, 0) / (T - 1));
  const se = sd / Math.sqrt(T);
  const df = T - 1;
  let tStat: number;
  let p: number;
  if (se === 0) {
    tStat = mean === 0 ? 0 : Math.sign(mean) * Number.POSITIVE_INFINITY;
    p = mean === 0 ? 1 : 0;
  } else {
    tStat = mean / se;
    // The lower tail directly: 1 - cdf(|t|) cancels to 0 for tiny p, the tail itself stays exact.
    p = Math.min(1, 2 * tCdf(-Math.abs(tStat), df));
  }
  const half = tQuantile(1 - (1 - level) / 2, df) * se;
  const perm = signFlipP(diffs, options.permutations ?? 20000, options.seed ?? 1);
  return {
    t: T,
    meanDiff: mean,
    ciLo: mean - half,
    ciHi: mean + half,
    tStat,
    df,
    p,
    permutationP: perm.p,
    permutationMethod: perm.method,
    clustered: options.cluster ?? false,
  };
}

/**
 * Sign-flip permutation test of mean(d) = 0: under the null each difference's sign is a coin
 * flip. Exact over all 2^T flips for T <= 16, else `rounds` seeded random flips ((hits+1)/(rounds+1)).
 */
export function signFlipP(
  diffs: number[],
  rounds: number,
  seed: number,
): { p: number; method: 'exact' | 'monte-carlo' } {
  const T = diffs.length;
  const observed = Math.abs(diffs.reduce((x, y) => x + y, 0));
  const eps = 1e-12 * Math.max(1, observed);
  if (T <= 16) {
    let hits = 0;
    const total = 2 ** T;
    for (let mask = 0; mask < total; mask++) {
      let s = 0;
      for (let i = 0; i < T; i++) s += mask & (1 << i) ? -diffs[i]! : diffs[i]!;
      if (Math.abs(s) >= observed - eps) hits += 1;
    }
    return { p: hits / total, method: 'exact' };
  }
  const bits = seededBits(seed);
  let hits = 0;
  for (let r = 0; r < rounds; r++) {
    let s = 0;
    let word = 0;
    for (let i = 0; i < T; i++) {
      if ((i & 31) === 0) word = bits();
      s += (word >>> (i & 31)) & 1 ? -diffs[i]! : diffs[i]!;
    }
    if (Math.abs(s) >= observed - eps) hits += 1;
  }
  return { p: (hits + 1) / (rounds + 1), method: 'monte-carlo' };
}
