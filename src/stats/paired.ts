import { z } from 'zod';
import { stat } from '../util/json.js';
import { seededBits } from './random.js';
import { tCdf } from './stdlib.js';

/** One task's success rates under two configurations, and its family for clustering. */
export interface PairedTask {
  task: string;
  a: number;
  b: number;
  family?: string;
}

/** Above this many tasks the sign-flip test and its interval draw random flips instead of all 2^T. */
export const EXACT_MAX_TASKS = 16;
/** Random flips (and subsets) drawn beyond EXACT_MAX_TASKS, and their seed: every caller uses these. */
export const DEFAULT_PERMUTATIONS = 20000;
export const DEFAULT_SEED = 1;

export const PairedComparisonSchema = z.strictObject({
  /** Tasks (or clusters, when clustered) in the test. */
  t: z.number().int(),
  meanDiff: stat(),
  /**
   * Two-sided p of mean difference 0 from the sign-flip test: exact over all 2^T flips for
   * T <= 16, else seeded random flips ((hits+1)/(rounds+1), never 0). Its only assumption is that
   * each task's difference is as likely negative as positive under no difference; no variance is
   * estimated, so equal differences give the smallest p their T allows (2/2^T), never 0.
   */
  p: stat(),
  pMethod: z.enum(['sign-flip-exact', 'sign-flip-monte-carlo']),
  /**
   * The interval of the same test inverted (Hartigan's subset means: the 2^T - 1 means of
   * non-empty subsets, or random subsets past 16 tasks), clipped to the differences' bounds; the
   * whole range when T is too small for the level (fewer than 6 tasks at 95%).
   */
  ciLo: stat(),
  ciHi: stat(),
  /** p < 1 - level. */
  significant: z.boolean(),
  /** The paired t-test, as a cross-check only: its normal assumption is the weak one with few tasks. */
  tStat: stat(),
  df: z.number().int(),
  /** null when the differences have no variance (the t statistic is then not a test). */
  tTestP: stat().nullable(),
  clustered: z.boolean(),
});
export type PairedComparison = z.infer<typeof PairedComparisonSchema>;

/** The per-task (or per-family) differences a - b a comparison runs on. */
function differences(tasks: PairedTask[], cluster: boolean | undefined): number[] {
  if (!cluster) return tasks.map((t) => t.a - t.b);
  const groups = new Map<string, number[]>();
  for (const t of tasks) {
    const key = t.family ?? t.task;
    groups.set(key, [...(groups.get(key) ?? []), t.a - t.b]);
  }
  return [...groups.keys()].sort().map((k) => {
    const g = groups.get(k)!;
    return g.reduce((x, y) => x + y, 0) / g.length;
  });
}

/**
 * Paired comparison on per-task differences a - b: the sign-flip test decides (p, interval,
 * significance), the t-test is kept beside it as a cross-check. With `cluster`, tasks of one family
 * are averaged first and the test runs over families, because tasks from one origin are not independent.
 */
export function pairedCompare(
  tasks: PairedTask[],
  options: {
    level?: number;
    cluster?: boolean;
    permutations?: number;
    seed?: number;
    bounds?: [number, number];
  } = {},
): PairedComparison {
  const level = options.level ?? 0.95;
  const diffs = differences(tasks, options.cluster);
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
  let tTestP: number | null;
  if (se === 0) {
    tStat = mean === 0 ? 0 : Math.sign(mean) * Number.POSITIVE_INFINITY;
    tTestP = mean === 0 ? 1 : null;
  } else {
    tStat = mean / se;
    // The lower tail directly: 1 - cdf(|t|) cancels to 0 for tiny p, the tail itself stays exact.
    tTestP = Math.min(1, 2 * tCdf(-Math.abs(tStat), df));
  }
  const rounds = options.permutations ?? DEFAULT_PERMUTATIONS;
  const seed = options.seed ?? DEFAULT_SEED;
  const flips = signFlips(diffs, rounds, seed, level, options.bounds ?? [-1, 1]);
  return {
    t: T,
    meanDiff: mean,
    p: flips.p,
    pMethod: flips.exact ? 'sign-flip-exact' : 'sign-flip-monte-carlo',
    ciLo: flips.ci[0],
    ciHi: flips.ci[1],
    significant: flips.p < 1 - level,
    tStat,
    df,
    tTestP,
    clustered: options.cluster ?? false,
  };
}

