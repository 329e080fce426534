import type { Slot } from '../store/store.js';
import { AdaptiveGate } from './adaptive-gate.js';
import type { JobState } from './job-state.js';

/**
 * The job's adaptive gate, fed every trial already recorded (a resumed job continues its rule);
 * null without `adaptive`.
 */
export function openGate(state: Pick<JobState, 'options' | 'priors'>): AdaptiveGate | null {
  const gate = AdaptiveGate.fromSpec(state.options.spec, state.priors);
  if (gate)
    for (const row of state.options.store.listTrials())
      if (row.status !== 'not_run') gate.record(row, row.reward, row.passed === 1);
  return gate;
}

/** May this slot start now (always, without a gate)? */
export const eligible = (state: JobState, slot: Slot): boolean => state.gate?.eligible(slot) ?? true;

/** Removes queued slots of tasks the adaptive rule has settled: they are not needed. */
export function dropSettled(state: JobState): void {
  const gate = state.gate;
  if (!gate) return;
  for (const c of state.configs) {
    const before = c.queue.length;
    c.queue = c.queue.filter((s) => !gate.settled(s));
    state.droppedByRule += before - c.queue.length;
  }
}
