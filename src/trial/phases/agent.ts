import type { AgentContext } from '../../agent/agent.js';
import { ModelError } from '../../model/errors.js';
import type { Sandbox } from '../../sandbox/sandbox.js';
import type { Task } from '../../task/task.js';
import { CancelledError, errorMessage } from '../../util/errors.js';
import { deadlineSignal } from '../../util/time.js';
import { ENDPOINT_FAILURE_KINDS } from '../accounting.js';
import { diskLimitMb, watchDisk, type DiskWatch } from '../disk-watch.js';
import { fail, timed, type TrialState } from '../state.js';
import { setPhaseNetwork } from './network.js';

/** What every agent call of the trial gets (a call adds its signal, and a run its task and logs). */
export function agentContext(state: TrialState, box: Sandbox): Omit<AgentContext, 'signal'> {
  const { task, agentLogs, scrub, usage, trialId, options } = state;
  return {
    sandbox: box,
    task,
    logsDir: agentLogs,
    scrub,
    usage,
    sessionId: trialId,
    env: options.agentEnv ?? {},
    pauseWhen: options.pauseWhen,
    resumeFrom: options.resumeFrom,
  };
}

/** Agent setup (installing its tools), on the environment's network, within its own timeout. False when it failed. */
export function agentSetupPhase(state: TrialState, box: Sandbox): Promise<boolean> {
  const { options, timeouts: t } = state;
  return timed(state, 'agent_setup', async () => {
    if (!(await setPhaseNetwork(state, box, state.networks.environment, 'agent_setup'))) return false;
    const deadline = deadlineSignal(options.signal, (t.agentSetupSec ?? 600) * 1000);
    try {
      await options.agent.setup({ ...agentContext(state, box), signal: deadline.signal });
      return true;
    } catch (err) {
      if (options.signal?.aborted) throw new CancelledError('trial');
      fail(
        state,
        'agent_setup_error',
        'agent_setup',
        deadline.timedOut() ? `agent setup timed out` : errorMessage(err),
      );
      return false;
    } finally {
      deadline.clear();
    }
  });
}

/** The agent on one instruction (the task's, or a step's); its end recorded, never thrown for an outcome. */
export function agentRunPhase(
  state: TrialState,
  box: Sandbox,
  view: Task,
  logsDir: string,
  label: string,
): Promise<void> {
  const { options, timeouts: t } = state;
  return timed(state, 'agent_run', async () => {
    if (!(await setPhaseNetwork(state, box, state.networks.agent, 'agent_run'))) {
      state.infraFailed = true;
      return;
    }
    const timeoutSec = view.config.agent.timeout_sec * (t.agentMultiplier ?? 1);
    const disk = watchDisk(box, diskLimitMb(state.task, t));
    const signal = options.signal;
    const deadline = deadlineSignal(AbortSignal.any([...(signal ? [signal] : []), disk.signal]), timeoutSec * 1000);
    try {
      const outcome = await options.agent.run({
        ...agentContext(state, box),
        task: view,
        logsDir,
        signal: deadline.signal,
      });
      state.outcome = outcome;
      state.exitReason = outcome.exitReason;
      if (disk.over()) throw new Error('disk limit');
      if (outcome.exitReason === 'agent_error')
        fail(state, 'agent_error', 'agent_run', label + (outcome.message ?? 'agent failed'));
      if (outcome.exitReason === 'model_error') {
        state.endpointFailed = ENDPOINT_FAILURE_KINDS.has(outcome.modelErrorKind ?? '');
        fail(
          state,
          state.endpointFailed ? 'model_unavailable' : 'model_error',
          'agent_run',
          label + (outcome.message ?? 'model call failed'),
        );
      }
    } catch (err) {
      if (signal?.aborted) throw new CancelledError('trial');
      recordAgentFailure(state, err, { disk, timedOut: deadline.timedOut(), timeoutSec, label });
    } finally {
      deadline.clear();
      disk.stop();
    }
  });
}

/** Why the agent's run ended in a throw: its disk limit, the model endpoint, its timeout, or its own error. */
function recordAgentFailure(
  state: TrialState,
  err: unknown,
  at: { disk: DiskWatch; timedOut: boolean; timeoutSec: number; label: string },
): void {
  const { label } = at;
  if (at.disk.over()) {
    state.exitReason = 'agent_error';
    fail(state, 'disk_limit', 'agent_run', label + at.disk.message());
  } else if (err instanceof ModelError && ENDPOINT_FAILURE_KINDS.has(err.kind) && !at.timedOut) {
    state.exitReason = 'model_error';
    state.endpointFailed = true;
    fail(state, 'model_unavailable', 'agent_run', `${label}${err.kind}: ${err.message}`);
  } else if (at.timedOut) {
    state.exitReason = 'agent_timeout';
    fail(state, 'agent_timeout', 'agent_run', `${label}agent did not finish within ${at.timeoutSec} s`);
  } else {
    state.exitReason = 'agent_error';
    fail(state, 'agent_error', 'agent_run', label + errorMessage(err));
  }
}
