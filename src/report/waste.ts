import { z } from 'zod';
import { stat } from '../util/json.js';
import type { StatsRecord } from '../records/record.js';

/**
 * Sandbox time that bought no grade, by cause: the runs discarded and run again after an
 * infrastructure failure, records replaced by `run --retry`, and recorded trials that ended
 * without a reward. A timed-out agent is graded (its sandbox is verified), so it is not waste.
 */
export const RetryWasteSchema = z.strictObject({
  /** Every run's sandbox time: recorded trials, the runs retried before them, replaced records. */
  sandboxMs: z.number(),
  /** Of it, the time of runs that gave no grade. */
  wastedMs: z.number(),
  /** wastedMs / sandboxMs; null when no time was recorded. */
  share: stat().nullable(),
  /** Wasted time by error class. */
  byCause: z.record(z.string(), z.number()),
  runs: z.number().int(),
  wastedRuns: z.number().int(),
});
export type RetryWaste = z.infer<typeof RetryWasteSchema>;

export function retryWaste(records: StatsRecord[]): RetryWaste {
  const byCause: Record<string, number> = {};
  let sandboxMs = 0;
  let wastedMs = 0;
  let runs = 0;
  let wastedRuns = 0;
  const waste = (cause: string, ms: number): void => {
    byCause[cause] = (byCause[cause] ?? 0) + ms;
    wastedMs += ms;
    wastedRuns += 1;
  };
  for (const r of records) {
    runs += 1;
    sandboxMs += r.durationMs;
    if (r.reward === null) waste(r.errorClass ?? 'no_reward', r.durationMs);
    for (const retry of r.retries ?? []) {
      runs += 1;
      sandboxMs += retry.durationMs;
      waste(retry.class, retry.durationMs);
    }
  }
  return { sandboxMs, wastedMs, share: sandboxMs > 0 ? wastedMs / sandboxMs : null, byCause, runs, wastedRuns };
}
