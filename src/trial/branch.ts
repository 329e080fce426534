import { cp } from 'node:fs/promises';
import path from 'node:path';
import type { AgentPause, AgentTurn } from '../agent/agent.js';
import type { ForkedService, Sandbox, SandboxFork } from '../sandbox/sandbox.js';
import { TermgradeError, errorMessage } from '../util/errors.js';
import { nowIso } from '../util/time.js';
import type { TrialOptions } from './options.js';
import { agentRunPhase, agentSetupPhase } from './phases/agent.js';
import { teardownPhase } from './phases/collection.js';
import { environmentPhase, settleEnvironment } from './phases/environment.js';
import { gradeTrial, inTrialFrame } from './run.js';
import type { PhaseTiming, TrialResult } from './schema.js';
import { cancelled, fail, newTrialId, openTrial, type TrialState } from './state.js';
import { writeFileAtomic } from '../util/files.js';

/** Where a tree branches, and into how many: after turn `atTurn`, or after the first turn that ran a command matching `atCommand`. */
export interface BranchPlan {
  n: number;
  atTurn?: number;
  atCommand?: RegExp;
  /** The agent that continues branch j (serve's: one whose model calls name the branch); default the prefix's. */
  branchAgent?: (j: number) => TrialOptions['agent'];
}

/** Branch `j` (from 0) of the tree whose prefix is trial `prefix`. */
export const branchTrialId = (prefix: string, j: number): string => `${prefix}.b${j}`;

/** What the prefix's fork carried into every branch. */
export interface TreeFork {
  services: ForkedService[];
  notCarried: string[];
  frozenMs: number | null;
}

/** A tree-shaped trial: one prefix, n branches each a trial of its own (result.json, `branch` naming the prefix). */
export interface BranchedTrial {
  /** The prefix's trial id: its folder holds the prefix's agent logs, trial.log and tree.json. */
  prefixId: string;
  /** The turns the prefix took (the branches continue after them). */
  prefixTurns: number;
  /** The prefix reached its branch point; false: the agent ended first, and each branch is graded on its end with no turn of its own. */
  reached: boolean;
  fork: TreeFork | null;
  /** The n branches' trials, in order; empty when the prefix failed before any fork. */
  branches: TrialResult[];
  /** The prefix, recorded as a trial of its own, when it failed before any fork (no sandbox, no endpoint, the fork refused); else null. */
  failed: TrialResult | null;
}

/**
 * A tree-shaped trial (Tree-GRPO style rollouts): the agent runs to its branch point (`plan`), its
 * live sandbox is forked into n (Sandbox.fork: the files and services at that moment), and each
 * branch continues a copy of the agent's paused run in its own child, to the end, graded as any
 * trial is graded (the same options: admission record, timeouts, grading policy). An agent that
 * ends before its branch point is branched at its end (each branch graded, with no turn of its
 * own). Refused (TermgradeError `usage`) for an agent that cannot branch, a multi-step task, or a
 * backend that cannot fork.
 */
export async function runBranchedTrial(options: TrialOptions, plan: BranchPlan): Promise<BranchedTrial> {
  refuseUnbranchable(options, plan);
  const pauseWhen = (t: AgentTurn): boolean =>
    plan.atTurn !== undefined ? t.turn >= plan.atTurn : t.commands.some((c) => plan.atCommand!.test(c));
  const prefixId = options.trialId ?? newTrialId(options.task, options.agent.name, options.attempt ?? 0);
  const state = await openTrial({ ...options, trialId: prefixId, pauseWhen, removeInBackground: undefined });
  let box: Sandbox | null = null;
  try {
    box = await runPrefix(state);
  } catch (err) {
    fail(state, cancelled(state, err) ? 'cancelled' : 'internal_error', 'agent_run', errorMessage(err));
  }
  const none = { prefixId, prefixTurns: state.usage.turns, reached: false, fork: null, branches: [] };
  if (!box) return { ...none, failed: await inTrialFrame(state, async () => undefined) };
  const forkedAt = nowIso();
  const t0 = performance.now();
  let made: SandboxFork;
  try {
    made = await box.fork!(plan.n, {
      labels: (j) => ({ 'io.termgrade.trial': branchTrialId(prefixId, j) }),
      signal: options.signal,
    });
  } catch (err) {
    if (!cancelled(state, err))
      fail(state, 'environment_error', 'agent_run', `the fork at the branch point failed: ${errorMessage(err)}`);
    else fail(state, 'cancelled', 'agent_run', errorMessage(err));
    return { ...none, failed: await inTrialFrame(state, async () => undefined) };
  }
  const forkTiming = { startedAt: forkedAt, finishedAt: nowIso(), durationMs: performance.now() - t0 };
  const fork = { services: made.services, notCarried: made.notCarried, frozenMs: made.frozenMs ?? null };
  const pause = state.outcome?.pause ?? null;
  const tree = { prefixId, prefixTurns: state.usage.turns, reached: pause !== null, fork };
  // The parent's part is over: its sandbox goes (no result of its own: the branches are the trials).
  await teardownPhase(state);
  await writeTree(state, tree, made.children.length);
  const branches = await Promise.all(
    made.children.map((child, j) =>
      runBranch({ ...options, agent: plan.branchAgent?.(j) ?? options.agent }, state, {
        child,
        j,
        n: plan.n,
        pause,
        forkTiming,
      }),
    ),
  );
  return { ...tree, branches, failed: null };
}

