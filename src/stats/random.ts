import { mt19937 } from './stdlib.js';

/** A seeded uniform [0, 1) generator (Mersenne Twister), so resampling results repeat exactly. */
export type Uniform = () => number;

/** 32 random bits per call, for drawing many fair coin flips cheaply. */
export function seededBits(seed: number): () => number {
  const prng = mt19937(seed) as () => number;
  return () => prng() >>> 0;
}

export function seededUniform(seed: number): Uniform {
  const prng = mt19937(seed) as { normalized: () => number };
  return () => prng.normalized();
}

/** Binomial(n, p) by n Bernoulli draws: n is small here (trials per task). */
export function binomial(n: number, p: number, u: Uniform): number {
  let c = 0;
  for (let i = 0; i < n; i++) if (u() < p) c += 1;
  return c;
}

/** Beta(a, b) draw by the ratio of gammas (Marsaglia-Tsang), from a Uniform. */
function gammaDraw(shape: number, u: Uniform): number {
  if (shape < 1) return gammaDraw(shape + 1, u) * u() ** (1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = Math.sqrt(-2 * Math.log(u() || 1e-300)) * Math.cos(2 * Math.PI * u());
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const w = u();
    if (w < 1 - 0.0331 * x ** 4 || Math.log(w) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

export function betaDraw(a: number, b: number, u: Uniform): number {
  const x = gammaDraw(a, u);
  return x / (x + gammaDraw(b, u));
}
