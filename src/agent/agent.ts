import type { Sandbox } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';

export interface AgentContext {
  sandbox: Sandbox;
  task: Task;
  /** Host folder for the agent's own logs (becomes <trial>/agent). */
  logsDir: string;
  /** Aborted at the agent's timeout, or when the whole run is cancelled. */
  signal: AbortSignal;
}

/** Why the agent stopped; the trial records it and verifies the sandbox either way. */
export type AgentExitReason = 'completed' | 'agent_error';

export interface AgentOutcome {
  exitReason: AgentExitReason;
  message: string | null;
  turns: number;
}

/**
 * An agent works in a sandbox until it is done, fails, or its signal aborts. It never grades
 * itself and never sees tests/. New scaffolds are one new file implementing this.
 */
export interface Agent {
  readonly name: string;
  /** Installs what the agent needs in the sandbox (its own phase, with its own timeout). */
  setup(ctx: AgentContext): Promise<void>;
  run(ctx: AgentContext): Promise<AgentOutcome>;
}
