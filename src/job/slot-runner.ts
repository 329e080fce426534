import path from 'node:path';
import type { RetriedAttempt, Slot } from '../store/store.js';
import type { Task } from '../task/task.js';
import { accountingOf } from '../trial/accounting.js';
import { runTrial } from '../trial/run.js';
import type { TrialOptions } from '../trial/options.js';
import type { TrialResult } from '../trial/schema.js';
import { trialAdmission } from '../trial/admission.js';
import { TermgradeError } from '../util/errors.js';
import { baseTrialIdOf, type ConfigRuntime, type JobState } from './job-state.js';
import type { WarmStart } from './warm-pool.js';

/** Trial files that cannot be written (full or read-only disk) stop the job with a clear word. */
export function diskError(jobDir: string, err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  const kept = 'Every trial finished before this is kept';
  if (code === 'ENOSPC')
    return new TermgradeError(
      'store_full',
      `cannot write trial files under ${jobDir}: the disk is full. ${kept}; free space and run the job again to resume.`,
    );
  if (code === 'EROFS' || code === 'EACCES') {
    const why = code === 'EROFS' ? 'the file system is read-only' : 'permission denied';
    return new TermgradeError(
      'store_readonly',
      `cannot write trial files under ${jobDir}: ${why}. ${kept}; fix it and run the job again to resume.`,
    );
  }
  return err;
}

/** A store write: one that fails is kept as the job's failure and stops the job. */
export function recordSafely(state: JobState, write: () => void): void {
  try {
    write();
  } catch (err) {
    state.storeFailure ??= err;
    state.stop.abort();
  }
}

/** The warm container taken for a slot as it was dispatched: its first run only uses it. */
interface Claim {
  warm: WarmStart | null;
}

/** How a trial gets its started sandbox from the job's warm pool (none: the trial starts its own). */
function warmStartOf(state: JobState, task: Task, claim: Claim): TrialOptions['start'] {
  const warm = state.warm;
  if (!warm) return undefined;
  return (prepared, signal) => {
    const mine = claim.warm ?? warm.start(task, prepared);
    claim.warm = null;
    // The trial gives up a start it waits on at its deadline: the warm start is then given up too.
    signal.addEventListener('abort', mine.cancel, { once: true });
    return mine.sandbox;
  };
}

/** One run of a slot's trial; a passing oracle trial records the task's protected set when none was kept. */
async function attempt(
  state: JobState,
  c: ConfigRuntime,
  slot: Slot,
  trialId: string,
  claim: Claim,
): Promise<TrialResult> {
  const { options } = state;
  const task = state.byName.get(slot.task)!;
  try {
    const admission = await trialAdmission(options.protection, task, c.agent.name);
    const result = await runTrial({
      task,
      agent: c.agent,
      provider: options.provider,
      ...admission.options,
      grading: options.spec.grading,
      outDir: path.join(options.jobDir, 'trials'),
      trialId,
      attempt: slot.attempt,
      timeouts: options.spec.timeouts,
      network: options.spec.network ?? null,
      signal: state.stop.signal,
      secrets: c.secrets,
      agentEnv: c.env,
      prepare: () => state.images.ensure(task, c.agent),
      start: warmStartOf(state, task, claim),
      onPhase: (phase) => state.emit({ type: 'phase', trialId, slot, phase }),
      removeInBackground: (removal) => removeLater(state, removal),
    });
    await admission.keep(result);
    return result;
  } finally {
    // A run that never reached its sandbox (it failed before: a trial folder it could not write)
    // leaves the claimed one unused.
    if (claim.warm) state.warm?.discard(claim.warm);
    claim.warm = null;
  }
}

function removeLater(state: JobState, removal: Promise<void>): void {
  state.removals.add(removal);
  void removal.finally(() => state.removals.delete(removal));
}

/**
 * Runs a slot to its record: infrastructure failures are run again (a new trial id each) up to the
 * job's infraRetries, outcomes never; the last run is recorded with the reasons of those before.
 */
export async function runSlot(state: JobState, c: ConfigRuntime, slot: Slot, claimed: WarmStart | null): Promise<void> {
  const baseId = baseTrialIdOf(slot, c.label);
  const reasons: RetriedAttempt[] = [];
  const claim: Claim = { warm: claimed };
  for (let runs = 1; ; runs++) {
    const trialId = runs === 1 ? baseId : `${baseId}__retry${runs - 1}`;
    state.emit({ type: 'trial-start', trialId, slot });
    const result = await attempt(state, c, slot, trialId, claim);
    const cls = result.error?.class;
    if (
      accountingOf(result.reward, cls) !== 'infra' ||
      state.stop.signal.aborted ||
      runs > state.options.spec.infraRetries
    ) {
      recordSlot(state, slot, trialId, result, runs, reasons);
      return;
    }
    reasons.push({ class: cls!, message: result.error!.message, durationMs: result.durationMs });
  }
}

/** Records a slot's last run (its own transaction), feeds the adaptive gate, counts it, and says so. */
function recordSlot(
  state: JobState,
  slot: Slot,
  trialId: string,
  r: TrialResult,
  runs: number,
  reasons: RetriedAttempt[],
): void {
  const { counts } = state;
  state.emit({ type: 'trial-recording', trialId, slot });
  if (r.error?.class !== 'cancelled') state.gate?.record(slot, r.reward, r.passed);
  const trialDir = path.join(state.options.jobDir, 'trials', trialId);
  recordSafely(state, () =>
    state.options.store.recordTrial(r, { slot, trialDir, infraAttempts: runs, retryReasons: reasons }),
  );
  const status = r.error?.class === 'cancelled' ? 'not_run' : r.reward === null ? 'error' : 'completed';
  if (status === 'not_run') counts.notRun += 1;
  else if (status === 'error') {
    counts.errors += 1;
    if (accountingOf(r.reward, r.error?.class) === 'infra') counts.infra += 1;
  } else counts.completed += 1;
  const errorClass = r.error?.class ?? null;
  const usage = { outputTokens: r.tokens?.output ?? 0, costUsd: r.costUsd };
  state.emit({
    type: 'trial-done',
    trialId,
    slot,
    status,
    reward: r.reward,
    errorClass,
    infraAttempts: runs,
    durationMs: r.durationMs,
    ...usage,
  });
}
