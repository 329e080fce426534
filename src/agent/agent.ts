import type { AgentSandbox } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import type { Scrub } from '../util/scrub.js';

/** Running totals an agent keeps up to date as it goes, so a timeout still leaves them behind. */
export interface AgentUsage {
  turns: number;
  tokens: { input: number; cached: number; output: number } | null;
  costUsd: number | null;
}

export interface AgentContext {
  /** What an agent needs of its sandbox (commands, files, a shell): never grading's parts. */
  sandbox: AgentSandbox;
  task: Task;
  /** Host folder for the agent's own logs (becomes <trial>/agent). */
  logsDir: string;
  /** Aborted at the agent's timeout, or when the whole run is cancelled. */
  signal: AbortSignal;
  /** Applied to everything the agent writes: secrets never reach a file. */
  scrub: Scrub;
  usage: AgentUsage;
  /** The trial's id, used as the trajectory's session id. */
  sessionId: string;
  /** Environment variables the configuration gives the agent's commands (--agent-env, env files). */
  env: Record<string, string>;
  /**
   * Tree rollouts (an agent with `canBranch`): asked after each whole turn (its model call and its
   * commands run); true stops the run there, ending `paused` with the state to continue from.
   */
  pauseWhen?: (turn: AgentTurn) => boolean;
  /** Tree rollouts: continue a paused run (a branch), its conversation and counters as they were. */
  resumeFrom?: AgentPause;
}

/** A turn that just ended, for a branch condition: its number (from 1) and the commands it ran. */
export interface AgentTurn {
  turn: number;
  commands: string[];
}

/**
 * A paused run, handed from the run that paused to each branch that continues it: opaque to all
 * but the agent that made it. Each branch gets its own copy (`structuredClone`).
 */
export interface AgentPause {
  readonly agent: string;
  /** Turns taken before the pause. */
  readonly turns: number;
  readonly state: unknown;
}

/** Why the agent stopped; the trial records it and verifies the sandbox either way. */
export type AgentExitReason =
  'completed' | 'max_turns' | 'context_exhausted' | 'model_error' | 'parse_errors' | 'agent_error' | 'paused';

export interface AgentOutcome {
  exitReason: AgentExitReason;
  message: string | null;
  /** With exitReason model_error: the model client's error kind (rate_limit, auth, refusal ...). */
  modelErrorKind?: string;
  /** With exitReason paused (ctx.pauseWhen said so): what a branch continues from. */
  pause?: AgentPause;
}

/**
 * An agent works in a sandbox until it is done, fails, or its signal aborts. It never grades
 * itself and never sees tests/. New scaffolds are one new file implementing this.
 */
export interface Agent {
  readonly name: string;
  /** The model it talks to, for the record; null for agents with no model. */
  readonly model: string | null;
  /**
   * True when the agent's first step is a model call that needs nothing of the sandbox: the trial
   * then starts the agent while the sandbox is still starting (its methods wait for it), hiding
   * the start behind the model's latency.
   */
  readonly modelFirst?: boolean;
  /**
   * The agent can pause at a turn and be continued from there in another sandbox (ctx.pauseWhen,
   * ctx.resumeFrom): tree rollouts. An agent whose state lives in the sandbox's processes (a
   * terminal session) cannot: a fork carries files and services, not its shell.
   */
  readonly canBranch?: boolean;
  /** Dockerfile lines the agent needs on top of the task's image, baked in before trials run. */
  readonly imageLayer?: string;
  /** Installs what the agent needs in the sandbox (its own phase, with its own timeout). */
  setup(ctx: AgentContext): Promise<void>;
  run(ctx: AgentContext): Promise<AgentOutcome>;
}
