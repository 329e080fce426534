/**
 * Adaptive sampling against fixed k = 16, cold and with a prior from an earlier measurement of
 * the same tasks, on synthetic pools of 1,004 tasks whose true rates follow a U-shaped mix (most
 * tasks nearly always or nearly never solved, a minority in between). Each task's new outcome
 * sequence is fed to both fixed k = 16 and the adaptive rule, so a decision agrees when the
 * adaptive rule, stopping early, says what k = 16 would have said. Scenarios for the prior (each
 * moved task gets a new rate drawn uniformly from the range named):
 *   none          the earlier measurement (16 trials) is of the same rates
 *   shift         every task's rate moved by the same amount (+1 on the log-odds scale)
 *   into band     a third of the tasks outside the band moved into it (0.25..0.75)
 *   out of band   a third of the tasks inside the band moved out of it (0.02..0.2 or 0.8..0.98)
 *   along band    a third of the in-band tasks moved to near an edge (0.26..0.34 or 0.66..0.74)
 *   crossed edge  a third of all tasks moved just across the nearer edge (0.15..0.35 or 0.65..0.85)
 * Each informed scenario runs under the guarded, yielding prior (what jobs use) and under the
 * unguarded prior of earlier releases. Besides the mean, the worst task class: tasks grouped by
 * earlier record (0..16 successes) and new rate (tenths), the class with the lowest agreement
 * among those of at least 50 tasks. Then the exact worst case, no simulation: for every earlier
 * record, the lowest agreement over every new rate 0.005..0.995.
 *
 *   node dist/bench/adaptive.js [seeds]
 *
 * Targets: cold <= 0.6x, undrifted prior <= 0.35x the trials of fixed k = 16; the exact worst case
 * >= 97% for every earlier record; the GMS estimate unbiased within simulation error.
 */
import {
  DEFAULT_ADAPTIVE_RULE,
  GmsEstimator,
  informedPrior,
  runAdaptive,
  type AdaptiveRule,
} from '../src/stats/adaptive.js';
import { inBand } from '../src/stats/band.js';
import { betaDraw, seededUniform, type Uniform } from '../src/stats/random.js';
import { guardedPrior, worstAgreement } from '../src/stats/adaptive-risk.js';

const SEEDS = Number(process.argv[2] ?? 20);
const TASKS = 1004;
/** What `run --adaptive` uses by default: Bayes-optimal stopping, one trial at a time. */
const rule: AdaptiveRule = { ...DEFAULT_ADAPTIVE_RULE, method: 'optimal', step: 1, risk: 0.009, yields: true };
/** The rule of earlier releases, for comparison: predictive curtailment in pairs. */
const legacy: AdaptiveRule = DEFAULT_ADAPTIVE_RULE;

const beta = betaDraw;

/** U-shaped: 40% near 0, 35% near 1, 25% spread over the middle. */
function trueRate(r: Uniform): number {
  const m = r();
  if (m < 0.4) return beta(0.3, 4, r);
  if (m < 0.75) return beta(4, 0.3, r);
  return beta(2, 2, r);
}

const logit = (p: number): number => Math.log(p / (1 - p));
const expit = (x: number): number => 1 / (1 + Math.exp(-x));
const clip = (p: number): number => Math.min(1 - 1e-9, Math.max(1e-9, p));

type Drift = 'none' | 'shift' | 'into band' | 'out of band' | 'along band' | 'crossed edge';
const DRIFTS: Drift[] = ['none', 'shift', 'into band', 'out of band', 'along band', 'crossed edge'];
type Scenario = { name: string; prior: 'cold (earlier)' | 'cold' | 'guarded' | 'unguarded'; drift: Drift };
const SCENARIOS: Scenario[] = [
  { name: 'cold (earlier)', prior: 'cold (earlier)', drift: 'none' },
  { name: 'cold', prior: 'cold', drift: 'none' },
  ...DRIFTS.flatMap((drift) =>
    (['guarded', 'unguarded'] as const).map((prior) => ({ name: `${prior}: ${drift}`, prior, drift })),
  ),
];
const TARGET: Record<string, number> = { cold: 0.6, 'guarded: none': 0.35 };
const inside = (p: number): boolean => inBand(p, rule.lo, rule.hi);
const between = (lo: number, hi: number, u: Uniform): number => lo + (hi - lo) * u();

