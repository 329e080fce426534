import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Sandbox } from '../../sandbox/sandbox.js';
import type { Task, TaskStep } from '../../task/task.js';
import { summarizeTests } from '../../verifier/schema.js';
import { aggregateStepRewards, missesMinimum } from '../step-rewards.js';
import type { TrialState } from '../state.js';
import { agentRunPhase } from './agent.js';
import { settleEnvironment } from './environment.js';
import { verificationPhase } from './verification.js';

/** A step as the agent and the verifier see it: the step's instruction, solution and agent timeout on the task. */
function stepView(task: Task, step: TaskStep): Task {
  const timeout_sec = step.config.agent.timeout_sec ?? task.config.agent.timeout_sec;
  return {
    ...task,
    instruction: step.instruction,
    solutionDir: step.solutionDir,
    config: { ...task.config, agent: { ...task.config.agent, timeout_sec } },
  };
}

/** One step: the agent on its instruction, then its grading. True when the trial goes on to the next step. */
async function runStep(state: TrialState, box: Sandbox, step: TaskStep): Promise<boolean> {
  const { task } = state;
  const s0 = performance.now();
  const label = `step "${step.name}": `;
  const stepDir = path.join(state.trialDir, 'steps', step.name);
  const view = stepView(task, step);
  const errorsBefore = state.errors.length;
  await mkdir(path.join(stepDir, 'agent'), { recursive: true });
  await mkdir(path.join(stepDir, 'verifier'), { recursive: true });
  await agentRunPhase(state, box, view, path.join(stepDir, 'agent'), label);
  if (!(await settleEnvironment(state)) || state.endpointFailed || state.infraFailed) return false;
  const dirs = { logs: path.join(stepDir, 'verifier'), artifacts: path.join(stepDir, 'artifacts') };
  const v = await verificationPhase(
    state,
    box,
    view,
    dirs,
    step.testsDirs,
    step.config.verifier.timeout_sec ?? task.config.verifier.timeout_sec,
    label,
    step.name,
  );
  if (v === null || v.reward === null) state.infraFailed = true;
  const stopped = !state.infraFailed && missesMinimum(step.config.min_reward, v?.reward ?? null, v?.rewards ?? {});
  state.stepResults.push({
    name: step.name,
    reward: v?.reward ?? null,
    rewards: v?.rewards ?? {},
    contributes: step.config.contributes_to_reward,
    stoppedTrial: stopped,
    exitReason: state.exitReason,
    error: state.errors.slice(errorsBefore)[0] ?? null,
    testsSummary: summarizeTests(v?.tests ?? []),
    collected: v?.collected ?? null,
    durationMs: performance.now() - s0,
  });
  for (const test of v?.tests ?? []) state.stepTests.push({ ...test, name: `${step.name}/${test.name}` });
  if (v) state.stepVerdicts.push(v);
  return !state.infraFailed && !stopped;
}

/**
 * A multi-step task: each step's instruction in turn in the one sandbox, each graded on the
 * protected path (its own snapshot and verifier sandbox), the agent going on in its sandbox; the
 * trial stops after a step that misses its min_reward. The trial's verdict combines the steps'.
 */
export async function stepsPhase(state: TrialState, box: Sandbox, steps: TaskStep[]): Promise<void> {
  for (const step of steps) if (!(await runStep(state, box, step))) break;
  const strategy = state.task.config.multi_step_reward_strategy ?? 'mean';
  const total = aggregateStepRewards(
    strategy,
    state.stepResults.map((r) => ({ rewards: r.reward === null ? null : r.rewards, contributes: r.contributes })),
  );
  const verdicts = state.stepVerdicts;
  if (state.infraFailed || state.endpointFailed || verdicts.length === 0) return;
  const last = verdicts[verdicts.length - 1]!;
  state.verdict = {
    ...last,
    reward: total?.reward ?? 0,
    rewards: total?.rewards ?? {},
    tests: state.stepTests,
    tampering: verdicts.flatMap((x) => x.tampering),
    findings: verdicts.flatMap((x) => x.findings ?? []),
    error: null,
    collected: undefined,
  };
}
