import { bandProbability } from '../stats/band.js';
import { efficiency, type Efficiency } from '../stats/efficiency.js';
import { jeffreys, wilson } from '../stats/intervals.js';
import { macroPassAtK, type PassAtK } from '../stats/pass-at-k.js';
import { GmsEstimator, type AdaptiveRule } from '../stats/adaptive.js';
import { meanSe } from '../stats/summary.js';
import tQuantile from '@stdlib/stats-base-dists-t-quantile';
import type { StatsRecord } from './records.js';

/** One configuration's counts on one task. Trials without a reward are not counted in n. */
export interface TaskCounts {
  config: string;
  task: string;
  n: number;
  c: number;
  errors: number;
  /** The adaptive rule the trials were sampled under, if any. */
  adaptive?: AdaptiveRule | null;
}

export interface TaskRate extends TaskCounts {
  /** c/n for fixed-k trials; the GMS estimate (or the fixed first-pair prefix) for adaptive ones. */
  rate: number;
  rateMethod: 'fixed' | 'gms' | 'prefix';
  wilson: [number, number];
  jeffreys: [number, number];
  bandProbability: number;
}

/** Groups records into per-configuration, per-task counts (sorted by config, then task). */
export function countByTask(records: StatsRecord[]): TaskCounts[] {
  const map = new Map<string, TaskCounts>();
  for (const r of records) {
    const key = `${r.config}\u0000${r.task}`;
    let t = map.get(key);
    if (!t) map.set(key, (t = { config: r.config, task: r.task, n: 0, c: 0, errors: 0, adaptive: r.adaptive ?? null }));
    if (r.reward === null) t.errors += 1;
    else {
      t.n += 1;
      if (r.passed) t.c += 1;
    }
  }
  return [...map.values()].sort((a, b) => (a.config === b.config ? (a.task < b.task ? -1 : 1) : a.config < b.config ? -1 : 1));
}

const estimators = new Map<string, GmsEstimator>();

/**
 * The task's success rate: c/n when k was fixed. Under adaptive sampling raw c/n is biased, so the
 * Girshick-Mosteller-Savage estimate at the stopping point is used, or, for a task cut off between
 * stopping points (budget, interrupt), the rate of its fixed first pair.
 */
export function estimateRate(t: TaskCounts): { rate: number; method: TaskRate['rateMethod'] } {
  if (!t.adaptive) return { rate: t.c / t.n, method: 'fixed' };
  const key = JSON.stringify(t.adaptive);
  let gms = estimators.get(key);
  if (!gms) estimators.set(key, (gms = new GmsEstimator(t.adaptive)));
  try {
    return { rate: gms.estimate(t.n, t.c), method: 'gms' };
  } catch {
    return { rate: Math.min(t.c, t.adaptive.step) / Math.min(t.n, t.adaptive.step), method: 'prefix' };
  }
}

export function taskRates(counts: TaskCounts[], band: [number, number] = [0.25, 0.75]): TaskRate[] {
  return counts
    .filter((t) => t.n > 0)
    .map((t) => {
      const w = wilson(t.c, t.n);
      const j = jeffreys(t.c, t.n);
      const est = estimateRate(t);
      return { ...t, rate: est.rate, rateMethod: est.method, wilson: [w.lo, w.hi], jeffreys: [j.lo, j.hi], bandProbability: bandProbability(t.c, t.n, band[0], band[1]) };
    });
}

export interface ConfigStats {
  config: string;
  tasks: number;
  trials: number;
  /** Trials with no reward, by error class (not counted in `trials`). */
  errorsByClass: Record<string, number>;
  /** Trials that were graded but ended with an agent-side error (timeouts etc.), by class. */
  outcomesByClass: Record<string, number>;
  pass1: { mean: number; se: number; ciLo: number; ciHi: number };
  passAtK: PassAtK[];
  efficiency: Efficiency;
}

/** Per configuration: pass@1 (macro mean over tasks, t-based 95% CI), pass@k, errors, efficiency. */
export function configStats(records: StatsRecord[]): ConfigStats[] {
  const byConfig = new Map<string, StatsRecord[]>();
  for (const r of records) {
    const list = byConfig.get(r.config);
    if (list) list.push(r);
    else byConfig.set(r.config, [r]);
  }
  const counts = countByTask(records);
  return [...byConfig.keys()].sort().map((config) => {
    const recs = byConfig.get(config)!;
    const tasks = counts.filter((t) => t.config === config && t.n > 0);
    const rates = meanSe(tasks.map((t) => estimateRate(t).rate));
    const half = rates.n > 1 ? tQuantile(0.975, rates.n - 1) * rates.se : Number.NaN;
    const maxN = Math.max(0, ...tasks.map((t) => t.n));
    const ks: number[] = [];
    for (let k = 1; k <= maxN; k *= 2) ks.push(k);
    if (maxN > 0 && !ks.includes(maxN)) ks.push(maxN);
    const errorsByClass: Record<string, number> = {};
    const outcomesByClass: Record<string, number> = {};
    for (const r of recs) {
      if (!r.errorClass) continue;
      const bucket = r.reward === null ? errorsByClass : outcomesByClass;
      bucket[r.errorClass] = (bucket[r.errorClass] ?? 0) + 1;
    }
    const graded = recs.filter((r) => r.reward !== null);
    return {
      config,
      tasks: tasks.length,
      trials: graded.length,
      errorsByClass,
      outcomesByClass,
      pass1: { mean: rates.mean, se: rates.se, ciLo: rates.mean - half, ciHi: rates.mean + half },
      passAtK: ks.map((k) => macroPassAtK(tasks, k)),
      efficiency: efficiency(graded),
    };
  });
}
