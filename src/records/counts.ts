import { z } from 'zod';
import type { AdaptiveRule } from '../stats/adaptive.js';
import { accountingOf } from '../trial/accounting.js';
import type { StatsRecord } from './record.js';

/**
 * One configuration's counts on one task. n counts graded trials only (see trial/accounting.ts);
 * trials without a reward are counted apart, by why: the infrastructure or the verifier.
 */
export const AdaptiveRuleSchema = z.strictObject({
  lo: z.number(),
  hi: z.number(),
  kMax: z.number().int(),
  risk: z.number(),
  step: z.number().int(),
  priorA: z.number(),
  priorB: z.number(),
  method: z.enum(['curtail', 'optimal']).optional(),
  informed: z.strictObject({ a: z.number(), b: z.number(), weight: z.number() }).nullable().optional(),
  yields: z.boolean().optional(),
}) satisfies z.ZodType<AdaptiveRule>;

export const TaskCountsSchema = z.strictObject({
  config: z.string(),
  task: z.string(),
  n: z.number().int(),
  c: z.number().int(),
  /** Trials with no reward (infra + ungraded). */
  errors: z.number().int(),
  infra: z.number().int(),
  ungraded: z.number().int(),
  /** The adaptive rule the trials were sampled under, if any. */
  adaptive: AdaptiveRuleSchema.nullable().optional(),
});
export type TaskCounts = z.infer<typeof TaskCountsSchema>;

/** Groups records into per-configuration, per-task counts (sorted by config, then task). */
export function countByTask(records: StatsRecord[]): TaskCounts[] {
  const map = new Map<string, TaskCounts>();
  for (const r of records) {
    const key = `${r.config}\u0000${r.task}`;
    let t = map.get(key);
    if (!t)
      map.set(
        key,
        (t = {
          config: r.config,
          task: r.task,
          n: 0,
          c: 0,
          errors: 0,
          infra: 0,
          ungraded: 0,
          adaptive: r.adaptive ?? null,
        }),
      );
    const acc = accountingOf(r.reward, r.errorClass);
    if (acc === 'not_run') continue;
    if (acc !== 'graded') {
      t.errors += 1;
      if (acc === 'infra') t.infra += 1;
      else t.ungraded += 1;
    } else {
      t.n += 1;
      if (r.passed) t.c += 1;
    }
  }
  return [...map.values()].sort((a, b) =>
    a.config === b.config ? (a.task < b.task ? -1 : 1) : a.config < b.config ? -1 : 1,
  );
}