/** The task's new rate under a drift (u draws whether it moved, and where to). */
function drifted(old: number, drift: Drift, u: Uniform): number {
  const moves = u() < 1 / 3;
  switch (drift) {
    case 'none':
      return old;
    case 'shift':
      return expit(logit(clip(old)) + 1);
    case 'into band':
      return moves && !inside(old) ? between(0.25, 0.75, u) : old;
    case 'out of band':
      return moves && inside(old) ? (u() < 0.5 ? between(0.02, 0.2, u) : between(0.8, 0.98, u)) : old;
    case 'along band':
      return moves && inside(old) ? (u() < 0.5 ? between(0.26, 0.34, u) : between(0.66, 0.74, u)) : old;
    case 'crossed edge':
      if (!moves) return old;
      return old < 0.5
        ? inside(old)
          ? between(0.15, 0.25, u)
          : between(0.25, 0.35, u)
        : inside(old)
          ? between(0.75, 0.85, u)
          : between(0.65, 0.75, u);
  }
}

interface SeedResult {
  ratio: number;
  agreement: number;
  /** Sum and sum of squares of (GMS estimate - true p), and how many. */
  err: number;
  err2: number;
  n: number;
  /** Per class (earlier successes, new rate's tenth): tasks and agreeing decisions. */
  classes: Map<string, { n: number; agree: number }>;
}

const estimators = new Map<string, GmsEstimator>();
function estimatorOf(r: AdaptiveRule): GmsEstimator {
  const key = JSON.stringify(r);
  let g = estimators.get(key);
  if (!g) estimators.set(key, (g = new GmsEstimator(r)));
  return g;
}

function ruleOf(scenario: Scenario, earlierC: number): AdaptiveRule {
  if (scenario.prior === 'cold (earlier)') return legacy;
  if (scenario.prior === 'cold') return rule;
  if (scenario.prior === 'unguarded')
    return { ...rule, yields: false, informed: informedPrior({ n: 16, c: earlierC }, { maxTrials: 16 }) };
  return { ...rule, informed: guardedPrior({ n: 16, c: earlierC }, rule, { maxTrials: 16 }) };
}

function runSeed(seed: number, scenario: Scenario): SeedResult {
  const u = seededUniform(seed * 7919 + SCENARIOS.indexOf(scenario));
  let fixed = 0;
  let adaptive = 0;
  let agree = 0;
  let err = 0;
  let err2 = 0;
  const classes = new Map<string, { n: number; agree: number }>();
  for (let i = 0; i < TASKS; i++) {
    const old = trueRate(u);
    const earlierC = Array.from({ length: 16 }, () => u() < old).filter(Boolean).length;
    const p = drifted(old, scenario.drift, u);
    const taskRule = ruleOf(scenario, earlierC);
    const outcomes = Array.from({ length: rule.kMax }, () => u() < p);
    const fixedIn = inBand(outcomes.filter(Boolean).length / rule.kMax, rule.lo, rule.hi);
    const a = runAdaptive(outcomes, taskRule);
    fixed += rule.kMax;
    adaptive += a.n;
    const ok = a.inBand === fixedIn;
    if (ok) agree += 1;
    const cls = `${earlierC}/16 -> ${Math.min(9, Math.floor(p * 10)) / 10}`;
    const k = classes.get(cls) ?? { n: 0, agree: 0 };
    classes.set(cls, { n: k.n + 1, agree: k.agree + (ok ? 1 : 0) });
    // The estimator is built for this task's own rule (its own prior).
    const e = estimatorOf(taskRule).estimate(a.n, a.c) - p;
    err += e;
    err2 += e * e;
  }
  return { ratio: adaptive / fixed, agreement: agree / TASKS, err, err2, n: TASKS, classes };
}

