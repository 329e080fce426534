import { isPassingReward } from '../trial/accounting.js';
import { z } from 'zod';
import { stat } from '../util/json.js';
import { bandProbability } from '../stats/band.js';
import { jeffreys } from '../stats/intervals.js';

/** One grade a server gave during training. */
export interface ServedGrade {
  task: string;
  /** The policy label the trainer sent (a checkpoint, a step). */
  policy: string;
  reward: number | null;
  /** ISO time the grade was given; grades are taken most recent first. */
  at: string;
}

export const DriftRowSchema = z.strictObject({
  policy: z.string(),
  task: z.string(),
  /** Graded rollouts counted (the most recent `recent` of them). */
  n: z.number().int(),
  c: z.number().int(),
  rate: stat(),
  interval: z.tuple([stat(), stat()]),
  bandProbability: stat(),
  verdict: z.enum(['in_band', 'always_solved', 'never_solved', 'above_band', 'below_band', 'too_few']),
  selected: z.boolean(),
});
export type DriftRow = z.infer<typeof DriftRowSchema>;

/**
 * Drift while training: per policy label and task, the success rate over its most recent graded
 * rollouts, and whether the task has left the band the selection chose it for (always solved,
 * never solved, or its rate outside the band with the band unlikely, P(band) < 0.1). Grades
 * without a reward (infrastructure) are not counted. Pure.
 */
export function driftReport(
  grades: ServedGrade[],
  options: { band: [number, number]; recent: number; minTrials: number; selected?: Set<string> },
): DriftRow[] {
  const groups = new Map<string, ServedGrade[]>();
  for (const g of grades) {
    if (g.reward === null) continue;
    const key = `${g.policy}\u0000${g.task}`;
    const list = groups.get(key);
    if (list) list.push(g);
    else groups.set(key, [g]);
  }
  const rows: DriftRow[] = [];
  for (const list of groups.values()) {
    const recent = [...list].sort((a, b) => (a.at < b.at ? 1 : -1)).slice(0, options.recent);
    const n = recent.length;
    const c = recent.filter((g) => isPassingReward(g.reward)).length;
    const rate = c / n;
    const j = jeffreys(c, n);
    const p = bandProbability(c, n, options.band[0], options.band[1]);
    let verdict: DriftRow['verdict'] = 'in_band';
    if (n < options.minTrials) verdict = 'too_few';
    else if (c === n) verdict = 'always_solved';
    else if (c === 0) verdict = 'never_solved';
    else if (p < 0.1)
      verdict = rate > options.band[1] ? 'above_band' : rate < options.band[0] ? 'below_band' : 'in_band';
    rows.push({
      policy: recent[0]!.policy,
      task: recent[0]!.task,
      n,
      c,
      rate,
      interval: [j.lo, j.hi],
      bandProbability: p,
      verdict,
      selected: options.selected?.has(recent[0]!.task) ?? false,
    });
  }
  return rows.sort((a, b) => (a.policy === b.policy ? (a.task < b.task ? -1 : 1) : a.policy < b.policy ? -1 : 1));
}
