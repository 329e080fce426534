import { bandProbability } from '../stats/band.js';
import { z } from 'zod';
import { efficiency, EfficiencySchema } from '../stats/efficiency.js';
import { jeffreys, wilson } from '../stats/intervals.js';
import { BetaPriorSchema, fitBetaPrior, passAtKCurve, PassAtKSchema } from '../stats/pass-at-k.js';
import { stat } from '../util/json.js';
import { retryWaste, RetryWasteSchema } from './waste.js';
import { CutInsideStepError, GmsEstimator } from '../stats/adaptive.js';
import { meanSe } from '../stats/summary.js';
import type { StatsRecord } from '../records/record.js';
import { countByTask, TaskCountsSchema, type TaskCounts } from '../records/counts.js';
import { accountingOf } from '../trial/accounting.js';
import { tQuantile } from '../stats/stdlib.js';

const interval = z.tuple([stat(), stat()]);

export const TaskRateSchema = TaskCountsSchema.extend({
  /**
   * c/n for fixed-k trials; for adaptive ones the Girshick-Mosteller-Savage estimate, at the rule's
   * stopping point or, for a task cut off before one (budget), for the plan actually followed;
   * none (NaN, null in JSON: `cut-inside-step`) for a task cut inside a step of trials run at once,
   * whose recorded trials are the ones that finished first.
   */
  rate: stat(),
  rateMethod: z.enum(['fixed', 'gms', 'gms-truncated', 'cut-inside-step']),
  /** Wilson's interval assumes a fixed n; under adaptive sampling it does not hold (null). */
  wilson: interval.nullable(),
  /** The Jeffreys interval, a Beta posterior: valid whatever the stopping rule. */
  jeffreys: interval,
  bandProbability: stat(),
});
export type TaskRate = z.infer<typeof TaskRateSchema>;

const estimators = new Map<string, GmsEstimator>();

/**
 * The task's success rate: c/n when k was fixed. Under adaptive sampling raw c/n is biased, so the
 * Girshick-Mosteller-Savage estimate is used: at the rule's stopping point, or, for a task cut off
 * between stopping points (budget, interrupt), the same estimator for the truncated plan. Both are
 * unbiased; one estimator serves the whole job.
 */
export function estimateRate(t: TaskCounts): { rate: number; method: TaskRate['rateMethod'] } {
  if (!t.adaptive) return { rate: t.c / t.n, method: 'fixed' };
  const key = JSON.stringify(t.adaptive);
  let gms = estimators.get(key);
  if (!gms) estimators.set(key, (gms = new GmsEstimator(t.adaptive)));
  try {
    return { rate: gms.estimate(t.n, t.c), method: 'gms' };
  } catch (first) {
    if (!(first instanceof RangeError)) throw first;
    // Not a stopping point of the rule (RangeError, the one thing estimate throws): sampling was cut off.
    try {
      return { rate: gms.estimateAnywhere(t.n, t.c), method: 'gms-truncated' };
    } catch (err) {
      if (err instanceof CutInsideStepError) return { rate: Number.NaN, method: 'cut-inside-step' };
      throw new RangeError(
        `${t.config} on ${t.task}: ${t.c} of ${t.n} trials cannot come from the job's adaptive rule (up to ${t.adaptive.kMax} trials in steps of ${t.adaptive.step}); the records are not from one adaptive job`,
        { cause: err },
      );
    }
  }
}

export function taskRates(counts: TaskCounts[], band: [number, number] = [0.25, 0.75]): TaskRate[] {
  return counts
    .filter((t) => t.n > 0)
    .map((t) => {
      const w = wilson(t.c, t.n);
      const j = jeffreys(t.c, t.n);
      const est = estimateRate(t);
      return {
        ...t,
        rate: est.rate,
        rateMethod: est.method,
        wilson: t.adaptive ? null : [w.lo, w.hi],
        jeffreys: [j.lo, j.hi],
        bandProbability: bandProbability(t.c, t.n, band[0], band[1]),
      };
    });
}

