import type { CheckReport } from '../check/schema.js';
import { inBand } from '../stats/band.js';
import { isNearMiss } from '../stats/efficiency.js';
import { jaccard, sameModelCeiling } from '../stats/overlap.js';
import { compareRates, pairedMethodNote, type PairedComparison } from '../stats/paired.js';
import { median } from '../stats/summary.js';
import { configStats, taskRates, type ConfigStats, type TaskRate } from './aggregate.js';
import { countByTask } from '../records/counts.js';
import type { SelectManifest } from './outputs.js';
import type { StatsRecord } from '../records/record.js';
import type { TrajectorySummary } from './trajectory.js';

/** What the report needs of one trial beyond its stats record: tests, tokens, trajectory. */
export interface TrialDetail {
  trialId: string;
  /** The id of the trial's job (trial ids are unique only within a job); '' when not known. */
  job?: string;
  config: string;
  task: string;
  passed: boolean;
  graded: boolean;
  errorClass: string | null;
  inputTokens: number | null;
  outputTokens: number | null;
  failedTests: string[];
  testsPassed: number;
  testsFailed: number;
  /** Reward-consistency findings (verifier/consistency.ts): the reward stands, flagged. */
  findings: Array<{ code: string; message: string }>;
  reward: number | null;
  trajectory: TrajectorySummary | null;
}

/**
 * A synth job's funnel as the report shows it (`report --synth`). The contract is synth's
 * (SynthReport in synth/schema.ts, `synth --json`); this is the part the page reads, declared
 * here so the report stays below synth: the CLI reads the funnel with synth's readSynthFunnel and
 * hands it over whole (report.json keeps all of it), and the compiler checks it against this.
 */
export interface SynthFunnelView {
  candidates: number;
  admitted: number;
  rejected: number;
  unfinished: number;
  endToEndYield: number | null;
  outDir: string;
  stages: Array<{
    stage: string;
    candidates: number;
    passed: number;
    yield: number | null;
    runs: number;
    wallMs: number;
    timeShare: number;
  }>;
  repairs: Array<{ part: string; attempts: number; candidates: number; admitted: number }>;
  rejections: Record<string, number>;
  testsPerAdmitted: { mean: number | null; min: number | null; max: number | null };
  tokens: { prompt: number; completion: number; calls: number; malformedReplies: number };
  costUsd: number | null;
}

export interface ReportInput {
  sources: string[];
  /** The jobs the records came from, with each one's trial count (see loadRecordSet). */
  jobs?: Array<{ id: string; name: string; trials: number }>;
  records: StatsRecord[];
  details: TrialDetail[];
  band: [number, number];
  /** Tasks with fewer graded trials stay out of band sets (as `overlap --min-trials`). */
  minTrials: number;
  check?: CheckReport | null;
  selection?: SelectManifest | null;
  /** A synth job's funnel (report --synth). */
  synth?: SynthFunnelView | null;
}

const BINS = 10;

type RatesOf = (config: string) => TaskRate[];

/** Per configuration: how many tasks have each success rate (10 bins), and how many are in the band. */
function histogramOf(names: string[], ratesOf: RatesOf, band: [number, number]) {
  return names.map((config) => {
    const mine = ratesOf(config);
    const bins = Array.from({ length: BINS }, (_, i) => ({ lo: i / BINS, hi: (i + 1) / BINS, count: 0 }));
    for (const t of mine) bins[Math.min(BINS - 1, Math.floor(t.rate * BINS))]!.count += 1;
    const inside = mine.filter((t) => inBand(t.rate, band[0], band[1])).length;
    return { config, bins, inBand: inside, outOfBand: mine.length - inside };
  });
}

/**
 * Each pair of configurations compared on their common tasks: compareRates, the function `compare`
 * calls, with the same defaults, so report.json's figures are `compare --json`'s.
 */
