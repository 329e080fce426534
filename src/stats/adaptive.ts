import { inBand } from './band.js';
import { betaln, binomcoefln } from './stdlib.js';

/**
 * Adaptive sampling. Trials of a task are run in steps (pairs, or one at a time); after each step
 * we ask: if we ran all kMax trials, how likely is the final rate c/kMax to land in the band? With
 * a Beta prior (or a mixture, see informedPrior) updated by what we saw, the remaining successes
 * follow a beta-binomial. Two stopping rules use that predictive probability P:
 * - `curtail` (predictive curtailment): stop once P <= risk or P >= 1 - risk;
 * - `optimal` (Bayes-optimal stopping): stop where the expected cost of stopping now,
 *   min(P, 1 - P) / risk (a decision that differs from the full run's costs 1/risk trials), is no
 *   more than that of going on (the next step's trials plus the expected cost from there), by
 *   backward induction over every (n, c) reachable. It spends trials where they change decisions.
 * Either way the decision is the full run's likelier one. Pure: no I/O, no randomness.
 */
export interface AdaptiveRule {
  lo: number;
  hi: number;
  kMax: number;
  risk: number;
  /** Decide only after every `step` trials (trials are launched in pairs). */
  step: number;
  /** The stopping rule; absent is `curtail` (jobs recorded before `optimal` existed). */
  method?: 'curtail' | 'optimal';
  priorA: number;
  priorB: number;
  /**
   * A prior from an earlier measurement of this task (see informedPrior): mixed with the vague
   * Beta(priorA, priorB), so new evidence that contradicts it moves the weight to the vague part.
   */
  informed?: InformedPrior | null;
  /**
   * The informed prior yields to contradicting evidence: at a point where the trials so far are
   * less likely under it than under the vague prior, the rule decides as a cold run would
   * (see contradictsPrior). Set for jobs made since; absent on older jobs, whose trials followed
   * the rule without it.
   */
  yields?: boolean;
}

/** The informed part of a task's prior: Beta(a, b), with this share of the prior mixture. */
export interface InformedPrior {
  a: number;
  b: number;
  weight: number;
}

/**
 * How an earlier measurement (n trials, c successes) becomes a prior, so that it never overrules
 * the new evidence:
 * - discounted (a power prior): the earlier trials count as at most `maxTrials` (default 8,
 *   half of k = 16) pseudo-trials, so a full new measurement always outweighs them;
 * - robust (a mixture): the discounted Beta gets `weight` of the prior, the vague Jeffreys
 *   Beta(1/2, 1/2) the rest. When the new trials disagree with the old rate (the task drifted), the
 *   posterior shifts to the vague part by Bayes' rule, and the rule samples on as if cold. The
 *   default weight is 0.97 for a one-sided earlier record (at most one success, or at most one
 *   failure: far from any band, so a drift into it is a large move the first trials show) and 0.9
 *   otherwise.
 * The prior changes when a task stops, never which estimate is unbiased (see GmsEstimator).
 */
export function informedPrior(
  earlier: { n: number; c: number },
  options: { maxTrials?: number; weight?: number } = {},
): InformedPrior | null {
  if (earlier.n <= 0) return null;
  const scale = Math.min(1, (options.maxTrials ?? 8) / earlier.n);
  const oneSided = earlier.c <= 1 || earlier.n - earlier.c <= 1;
  return {
    a: 0.5 + scale * earlier.c,
    b: 0.5 + scale * (earlier.n - earlier.c),
    weight: options.weight ?? (oneSided ? 0.97 : 0.9),
  };
}

/** Each stopping rule's default risk: the two read it on different scales. */
export const DEFAULT_RISK = { optimal: 0.009, curtail: 0.02 } as const;

export const DEFAULT_ADAPTIVE_RULE: AdaptiveRule = {
  lo: 0.25,
  hi: 0.75,
  kMax: 16,
  risk: 0.02,
  step: 2,
  priorA: 0.5,
  priorB: 0.5,
};

export type AdaptiveDecision =
  { stop: false; probability: number | null } | { stop: true; inBand: boolean; probability: number };

/** The decision a full run of kMax trials would make. */
export function finalInBand(c: number, rule: AdaptiveRule): boolean {
  return inBand(c / rule.kMax, rule.lo, rule.hi);
}

/** P(final rate in band | c of n) under one Beta(a0, b0) prior: the beta-binomial predictive. */
function betaPredictiveInBand(n: number, c: number, a0: number, b0: number, rule: AdaptiveRule): number {
  const m = rule.kMax - n;
  const a = c + a0;
  const b = n - c + b0;
  const norm = betaln(a, b);
  let p = 0;
  for (let j = 0; j <= m; j++) {
    if (finalInBand(c + j, rule)) p += Math.exp(binomcoefln(m, j) + betaln(j + a, m - j + b) - norm);
  }
  return p;
}

