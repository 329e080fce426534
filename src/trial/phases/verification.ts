import type { Sandbox, SandboxProvider, SnapshotBounds } from '../../sandbox/sandbox.js';
import type { Task } from '../../task/task.js';
import { errorMessage, isEngineLost } from '../../util/errors.js';
import type { GradingPolicy } from '../../verifier/evidence.js';
import type { ProtectionRecord } from '../../verifier/protection.js';
import type { VerifierOutcome } from '../../verifier/schema.js';
import { gradeSandbox } from '../../verifier/verify.js';
import { diskLimitMb } from '../disk-watch.js';
import type { AdmissionRef } from '../schema.js';
import { cancelled, fail, timed, type TrialState } from '../state.js';
import { setPhaseNetwork } from './network.js';

/** Where one grading writes: the verifier's logs and the collected artifacts. */
export interface GradingDirs {
  logs: string;
  artifacts: string;
}

/**
 * What every grading of an agent's sandbox applies, whichever command grades it (`run`,
 * `run-trial`, `serve`'s sessions and episodes): the task's admission record, the evidence policy,
 * the verifier's timeout multiplier, the engine's health for a step that failed. One function.
 */
export interface GradingContext {
  provider: Pick<SandboxProvider, 'health'>;
  /** The task's admission record; null: the fixed rules only (the outcome says `rules`). */
  protection: ProtectionRecord | null;
  /** Multiplies the verifier's timeout (--timeout-multiplier); default 1. */
  verifierMultiplier?: number;
  signal?: AbortSignal;
  /** Receives the protected set this grading recorded (the reference solution's: admission). */
  onRecord?: (record: ProtectionRecord) => void;
  /** How the reward is held against the tests' own evidence; default `evidence` (verifier/evidence.ts). */
  grading?: GradingPolicy;
  /** A multi-step task's step being graded (its own tests: no admission evidence of its own). */
  step?: string;
  /** What grading takes on at most (files, bytes, copy time); default the task's disk limit and the scan's own limits. */
  bounds?: SnapshotBounds;
}

/** One grading on the protected path (snapshot, scan, fresh verifier sandbox) in its context; engine failures throw. */
export function gradeAgentSandbox(
  box: Sandbox,
  view: Task,
  dirs: GradingDirs,
  testsDirs: string[] | undefined,
  timeoutSec: number,
  context: GradingContext,
): Promise<VerifierOutcome> {
  const grading = {
    hostLogsDir: dirs.logs,
    hostArtifactsDir: dirs.artifacts,
    testsDirs,
    timeoutSec: timeoutSec * (context.verifierMultiplier ?? 1),
    signal: context.signal,
    protection: context.protection,
    onRecord: context.onRecord,
    policy: context.grading,
    step: context.step,
    bounds: context.bounds,
  };
  return gradeSandbox(box, view, grading, context.provider);
}

/**
 * A grading that threw (see OUTCOME_CLASSES in accounting.ts for what each class means): the
 * engine was lost (the work runs again elsewhere), or grading could not finish on an engine that
 * is still there (verifier_crash). Both are infrastructure failures: no reward, retried.
 */
export function gradingFailureClass(err: unknown): 'environment_error' | 'verifier_crash' {
  return isEngineLost(err) ? 'environment_error' : 'verifier_crash';
}

/** The admission record a grade used, as results name it; null when it had none. */
export function admissionRefOf(
  record: ProtectionRecord | null | undefined,
  file: string | null | undefined,
): AdmissionRef | null {
  return record ? { checksum: record.checksum, recordedAt: record.recordedAt, file: file ?? null } : null;
}

/** One grading of a trial (of its step `step` for a multi-step task): on the verifier phase's network, in the trial's context; null when the engine failed it. */
export function verificationPhase(
  state: TrialState,
  box: Sandbox,
  view: Task,
  dirs: GradingDirs,
  testsDirs: string[] | undefined,
  timeoutSec: number,
  label: string,
  step?: string,
): Promise<VerifierOutcome | null> {
  const { options } = state;
  return timed(state, 'verification', async () => {
    if (!(await setPhaseNetwork(state, box, state.networks.verifier, 'verification'))) return null;
    try {
      const v = await gradeAgentSandbox(box, view, dirs, testsDirs, timeoutSec, {
        provider: options.provider,
        protection: options.protection ?? null,
        verifierMultiplier: state.timeouts.verifierMultiplier,
        signal: options.signal,
        onRecord: options.onProtectionRecord,
        // The disk limit holds at grading too: the files the agent left are measured before they are copied.
        bounds: {
          ...options.gradingBounds,
          maxBytes: options.gradingBounds?.maxBytes ?? diskLimitMb(state.task, state.timeouts) * 1024 * 1024,
        },
        grading: options.grading,
        // A step's grading is held against (and recorded as) that step's evidence.
        step,
      });
      if (v.error) fail(state, v.error.class, 'verification', label + v.error.message);
      return v;
    } catch (err) {
      if (cancelled(state, err)) throw err;
      // The engine failed while grading: a lost engine's trial runs again elsewhere.
      fail(state, gradingFailureClass(err), 'verification', label + errorMessage(err));
      return null;
    }
  });
}