function pairedOf(names: string[], ratesOf: RatesOf) {
  const paired: Array<{
    a: string;
    b: string;
    tasks: number;
    meanDiff: number;
    ciLo: number;
    ciHi: number;
    p: number;
    pMethod: PairedComparison['pMethod'];
    significant: boolean;
    method: string;
  }> = [];
  for (let i = 0; i < names.length; i++) {
    for (let j = i + 1; j < names.length; j++) {
      let r: PairedComparison;
      try {
        r = compareRates(ratesOf(names[i]!), ratesOf(names[j]!)).result;
      } catch (err) {
        if (err instanceof RangeError) continue; // fewer than 2 common tasks: no comparison
        throw err;
      }
      paired.push({
        a: names[i]!,
        b: names[j]!,
        tasks: r.t,
        meanDiff: r.meanDiff,
        ciLo: r.ciLo,
        ciHi: r.ciHi,
        p: r.p,
        pMethod: r.pMethod,
        significant: r.significant,
        method: pairedMethodNote(r),
      });
    }
  }
  return paired;
}

/** The configurations' band sets: sizes, Jaccard overlap, and each one's same-model ceiling. */
function overlapOf(names: string[], ratesOf: RatesOf, minTrials: number, band: [number, number]) {
  const sets = names.map(
    (m) =>
      new Set(
        ratesOf(m)
          .filter((t) => t.n >= minTrials && inBand(t.rate, band[0], band[1]))
          .map((t) => t.task),
      ),
  );
  return {
    models: names,
    minTrials,
    sizes: sets.map((s) => s.size),
    /** Per configuration: tasks with enough graded trials to be in a band set at all. */
    measured: names.map((m) => ratesOf(m).filter((t) => t.n >= minTrials).length),
    jaccard: names.map((_, i) => names.map((__, j) => jaccard(sets[i]!, sets[j]!))),
    sameModelCeiling: names.map((m) =>
      sameModelCeiling(
        ratesOf(m).filter((t) => t.n >= minTrials),
        band,
      ),
    ),
  };
}

/** Per configuration, how its agent behaved, from the trajectories. */
function behaviourOf(names: string[], details: TrialDetail[]) {
  return names.map((config) => {
    const mine = details.filter((d) => d.config === config);
    const traced = mine.filter((d) => d.trajectory);
    const t = (d: TrialDetail): TrajectorySummary => d.trajectory!;
    const noActionTokens = traced.flatMap((d) => t(d).noActionTokens);
    // Turns of successes against failures of the same task: the mean difference per task, then the median over tasks.
    const byTask = new Map<string, { s: number[]; f: number[] }>();
    for (const d of traced.filter((x) => x.graded)) {
      const e = byTask.get(d.task) ?? { s: [], f: [] };
      (d.passed ? e.s : e.f).push(t(d).turns);
      byTask.set(d.task, e);
    }
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    const diffs = [...byTask.values()].filter((e) => e.s.length && e.f.length).map((e) => mean(e.s) - mean(e.f));
    const withTokens = mine.filter((d) => d.inputTokens !== null && d.outputTokens !== null);
    const output = withTokens.reduce((a, d) => a + d.outputTokens!, 0);
    return {
      config,
      trials: mine.length,
      withTrajectory: traced.length,
      quitEarly: traced.filter((d) => t(d).quitEarly).length,
      turns: traced.reduce((a, d) => a + t(d).turns, 0),
      noActionTurns: traced.reduce((a, d) => a + t(d).noActionTurns, 0),
      noActionTokensMedian: noActionTokens.length ? median(noActionTokens) : null,
      tasksWithBoth: diffs.length,
      turnsSuccessMinusFailure: diffs.length ? median(diffs) : null,
      inputOutputRatio: output > 0 ? withTokens.reduce((a, d) => a + d.inputTokens!, 0) / output : null,
    };
  });
}

