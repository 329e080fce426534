import { betaQuantile, normalQuantile } from './stdlib.js';

/** A success rate and its interval; `level` is the coverage (0.95 by default). */
export interface RateInterval {
  rate: number;
  lo: number;
  hi: number;
}

function checkCounts(c: number, n: number): void {
  if (!Number.isInteger(c) || !Number.isInteger(n) || n < 0 || c < 0 || c > n) {
    throw new RangeError(`need whole counts with 0 <= successes <= trials, got ${c} of ${n}`);
  }
}

/** Wilson score interval (Wilson 1927). n = 0 gives the uninformative [0, 1]. */
export function wilson(c: number, n: number, level = 0.95): RateInterval {
  checkCounts(c, n);
  if (n === 0) return { rate: Number.NaN, lo: 0, hi: 1 };
  const z = normalQuantile(1 - (1 - level) / 2, 0, 1);
  const p = c / n;
  const z2 = z * z;
  const denom = 1 + z2 / n;
  const center = (p + z2 / (2 * n)) / denom;
  const half = (z / denom) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  return { rate: p, lo: Math.max(0, center - half), hi: Math.min(1, center + half) };
}

/**
 * Jeffreys interval: equal-tailed quantiles of Beta(c + 1/2, n - c + 1/2), with the lower end
 * set to 0 when c = 0 and the upper to 1 when c = n (Brown, Cai & DasGupta 2001).
 */
export function jeffreys(c: number, n: number, level = 0.95): RateInterval {
  checkCounts(c, n);
  const a = c + 0.5;
  const b = n - c + 0.5;
  const tail = (1 - level) / 2;
  return {
    rate: n === 0 ? Number.NaN : c / n,
    lo: c === 0 ? 0 : betaQuantile(tail, a, b),
    hi: c === n ? 1 : betaQuantile(1 - tail, a, b),
  };
}
