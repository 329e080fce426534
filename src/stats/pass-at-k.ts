import { z } from 'zod';
import { stat } from '../util/json.js';
import { betaln } from './stdlib.js';

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
 * A Beta(a, b) prior over a configuration's per-task success rates. a = 0 is all mass at rate 0
 * (the configuration never succeeded), b = 0 all mass at 1 (it always did).
 */
export const BetaPriorSchema = z.strictObject({ a: stat(), b: stat() });
export type BetaPrior = z.infer<typeof BetaPriorSchema>;

/** Tasks grouped by (n, c): the likelihood only depends on those, and there are few of them. */
function groupCounts(tasks: Array<{ n: number; c: number }>): Array<{ n: number; c: number; w: number }> {
  const m = new Map<string, { n: number; c: number; w: number }>();
  for (const t of tasks) {
    if (t.n <= 0) continue;
    const key = `${t.n}/${t.c}`;
    const g = m.get(key);
    if (g) g.w += 1;
    else m.set(key, { n: t.n, c: t.c, w: 1 });
  }
  return [...m.values()];
}

const LOGIT_RANGE = 9;
const LOG10_S_MIN = -3;
const LOG10_S_MAX = 4;

/**
 * The empirical-Bayes prior of a configuration: the Beta(a, b) that maximises the beta-binomial
 * likelihood of its tasks' (n, c), searched over the mean a/(a+b) (logit in [-9, 9]) and the
 * concentration a+b (10^-3 .. 10^4), a grid then a shrinking pattern search. A configuration that
 * never succeeded gets a = 0, one that always did b = 0: the prior cannot contradict its evidence.
 * Pure and deterministic; NaN for no task.
 */
export function fitBetaPrior(tasks: Array<{ n: number; c: number }>): BetaPrior {
  const groups = groupCounts(tasks);
  if (!groups.length) return { a: Number.NaN, b: Number.NaN };
  if (groups.every((g) => g.c === 0)) return { a: 0, b: 1 };
  if (groups.every((g) => g.c === g.n)) return { a: 1, b: 0 };
  const ll = (x: number, y: number): number => {
    const mu = 1 / (1 + Math.exp(-x));
    const s = 10 ** y;
    const a = mu * s;
    const b = (1 - mu) * s;
    const base = betaln(a, b);
    let sum = 0;
    for (const g of groups) sum += g.w * (betaln(g.c + a, g.n - g.c + b) - base);
    return sum;
  };
  let best = { x: 0, y: 0, v: Number.NEGATIVE_INFINITY };
  for (let x = -LOGIT_RANGE; x <= LOGIT_RANGE; x += 1)
    for (let y = LOG10_S_MIN; y <= LOG10_S_MAX; y += 0.5) {
      const v = ll(x, y);
      if (v > best.v) best = { x, y, v };
    }
  const clampX = (x: number): number => Math.max(-LOGIT_RANGE, Math.min(LOGIT_RANGE, x));
  const clampY = (y: number): number => Math.max(LOG10_S_MIN, Math.min(LOG10_S_MAX, y));
  for (let step = 0.5; step > 1e-6; step /= 2) {
    let moved = true;
    while (moved) {
      moved = false;
      for (const [dx, dy] of [
        [step, 0],
        [-step, 0],
        [0, step / 2],
        [0, -step / 2],
      ] as const) {
        const x = clampX(best.x + dx);
        const y = clampY(best.y + dy);
        const v = ll(x, y);
        if (v > best.v + 1e-12) {
          best = { x, y, v };
          moved = true;
        }
      }
    }
  }
  const mu = 1 / (1 + Math.exp(-best.x));
  const s = 10 ** best.y;
  return { a: mu * s, b: (1 - mu) * s };
}

/** E[(1-p)^m] under Beta(a, b), with the point masses a = 0 (p = 0) and b = 0 (p = 1). */
function meanFailPower(a: number, b: number, m: number): number {
  if (m === 0) return 1;
  if (a === 0) return 1;
  if (b === 0) return 0;
  return Math.exp(betaln(a, b + m) - betaln(a, b));
}

/**
 * pass@k of one task with fewer trials than k (n < k): its n observed trials are k's first n,
 * the other k - n are predicted from the configuration's prior updated by this task's record.
 * So a task that succeeded at least once is 1 (as the unbiased estimator says at k = n), one that
 * never did is 1 - E[(1-p)^(k-n) | Beta(a, b + n)]: continuous with the unbiased value at k = n and
 * increasing in k, and 0 when the prior says the configuration never succeeds.
 */
export function passAtKExtended(n: number, c: number, k: number, prior: BetaPrior): number {
  if (k <= n) return passAtK(n, c, k);
  if (c > 0) return 1;
  return 1 - meanFailPower(prior.a, prior.b + n, k - n);
}

/**
 * pass@k as the posterior mean of 1 - (1-p)^k under Beta(a + c, b + n - c): the form valid
 * whatever the stopping rule, used for adaptively sampled jobs (where the unbiased estimator is not).
 */
