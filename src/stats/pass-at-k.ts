import { z } from 'zod';
import { stat } from '../util/json.js';
import betaln from '@stdlib/math-base-special-betaln';

/**
 * Unbiased pass@k for one task with n trials and c successes (Chen et al. 2021), in the stable
 * product form: 1 - prod_{i=n-c+1..n} (1 - k/i). Defined only for 1 <= k <= n.
 */
export function passAtK(n: number, c: number, k: number): number {
  if (!(k >= 1 && k <= n)) throw new RangeError(`unbiased pass@${k} needs at least ${k} trials, have ${n}`);
  if (n - c < k) return 1;
  let prod = 1;
  for (let i = n - c + 1; i <= n; i++) prod *= 1 - k / i;
  return 1 - prod;
}

/**
 * A model-based pass@k for k > n, where no unbiased estimator exists: the posterior mean of
 * 1 - (1-p)^k under Jeffreys' Beta(c + 1/2, n - c + 1/2), i.e. 1 - B(a, b + k) / B(a, b).
 * Always label it as an estimate from a model, never as pass@k.
 */
export function passAtKModel(n: number, c: number, k: number): number {
  const a = c + 0.5;
  const b = n - c + 0.5;
  return 1 - Math.exp(betaln(a, b + k) - betaln(a, b));
}

export const PassAtKSchema = z.strictObject({
  k: z.number().int(),
  value: stat(),
  /**
   * 'unbiased' when every task has >= k trials; else 'model' (Jeffreys posterior) for those short,
   * or for every task when trials were sampled adaptively; 'gms' for pass@1 of an adaptive job.
   */
  method: z.enum(['unbiased', 'model', 'gms']),
  tasks: z.number().int(),
});
export type PassAtK = z.infer<typeof PassAtKSchema>;

/** Macro pass@k over tasks: the unweighted mean of per-task values, never pooled counts. */
export function macroPassAtK(tasks: Array<{ n: number; c: number }>, k: number, posteriorOnly = false): PassAtK {
  const counted = tasks.filter((t) => t.n > 0);
  let model = false;
  const values = counted.map((t) => {
    if (t.n >= k && !posteriorOnly) return passAtK(t.n, t.c, k);
    model = true;
    return passAtKModel(t.n, t.c, k);
  });
  const value = values.length ? values.reduce((a, b) => a + b, 0) / values.length : Number.NaN;
  return { k, value, method: model ? 'model' : 'unbiased', tasks: counted.length };
}
