import { primaryReward } from '../verifier/reward.js';

/** What aggregation needs of one step that ran: its rewards (null: no verifier result) and whether it counts. */
export interface StepRewardInput {
  rewards: Record<string, number> | null;
  contributes: boolean;
}

/**
 * The task's rewards from its steps', as Harbor defines them: "mean" is the per-key mean over the
 * contributing steps that have a verifier result (a key a step lacks counts 0 for it); "final" is
 * the last such step's rewards as they are. Null when no contributing step was verified.
 */
export function aggregateStepRewards(
  strategy: 'mean' | 'final',
  steps: StepRewardInput[],
): { reward: number; rewards: Record<string, number> } | null {
  const graded = steps.filter(
    (s): s is { rewards: Record<string, number>; contributes: boolean } =>
      s.contributes && s.rewards !== null && Object.keys(s.rewards).length > 0,
  );
  if (graded.length === 0) return null;
  if (strategy === 'final') {
    const last = graded[graded.length - 1]!.rewards;
    return { reward: primaryReward(last), rewards: { ...last } };
  }
  const keys = [...new Set(graded.flatMap((s) => Object.keys(s.rewards)))];
  const rewards: Record<string, number> = {};
  for (const k of keys) rewards[k] = graded.reduce((sum, s) => sum + (s.rewards[k] ?? 0), 0) / graded.length;
  return { reward: primaryReward(rewards), rewards };
}

/**
 * Whether a step's result misses its `min_reward` (the trial then stops after it): a number is
 * compared with the primary reward, a map with each named reward (a missing name counts 0). A step
 * with no reward at all misses any minimum.
 */
export function missesMinimum(
  minReward: number | Record<string, number> | undefined,
  reward: number | null,
  rewards: Record<string, number>,
): boolean {
  if (minReward === undefined) return false;
  if (reward === null) return true;
  if (typeof minReward === 'number') return reward < minReward;
  return Object.entries(minReward).some(([k, min]) => (rewards[k] ?? 0) < min);
}
