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

export interface Efficiency {
  successes: number;
  medianTimeMsPerSuccess: number | null;
  medianOutputTokensPerSuccess: number | null;
  medianCostUsdPerSuccess: number | null;
  /** Failed trials that passed >= 8 tests and failed exactly one: the cheapest wins. */
  nearMisses: number;
}

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