export const ConfigStatsSchema = z.strictObject({
  config: z.string(),
  tasks: z.number().int(),
  trials: z.number().int(),
  /** Trials with no reward, by error class (not counted in `trials`). */
  errorsByClass: z.record(z.string(), z.number().int()),
  /** Trials that were graded but ended with an agent-side error (timeouts etc.), by class. */
  outcomesByClass: z.record(z.string(), z.number().int()),
  /** 95% interval of the macro mean, clipped to [0, 1]; null where it is undefined (one task). */
  pass1: z.strictObject({ mean: stat(), se: stat(), ciLo: stat().nullable(), ciHi: stat().nullable() }),
  /** pass@k for k = 1, 2, 4, ... up to the most graded trials of a task; each names its method. */
  passAtK: z.array(PassAtKSchema),
  /** The empirical-Bayes prior pass@k uses for tasks short of k (or every task, adaptive): fitted on this configuration's tasks. */
  passAtKPrior: BetaPriorSchema,
  efficiency: EfficiencySchema,
  /**
   * How much of what was attempted was graded. Trials without a reward are shown here, never as
   * 0 and never dropped: infra (retried, still failed), ungraded (the verifier gave no reward).
   */
  coverage: z.strictObject({
    attempted: z.number().int(),
    graded: z.number().int(),
    infra: z.number().int(),
    ungraded: z.number().int(),
    fraction: stat(),
  }),
  /** Tasks this configuration attempted with no graded trial at all: no rate exists for them. */
  unmeasuredTasks: z.array(z.string()),
  /** Sandbox time that bought no grade (retried, replaced or unrewarded runs), by cause. */
  retryWaste: RetryWasteSchema,
  /**
   * Trials whose reward disagrees with the verifier's other evidence (a full reward with failed
   * tests, reward files that differ): still counted as graded with their reward, flagged here.
   */
  findings: z.strictObject({ inconsistentTrials: z.number().int(), byCode: z.record(z.string(), z.number().int()) }),
});
export type ConfigStats = z.infer<typeof ConfigStatsSchema>;

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
    const mine = counts.filter((t) => t.config === config);
    const tasks = mine.filter((t) => t.n > 0);
    const rates = meanSe(tasks.map((t) => estimateRate(t).rate));
    const half = rates.n > 1 ? tQuantile(0.975, rates.n - 1) * rates.se : Number.NaN;
    const adaptive = tasks.some((t) => t.adaptive);
    const prior = fitBetaPrior(tasks);
    const errorsByClass: Record<string, number> = {};
    const outcomesByClass: Record<string, number> = {};
    for (const r of recs) {
      if (!r.errorClass) continue;
      const bucket = r.reward === null ? errorsByClass : outcomesByClass;
      bucket[r.errorClass] = (bucket[r.errorClass] ?? 0) + 1;
    }
    const graded = recs.filter((r) => accountingOf(r.reward, r.errorClass) === 'graded');
    const byCode: Record<string, number> = {};
    for (const code of recs.flatMap((r) => [...new Set(r.findings ?? [])])) byCode[code] = (byCode[code] ?? 0) + 1;
    const infra = mine.reduce((a, t) => a + t.infra, 0);
    const ungraded = mine.reduce((a, t) => a + t.ungraded, 0);
    const attempted = graded.length + infra + ungraded;
    const clip = (x: number): number | null => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : null);
    return {
      config,
      tasks: tasks.length,
      trials: graded.length,
      errorsByClass,
      outcomesByClass,
      pass1: { mean: rates.mean, se: rates.se, ciLo: clip(rates.mean - half), ciHi: clip(rates.mean + half) },
      // One curve, non-decreasing in k (see stats/pass-at-k.ts); pass@1 of a fixed-k job equals
      // pass1.mean, of an adaptive one it is the posterior (pass1.mean is the GMS rate).
      passAtK: passAtKCurve(tasks, { adaptive, prior }),
      passAtKPrior: prior,
      efficiency: efficiency(graded),
      coverage: {
        attempted,
        graded: graded.length,
        infra,
        ungraded,
        fraction: attempted ? graded.length / attempted : 0,
      },
      unmeasuredTasks: mine.filter((t) => t.n === 0).map((t) => t.task),
      retryWaste: retryWaste(recs),
      findings: { inconsistentTrials: recs.filter((r) => (r.findings ?? []).length > 0).length, byCode },
    };
  });
}