/** Graded failures that passed most of their tests. */
function nearMissesOf(details: TrialDetail[], jobs: ReportInput['jobs']) {
  const jobName = new Map((jobs ?? []).map((j) => [j.id, j.name]));
  return details
    .filter(
      (d) =>
        d.graded &&
        isNearMiss({
          passed: d.passed,
          durationMs: 0,
          outputTokens: null,
          costUsd: null,
          testsPassed: d.testsPassed,
          testsFailed: d.testsFailed,
        }),
    )
    .map((d) => ({
      trialId: d.trialId,
      job: jobName.get(d.job ?? '') ?? d.job ?? '',
      config: d.config,
      task: d.task,
      failing: d.failedTests,
      testsPassed: d.testsPassed,
    }));
}

/** The tests that failed most often in graded failures (at most 30). */
function failingTestsOf(details: TrialDetail[]) {
  const failing = new Map<string, { failures: number; tasks: Set<string>; configs: Set<string> }>();
  for (const d of details.filter((x) => x.graded && !x.passed)) {
    for (const name of d.failedTests) {
      const key = `${d.task} :: ${name}`;
      const e = failing.get(key) ?? { failures: 0, tasks: new Set<string>(), configs: new Set<string>() };
      e.failures += 1;
      e.tasks.add(d.task);
      e.configs.add(d.config);
      failing.set(key, e);
    }
  }
  return [...failing.entries()]
    .map(([test, e]) => ({ test, failures: e.failures, configs: [...e.configs].sort() }))
    .sort((a, b) => b.failures - a.failures || a.test.localeCompare(b.test))
    .slice(0, 30);
}

/** Every trial whose reward disagrees with its own evidence, for a reader to look at. */
function inconsistentOf(details: TrialDetail[]) {
  return details
    .filter((d) => d.findings.length > 0)
    .map((d) => ({ trialId: d.trialId, config: d.config, task: d.task, reward: d.reward, findings: d.findings }))
    .sort(
      (a, b) => a.config.localeCompare(b.config) || a.task.localeCompare(b.task) || a.trialId.localeCompare(b.trialId),
    );
}

/**
 * Every figure of the report, computed from the same records `stats` reads with the same
 * functions (so the numbers equal `stats --json`, `compare`, `overlap`): pure, no I/O. The page
 * renders this; report.json beside it holds it as is.
 */
export function reportData(input: ReportInput) {
  const { records, details, band } = input;
  const configs: ConfigStats[] = configStats(records);
  const names = configs.map((c) => c.config);
  const rates: TaskRate[] = taskRates(countByTask(records), band);
  const ratesOf = (config: string): TaskRate[] => rates.filter((r) => r.config === config && r.n > 0);
  const histogram = histogramOf(names, ratesOf, band);
  const paired = pairedOf(names, ratesOf);
  const runtime = configs.map((c) => ({
    config: c.config,
    pass1: c.pass1.mean,
    hours: records.filter((r) => r.config === c.config).reduce((a, r) => a + r.durationMs, 0) / 3_600_000,
    ...c.efficiency,
  }));

  const overlap = overlapOf(names, ratesOf, input.minTrials, band);
  const behaviour = behaviourOf(names, details);
  const nearMisses = nearMissesOf(details, input.jobs);
  const failingTests = failingTestsOf(details);
  const inconsistent = inconsistentOf(details);

  const check = input.check
    ? {
        total: input.check.summary.total,
        admissible: input.check.summary.admissible,
        rejected: input.check.summary.rejected,
        yield: input.check.summary.yield,
        reasons: input.check.summary.reasons,
      }
    : null;

  const jobs = (input.jobs ?? []).map((j) => ({ name: j.name, trials: j.trials }));
  return {
    sources: input.sources,
    jobs,
    band,
    trials: records.length,
    configs,
    tasks: rates,
    histogram,
    paired,
    runtime,
    overlap,
    behaviour,
    nearMisses,
    failingTests,
    inconsistent,
    check,
    selection: input.selection ?? null,
    synth: input.synth ?? null,
  };
}

export type ReportData = ReturnType<typeof reportData>;
