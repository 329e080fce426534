import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { TaskError, isMissing, readFailure } from '../util/errors.js';
import { exists } from '../util/files.js';
import type { TaskConfig } from './schema.js';
import type { TaskDataset, TaskStep } from './task.js';

/**
 * A multi-step task's steps, from `[[steps]]` and the steps/<name>/ folders (Harbor's layout):
 * each step needs its instruction.md, and a test.sh in its own tests/ or the task's tests/ (the
 * step's files are copied over the task's). A step's solution/ is the oracle's for that step.
 */
export async function loadSteps(
  taskPath: string,
  config: TaskConfig,
  rootSolutionDir: string | null,
): Promise<TaskStep[]> {
  const declared = config.steps ?? [];
  const seen = new Set<string>();
  const rootTests = path.join(taskPath, 'tests');
  const rootHasTest = await exists(path.join(rootTests, 'test.sh'));
  const steps: TaskStep[] = [];
  for (const [i, step] of declared.entries()) {
    const where = `task.toml [steps.${i}] "${step.name}"`;
    if (seen.has(step.name))
      throw new TaskError(taskPath, where, 'a second step of this name (step names are folder names under steps/)');
    seen.add(step.name);
    const dir = path.join(taskPath, 'steps', step.name);
    let instruction: string;
    try {
      instruction = await readFile(path.join(dir, 'instruction.md'), 'utf8');
    } catch (err) {
      throw new TaskError(
        taskPath,
        `steps/${step.name}/instruction.md`,
        isMissing(err) ? 'missing (every step tells the agent what to do)' : `cannot be read (${readFailure(err)})`,
      );
    }
    if (instruction.trim() === '') throw new TaskError(taskPath, `steps/${step.name}/instruction.md`, 'empty');
    const stepTests = path.join(dir, 'tests');
    const stepHasTests = await exists(stepTests);
    if (!rootHasTest && !(await exists(path.join(stepTests, 'test.sh')))) {
      throw new TaskError(
        taskPath,
        `steps/${step.name}/tests/test.sh`,
        'missing, and the task has no tests/test.sh for its steps to share',
      );
    }
    const stepSolution = path.join(dir, 'solution');
    steps.push({
      name: step.name,
      config: step,
      instruction,
      testsDirs: [...((await exists(rootTests)) ? [rootTests] : []), ...(stepHasTests ? [stepTests] : [])],
      solutionDir: (await exists(path.join(stepSolution, 'solve.sh'))) ? stepSolution : rootSolutionDir,
    });
  }
  if (!declared.some((s) => s.contributes_to_reward))
    throw new TaskError(
      taskPath,
      'task.toml [steps]',
      'every step has contributes_to_reward = false: the task would have no reward',
    );
  return steps;
}

const text = (v: unknown): string | null => (typeof v === 'string' || typeof v === 'number' ? String(v) : null);

/**
 * The dataset a task belongs to, from the dataset.toml in its parent folder (`[dataset] name,
 * version`, or the same keys at the top): null without one. A dataset.toml that is there but
 * unreadable is the task's error, named, not a silent null.
 */
export async function loadDataset(taskPath: string): Promise<TaskDataset | null> {
  const file = path.join(path.dirname(taskPath), 'dataset.toml');
  if (!(await exists(file))) return null;
  let raw: Record<string, unknown>;
  try {
    raw = parseToml(await readFile(file, 'utf8'));
  } catch (err) {
    throw new TaskError(
      path.dirname(taskPath),
      'dataset.toml',
      `not valid TOML: ${(err instanceof Error ? err.message : String(err)).split('\n')[0]}`,
    );
  }
  const table = raw.dataset && typeof raw.dataset === 'object' ? (raw.dataset as Record<string, unknown>) : raw;
  return { name: text(table.name), version: text(table.version) };
}
