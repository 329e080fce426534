import path from 'node:path';
import type { Sandbox } from '../sandbox/sandbox.js';
import { errorMessage } from '../util/errors.js';
import type { TrialOptions } from './options.js';
import { agentRunPhase, agentSetupPhase } from './phases/agent.js';
import { collectionPhase, teardownPhase } from './phases/collection.js';
import { environmentPhase, settleEnvironment } from './phases/environment.js';
import { stepsPhase } from './phases/steps.js';
import { verificationPhase } from './phases/verification.js';
import type { TrialResult } from './schema.js';
import { cancelled, fail, openTrial, type TrialState } from './state.js';

export type { TrialOptions, TrialTimeouts } from './options.js';
export { newTrialId } from './state.js';
export { DEFAULT_DISK_LIMIT_MB } from './disk-watch.js';

/**
 * The agent and the verifier on a sandbox that was started: agent setup, then the agent's run and
 * its grading (a multi-step task: each step's run and grading in turn).
 */
async function agentAndVerification(state: TrialState, box: Sandbox): Promise<void> {
  const { task } = state;
  if (!(await agentSetupPhase(state, box))) return;
  if (task.steps?.length) return stepsPhase(state, box, task.steps);
  await agentRunPhase(state, box, task, state.agentLogs, '');
  await gradeTrial(state, box);
}

/**
 * The sandbox graded once the agent ended, whatever way it ended: partial work counts. Not when
 * the sandbox never started or the model endpoint failed: that trial carries no reward at all
 * (infrastructure), and is retried.
 */
export async function gradeTrial(state: TrialState, box: Sandbox): Promise<void> {
  const { task } = state;
  if (!(await settleEnvironment(state)) || state.endpointFailed || state.infraFailed) return;
  const dirs = { logs: state.verifierLogs, artifacts: path.join(state.trialDir, 'artifacts') };
  state.verdict = await verificationPhase(state, box, task, dirs, undefined, task.config.verifier.timeout_sec, '');
}

/** `work` on an opened trial, then its teardown on every path and its result: the frame of every trial. */
export async function inTrialFrame(state: TrialState, work: () => Promise<void>): Promise<TrialResult> {
  try {
    await work();
  } catch (err) {
    fail(state, cancelled(state, err) ? 'cancelled' : 'internal_error', 'teardown', errorMessage(err));
  } finally {
    await teardownPhase(state);
  }
  return collectionPhase(state);
}

/**
 * One trial: environment setup, agent setup, agent run, verification, teardown; each timed, each
 * bounded. The agent's timeout or crash is recorded and the sandbox is still verified; teardown
 * happens on every path. Never throws for a trial outcome: the result says what happened.
 */
export async function runTrial(options: TrialOptions): Promise<TrialResult> {
  const state = await openTrial(options);
  return inTrialFrame(state, async () => {
    await environmentPhase(state);
    if (state.sandbox) await agentAndVerification(state, state.sandbox);
  });
}
