import type betalnFn from '@stdlib/math-base-special-betaln';
import type binomcoeflnFn from '@stdlib/math-base-special-binomcoefln';
import type mt19937Fn from '@stdlib/random-base-mt19937';
import type betaCdfFn from '@stdlib/stats-base-dists-beta-cdf';
import type betaQuantileFn from '@stdlib/stats-base-dists-beta-quantile';
import type normalQuantileFn from '@stdlib/stats-base-dists-normal-quantile';
import type tCdfFn from '@stdlib/stats-base-dists-t-cdf';
import type tQuantileFn from '@stdlib/stats-base-dists-t-quantile';
import { lazyRequire } from '../util/lazy-require.js';

/**
 * The @stdlib functions termgrade's statistics use, each loaded on its first call (see
 * lazyRequire: they are 680 files, which a process that computes no statistic need not load).
 * The one place they are bound; the stats modules, the curriculum and the report import them here.
 */
const betalnLib = lazyRequire<typeof betalnFn>('@stdlib/math-base-special-betaln');
const binomcoeflnLib = lazyRequire<typeof binomcoeflnFn>('@stdlib/math-base-special-binomcoefln');
const betaCdfLib = lazyRequire<typeof betaCdfFn>('@stdlib/stats-base-dists-beta-cdf');
const betaQuantileLib = lazyRequire<typeof betaQuantileFn>('@stdlib/stats-base-dists-beta-quantile');
const normalQuantileLib = lazyRequire<typeof normalQuantileFn>('@stdlib/stats-base-dists-normal-quantile');
const tCdfLib = lazyRequire<typeof tCdfFn>('@stdlib/stats-base-dists-t-cdf');
const tQuantileLib = lazyRequire<typeof tQuantileFn>('@stdlib/stats-base-dists-t-quantile');
const mt19937Lib = lazyRequire<typeof mt19937Fn>('@stdlib/random-base-mt19937');

export const betaln = (a: number, b: number): number => betalnLib()(a, b);
export const binomcoefln = (n: number, k: number): number => binomcoeflnLib()(n, k);
export const betaCdf = (x: number, a: number, b: number): number => betaCdfLib()(x, a, b);
export const betaQuantile = (p: number, a: number, b: number): number => betaQuantileLib()(p, a, b);
export const normalQuantile = (p: number, mu: number, sigma: number): number => normalQuantileLib()(p, mu, sigma);
export const tCdf = (x: number, v: number): number => tCdfLib()(x, v);
export const tQuantile = (p: number, v: number): number => tQuantileLib()(p, v);
/** A Mersenne Twister seeded with `seed` (the caller names the face of it it uses). */
export const mt19937 = (seed: number): unknown => mt19937Lib().factory({ seed });