/**
 * The prior's components after c successes in n trials: each Beta prior's weight times the
 * marginal likelihood of the data under it, normalised (one component without an informed prior).
 */
function posteriorComponents(n: number, c: number, rule: AdaptiveRule): Array<{ w: number; a: number; b: number }> {
  const inf = rule.informed;
  if (!inf || inf.weight <= 0) return [{ w: 1, a: rule.priorA, b: rule.priorB }];
  const logLik = (a: number, b: number): number => betaln(a + c, b + n - c) - betaln(a, b);
  const lv = Math.log(1 - inf.weight) + logLik(rule.priorA, rule.priorB);
  const li = Math.log(inf.weight) + logLik(inf.a, inf.b);
  const top = Math.max(lv, li);
  const wi = Math.exp(li - top) / (Math.exp(li - top) + Math.exp(lv - top));
  return [
    { w: 1 - wi, a: rule.priorA, b: rule.priorB },
    { w: wi, a: inf.a, b: inf.b },
  ];
}

/**
 * P(the full kMax-trial rate lands in the band | c successes in n trials): the beta-binomial
 * predictive, or with an informed prior the mixture of the two components' predictives, each
 * weighted by its posterior weight (prior weight times the marginal likelihood of c of n).
 */
export function predictiveInBand(n: number, c: number, rule: AdaptiveRule): number {
  if (rule.kMax - n <= 0) return finalInBand(c, rule) ? 1 : 0;
  const p = posteriorComponents(n, c, rule).reduce((s, k) => s + k.w * betaPredictiveInBand(n, c, k.a, k.b, rule), 0);
  return Math.min(1, Math.max(0, p));
}

/** P(j successes in the next s trials | c of n), j = 0..s: the (mixture) beta-binomial. */
function nextSuccesses(n: number, c: number, s: number, rule: AdaptiveRule): number[] {
  const out = new Array<number>(s + 1).fill(0);
  for (const k of posteriorComponents(n, c, rule)) {
    const a = k.a + c;
    const b = k.b + n - c;
    for (let j = 0; j <= s; j++) out[j]! += k.w * Math.exp(binomcoefln(s, j) + betaln(j + a, s - j + b) - betaln(a, b));
  }
  return out;
}

/** Where the Bayes-optimal rule stops: `${n}/${c}` for every stopping state, by backward induction. */
function optimalStops(rule: AdaptiveRule): Set<string> {
  const K = rule.kMax;
  const value: number[][] = Array.from({ length: K + 1 }, () => []);
  const stops = new Set<string>();
  for (let c = 0; c <= K; c++) value[K]![c] = 0;
  for (let n = K - 1; n >= 0; n--) {
    const s = Math.min(K - n, n % rule.step === 0 ? rule.step : rule.step - (n % rule.step));
    for (let c = 0; c <= n; c++) {
      const next = nextSuccesses(n, c, s, rule);
      const goOn = s + next.reduce((sum, q, j) => sum + q * value[n + s]![c + j]!, 0);
      if (n === 0 || n % rule.step !== 0) {
        value[n]![c] = goOn;
        continue;
      }
      const p = predictiveInBand(n, c, rule);
      const stopNow = Math.min(p, 1 - p) / rule.risk;
      if (stopNow <= goOn) stops.add(`${n}/${c}`);
      value[n]![c] = Math.min(stopNow, goOn);
    }
  }
  return stops;
}

const optimalCache = new Map<string, Set<string>>();

function optimalStopsOf(rule: AdaptiveRule): Set<string> {
  const key = JSON.stringify(rule);
  let stops = optimalCache.get(key);
  if (!stops) {
    if (optimalCache.size > 10_000) optimalCache.clear();
    optimalCache.set(key, (stops = optimalStops(rule)));
  }
  return stops;
}

/**
 * Do c successes in n trials contradict the informed prior? They do when they are less likely under
 * it than under the vague prior (its posterior share fell below its prior share: Bayes' factor < 1).
 */
export function contradictsPrior(n: number, c: number, rule: AdaptiveRule): boolean {
  const inf = rule.informed;
  if (!rule.yields || !inf || inf.weight <= 0 || n === 0) return false;
  return posteriorComponents(n, c, rule)[1]!.w < inf.weight;
}

export function decide(n: number, c: number, rule: AdaptiveRule = DEFAULT_ADAPTIVE_RULE): AdaptiveDecision {
  if (n >= rule.kMax) return { stop: true, inBand: finalInBand(c, rule), probability: finalInBand(c, rule) ? 1 : 0 };
  if (n === 0 || n % rule.step !== 0) return { stop: false, probability: null };
  // Trials that contradict the prior are read as a cold run reads them: the prior may shorten a run
  // that agrees with it, never one that argues against it.
  if (contradictsPrior(n, c, rule)) return decide(n, c, { ...rule, informed: null });
  const probability = predictiveInBand(n, c, rule);
  if (rule.method === 'optimal')
    return optimalStopsOf(rule).has(`${n}/${c}`)
      ? { stop: true, inBand: probability >= 0.5, probability }
      : { stop: false, probability };
  if (probability <= rule.risk) return { stop: true, inBand: false, probability };
  if (probability >= 1 - rule.risk) return { stop: true, inBand: true, probability };
  return { stop: false, probability };
}

