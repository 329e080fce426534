import { z } from 'zod';
import { median } from './summary.js';

/** The fields of a trial the efficiency and near-miss figures need. */
export interface EfficiencyTrial {
  passed: boolean;
  durationMs: number;
  outputTokens: number | null;
  costUsd: number | null;
  testsPassed: number;
  testsFailed: number;
}

export const EfficiencySchema = z.strictObject({
  successes: z.number().int(),
  medianTimeMsPerSuccess: z.number().nullable(),
  medianOutputTokensPerSuccess: z.number().nullable(),
  medianCostUsdPerSuccess: z.number().nullable(),
  /** Failed trials that passed >= 8 tests and failed exactly one: the cheapest wins. */
  nearMisses: z.number().int(),
});
export type Efficiency = z.infer<typeof EfficiencySchema>;

const orNull = (values: number[]): number | null => (values.length ? median(values) : null);

export function isNearMiss(t: EfficiencyTrial): boolean {
  return !t.passed && t.testsPassed >= 8 && t.testsFailed === 1;
}

/** Medians over successful trials only: what a success costs in time, tokens and money. */
export function efficiency(trials: EfficiencyTrial[]): Efficiency {
  const wins = trials.filter((t) => t.passed);
  return {
    successes: wins.length,
    medianTimeMsPerSuccess: orNull(wins.map((t) => t.durationMs)),
    medianOutputTokensPerSuccess: orNull(wins.flatMap((t) => (t.outputTokens === null ? [] : [t.outputTokens]))),
    medianCostUsdPerSuccess: orNull(wins.flatMap((t) => (t.costUsd === null ? [] : [t.costUsd]))),
    nearMisses: trials.filter(isNearMiss).length,
  };
}
