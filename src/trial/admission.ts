import type { Task } from '../task/task.js';
import { mergeStepRecords, recordHasEvidence, type ProtectionRecord } from '../verifier/protection.js';
import type { ProtectionStore } from '../verifier/protection-store.js';
import type { TrialOptions } from './options.js';
import type { TrialResult } from './schema.js';

/** A trial's admission record: what it is graded against, and what it records (an oracle trial's). */
export interface TrialAdmission {
  /** For runTrial: the record and its file, and the receiver of the record this trial's grading makes. */
  options: Pick<TrialOptions, 'protection' | 'admissionFile' | 'onProtectionRecord'>;
  /** Keeps the record the trial made, when it passed with no error. */
  keep(result: TrialResult): Promise<void>;
}

/**
 * The one way a command gives a trial its admission record (`run`, `run-trial`, `serve`'s
 * episodes): found in the store by task content; and a passing oracle trial of a task with none
 * (or with one made before admission kept the evidence of a pass) records it, as `check` would.
 */
export async function trialAdmission(
  store: ProtectionStore | undefined,
  task: Task,
  agentName: string,
): Promise<TrialAdmission> {
  const found = (await store?.find(task)) ?? null;
  const made: { record: ProtectionRecord | null } = { record: null };
  const steps = (task.steps ?? []).map((s) => s.name);
  const records = !!store && !(found && recordHasEvidence(found.record, steps)) && agentName === 'oracle';
  return {
    options: {
      protection: found?.record ?? null,
      admissionFile: found?.file ?? null,
      // A multi-step task's steps each make a record: one record of them all.
      onProtectionRecord: records ? (rec) => (made.record = mergeStepRecords(made.record, rec)) : undefined,
    },
    keep: async (result) => {
      if (made.record && result.passed && result.errors.length === 0) await store!.save(made.record);
    },
  };
}
