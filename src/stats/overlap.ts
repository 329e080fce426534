import { inBand } from './band.js';
import { binomial, seededUniform } from './random.js';

/** |A n B| / |A u B|; null when both sets are empty (undefined, not 1 or 0). */
export function jaccard<T>(a: Iterable<T>, b: Iterable<T>): number | null {
  const A = new Set(a);
  const B = new Set(b);
  let inter = 0;
  for (const x of A) if (B.has(x)) inter += 1;
  const union = A.size + B.size - inter;
  return union === 0 ? null : inter / union;
}

/**
 * The Jaccard that re-measuring the *same* model would reach: for each of `rounds` resamples,
 * draw two independent replicate runs per task (Binomial(n, c/n) each), take each run's band set,
 * and average their Jaccard. Two different models' J is read against this ceiling.
 */
export function sameModelCeiling(
  tasks: Array<{ task: string; n: number; c: number }>,
  band: [number, number],
  options: { rounds?: number; seed?: number } = {},
): number | null {
  const u = seededUniform(options.seed ?? 7);
  const rounds = options.rounds ?? 200;
  const values: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const one: string[] = [];
    const two: string[] = [];
    for (const t of tasks) {
      if (t.n === 0) continue;
      const p = t.c / t.n;
      if (inBand(binomial(t.n, p, u) / t.n, band[0], band[1])) one.push(t.task);
      if (inBand(binomial(t.n, p, u) / t.n, band[0], band[1])) two.push(t.task);
    }
    const j = jaccard(one, two);
    if (j !== null) values.push(j);
  }
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}
