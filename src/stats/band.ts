import { betaCdf } from './stdlib.js';

/**
 * Posterior probability that a task's true success rate lies in [lo, hi], under Jeffreys'
 * Beta(c + 1/2, n - c + 1/2): I_hi(a, b) - I_lo(a, b).
 */
export function bandProbability(c: number, n: number, lo: number, hi: number): number {
  const a = c + 0.5;
  const b = n - c + 0.5;
  return betaCdf(hi, a, b) - betaCdf(lo, a, b);
}

export function inBand(rate: number, lo: number, hi: number): boolean {
  return rate >= lo && rate <= hi;
}
