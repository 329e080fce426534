import { pendingSandbox } from '../../sandbox/pending.js';
import { TermgradeError, errorMessage } from '../../util/errors.js';
import { nowIso } from '../../util/time.js';
import { acquireTrialSandbox } from '../acquire-sandbox.js';
import { cancelled, fail, timed, type TrialState } from '../state.js';

/** A failure to make the sandbox: the image's build, or else the environment. */
const setupErrorClass = (err: unknown): 'build_failed' | 'environment_error' =>
  err instanceof TermgradeError && err.code === 'build_failed' ? 'build_failed' : 'environment_error';

/**
 * Environment setup: the image prepared (built once, or found) and the sandbox started. A failure
 * is recorded (the trial has no sandbox then); a cancel is thrown. With a model-first agent the
 * sandbox is still starting when this returns: the agent begins with a model call, the sandbox
 * catches up (`settleEnvironment`).
 */
export function environmentPhase(state: TrialState): Promise<void> {
  const { options, task, setupTimes } = state;
  return timed(state, 'environment_setup', async () => {
    setupTimes.iso = nowIso();
    setupTimes.ms = performance.now();
    try {
      const prepared = await (options.prepare
        ? options.prepare()
        : options.provider.prepare(task, { signal: options.signal, agentLayer: options.agent.imageLayer }));
      state.prepared = prepared;
      const starting = acquireTrialSandbox(state, prepared).then((box) => {
        setupTimes.readyIso = nowIso();
        setupTimes.readyMs = performance.now();
        return box;
      });
      if (options.agent.modelFirst) {
        state.startingSandbox = starting;
        state.sandbox = pendingSandbox(starting);
      } else state.sandbox = await starting;
    } catch (err) {
      if (cancelled(state, err)) throw err;
      fail(state, setupErrorClass(err), 'environment_setup', errorMessage(err));
    }
  });
}

/**
 * A sandbox started behind the agent's first model call: its setup phase is the time until it was
 * ready (overlapping the agent's run); a start that failed is the environment's failure, whatever
 * the agent made of it, and there is nothing to grade. True when the sandbox is there.
 */
export async function settleEnvironment(state: TrialState): Promise<boolean> {
  const starting = state.startingSandbox;
  state.startingSandbox = null;
  if (!starting) return true;
  const { setupTimes: from } = state;
  try {
    await starting;
    state.phases.environment_setup = {
      startedAt: from.iso,
      finishedAt: from.readyIso,
      durationMs: from.readyMs - from.ms,
    };
    return true;
  } catch (err) {
    const failure = err ?? new Error('the sandbox did not start');
    fail(state, setupErrorClass(failure), 'environment_setup', errorMessage(failure));
    return false;
  }
}