/**
 * The sign-flip test and its interval from one set of sign patterns. A pattern is a subset S of
 * the tasks (those whose sign stays); its flipped sum is 2 sum(S) - sum(all), so the two-sided p
 * counts patterns with |2 sum(S) - total| >= |total|. The interval is Hartigan's: the sorted means
 * of the non-empty subsets split the line into intervals each holding the centre of a symmetric
 * distribution with equal probability; dropping j from each end leaves coverage
 * 1 - 2j/(patterns) >= level. All 2^T patterns up to EXACT_MAX_TASKS, else `rounds` seeded ones
 * (p = (hits+1)/(rounds+1), never 0).
 */
function signFlips(
  values: number[],
  rounds: number,
  seed: number,
  level: number,
  bounds: [number, number],
): { p: number; exact: boolean; ci: [number, number] } {
  const T = values.length;
  const diffs = Float64Array.from(values);
  let total = 0;
  for (let i = 0; i < T; i++) total += diffs[i]!;
  const observed = Math.abs(total);
  const eps = 1e-12 * Math.max(1, observed);
  const exact = T <= EXACT_MAX_TASKS;
  const patterns = exact ? 2 ** T : rounds;
  // Sums and counts of every pattern of each block of 8 tasks, looked up a byte at a time.
  const blocks = Math.ceil(T / 8);
  const blockSum = new Float64Array(blocks * 256);
  const blockCount = new Uint8Array(blocks * 256);
  for (let b = 0; b < blocks; b++)
    for (let pat = 0; pat < 256; pat++) {
      let s = 0;
      let m = 0;
      for (let i = 0; i < 8 && b * 8 + i < T; i++)
        if (pat & (1 << i)) {
          s += diffs[b * 8 + i]!;
          m += 1;
        }
      blockSum[b * 256 + pat] = s;
      blockCount[b * 256 + pat] = m;
    }
  const means = new Float64Array(patterns);
  let n = 0;
  let hits = 0;
  const bits = seededBits(seed);
  for (let r = 0; r < patterns; r++) {
    let s = 0;
    let m = 0;
    let word = 0;
    for (let b = 0; b < blocks; b++) {
      let pat: number;
      if (exact) pat = (r >>> (8 * b)) & 255;
      else {
        if ((b & 3) === 0) word = bits();
        pat = (word >>> (8 * (b & 3))) & 255;
      }
      s += blockSum[b * 256 + pat]!;
      m += blockCount[b * 256 + pat]!;
    }
    if (Math.abs(2 * s - total) >= observed - eps) hits += 1;
    if (m > 0) means[n++] = s / m;
  }
  const p = exact ? hits / patterns : (hits + 1) / (rounds + 1);
  const sorted = means.subarray(0, n).sort();
  const j = Math.floor(((n + 1) * (1 - level)) / 2);
  const lo = j >= 1 ? sorted[j - 1]! : Number.NEGATIVE_INFINITY;
  const hi = j >= 1 ? sorted[n - j]! : Number.POSITIVE_INFINITY;
  return { p, exact, ci: [Math.max(bounds[0], lo), Math.min(bounds[1], hi)] };
}

/** The paired comparison of two configurations on their common tasks (compare, report, viewer: one place). */
export function compareRates(
  a: Array<{ task: string; rate: number }>,
  b: Array<{ task: string; rate: number }>,
  options: { families?: Map<string, string>; permutations?: number } = {},
): { result: PairedComparison; onlyA: number; onlyB: number } {
  const ra = new Map(a.map((r) => [r.task, r.rate]));
  const rb = new Map(b.map((r) => [r.task, r.rate]));
  const common = [...ra.keys()].filter((t) => rb.has(t) && Number.isFinite(ra.get(t)!) && Number.isFinite(rb.get(t)!));
  common.sort();
  const result = pairedCompare(
    common.map((task) => ({ task, a: ra.get(task)!, b: rb.get(task)!, family: options.families?.get(task) })),
    { cluster: options.families !== undefined, permutations: options.permutations },
  );
  return { result, onlyA: ra.size - common.length, onlyB: rb.size - common.length };
}

/** One line naming the test, where a comparison is shown. */
export function pairedMethodNote(r: PairedComparison): string {
  const how =
    r.pMethod === 'sign-flip-exact'
      ? `exact sign-flip test over all ${2 ** r.t} sign patterns`
      : 'sign-flip test on seeded random sign patterns';
  return `${how}; interval from the same test (subset means)${r.t < 6 ? `; ${r.t} ${r.clustered ? 'families' : 'tasks'} cannot reach p < 0.05 (the smallest p is ${(2 / 2 ** r.t).toPrecision(3)})` : ''}`;
}
