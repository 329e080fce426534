import { acquireSandbox } from '../sandbox/lease.js';
import type { PreparedEnvironment, Sandbox } from '../sandbox/sandbox.js';
import { DEFAULT_START_TIMEOUT_SEC } from '../sandbox/start.js';
import type { TrialState } from './state.js';

/**
 * The trial's sandbox, started (or a warm one taken, `options.start`) on the trial's start network,
 * /logs made. acquireSandbox owns the start: at its deadline it is given up and its sandbox closed.
 */
export async function acquireTrialSandbox(state: TrialState, prepared: PreparedEnvironment): Promise<Sandbox> {
  const { options } = state;
  const start = options.start;
  const lease = await acquireSandbox({
    provider: options.provider,
    task: state.task,
    prepare: prepared,
    deadlineMs: (state.timeouts.environmentSec ?? DEFAULT_START_TIMEOUT_SEC) * 1000,
    signal: options.signal,
    labels: { 'io.termgrade.trial': state.trialId },
    network: state.startNetwork,
    start: start ? (startSignal) => start(prepared, startSignal) : undefined,
  });
  return lease.sandbox;
}
