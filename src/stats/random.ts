import mt19937 from '@stdlib/random-base-mt19937';

/** A seeded uniform [0, 1) generator (Mersenne Twister), so resampling results repeat exactly. */
export type Uniform = () => number;

/** 32 random bits per call, for drawing many fair coin flips cheaply. */
export function seededBits(seed: number): () => number {
  const prng = mt19937.factory({ seed }) as unknown as () => number;
  return () => prng() >>> 0;
}

export function seededUniform(seed: number): Uniform {
  const prng = mt19937.factory({ seed }) as unknown as { normalized: () => number };
  return () => prng.normalized();
}

/** Binomial(n, p) by n Bernoulli draws: n is small here (trials per task). */
export function binomial(n: number, p: number, u: Uniform): number {
  let c = 0;
  for (let i = 0; i < n; i++) if (u() < p) c += 1;
  return c;
}