function refuseUnbranchable(options: TrialOptions, plan: BranchPlan): void {
  const { agent, task, provider } = options;
  if (!agent.canBranch)
    throw new TermgradeError('usage', `agent ${agent.name} cannot branch (its state is not the conversation alone)`);
  if (task.steps?.length)
    throw new TermgradeError('usage', `task ${task.name} has steps: a multi-step task is not branched`);
  if (!provider.capabilities.fork)
    throw new TermgradeError('usage', `the ${provider.name} backend cannot fork a sandbox: no branches`);
  if ((plan.atTurn === undefined) === (plan.atCommand === undefined))
    throw new TermgradeError('usage', 'a branch point is a turn or a command pattern (one of them)');
  if (!Number.isInteger(plan.n) || plan.n < 1) throw new TermgradeError('usage', `${plan.n} branches: give 1 or more`);
}

/**
 * The prefix: environment, agent setup, the agent's run to its branch point. The started sandbox
 * (the real one behind a model-first start) when it can be forked; null when there is nothing to
 * branch (no sandbox, the setup or the endpoint failed: the prefix is then a failed trial).
 */
async function runPrefix(state: TrialState): Promise<Sandbox | null> {
  await environmentPhase(state);
  const box = state.sandbox;
  if (!box) return null;
  const starting = state.startingSandbox;
  if (!(await agentSetupPhase(state, box))) return null;
  await agentRunPhase(state, box, state.task, state.agentLogs, '');
  if (!(await settleEnvironment(state)) || state.endpointFailed || state.infraFailed) return null;
  return starting ? await starting : box;
}

/** tree.json in the prefix's folder: what links the branches to it, and what the prefix took. */
async function writeTree(
  state: TrialState,
  tree: { prefixId: string; prefixTurns: number; reached: boolean; fork: TreeFork },
  n: number,
): Promise<void> {
  const file = path.join(state.trialDir, 'tree.json');
  const record = {
    prefix: tree.prefixId,
    branches: Array.from({ length: n }, (_, j) => branchTrialId(tree.prefixId, j)),
    prefix_turns: tree.prefixTurns,
    reached: tree.reached,
    exit_reason: state.exitReason,
    usage: state.usage,
    fork: { services: tree.fork.services, not_carried: tree.fork.notCarried, frozen_ms: tree.fork.frozenMs },
    phases: state.phases,
  };
  await writeFileAtomic(file, `${state.scrub(JSON.stringify(record, null, 2))}\n`);
}

/**
 * Branch j: a trial of its own on child j of the fork (its environment's time is the fork's),
 * continuing a copy of the paused run, or (the agent ended before the branch point) taking the
 * prefix's end and its logs as they are; then graded as any trial.
 */
async function runBranch(
  options: TrialOptions,
  prefix: TrialState,
  b: { child: Sandbox; j: number; n: number; pause: AgentPause | null; forkTiming: PhaseTiming },
): Promise<TrialResult> {
  const state = await openTrial({
    ...options,
    trialId: branchTrialId(prefix.trialId, b.j),
    pauseWhen: undefined,
    resumeFrom: b.pause ?? undefined,
    branchOf: { prefix: prefix.trialId, index: b.j, of: b.n, atTurn: prefix.usage.turns },
  });
  state.sandbox = b.child;
  state.prepared = prefix.prepared;
  state.phases.environment_setup = b.forkTiming;
  return inTrialFrame(state, async () => {
    if (b.pause) await agentRunPhase(state, b.child, state.task, state.agentLogs, '');
    else {
      state.exitReason = prefix.exitReason;
      state.outcome = prefix.outcome;
      Object.assign(state.usage, prefix.usage);
      state.errors.push(...prefix.errors);
      await cp(prefix.agentLogs, state.agentLogs, { recursive: true });
    }
    await gradeTrial(state, b.child);
  });
}
