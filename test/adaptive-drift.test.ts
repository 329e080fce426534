/**
 * An informed prior that yields to evidence: exact enumeration (every outcome path) of how often
 * the adaptive rule says what fixed k would have said, for every earlier record 0..k and every
 * rate a task may have drifted to; and the budget cut inside a step of trials run at once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  contradictsPrior,
  CutInsideStepError,
  decide,
  DEFAULT_ADAPTIVE_RULE,
  GmsEstimator,
  informedPrior,
  type AdaptiveRule,
} from '../src/stats/adaptive.js';
import { agreementWithFixed, guardedPrior, stopTable, worstAgreement } from '../src/stats/adaptive-risk.js';
import { estimateRate } from '../src/report/aggregate.js';
import { priorConfigOf } from '../src/records/sampling.js';

const cold: AdaptiveRule = { ...DEFAULT_ADAPTIVE_RULE, method: 'optimal', step: 1, risk: 0.009, yields: true };

describe('a prior that yields to evidence', () => {
  it('the unguarded prior of a never-solved task decides after one failure and agrees 44% of the time at p = 0.38', () => {
    const unguarded = { ...cold, informed: informedPrior({ n: 16, c: 0 }, { maxTrials: 16 }) };
    assert.equal(decide(1, 0, unguarded).stop, true, 'the defect the guard removes');
    assert.ok(agreementWithFixed(unguarded, 0.38).agreement < 0.5);
  });

  it('worst case over every earlier record 0..16 and every new rate: at least 97% agreement with fixed k', () => {
    for (let c0 = 0; c0 <= 16; c0++) {
      const informed = guardedPrior({ n: 16, c: c0 }, cold, { maxTrials: 16 });
      const worst = worstAgreement({ ...cold, informed });
      assert.ok(
        worst.agreement >= 0.97,
        `earlier ${c0}/16: ${worst.agreement} at p = ${worst.p} (weight ${informed?.weight})`,
      );
    }
  });

  it('no rule can stop a run of failures before 7 trials and keep 97%: the floor bounds what a prior may save', () => {
    const table = stopTable({ ...cold, yields: false });
    assert.equal(table.get('7/0'), false, 'cold decides "out" after 7 failures');
    // The same rule, but out after 6 failures: some rate between the band's edge and its middle
    // makes that decision wrong too often, whatever the prior says.
    const early = new Map(table);
    early.set('6/0', false);
    const worst = Math.min(
      ...Array.from({ length: 199 }, (_, i) => agreementWithFixed(cold, (i + 1) / 200, early).agreement),
    );
    assert.ok(worst < 0.97, `stopping after 6 failures: ${worst}`);
  });

  it('contradicting trials are read as a cold run reads them: never a stop where cold would go on', () => {
    for (const c0 of [0, 3, 8, 13, 16]) {
      const rule = { ...cold, informed: informedPrior({ n: 16, c: c0 }, { maxTrials: 16, weight: 0.9 }) };
      let contradicted = 0;
      for (let n = 1; n < 16; n++) {
        for (let c = 0; c <= n; c++) {
          if (!contradictsPrior(n, c, rule)) continue;
          contradicted += 1;
          assert.deepEqual(
            decide(n, c, rule),
            decide(n, c, { ...rule, informed: null }),
            `${c}/${n} against a prior of ${c0}/16`,
          );
        }
      }
      assert.ok(contradicted > 10, `prior ${c0}/16: ${contradicted} contradicting points checked`);
    }
  });

  it('GMS stays exactly unbiased under the guarded, yielding rule (every p, by enumeration)', () => {
    for (const c0 of [0, 5, 8, 16]) {
      const rule = { ...cold, informed: informedPrior({ n: 16, c: c0 }, { maxTrials: 16, weight: 0.9 }) };
      const gms = new GmsEstimator(rule);
      const table = stopTable(rule);
      for (const p of [0.05, 0.3, 0.5, 0.8]) {
        let live = new Map<number, number>([[0, 1]]);
        let mean = 0;
        let total = 0;
        for (let n = 1; n <= 16; n++) {
          const next = new Map<number, number>();
          for (const [c, pr] of live) {
            next.set(c + 1, (next.get(c + 1) ?? 0) + pr * p);
            next.set(c, (next.get(c) ?? 0) + pr * (1 - p));
          }
          live = new Map();
          for (const [c, pr] of next) {
            if (table.has(`${n}/${c}`)) {
              mean += pr * gms.estimate(n, c);
              total += pr;
            } else live.set(c, pr);
          }
        }
        assert.ok(Math.abs(total - 1) < 1e-12 && Math.abs(mean - p) < 1e-9, `prior ${c0}/16, p ${p}: E = ${mean}`);
      }
    }
  });

  it('a prior from a configuration with another label is refused unless named', () => {
    assert.deepEqual(Object.hasOwn(priorConfigOf('gpt-b', ['gpt-a'], undefined), 'problem'), true);
    assert.match(
      (priorConfigOf('gpt-b', ['gpt-a'], undefined) as { problem: string }).problem,
      /no configuration labelled "gpt-b".*name it/,
    );
    assert.deepEqual(priorConfigOf('gpt-b', ['gpt-a'], 'gpt-a'), { from: 'gpt-a' });
    assert.deepEqual(priorConfigOf('gpt-a', ['gpt-a', 'gpt-b'], undefined), { from: 'gpt-a' });
    assert.ok('problem' in priorConfigOf('gpt-a', ['gpt-a'], 'gpt-c'));
  });
});

describe('budget cut inside a step (pairs run at once)', () => {
  const pairs: AdaptiveRule = DEFAULT_ADAPTIVE_RULE; // curtailment in pairs
  const gms = new GmsEstimator(pairs);

  /**
   * Exact expectation of what is recorded when the budget ends during pair number `cut` (0-based):
   * both trials of earlier pairs are in; of the cut pair only the one that finished first, and a
   * success finishes before a failure (the quick success, the slow failure dropped).
   */
  function cutDuringPair(p: number, cut: number, estimate: (n: number, c: number) => number): number {
    let live = new Map<number, number>([[0, 1]]);
    let mean = 0;
    for (let pair = 0; pair <= cut; pair++) {
      const n = 2 * pair;
      const next = new Map<number, number>();
      for (const [c, pr] of live) {
        if (pair === cut) {
          // Recorded: one trial, a success if either trial of the pair succeeded.
          const quickSuccess = 1 - (1 - p) ** 2;
          mean += pr * (quickSuccess * estimate(n + 1, c + 1) + (1 - quickSuccess) * estimate(n + 1, c));
          continue;
        }
        for (const [j, q] of [
          [0, (1 - p) ** 2],
          [1, 2 * p * (1 - p)],
          [2, p * p],
        ] as const) {
          if (decide(n + 2, c + j, pairs).stop) mean += pr * q * estimate(n + 2, c + j);
          else next.set(c + j, (next.get(c + j) ?? 0) + pr * q);
        }
      }
      live = next;
    }
    return mean;
  }

  it('the recorded quick success makes raw counts biased, so no rate is given inside a step', () => {
    // What the old code effectively did: the raw share of the trials recorded at the cut.
    const raw = cutDuringPair(0.3, 1, (n, c) => c / n);
    assert.ok(raw > 0.3 + 0.05, `raw ${raw}`);
    assert.throws(() => gms.estimateAnywhere(3, 1), CutInsideStepError);
    const rate = estimateRate({
      config: 'm',
      task: 't',
      n: 3,
      c: 1,
      errors: 0,
      infra: 0,
      ungraded: 0,
      adaptive: pairs,
    });
    assert.equal(rate.method, 'cut-inside-step');
    assert.ok(Number.isNaN(rate.rate));
  });

  it('a cut between steps keeps the exact GMS estimate unbiased', () => {
    for (const cut of [1, 2, 3, 4]) {
      for (const p of [0.1, 0.3, 0.5, 0.8]) {
        // Cut when pair `cut` has not started: every path either stopped or is at n = 2 * cut.
        let live = new Map<number, number>([[0, 1]]);
        let mean = 0;
        for (let pair = 0; pair < cut; pair++) {
          const next = new Map<number, number>();
          for (const [c, pr] of live) {
            for (const [j, q] of [
              [0, (1 - p) ** 2],
              [1, 2 * p * (1 - p)],
              [2, p * p],
            ] as const) {
              if (decide(2 * pair + 2, c + j, pairs).stop) mean += pr * q * gms.estimate(2 * pair + 2, c + j);
              else next.set(c + j, (next.get(c + j) ?? 0) + pr * q);
            }
          }
          live = next;
        }
        for (const [c, pr] of live) mean += pr * gms.estimateAnywhere(2 * cut, c);
        assert.ok(Math.abs(mean - p) < 1e-12, `cut after ${cut} pairs, p ${p}: ${mean}`);
      }
    }
  });
});
