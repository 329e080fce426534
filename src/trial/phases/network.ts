import type { Sandbox } from '../../sandbox/sandbox.js';
import { networkFor } from '../../task/network.js';
import type { NetworkMode } from '../../task/schema.js';
import { errorMessage } from '../../util/errors.js';
import type { Phase } from '../schema.js';
import { cancelled, fail, type TrialState } from '../state.js';

/**
 * Puts the sandbox on a phase's network (Harbor's per-phase policy): the baseline until the agent
 * runs. False, with the failure recorded, when the engine could not switch it; a cancel is thrown.
 */
export async function setPhaseNetwork(
  state: TrialState,
  box: Sandbox,
  mode: NetworkMode,
  phase: Phase,
): Promise<boolean> {
  const want = networkFor(mode, state.startNetwork);
  if (want === state.onNetwork) return true;
  try {
    await box.setNetwork(want);
    state.onNetwork = want;
    return true;
  } catch (err) {
    if (cancelled(state, err)) throw err;
    fail(
      state,
      'environment_error',
      phase,
      `the sandbox could not be put on the ${phase} phase's network (${mode}): ${errorMessage(err)}`,
    );
    return false;
  }
}
