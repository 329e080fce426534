/**
 * Adaptive sampling against fixed k = 16, cold and with a prior from an earlier measurement of
 * the same tasks, on synthetic pools of 1,004 tasks whose true rates follow a U-shaped mix (most
 * tasks nearly always or nearly never solved, a minority in between). Each task's new outcome
 * sequence is fed to both fixed k = 16 and the adaptive rule, so a decision agrees when the
 * adaptive rule, stopping early, says what k = 16 would have said. Scenarios for the prior:
 *   none          the earlier measurement (16 trials) is of the same rates
 *   shift         every task's rate moved by the same amount (+1 on the log-odds scale)
 *   third moved   a third of the tasks moved across the band (rate p became 1 - p)
 *
 *   node dist/bench/adaptive.js [seeds]
 *
 * Targets: cold <= 0.6x, undrifted prior <= 0.35x, a third moved <= 0.5x the trials of
 * fixed k = 16, each at >= 99% of its band decisions (mean over seeds; the worst seed printed),
 * and the GMS estimate unbiased within simulation error.
 */
import { DEFAULT_ADAPTIVE_RULE, GmsEstimator, informedPrior, runAdaptive, type AdaptiveRule } from '../src/stats/adaptive.js';
import { inBand } from '../src/stats/band.js';
import { seededUniform, type Uniform } from '../src/stats/random.js';

const SEEDS = Number(process.argv[2] ?? 20);
const TASKS = 1004;
/** What `run --adaptive` uses by default: Bayes-optimal stopping, one trial at a time. */
const rule: AdaptiveRule = { ...DEFAULT_ADAPTIVE_RULE, method: 'optimal', step: 1, risk: 0.009 };
/** The rule of earlier releases, for comparison: predictive curtailment in pairs. */
const legacy: AdaptiveRule = DEFAULT_ADAPTIVE_RULE;

/** Beta(a, b) by the ratio of gammas (Marsaglia-Tsang), enough for a synthetic pool. */
function gamma(shape: number, r: Uniform): number {
  if (shape < 1) return gamma(shape + 1, r) * r() ** (1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      const u1 = r();
      const u2 = r();
      x = Math.sqrt(-2 * Math.log(u1 || 1e-300)) * Math.cos(2 * Math.PI * u2);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const w = r();
    if (w < 1 - 0.0331 * x ** 4 || Math.log(w) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}
const beta = (a: number, b: number, r: Uniform): number => {
  const x = gamma(a, r);
  return x / (x + gamma(b, r));
};

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

type Scenario = 'cold (earlier)' | 'cold' | 'none' | 'shift' | 'third moved';
const SCENARIOS: Scenario[] = ['cold (earlier)', 'cold', 'none', 'shift', 'third moved'];
const TARGET: Record<Scenario, number> = { 'cold (earlier)': Number.NaN, cold: 0.6, none: 0.35, shift: Number.NaN, 'third moved': 0.5 };

interface SeedResult {
  ratio: number;
  agreement: number;
  /** Sum and sum of squares of (GMS estimate - true p), and how many. */
  err: number;
  err2: number;
  n: number;
}

function runSeed(seed: number, scenario: Scenario): SeedResult {
  const u = seededUniform(seed * 7919 + SCENARIOS.indexOf(scenario));
  let fixed = 0;
  let adaptive = 0;
  let agree = 0;
  let err = 0;
  let err2 = 0;
  for (let i = 0; i < TASKS; i++) {
    const old = trueRate(u);
    const earlierC = Array.from({ length: 16 }, () => u() < old).filter(Boolean).length;
    const p = scenario === 'shift' ? expit(logit(clip(old)) + 1) : scenario === 'third moved' && u() < 1 / 3 ? 1 - old : old;
    const taskRule: AdaptiveRule = scenario === 'cold (earlier)' ? legacy : scenario === 'cold' ? rule : { ...rule, informed: informedPrior({ n: 16, c: earlierC }, { maxTrials: 16 }) };
    const outcomes = Array.from({ length: rule.kMax }, () => u() < p);
    const fixedIn = inBand(outcomes.filter(Boolean).length / rule.kMax, rule.lo, rule.hi);
    const a = runAdaptive(outcomes, taskRule);
    fixed += rule.kMax;
    adaptive += a.n;
    if (a.inBand === fixedIn) agree += 1;
    // The estimator is built for this task's own rule (its own prior): one per task.
    const e = new GmsEstimator(taskRule).estimate(a.n, a.c) - p;
    err += e;
    err2 += e * e;
  }
  return { ratio: adaptive / fixed, agreement: agree / TASKS, err, err2, n: TASKS };
}

const pad = (s: string, n = 14): string => s.padStart(n);
console.log(`synthetic pools: ${TASKS} tasks each, U-shaped true rates, ${SEEDS} seeds; band ${rule.lo}..${rule.hi}, k ${rule.kMax}`);
console.log(`rule: Bayes-optimal stopping, one trial at a time, risk ${rule.risk} (a differing decision costs ${Math.round(1 / rule.risk)} trials); 'cold (earlier)': curtailment in pairs, risk ${legacy.risk}`);
console.log('prior: the 16 earlier trials, counted as at most 16, mixed with Jeffreys Beta(1/2, 1/2): 0.97 / 0.03 for a one-sided record (<= 1 success or failure), else 0.9 / 0.1');
console.log(`${'scenario'.padEnd(14)}${pad('trials/fixed')}${pad('worst seed')}${pad('agreement %')}${pad('worst seed %')}${pad('mean bias')}${pad('bias / SE')}${pad('target')}`);
for (const scenario of SCENARIOS) {
  const results = Array.from({ length: SEEDS }, (_, s) => runSeed(s + 1, scenario));
  const mean = (f: (r: SeedResult) => number): number => results.reduce((a, r) => a + f(r), 0) / results.length;
  const n = results.reduce((a, r) => a + r.n, 0);
  const bias = results.reduce((a, r) => a + r.err, 0) / n;
  const sd = Math.sqrt(results.reduce((a, r) => a + r.err2, 0) / n - bias * bias);
  const ratio = mean((r) => r.ratio);
  const agreement = mean((r) => r.agreement);
  const target = TARGET[scenario];
  const verdict = Number.isNaN(target) ? '(none)' : `<= ${target}: ${ratio <= target && agreement >= 0.99 ? 'met' : 'NOT met'}`;
  console.log(
    `${scenario.padEnd(14)}${pad(ratio.toFixed(3))}${pad(Math.max(...results.map((r) => r.ratio)).toFixed(3))}${pad((100 * agreement).toFixed(2))}${pad((100 * Math.min(...results.map((r) => r.agreement))).toFixed(2))}${pad(bias.toFixed(5))}${pad((bias / (sd / Math.sqrt(n))).toFixed(2))}  ${verdict}`,
  );
}
console.log('bias: mean of (GMS estimate - true p) over every task of every seed; |bias / SE| < 2 is unbiased within simulation error.');
