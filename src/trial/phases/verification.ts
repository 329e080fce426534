import type { Sandbox } from '../../sandbox/sandbox.js';
import type { Task } from '../../task/task.js';
import { EngineLostError, GradingStepError, errorMessage } from '../../util/errors.js';
import type { VerifierOutcome } from '../../verifier/schema.js';
import { gradeSandbox } from '../../verifier/verify.js';
import { diskLimitMb } from '../disk-watch.js';
import { cancelled, fail, timed, type TrialState } from '../state.js';
import { setPhaseNetwork } from './network.js';

/** Where one grading writes: the verifier's logs and the collected artifacts. */
export interface GradingDirs {
  logs: string;
  artifacts: string;
}

/** One grading on the protected path (snapshot, scan, fresh verifier sandbox); null when the engine failed it. */
export function verificationPhase(
  state: TrialState,
  box: Sandbox,
  view: Task,
  dirs: GradingDirs,
  testsDirs: string[] | undefined,
  timeoutSec: number,
  label: string,
): Promise<VerifierOutcome | null> {
  const { options } = state;
  return timed(state, 'verification', async () => {
    if (!(await setPhaseNetwork(state, box, state.networks.verifier, 'verification'))) return null;
    try {
      const grading = {
        hostLogsDir: dirs.logs,
        hostArtifactsDir: dirs.artifacts,
        testsDirs,
        timeoutSec: timeoutSec * (state.timeouts.verifierMultiplier ?? 1),
        signal: options.signal,
        protection: options.protection ?? null,
        onRecord: options.onProtectionRecord,
        // The disk limit holds at grading too: the files the agent left are measured before they are copied.
        bounds: {
          ...options.gradingBounds,
          maxBytes: options.gradingBounds?.maxBytes ?? diskLimitMb(state.task, state.timeouts) * 1024 * 1024,
        },
        policy: options.grading,
        // A step's grading (label names it) has no admission evidence of its own yet.
        step: label === '' ? undefined : label,
      };
      const v = await gradeSandbox(box, view, grading, options.provider);
      if (v.error) fail(state, v.error.class, 'verification', label + v.error.message);
      return v;
    } catch (err) {
      if (cancelled(state, err)) throw err;
      // The engine failed while grading: a lost engine's trial runs again elsewhere.
      const lost =
        err instanceof GradingStepError ? err.cause instanceof EngineLostError : err instanceof EngineLostError;
      fail(state, lost ? 'environment_error' : 'verifier_crash', 'verification', label + errorMessage(err));
      return null;
    }
  });
}
