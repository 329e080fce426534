import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { TermgradeError } from '../util/errors.js';
import type { Agent, AgentContext, AgentOutcome } from './agent.js';
import type { AgentPlugin } from './registry.js';

export const SOLUTION_DIR = '/solution';

/** Runs the task's reference solution, solution/solve.sh: the proof that the task can be solved. */
export const oracleAgent: Agent = {
  name: 'oracle',
  model: null,
  async setup({ sandbox, task }: AgentContext): Promise<void> {
    // A multi-step task's solutions are its steps': each is copied in as its step begins (run).
    if (task.steps?.length) return;
    if (!task.solutionDir)
      throw new TermgradeError(
        'invalid_task',
        `task ${task.path}: solution/solve.sh: missing (the oracle has nothing to run)`,
      );
    await sandbox.copyIn(task.solutionDir, SOLUTION_DIR);
  },
  async run({ sandbox, task, logsDir, signal, scrub, usage }: AgentContext): Promise<AgentOutcome> {
    usage.turns += 1;
    if (task.steps?.length) {
      if (!task.solutionDir)
        return {
          exitReason: 'agent_error',
          message: `task ${task.path}: this step has no solution/solve.sh (nor has the task)`,
        };
      await sandbox.copyIn(task.solutionDir, SOLUTION_DIR);
    }
    const result = await sandbox.exec(['bash', `${SOLUTION_DIR}/solve.sh`], { env: task.config.solution.env, signal });
    await writeFile(
      path.join(logsDir, 'oracle.txt'),
      scrub(`${result.stdout.text}${result.stderr.text ? `\n--- stderr ---\n${result.stderr.text}` : ''}`),
    );
    if (result.exitCode !== 0)
      return { exitReason: 'agent_error', message: `solve.sh exited with code ${result.exitCode}` };
    return { exitReason: 'completed', message: null };
  },
};

/** Does nothing: a task this agent passes does not test anything. */
export const nopAgent: Agent = {
  name: 'nop',
  model: null,
  async setup(): Promise<void> {},
  async run(): Promise<AgentOutcome> {
    return { exitReason: 'completed', message: null };
  },
};

export const oraclePlugin: AgentPlugin = { name: 'oracle', create: () => oracleAgent };
export const nopPlugin: AgentPlugin = { name: 'nop', create: () => nopAgent };
