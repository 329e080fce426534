import { isPassingReward } from '../trial/accounting.js';
import { configStats, taskRates, type ConfigStats } from '../report/aggregate.js';
import { countByTask } from '../records/counts.js';
import { loadRecordSet } from '../records/load.js';
import type { StatsRecord } from '../records/record.js';

/**
 * The viewer's figures, computed by the functions `stats` and `report` use (so the numbers are
 * theirs): a job's per-configuration summary, and the task x configuration grid of rates.
 */

export interface JobConfigFigures {
  config: string;
  tasks: number;
  /** Graded trials (the ones rates count). */
  graded: number;
  attempted: number;
  pass1: { mean: number; ciLo: number | null; ciHi: number | null };
  /** Graded / attempted. */
  coverage: number;
  /** Sum of the trials' recorded cost; null when no trial recorded one. */
  costUsd: number | null;
  /** pass@k as `stats` gives it, each with its method and the prior it used. */
  passAtK: ConfigStats['passAtK'];
  passAtKPrior: ConfigStats['passAtKPrior'];
}

/** One job's (or trial folder's) figures per configuration, read as `stats` reads it; a source that cannot be read says why. */
export async function jobFigures(dir: string): Promise<{ configs: JobConfigFigures[]; error: string | null }> {
  let records: StatsRecord[];
  try {
    records = (await loadRecordSet([dir])).records;
  } catch (err) {
    return { configs: [], error: (err as Error).message };
  }
  return {
    error: null,
    configs: configStats(records).map((c) => {
      const costs = records.filter((r) => r.config === c.config && r.costUsd !== null).map((r) => r.costUsd!);
      return {
        config: c.config,
        tasks: c.tasks,
        graded: c.trials,
        attempted: c.coverage.attempted,
        pass1: { mean: c.pass1.mean, ciLo: c.pass1.ciLo, ciHi: c.pass1.ciHi },
        coverage: c.coverage.fraction,
        costUsd: costs.length ? costs.reduce((a, b) => a + b, 0) : null,
        passAtK: c.passAtK,
        passAtKPrior: c.passAtKPrior,
      };
    }),
  };
}

export interface GridCell {
  task: string;
  config: string;
  /** Graded trials and successes; rate c/n (null with none graded). */
  n: number;
  c: number;
  rate: number | null;
  /** Trials with no reward, and trials in flight. */
  errors: number;
  running: number;
}

/** One trial as the grid counts it (Catalog.outcomes gives these). */
export interface TrialOutcome {
  job: string;
  task: string;
  config: string;
  status: string;
  reward: number | null;
  error_class: string | null;
}

/** The task x configuration grid over the trials a filter leaves: each cell its rate, counted as `stats` counts. */

export function grid(rows: TrialOutcome[]): { tasks: string[]; configs: string[]; cells: GridCell[] } {
  const records: StatsRecord[] = rows
    .filter((r) => r.status !== 'running' && r.status !== 'not_run')
    .map((r, i) => ({
      trialId: String(i),
      job: r.job,
      task: r.task,
      config: r.config,
      reward: r.reward,
      passed: isPassingReward(r.reward),
      errorClass: r.error_class,
      durationMs: 0,
      outputTokens: null,
      costUsd: null,
      testsPassed: 0,
      testsFailed: 0,
    }));
  const counts = countByTask(records);
  const rates = new Map(taskRates(counts).map((t) => [`${t.config}\u0000${t.task}`, t.rate]));
  const cells = new Map<string, GridCell>();
  const cell = (task: string, config: string): GridCell => {
    const key = `${config}\u0000${task}`;
    let c = cells.get(key);
    if (!c) cells.set(key, (c = { task, config, n: 0, c: 0, rate: null, errors: 0, running: 0 }));
    return c;
  };
  for (const t of counts)
    Object.assign(cell(t.task, t.config), {
      n: t.n,
      c: t.c,
      errors: t.errors,
      rate: rates.get(`${t.config}\u0000${t.task}`) ?? null,
    });
  for (const r of rows) if (r.status === 'running') cell(r.task, r.config).running += 1;
  const all = [...cells.values()];
  return {
    tasks: [...new Set(all.map((c) => c.task))].sort(),
    configs: [...new Set(all.map((c) => c.config))].sort(),
    cells: all,
  };
}
