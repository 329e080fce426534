import { z } from 'zod';
import { DEFAULT_ADAPTIVE_RULE, DEFAULT_RISK, informedPrior, type AdaptiveRule } from '../stats/adaptive.js';
import { guardedPrior } from '../stats/adaptive-risk.js';
import type { Priors } from '../store/schema.js';
import type { JobStore } from '../store/store.js';

export type { Priors } from '../store/schema.js';

/**
 * Adaptive sampling: run trials of a task in pairs and stop once its band decision is settled
 * (Bayesian predictive curtailment); k is the cap. Rates from such jobs use the
 * Girshick-Mosteller-Savage estimator, never raw c/n.
 */
export const AdaptiveSpecSchema = z.strictObject({
  lo: z.number().min(0).max(1).default(0.25),
  hi: z.number().min(0).max(1).default(0.75),
  /** `optimal` (Bayes-optimal stopping) or `curtail` (predictive curtailment); see stats/adaptive.ts. */
  method: z.enum(['optimal', 'curtail']).default('optimal'),
  /** The cost of a decision that differs from k trials' (optimal: 1/risk trials; curtail: the threshold). Default 0.009 / 0.02. */
  risk: z.number().gt(0).lt(0.5).optional(),
  /** Trials of a task between decisions: 1, or 2 (pairs: more trials at once on small task sets). */
  step: z.number().int().min(1).max(4).default(1),
  /**
   * An earlier measurement of the same tasks (a job folder or records) as each task's prior,
   * discounted and mixed with a vague prior (stats/adaptive.ts informedPrior). Read once, when
   * the job is made; the counts used are kept in the job.
   */
  prior: z
    .strictObject({
      source: z.string().min(1),
      /** Which configuration of the source; default the one with the same label (another is used only when named). */
      config: z.string().min(1).optional(),
      /** The informed part's share of the prior; default 0.97 for a one-sided earlier record, else 0.9. */
      weight: z.number().gt(0).lt(1).optional(),
      /** Earlier trials count as at most this many (default k). */
      maxTrials: z.number().positive().optional(),
      /**
       * The least agreement with fixed k the prior may leave, whatever rate a task drifted to
       * (exact, stats/adaptive-risk.ts): its weight is lowered until it holds. Default 0.97;
       * absent only in jobs made before it existed (their prior was unguarded).
       */
      floor: z.number().gt(0).lt(1).default(0.97),
    })
    .optional(),
});
export type AdaptiveSpec = z.infer<typeof AdaptiveSpecSchema>;

/** The job's base rule, from its spec (k is the cap). */
export function baseRuleOf(adaptive: AdaptiveSpec, k: number): AdaptiveRule {
  return {
    ...DEFAULT_ADAPTIVE_RULE,
    lo: adaptive.lo,
    hi: adaptive.hi,
    risk: adaptive.risk ?? DEFAULT_RISK[adaptive.method],
    kMax: k,
    step: adaptive.step,
    method: adaptive.method,
  };
}

/**
 * One task's rule: the base rule with the task's informed prior, when the job has one for it. The
 * prior's weight is capped so that whatever rate the task has drifted to, the rule agrees with
 * fixed k at least `floor` of the time (stats/adaptive-risk.ts); a prior no weight makes safe is
 * dropped and the task runs cold.
 */
export function taskRuleOf(
  base: AdaptiveRule,
  adaptive: AdaptiveSpec,
  priors: Priors | null,
  config: string,
  task: string,
): AdaptiveRule {
  const earlier = priors?.[config]?.[task];
  if (!earlier || !adaptive.prior) return base;
  const { weight, maxTrials, floor } = adaptive.prior;
  // Jobs made before the floor existed sampled under the unguarded prior: their rule stays theirs.
  if (floor === undefined)
    return { ...base, informed: informedPrior(earlier, { weight, maxTrials: maxTrials ?? base.kMax }) };
  return {
    ...base,
    yields: true,
    informed: guardedPrior(earlier, { ...base, yields: true }, { weight, maxTrials: maxTrials ?? base.kMax, floor }),
  };
}

/**
 * Which configuration of a prior's source informs the configuration `label`: the one named, else
 * the one with the same label. A source whose only configuration has another label is refused
 * unless named: an earlier measurement of another model is not this model's prior by default.
 */
export function priorConfigOf(
  label: string,
  available: string[],
  named: string | undefined,
): { from: string } | { problem: string } {
  if (named !== undefined)
    return available.includes(named)
      ? { from: named }
      : { problem: `no configuration "${named}" (it has: ${available.join(', ')})` };
  if (available.includes(label)) return { from: label };
  return {
    problem: `no configuration labelled "${label}" (it has: ${available.join(', ')}); to use another configuration's measurement as the prior, name it with --prior-config or adaptive.prior.config`,
  };
}

/**
 * The rule each task of a stored job was sampled under (its own prior's), or null for a job of
 * fixed k: what its rates must be estimated by. Jobs made before the stopping rule could be chosen
 * used predictive curtailment in pairs.
 */
export function storedRules(store: JobStore): (config: string, task: string) => AdaptiveRule | null {
  const spec = JSON.parse(store.getMeta('spec') ?? '{}') as { k?: number; adaptive?: Partial<AdaptiveSpec> };
  const priors = store.metaValue('priors');
  const stored = spec.adaptive;
  if (!stored || !spec.k) return () => null;
  const adaptive: AdaptiveSpec = { lo: 0.25, hi: 0.75, method: 'curtail', step: 2, ...stored };
  const base = baseRuleOf(adaptive, spec.k);
  return (config, task) => taskRuleOf(base, adaptive, priors, config, task);
}
