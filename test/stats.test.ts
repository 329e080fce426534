/**
 * Every formula pinned to values computed independently, once, with SciPy 1.17.1 (Python 3.11):
 *   Wilson   scipy.stats.binomtest(c, n).proportion_ci(0.95, method='wilson')
 *   Jeffreys scipy.stats.beta.ppf(0.025 / 0.975, c + .5, n - c + .5)
 *   pass@k   1 - math.comb(n - c, k) / math.comb(n, k)        (the combinatorial form)
 *   model    1 - scipy.special.beta(a, b + k) / scipy.special.beta(a, b)
 *   EB prior scipy.optimize.minimize (Nelder-Mead) of -sum(betaln(c + a, n - c + b) - betaln(a, b))
 *   paired   scipy.stats.ttest_rel(A, B) (the cross-check)
 *   flips    exhaustive enumeration of the 2^8 sign vectors with itertools.product
 *   band     scipy.stats.beta.cdf(.75, a, b) - scipy.stats.beta.cdf(.25, a, b)
 *   predict  sum of scipy.stats.betabinom.pmf(j, 16 - n, c + .5, n - c + .5) over in-band finals
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { seededBits, seededUniform } from '../src/stats/random.js';
import {
  DEFAULT_ADAPTIVE_RULE,
  decide,
  GmsEstimator,
  informedPrior,
  predictiveInBand,
  runAdaptive,
  type AdaptiveRule,
} from '../src/stats/adaptive.js';
import { bandProbability } from '../src/stats/band.js';
import { efficiency } from '../src/stats/efficiency.js';
import { jeffreys, wilson } from '../src/stats/intervals.js';
import { jaccard, sameModelCeiling } from '../src/stats/overlap.js';
import { pairedCompare } from '../src/stats/paired.js';
import {
  fitBetaPrior,
  macroPassAtK,
  passAtK,
  passAtKCurve,
  passAtKExtended,
  passAtKPosterior,
} from '../src/stats/pass-at-k.js';
import { meanSe, median } from '../src/stats/summary.js';

const close = (actual: number, expected: number, tol = 1e-9, what = ''): void => {
  assert.ok(Math.abs(actual - expected) <= tol, `${what} ${actual} != ${expected} (tol ${tol})`);
};

describe('intervals', () => {
  const cases: Array<[number, number, [number, number], [number, number]]> = [
    [8, 10, [0.4901624715366418, 0.9433178485456248], [0.4972255035600069, 0.9559405864473692]],
    [0, 10, [0, 0.27753279986288926], [0, 0.21719626750921053]],
    [10, 10, [0.7224672001371109, 1], [0.7828037324907894, 1]],
    [1, 30, [0.005908590381612441, 0.16670390991409173], [0.0036204643737916633, 0.14541777735402014]],
    [5, 16, [0.14164643854782039, 0.5559564416525933], [0.13058165554392442, 0.55570446457224]],
  ];
  for (const [c, n, w, j] of cases) {
    it(`Wilson and Jeffreys for ${c}/${n}`, () => {
      const W = wilson(c, n);
      close(W.lo, w[0], 1e-9, 'wilson lo');
      close(W.hi, w[1], 1e-9, 'wilson hi');
      const J = jeffreys(c, n);
      close(J.lo, j[0], 1e-8, 'jeffreys lo');
      close(J.hi, j[1], 1e-8, 'jeffreys hi');
      close(J.rate, c / n);
    });
  }
  it('refuses impossible counts and is uninformative with no trials', () => {
    assert.throws(() => wilson(3, 2), /0 <= successes <= trials/);
    assert.deepEqual([wilson(0, 0).lo, wilson(0, 0).hi], [0, 1]);
  });
});

describe('pass@k', () => {
  for (const [n, c, k, v] of [
    [10, 3, 1, 0.30000000000000004],
    [10, 3, 5, 0.9166666666666666],
    [16, 8, 8, 0.9999222999223],
    [8, 1, 4, 0.5],
    [5, 0, 2, 0],
  ] as const) {
    it(`unbiased pass@${k} with ${c}/${n}`, () => close(passAtK(n, c, k), v, 1e-12));
  }
  it('has no unbiased value for k > n; the posterior form matches its closed form', () => {
    assert.throws(() => passAtK(4, 2, 8), /needs at least 8 trials/);
    const jeffreysPrior = { a: 0.5, b: 0.5 };
    close(passAtKPosterior(4, 2, 8, jeffreysPrior), 0.9572855631510416, 1e-10);
    close(passAtKPosterior(2, 0, 16, jeffreysPrior), 0.6478384011425079, 1e-10);
    close(passAtKPosterior(8, 7, 32, jeffreysPrior), 0.9999999160319167, 1e-10);
  });
  const mixed = [
    { n: 4, c: 1 },
    { n: 4, c: 0 },
    { n: 4, c: 2 },
    { n: 2, c: 0 },
    { n: 8, c: 3 },
    { n: 8, c: 0 },
    { n: 1, c: 1 },
  ];
  it("fits the empirical-Bayes prior by maximum likelihood (SciPy's optimum)", () => {
    const p = fitBetaPrior(mixed);
    close(p.a, 1.6311953531097785, 1e-3, 'a');
    close(p.b, 5.277630241481326, 1e-3, 'b');
    // A task short of k: its own trials, then k - n predicted (SciPy: 1 - B(a, b+4)/B(a, b+2)).
    close(passAtKExtended(2, 0, 4, p), 0.3175774524418298, 1e-4);
    assert.equal(passAtKExtended(2, 1, 4, p), 1, 'a success among its own trials: 1, as the unbiased pass@2');
  });
  it('cannot contradict the evidence: never succeeded is 0, always succeeded is 1, at every k', () => {
    const never = [
      { n: 18, c: 0 },
      { n: 2, c: 0 },
      { n: 1, c: 0 },
    ];
    const always = [
      { n: 2, c: 2 },
      { n: 18, c: 18 },
    ];
    for (const k of [1, 2, 3, 4, 6, 8, 16, 18])
      for (const adaptive of [false, true]) {
        assert.equal(macroPassAtK(never, k, { adaptive }).value, 0, `never, pass@${k}`);
        assert.equal(macroPassAtK(always, k, { adaptive }).value, 1, `always, pass@${k}`);
      }
  });
  it('never decreases in k, for fixed and adaptive jobs (random configurations)', () => {
    const bits = seededBits(7);
    for (let round = 0; round < 200; round++) {
      const tasks = Array.from({ length: 1 + (bits() % 6) }, () => {
        const n = 1 + (bits() % 9);
        return { n, c: bits() % (n + 1) };
      });
      for (const adaptive of [false, true]) {
        const prior = fitBetaPrior(tasks);
        let last = -1;
        for (let k = 1; k <= 20; k++) {
          const v = macroPassAtK(tasks, k, { adaptive, prior }).value;
          assert.ok(v >= last - 1e-12, `${JSON.stringify(tasks)} adaptive=${adaptive}: pass@${k} ${v} < ${last}`);
          last = v;
        }
      }
    }
  });
  it('names the method: unbiased only when every task has k trials', () => {
    const curve = passAtKCurve(mixed);
    assert.deepEqual(
      curve.map((p) => [p.k, p.method, p.extended]),
      [
        [1, 'unbiased', 0],
        [2, 'unbiased+eb', 1],
        [4, 'unbiased+eb', 2],
        [8, 'unbiased+eb', 5],
      ],
    );
  });
  it('macro-averages over tasks instead of pooling counts when n varies', () => {
    const m = macroPassAtK(
      [
        { n: 2, c: 2 },
        { n: 10, c: 0 },
      ],
      1,
    );
    assert.equal(m.method, 'unbiased');
    close(m.value, 0.5); // pooled 2/12 would be wrong
  });
});

describe('paired comparison', () => {
  const A = [0.75, 0.5, 1.0, 0.25, 0.625, 0.875, 0.0, 0.5];
  const B = [0.5, 0.5, 0.75, 0.0, 0.5, 0.5, 0.125, 0.25];
  const tasks = A.map((a, i) => ({ task: `t${i}`, a, b: B[i]!, family: i < 4 ? 'f1' : `f${i}` }));

  it('keeps the t-test as a cross-check, matching scipy ttest_rel', () => {
    const r = pairedCompare(tasks);
    assert.equal(r.t, 8);
    assert.equal(r.df, 7);
    close(r.tStat, 2.9859319271685028, 1e-10);
    close(r.tTestP!, 0.02034319516819436, 1e-9);
    close(r.meanDiff, 0.171875, 1e-12);
  });

  it('decides by the exact sign-flip p (12 of 256) and its subset-mean interval', () => {
    const r = pairedCompare(tasks);
    assert.equal(r.pMethod, 'sign-flip-exact');
    close(r.p, 12 / 256, 1e-12);
    assert.equal(r.significant, true);
    // Hartigan: 255 subset means; 1 - 2j/256 >= 0.95 gives j = 6: the 6th smallest and largest.
    const d = A.map((a, i) => a - B[i]!);
    const means: number[] = [];
    for (let m = 1; m < 256; m++) {
      const s = d.filter((_, i) => m & (1 << i));
      means.push(s.reduce((x, y) => x + y, 0) / s.length);
    }
    means.sort((x, y) => x - y);
    close(r.ciLo, means[5]!, 1e-12);
    close(r.ciHi, means[249]!, 1e-12);
    assert.ok(r.ciLo > 0, 'the interval excludes 0 as the test rejects');
  });

  it('three tasks that differ by the same amount: p 0.25, not significant, the whole range', () => {
    const r = pairedCompare([
      { task: 'a', a: 0, b: 1 },
      { task: 'b', a: 0, b: 1 },
      { task: 'c', a: 0, b: 1 },
    ]);
    assert.equal(r.p, 0.25);
    assert.equal(r.significant, false);
    assert.deepEqual([r.ciLo, r.ciHi], [-1, 1]);
    assert.equal(r.tTestP, null, 'no variance: the t-test gives no p');
    assert.equal(r.tStat, Number.NEGATIVE_INFINITY);
  });

  it('clusters by family: the test runs over family means', () => {
    const r = pairedCompare(tasks, { cluster: true });
    assert.equal(r.clustered, true);
    assert.equal(r.t, 5); // f1 (4 tasks) + f4..f7
    const famMeans = [(0.25 + 0 + 0.25 + 0.25) / 4, 0.125, 0.375, -0.125, 0.25];
    close(r.meanDiff, famMeans.reduce((a, b) => a + b) / 5, 1e-12);
  });

  it('handles identical configurations and too few tasks', () => {
    const same = pairedCompare([
      { task: 'a', a: 0.5, b: 0.5 },
      { task: 'b', a: 1, b: 1 },
    ]);
    assert.equal(same.p, 1);
    assert.equal(same.meanDiff, 0);
    assert.throws(() => pairedCompare([{ task: 'a', a: 1, b: 0 }]), /at least 2/);
  });

  it('uses a seeded Monte Carlo permutation for many tasks, repeatably', () => {
    const many = Array.from({ length: 40 }, (_, i) => ({ task: `t${i}`, a: (i % 5) / 4, b: ((i + 1) % 5) / 4 }));
    const r1 = pairedCompare(many);
    const r2 = pairedCompare(many);
    assert.equal(r1.pMethod, 'sign-flip-monte-carlo');
    assert.equal(r1.p, r2.p);
    assert.deepEqual([r1.ciLo, r1.ciHi], [r2.ciLo, r2.ciHi]);
    assert.ok(Math.abs(r1.p - r1.tTestP!) < 0.1, `permutation ${r1.p} vs t ${r1.tTestP}`);
    assert.ok(r1.p > 0);
  });
});

describe('band probability and overlap', () => {
  for (const [c, n, v] of [
    [4, 8, 0.8826931969857619],
    [0, 8, 0.02925638446559964],
    [8, 16, 0.9707419637633505],
    [2, 4, 0.7468300048996773],
  ] as const) {
    it(`P(0.25 <= p <= 0.75 | ${c}/${n})`, () => close(bandProbability(c, n, 0.25, 0.75), v, 1e-10));
  }

  it('computes Jaccard, undefined for two empty sets', () => {
    close(jaccard(['a', 'b', 'c'], ['b', 'c', 'd'])!, 0.5);
    assert.equal(jaccard([], []), null);
    assert.equal(jaccard(['a'], []), 0);
  });

  it('puts a same-model ceiling below 1 for mid-band tasks and at 1 for certain ones', () => {
    const certain = Array.from({ length: 20 }, (_, i) => ({ task: `t${i}`, n: 16, c: i < 10 ? 8 : 0 }));
    // p-hat 0.5 tasks stay in band only most of the time; p-hat 0 tasks never enter it.
    const ceiling = sameModelCeiling(certain, [0.25, 0.75], { rounds: 300, seed: 3 })!;
    assert.ok(ceiling > 0.8 && ceiling < 1, `ceiling ${ceiling}`);
    const borderline = Array.from({ length: 50 }, (_, i) => ({ task: `t${i}`, n: 8, c: 2 }));
    const low = sameModelCeiling(borderline, [0.25, 0.75], { rounds: 300, seed: 3 })!;
    assert.ok(low < ceiling, 'tasks at the band edge re-measure less consistently');
    assert.equal(
      sameModelCeiling(certain, [0.25, 0.75], { rounds: 50, seed: 9 }),
      sameModelCeiling(certain, [0.25, 0.75], { rounds: 50, seed: 9 }),
    );
  });
});

describe('summaries and efficiency', () => {
  it('gives mean and standard error, and medians', () => {
    const m = meanSe([0.5, 0.75, 1, 0.25]);
    close(m.mean, 0.625);
    close(m.se, Math.sqrt((0.125 ** 2 + 0.125 ** 2 + 0.375 ** 2 + 0.375 ** 2) / 3 / 4));
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
  });

  it('takes medians over successes only and counts near misses', () => {
    const e = efficiency([
      { passed: true, durationMs: 100, outputTokens: 10, costUsd: 0.1, testsPassed: 9, testsFailed: 0 },
      { passed: true, durationMs: 300, outputTokens: 30, costUsd: null, testsPassed: 9, testsFailed: 0 },
      { passed: false, durationMs: 5000, outputTokens: 999, costUsd: 9, testsPassed: 8, testsFailed: 1 },
      { passed: false, durationMs: 5000, outputTokens: 999, costUsd: 9, testsPassed: 7, testsFailed: 1 },
      { passed: false, durationMs: 5000, outputTokens: 999, costUsd: 9, testsPassed: 8, testsFailed: 2 },
    ]);
    assert.deepEqual(e, {
      successes: 2,
      medianTimeMsPerSuccess: 200,
      medianOutputTokensPerSuccess: 20,
      medianCostUsdPerSuccess: 0.1,
      nearMisses: 1,
    });
  });
});

describe('adaptive sampling', () => {
  for (const [n, c, v] of [
    [2, 0, 0.2565062455832957],
    [4, 2, 0.8715871572494506],
    [6, 6, 0.04032533819025214],
    [8, 1, 0.18482978305060835],
  ] as const) {
    it(`beta-binomial predictive P(final in band | ${c}/${n})`, () =>
      close(predictiveInBand(n, c, DEFAULT_ADAPTIVE_RULE), v, 1e-10));
  }

  it('decides only after pairs, stops when settled, and always by kMax', () => {
    assert.equal(decide(1, 1).stop, false);
    assert.deepEqual(decide(6, 6), { stop: false, probability: predictiveInBand(6, 6, DEFAULT_ADAPTIVE_RULE) });
    const settledOut = decide(10, 10);
    assert.equal(settledOut.stop && settledOut.inBand, false);
    assert.equal(settledOut.stop, true);
    const full = decide(16, 4);
    assert.deepEqual(full, { stop: true, inBand: true, probability: 1 });
    assert.equal(runAdaptive(Array(16).fill(true)).inBand, false);
    assert.ok(runAdaptive(Array(16).fill(true)).n < 16);
  });

  /** Probability of stopping at each point of a rule, for a true rate p (exact, by dynamic programming). */
  function stopDistribution(rule: AdaptiveRule, p: number): Array<{ n: number; c: number; prob: number }> {
    let live = new Map<number, number>([[0, 1]]);
    const out: Array<{ n: number; c: number; prob: number }> = [];
    for (let n = 1; n <= rule.kMax; n++) {
      const next = new Map<number, number>();
      for (const [c, pr] of live) {
        next.set(c + 1, (next.get(c + 1) ?? 0) + pr * p);
        next.set(c, (next.get(c) ?? 0) + pr * (1 - p));
      }
      live = new Map();
      for (const [c, pr] of next) {
        if (decide(n, c, rule).stop) out.push({ n, c, prob: pr });
        else live.set(c, pr);
      }
    }
    return out;
  }

  it('GMS estimator is exactly unbiased under the stopping rule, where raw c/n is not', () => {
    const gms = new GmsEstimator(DEFAULT_ADAPTIVE_RULE);
    for (const p of [0.05, 0.1, 0.3, 0.5, 0.7, 0.9]) {
      const dist = stopDistribution(DEFAULT_ADAPTIVE_RULE, p);
      close(
        dist.reduce((a, s) => a + s.prob, 0),
        1,
        1e-12,
        'stopping is certain',
      );
      const unbiased = dist.reduce((a, s) => a + s.prob * gms.estimate(s.n, s.c), 0);
      close(unbiased, p, 1e-9, `E[GMS] at p=${p}`);
      const raw = dist.reduce((a, s) => a + (s.prob * s.c) / s.n, 0);
      if (p === 0.1) assert.ok(Math.abs(raw - p) > 0.005, `raw c/n is biased at p=0.1 (${raw})`);
    }
    assert.throws(() => gms.estimate(3, 1), /not a stopping point/);
  });

  const optimal: AdaptiveRule = { ...DEFAULT_ADAPTIVE_RULE, method: 'optimal', step: 1, risk: 0.009 };

  it('an informed prior is discounted to at most maxTrials pseudo-trials and mixed with the vague prior', () => {
    assert.deepEqual(informedPrior({ n: 32, c: 8 }, { maxTrials: 16, weight: 0.9 }), { a: 4.5, b: 12.5, weight: 0.9 });
    assert.deepEqual(
      informedPrior({ n: 4, c: 1 }, { maxTrials: 16 }),
      { a: 1.5, b: 3.5, weight: 0.97 },
      'at most one success: one-sided',
    );
    assert.deepEqual(informedPrior({ n: 16, c: 8 }, { maxTrials: 16 }), { a: 8.5, b: 8.5, weight: 0.9 });
    assert.equal(informedPrior({ n: 0, c: 0 }), null);
    // Agreeing evidence: after 0 of 2, a prior of 0 of 16 makes "in the band" far less likely than
    // the vague prior alone does. Evidence against it (6 of 6) moves the weight to the vague part:
    // the prediction is then the vague prior's, to within a thousandth.
    const never = { ...optimal, informed: informedPrior({ n: 16, c: 0 }, { maxTrials: 16, weight: 0.9 }) };
    assert.ok(predictiveInBand(2, 0, never) < predictiveInBand(2, 0, optimal) / 10);
    close(predictiveInBand(6, 6, never), predictiveInBand(6, 6, optimal), 1e-3, 'the prior has lost its say');
  });

  it('the prior lets a task stop sooner when the new trials agree with it, never before the first trial', () => {
    const never = { ...optimal, informed: informedPrior({ n: 16, c: 0 }, { maxTrials: 16, weight: 0.9 }) };
    assert.equal(decide(0, 0, never).stop, false);
    assert.equal(runAdaptive(Array(16).fill(false), never).n < runAdaptive(Array(16).fill(false), optimal).n, true);
    // The same task, drifted: it now always succeeds. The rule samples on and says "out" only
    // when the full run would (16 of 16 is above the band).
    const drifted = runAdaptive(Array(16).fill(true), never);
    assert.equal(drifted.inBand, false);
    assert.ok(drifted.n > runAdaptive(Array(16).fill(false), never).n, 'conflict costs trials, not a wrong decision');
  });

  it('GMS is exactly unbiased under the Bayes-optimal rule with an informed prior (every p, by enumeration)', () => {
    for (const earlier of [
      { n: 16, c: 0 },
      { n: 16, c: 8 },
      { n: 16, c: 13 },
    ]) {
      const rule = { ...optimal, informed: informedPrior(earlier, { maxTrials: 16, weight: 0.9 }) };
      const gms = new GmsEstimator(rule);
      for (const p of [0.02, 0.2, 0.5, 0.8, 0.98]) {
        const dist = stopDistribution(rule, p);
        close(
          dist.reduce((a, s) => a + s.prob, 0),
          1,
          1e-12,
          'stopping is certain',
        );
        close(
          dist.reduce((a, s) => a + s.prob * gms.estimate(s.n, s.c), 0),
          p,
          1e-9,
          `E[GMS] at p=${p}, prior ${earlier.c}/${earlier.n}`,
        );
      }
    }
  });

  it('GMS is unbiased by simulation too: drifted tasks, informed priors, 40,000 runs', () => {
    const u = seededUniform(11);
    let err = 0;
    let err2 = 0;
    const runs = 40_000;
    const estimators = new Map<number, GmsEstimator>(); // one per prior (earlier successes)
    for (let i = 0; i < runs; i++) {
      const earlierP = u();
      const earlier = { n: 16, c: Array.from({ length: 16 }, () => u() < earlierP).filter(Boolean).length };
      const p = u() < 1 / 3 ? 1 - earlierP : earlierP; // a third drifted
      const rule = { ...optimal, informed: informedPrior(earlier, { maxTrials: 16, weight: 0.9 }) };
      const r = runAdaptive(
        Array.from({ length: 16 }, () => u() < p),
        rule,
      );
      let gms = estimators.get(earlier.c);
      if (!gms) estimators.set(earlier.c, (gms = new GmsEstimator(rule)));
      const e = gms.estimate(r.n, r.c) - p;
      err += e;
      err2 += e * e;
    }
    const mean = err / runs;
    const se = Math.sqrt((err2 / runs - mean * mean) / runs);
    assert.ok(Math.abs(mean) < 3 * se, `mean error ${mean} is within 3 standard errors (${se})`);
  });
});