/** A task cut off inside a step (a budget ended one trial of a pair): its counts have no unbiased rate. */
export class CutInsideStepError extends RangeError {
  constructor(n: number, c: number, step: number) {
    super(
      `${c} of ${n} trials: cut off inside a step of ${step} trials run at once, so the recorded trials are the ones that finished first; no unbiased rate exists for them`,
    );
  }
}

/**
 * Girshick-Mosteller-Savage (1946) unbiased estimator of p for a sequential plan: at a stopping
 * point (n, c) it is (paths from (1,1) to (n,c)) / (paths from (0,0) to (n,c)), counting only paths
 * that do not stop earlier. Raw c/n is biased under early stopping; this is not.
 */
export class GmsEstimator {
  private readonly estimates = new Map<string, number>();
  /** Points the rule passes through without stopping, for runs cut off there (budget, interrupt). */
  private readonly truncated = new Map<string, number>();

  constructor(readonly rule: AdaptiveRule = DEFAULT_ADAPTIVE_RULE) {
    const K = rule.kMax;
    // all[n][c]: admissible paths from (0,0); first[n][c]: those whose first trial succeeded.
    const all = Array.from({ length: K + 1 }, () => new Float64Array(K + 1));
    const first = Array.from({ length: K + 1 }, () => new Float64Array(K + 1));
    all[0]![0] = 1;
    for (let n = 0; n < K; n++) {
      for (let c = 0; c <= n; c++) {
        const paths = all[n]![c]!;
        if (paths === 0 || (n > 0 && decide(n, c, rule).stop)) continue;
        all[n + 1]![c + 1]! += paths;
        all[n + 1]![c]! += paths;
        const firstPaths = n === 0 ? 0 : first[n]![c]!;
        if (n === 0) first[1]![1] = 1;
        else {
          first[n + 1]![c + 1]! += firstPaths;
          first[n + 1]![c]! += firstPaths;
        }
      }
    }
    for (let n = 1; n <= K; n++) {
      for (let c = 0; c <= n; c++) {
        if (all[n]![c]! > 0)
          (decide(n, c, rule).stop ? this.estimates : this.truncated).set(`${n}/${c}`, first[n]![c]! / all[n]![c]!);
      }
    }
  }

  /** The unbiased rate at a stopping point of this rule; throws for a point the rule never stops at. */
  estimate(n: number, c: number): number {
    const v = this.estimates.get(`${n}/${c}`);
    if (v === undefined) throw new RangeError(`(${n} trials, ${c} successes) is not a stopping point of this rule`);
    return v;
  }

  /**
   * The unbiased rate for a task whose sampling was cut off at (n, c) by something that does not
   * look at the outcomes (a budget, an interrupt): the plan actually followed was "the rule, or
   * stop at n", and the same path count is unbiased for it. Stopping points give `estimate`.
   * Throws for a point no path of the rule reaches (the trials did not follow this rule).
   */
  estimateAnywhere(n: number, c: number): number {
    const stop = this.estimates.get(`${n}/${c}`);
    if (stop !== undefined) return stop;
    // Inside a step the trials ran at once, and a cut keeps the ones that finished first: the
    // quick ones, which are not a fair draw (a quick success and a slow failure leave a success).
    // No estimate from these counts is unbiased, so none is given.
    if (n % this.rule.step !== 0) throw new CutInsideStepError(n, c, this.rule.step);
    const v = this.truncated.get(`${n}/${c}`);
    if (v === undefined) throw new RangeError(`(${n} trials, ${c} successes) cannot be reached under this rule`);
    return v;
  }

  stoppingPoints(): Array<{ n: number; c: number; estimate: number }> {
    return [...this.estimates.entries()].map(([k, estimate]) => {
      const [n, c] = k.split('/').map(Number) as [number, number];
      return { n, c, estimate };
    });
  }
}

/** Runs the rule over one task's outcome sequence (true = success) and says where it stopped. */
export function runAdaptive(
  outcomes: boolean[],
  rule: AdaptiveRule = DEFAULT_ADAPTIVE_RULE,
): { n: number; c: number; inBand: boolean } {
  let c = 0;
  for (let n = 1; n <= rule.kMax; n++) {
    if (outcomes[n - 1] === undefined)
      throw new RangeError(`the rule needs up to ${rule.kMax} outcomes, got ${outcomes.length}`);
    if (outcomes[n - 1]) c += 1;
    const d = decide(n, c, rule);
    if (d.stop) return { n, c, inBand: d.inBand };
  }
  throw new Error('unreachable: the rule always stops at kMax');
}
