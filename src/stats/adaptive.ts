import betaln from '@stdlib/math-base-special-betaln';
import binomcoefln from '@stdlib/math-base-special-binomcoefln';
import { inBand } from './band.js';

/**
 * Adaptive sampling by Bayesian predictive curtailment. Trials of a task are run in steps (pairs);
 * after each step we ask: if we ran all kMax trials, how likely is the final rate c/kMax to land
 * in the band? With a Beta prior updated by what we saw, the remaining successes follow a
 * beta-binomial. Once that probability is <= risk or >= 1 - risk, the decision is settled and
 * the task stops early. Pure: no I/O, no randomness.
 */
export interface AdaptiveRule {
  lo: number;
  hi: number;
  kMax: number;
  risk: number;
  /** Decide only after every `step` trials (trials are launched in pairs). */
  step: number;
  priorA: number;
  priorB: number;
}

export const DEFAULT_ADAPTIVE_RULE: AdaptiveRule = { lo: 0.25, hi: 0.75, kMax: 16, risk: 0.02, step: 2, priorA: 0.5, priorB: 0.5 };

export type AdaptiveDecision =
  | { stop: false; probability: number | null }
  | { stop: true; inBand: boolean; probability: number };

/** The decision a full run of kMax trials would make. */
export function finalInBand(c: number, rule: AdaptiveRule): boolean {
  return inBand(c / rule.kMax, rule.lo, rule.hi);
}

/** P(the full kMax-trial rate lands in the band | c successes in n trials), beta-binomial predictive. */
export function predictiveInBand(n: number, c: number, rule: AdaptiveRule): number {
  const m = rule.kMax - n;
  if (m <= 0) return finalInBand(c, rule) ? 1 : 0;
  const a = c + rule.priorA;
  const b = n - c + rule.priorB;
  const norm = betaln(a, b);
  let p = 0;
  for (let j = 0; j <= m; j++) {
    if (finalInBand(c + j, rule)) p += Math.exp(binomcoefln(m, j) + betaln(j + a, m - j + b) - norm);
  }
  return Math.min(1, Math.max(0, p));
}

export function decide(n: number, c: number, rule: AdaptiveRule = DEFAULT_ADAPTIVE_RULE): AdaptiveDecision {
  if (n >= rule.kMax) return { stop: true, inBand: finalInBand(c, rule), probability: finalInBand(c, rule) ? 1 : 0 };
  if (n === 0 || n % rule.step !== 0) return { stop: false, probability: null };
  const probability = predictiveInBand(n, c, rule);
  if (probability <= rule.risk) return { stop: true, inBand: false, probability };
  if (probability >= 1 - rule.risk) return { stop: true, inBand: true, probability };
  return { stop: false, probability };
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
        if (all[n]![c]! > 0) (decide(n, c, rule).stop ? this.estimates : this.truncated).set(`${n}/${c}`, first[n]![c]! / all[n]![c]!);
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
    const v = this.estimates.get(`${n}/${c}`) ?? this.truncated.get(`${n}/${c}`);
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
export function runAdaptive(outcomes: boolean[], rule: AdaptiveRule = DEFAULT_ADAPTIVE_RULE): { n: number; c: number; inBand: boolean } {
  let c = 0;
  for (let n = 1; n <= rule.kMax; n++) {
    if (outcomes[n - 1] === undefined) throw new RangeError(`the rule needs up to ${rule.kMax} outcomes, got ${outcomes.length}`);
    if (outcomes[n - 1]) c += 1;
    const d = decide(n, c, rule);
    if (d.stop) return { n, c, inBand: d.inBand };
  }
  throw new Error('unreachable: the rule always stops at kMax');
}
