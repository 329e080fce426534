import { decide, finalInBand, informedPrior, type AdaptiveRule, type InformedPrior } from './adaptive.js';

/**
 * What an adaptive rule risks against the fixed-k run it stands in for, computed exactly (every
 * path of outcomes, no simulation): how often it says what kMax trials would have said, and what
 * it costs. Used to bound how much weight an informed prior may have, so that no drift of one
 * task (any earlier record, any new rate) makes the rule disagree with fixed k more than allowed.
 * Pure: no I/O, no randomness.
 */

/** Every point where the rule stops, with its decision: `${n}/${c}` -> in band. */
export function stopTable(rule: AdaptiveRule): Map<string, boolean> {
  const table = new Map<string, boolean>();
  let live = new Set<number>([0]);
  for (let n = 1; n <= rule.kMax; n++) {
    const next = new Set<number>();
    for (const c of live) {
      next.add(c);
      next.add(c + 1);
    }
    live = new Set();
    for (const c of next) {
      const d = decide(n, c, rule);
      if (d.stop) table.set(`${n}/${c}`, d.inBand);
      else live.add(c);
    }
  }
  return table;
}

const logChoose = (n: number, k: number): number => {
  let s = 0;
  for (let i = 0; i < k; i++) s += Math.log(n - i) - Math.log(i + 1);
  return s;
};

/** P(Binomial(m, p) successes j make the final count land in the band | c so far). */
function finalInBandProbability(c: number, m: number, p: number, rule: AdaptiveRule): number {
  let pin = 0;
  for (let j = 0; j <= m; j++) {
    if (!finalInBand(c + j, rule)) continue;
    pin +=
      p === 0
        ? j === 0
          ? 1
          : 0
        : p === 1
          ? j === m
            ? 1
            : 0
          : Math.exp(logChoose(m, j) + j * Math.log(p) + (m - j) * Math.log(1 - p));
  }
  return pin;
}

/**
 * For a task of true rate p, exactly: the probability that the rule's decision equals that of all
 * kMax trials (the same outcomes, run to the end), and the expected trials as a share of kMax.
 */
export function agreementWithFixed(
  rule: AdaptiveRule,
  p: number,
  table: Map<string, boolean> = stopTable(rule),
): { agreement: number; cost: number } {
  let live = new Map<number, number>([[0, 1]]);
  let agreement = 0;
  let trials = 0;
  for (let n = 1; n <= rule.kMax; n++) {
    const next = new Map<number, number>();
    for (const [c, pr] of live) {
      next.set(c + 1, (next.get(c + 1) ?? 0) + pr * p);
      next.set(c, (next.get(c) ?? 0) + pr * (1 - p));
    }
    live = new Map();
    for (const [c, pr] of next) {
      const said = table.get(`${n}/${c}`);
      if (said === undefined) {
        live.set(c, pr);
        continue;
      }
      trials += pr * n;
      const pin = finalInBandProbability(c, rule.kMax - n, p, rule);
      agreement += pr * (said ? pin : 1 - pin);
    }
  }
  return { agreement, cost: trials / rule.kMax };
}

/** The new rates a single task may drift to: 0.005 .. 0.995 in steps of 0.005. */
export const DRIFT_RATES: readonly number[] = Array.from({ length: 199 }, (_, i) => (i + 1) / 200);

/** The lowest agreement over every new rate, and where. */
export function worstAgreement(
  rule: AdaptiveRule,
  rates: readonly number[] = DRIFT_RATES,
): { agreement: number; p: number } {
  const table = stopTable(rule);
  let worst = { agreement: 1, p: Number.NaN };
  for (const p of rates) {
    const a = agreementWithFixed(rule, p, table).agreement;
    if (a < worst.agreement) worst = { agreement: a, p };
  }
  return worst;
}

/** Default floor: a drifted task agrees with fixed k at least this often (or as often as cold does, if less). */
export const DEFAULT_AGREEMENT_FLOOR = 0.97;

/** Weights tried, largest first: the informed prior gets the largest that keeps the floor. */
const WEIGHTS = [0.97, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.02];

const guardCache = new Map<string, InformedPrior | null>();

/**
 * The informed prior of an earlier record (n, c), with its weight lowered until the rule keeps,
 * for every rate the task may now have, agreement with fixed k at or above `floor` (or cold's own
 * worst case, when that is lower: the prior never makes the worst case worse than no prior).
 * null when no weight does: the task is then sampled cold. The weight is derived from the rule's
 * risk through the exact agreement above, not chosen by hand.
 */
export function guardedPrior(
  earlier: { n: number; c: number },
  base: AdaptiveRule,
  options: { maxTrials?: number; weight?: number; floor?: number } = {},
): InformedPrior | null {
  const first = informedPrior(earlier, options);
  if (!first) return null;
  const key = JSON.stringify([earlier.n, earlier.c, { ...base, informed: null }, options]);
  if (guardCache.has(key)) return guardCache.get(key)!;
  const cold = { ...base, informed: null };
  const floor = Math.min(options.floor ?? DEFAULT_AGREEMENT_FLOOR, worstAgreement(cold).agreement);
  let chosen: InformedPrior | null = null;
  for (const weight of [first.weight, ...WEIGHTS.filter((w) => w < first.weight)]) {
    const informed = { ...first, weight };
    if (worstAgreement({ ...base, informed }).agreement >= floor - 1e-12) {
      chosen = informed;
      break;
    }
  }
  if (guardCache.size > 10_000) guardCache.clear();
  guardCache.set(key, chosen);
  return chosen;
}