const pad = (s: string, n = 14): string => s.padStart(n);
console.log(
  `synthetic pools: ${TASKS} tasks each, U-shaped true rates, ${SEEDS} seeds; band ${rule.lo}..${rule.hi}, k ${rule.kMax}`,
);
console.log(
  `rule: Bayes-optimal stopping, one trial at a time, risk ${rule.risk} (a differing decision costs ${Math.round(1 / rule.risk)} trials); 'cold (earlier)': curtailment in pairs, risk ${legacy.risk}`,
);
console.log(
  'prior: the 16 earlier trials, counted as at most 16, mixed with Jeffreys Beta(1/2, 1/2): 0.97 / 0.03 for a one-sided record (<= 1 success or failure), else 0.9 / 0.1',
);
console.log(
  `${'scenario'.padEnd(26)}${pad('trials/fixed')}${pad('agreement %')}${pad('worst seed %')}${pad('worst class %', 15)}  ${'worst class (earlier -> new p)'.padEnd(31)}${pad('bias / SE', 10)}  target`,
);
for (const scenario of SCENARIOS) {
  const results = Array.from({ length: SEEDS }, (_, s) => runSeed(s + 1, scenario));
  const mean = (f: (r: SeedResult) => number): number => results.reduce((a, r) => a + f(r), 0) / results.length;
  const n = results.reduce((a, r) => a + r.n, 0);
  const bias = results.reduce((a, r) => a + r.err, 0) / n;
  const sd = Math.sqrt(results.reduce((a, r) => a + r.err2, 0) / n - bias * bias);
  const ratio = mean((r) => r.ratio);
  const agreement = mean((r) => r.agreement);
  const classes = new Map<string, { n: number; agree: number }>();
  for (const r of results)
    for (const [k, v] of r.classes)
      classes.set(k, { n: (classes.get(k)?.n ?? 0) + v.n, agree: (classes.get(k)?.agree ?? 0) + v.agree });
  const worst = [...classes.entries()]
    .filter(([, v]) => v.n >= 50)
    .sort((x, y) => x[1].agree / x[1].n - y[1].agree / y[1].n)[0]!;
  const target = TARGET[scenario.name];
  const verdict = target === undefined ? '' : `<= ${target}: ${ratio <= target ? 'met' : 'NOT met'}`;
  console.log(
    `${scenario.name.padEnd(26)}${pad(ratio.toFixed(3))}${pad((100 * agreement).toFixed(2))}${pad((100 * Math.min(...results.map((r) => r.agreement))).toFixed(2))}${pad(((100 * worst[1].agree) / worst[1].n).toFixed(1), 15)}  ${`${worst[0]} (${worst[1].n} tasks)`.padEnd(31)}${pad((bias / (sd / Math.sqrt(n))).toFixed(2), 10)}  ${verdict}`,
  );
}
console.log(
  'bias: mean of (GMS estimate - true p) over every task of every seed; |bias / SE| < 2 is unbiased within simulation error.',
);
console.log('');
console.log('exact worst case over every new rate 0.005..0.995, by earlier record (agreement with fixed k = 16, %):');
console.log(`${'earlier'.padEnd(9)}${pad('guarded', 10)}${pad('weight', 8)}${pad('unguarded', 11)}${pad('at p', 7)}`);
const coldWorst = worstAgreement(rule);
let floorMet = true;
for (let c0 = 0; c0 <= 16; c0++) {
  const informed = guardedPrior({ n: 16, c: c0 }, rule, { maxTrials: 16 });
  const g = worstAgreement({ ...rule, informed });
  const un = worstAgreement({ ...rule, yields: false, informed: informedPrior({ n: 16, c: c0 }, { maxTrials: 16 }) });
  if (g.agreement < 0.97) floorMet = false;
  console.log(
    `${`${c0}/16`.padEnd(9)}${pad((100 * g.agreement).toFixed(2), 10)}${pad(informed ? informed.weight.toFixed(2) : 'cold', 8)}${pad((100 * un.agreement).toFixed(2), 11)}${pad(un.p.toFixed(3), 7)}`,
  );
}
console.log(
  `cold: ${(100 * coldWorst.agreement).toFixed(2)}% at p = ${coldWorst.p}; guarded worst case >= 97% for every earlier record: ${floorMet ? 'met' : 'NOT met'}`,
);