export function passAtKPosterior(n: number, c: number, k: number, prior: BetaPrior): number {
  return 1 - meanFailPower(prior.a + c, prior.b + n - c, k);
}

/**
 * How a pass@k was estimated:
 * - 'unbiased': every task has >= k graded trials; the unbiased estimator over each.
 * - 'unbiased+eb': tasks with fewer than k trials (`extended` of them) take their own trials plus
 *   k - n predicted from the configuration's empirical-Bayes prior (passAtKExtended); the rest unbiased.
 * - 'eb-posterior': trials sampled adaptively; every task's posterior under that prior (passAtKPosterior).
 */
export const PassAtKMethod = z.enum(['unbiased', 'unbiased+eb', 'eb-posterior']);
export type PassAtKMethod = z.infer<typeof PassAtKMethod>;

export const PassAtKSchema = z.strictObject({
  k: z.number().int(),
  value: stat(),
  method: PassAtKMethod,
  tasks: z.number().int(),
  /** Tasks with fewer than k graded trials (their value extended by the prior); 0 under 'unbiased'. */
  extended: z.number().int(),
});
export type PassAtK = z.infer<typeof PassAtKSchema>;

/**
 * Macro pass@k over tasks: the unweighted mean of per-task values, never pooled counts. Every
 * task with a graded trial counts at every k, and each task's value is non-decreasing in k, so
 * the figure never falls as k grows. `prior` is fitBetaPrior over the same tasks.
 */
export function macroPassAtK(
  tasks: Array<{ n: number; c: number }>,
  k: number,
  options: { adaptive?: boolean; prior?: BetaPrior } = {},
): PassAtK {
  const counted = tasks.filter((t) => t.n > 0);
  const prior = options.prior ?? fitBetaPrior(counted);
  let extended = 0;
  const values = counted.map((t) => {
    if (options.adaptive) return passAtKPosterior(t.n, t.c, k, prior);
    if (t.n >= k) return passAtK(t.n, t.c, k);
    extended += 1;
    return passAtKExtended(t.n, t.c, k, prior);
  });
  const value = values.length ? values.reduce((a, b) => a + b, 0) / values.length : Number.NaN;
  const method: PassAtKMethod = options.adaptive ? 'eb-posterior' : extended ? 'unbiased+eb' : 'unbiased';
  return { k, value, method, tasks: counted.length, extended: options.adaptive ? counted.length : extended };
}

/** The pass@k figures shown for a configuration: k = 1, 2, 4, ... up to its most trials on a task, and that. */
export function passAtKCurve(
  tasks: Array<{ n: number; c: number }>,
  options: { adaptive?: boolean; prior?: BetaPrior } = {},
): PassAtK[] {
  const counted = tasks.filter((t) => t.n > 0);
  const maxN = Math.max(0, ...counted.map((t) => t.n));
  const ks: number[] = [];
  for (let k = 1; k <= maxN; k *= 2) ks.push(k);
  if (maxN > 0 && !ks.includes(maxN)) ks.push(maxN);
  const prior = options.prior ?? fitBetaPrior(counted);
  return ks.map((k) => macroPassAtK(counted, k, { ...options, prior }));
}

/** The prior in words: its parameters, or where its mass is when it is a point. */
function priorText(prior: BetaPrior | undefined): string {
  if (!prior) return "fitted on this configuration's tasks";
  if (prior.a === 0) return "all at rate 0, fitted on this configuration's tasks: it never succeeded";
  if (prior.b === 0) return "all at rate 1, fitted on this configuration's tasks: it always succeeded";
  return `Beta(${prior.a.toPrecision(3)}, ${prior.b.toPrecision(3)}) fitted on this configuration's tasks`;
}

/** One line naming how a pass@k was estimated: shown wherever the figure is (stats, report, viewer). */
export function passAtKMethodNote(p: PassAtK, prior?: BetaPrior): string {
  if (p.method === 'unbiased') return 'unbiased estimator (every task has at least k trials)';
  if (p.method === 'eb-posterior')
    return `posterior mean under an empirical-Bayes prior (${priorText(prior)}): trials were sampled adaptively`;
  return `unbiased estimator; ${p.extended} of ${p.tasks} task(s) with fewer than k trials count their own trials plus k - n predicted by an empirical-Bayes prior (${priorText(prior)})`;
}

/** The same for a whole curve, in one line: null when every figure is unbiased. */
export function passAtKCurveNote(curve: PassAtK[], prior?: BetaPrior): string | null {
  const marked = curve.filter((p) => p.method !== 'unbiased');
  if (!marked.length) return null;
  if (marked.every((p) => p.method === 'eb-posterior'))
    return `posterior means under an empirical-Bayes prior (${priorText(prior)}): trials were sampled adaptively`;
  const counts = marked.map((p) => `pass@${p.k}: ${p.extended} of ${p.tasks}`).join(', ');
  return `tasks with fewer than k trials count their own trials plus k - n predicted by an empirical-Bayes prior (${priorText(prior)}); such tasks: ${counts}`;
}
