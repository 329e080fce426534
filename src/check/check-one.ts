import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadTask } from '../task/load.js';
import type { Task } from '../task/task.js';
import { CancelledError, TermgradeError, errorMessage } from '../util/errors.js';
import {
  describeCommands,
  verifierPlan,
  withVerifierToolchain,
  type VerifierPlan,
} from '../verifier/toolchain/plan.js';
import { checkRuns, safeName, type CheckContext } from './check-runs.js';
import type { CheckOptions } from './options.js';
import { reviewTask } from './review.js';
import type { CheckedTask } from './schema.js';
import type { ReasonCode } from './verdict.js';

/** A task's check before anything is known: rejected until it is judged. */
function emptyCheck(taskPath: string): CheckedTask {
  return {
    path: taskPath,
    name: path.basename(taskPath),
    verdict: 'rejected',
    reasons: [],
    tests: [],
    details: [],
    image: null,
    imageCached: null,
    buildMs: null,
    oracle: { runs: 0, passed: 0, rewards: [] },
    nop: null,
    trials: [],
    findings: [],
    hacks: [],
    review: null,
    probeMs: null,
    substitutions: [],
    probesNotRun: [],
    durationMs: 0,
  };
}

/**
 * The task loaded, with a reference solution (a multi-step task's: each step's solution/, or the
 * task's); null when not.
 */
async function loadForCheck(taskPath: string, result: CheckedTask): Promise<Task | null> {
  try {
    const task = await loadTask(taskPath);
    result.name = task.name;
    // Kept and shown, never a reason: a typo'd section would otherwise pass silently.
    for (const w of task.warnings ?? []) result.details.push(`warning: ${w}`);
    const unsolved = task.steps?.length
      ? task.steps.filter((st) => !st.solutionDir).map((st) => `steps/${st.name}/solution/solve.sh`)
      : task.solutionDir
        ? []
        : ['solution/solve.sh'];
    if (unsolved.length)
      throw new TermgradeError(
        'invalid_task',
        `task ${taskPath}: ${unsolved.join(', ')}: missing (check needs a reference solution)`,
      );
    return task;
  } catch (err) {
    result.details.push(errorMessage(err));
    return null;
  }
}

/**
 * How the task's verifier gets its tools; the task graded with the offline toolchain where it
 * serves them. Null: test.sh unreadable.
 */
async function planVerifier(
  task: Task,
  result: CheckedTask,
  options: CheckOptions,
): Promise<{ task: Task; plan: VerifierPlan } | null> {
  let plan: VerifierPlan;
  try {
    plan = await verifierPlan(task, { wheelsDir: options.verifierWheels });
  } catch (err) {
    result.details.push(`tests/test.sh: ${errorMessage(err)}`);
    return null;
  }
  // Checked online (--network, a task that asks for the internet): its verifier fetches its own tools.
  if (options.network && task.limits.network) {
    result.details.push(`verifier: checked online on network ${options.network}: test.sh fetches its own tools`);
    return { task, plan };
  }
  if (options.verifierToolchain === false) return { task, plan };
  // What the toolchain does not serve still fails at once offline (the fetch settings alone).
  if (plan.kind !== 'toolchain') return { task: withVerifierToolchain(task, plan), plan };
  const substituted = plan.substituted.length ? ` (${plan.substituted.join(', ')})` : '';
  result.details.push(
    `verifier: test.sh fetches its tools (${describeCommands(plan.commands)}); graded offline with termgrade's verifier toolchain${substituted}`,
  );
  return { task: withVerifierToolchain(task, plan), plan };
}

/** The task's image built (or found), its log kept under builds/; false when the build failed. */
async function buildForCheck(
  task: Task,
  taskPath: string,
  result: CheckedTask,
  options: CheckOptions,
): Promise<boolean> {
  const buildLog = path.join(options.outDir, 'builds', `${safeName(taskPath)}.log`);
  try {
    const prepared = await options.provider.prepare(task, { signal: options.signal, forceBuild: options.forceBuild });
    Object.assign(result, { image: prepared.image, imageCached: prepared.cached, buildMs: prepared.durationMs });
    if (prepared.log) await writeFile(buildLog, prepared.log);
    return true;
  } catch (err) {
    if (err instanceof CancelledError) throw err;
    const log = (err as { log?: string }).log;
    if (log) await writeFile(buildLog, log);
    result.details.push(`build: ${errorMessage(err)}${log ? ` (log: ${buildLog})` : ''}`);
    return false;
  }
}

/** Checks one task folder: loaded, its verifier planned, its image built, then its runs and probes judged. */
export async function checkOne(taskPath: string, options: CheckOptions): Promise<CheckedTask> {
  const started = performance.now();
  const emit = options.onEvent ?? (() => {});
  const result = emptyCheck(taskPath);
  const finish = (reasons: ReasonCode[]): CheckedTask => {
    result.reasons = reasons;
    result.verdict = reasons.length === 0 ? 'admissible' : 'rejected';
    result.durationMs = performance.now() - started;
    emit({ type: 'task-done', task: result });
    return result;
  };
  emit({ type: 'task-start', path: taskPath });
  const loaded = await loadForCheck(taskPath, result);
  if (!loaded) return finish(['invalid_task']);
  if (options.review) result.review = await reviewTask(loaded, options.review, options.signal);
  const planned = await planVerifier(loaded, result, options);
  if (!planned) return finish(['invalid_task']);
  emit({ type: 'phase', path: taskPath, phase: 'build' });
  if (!(await buildForCheck(planned.task, taskPath, result, options))) return finish(['build_failed']);
  const ctx: CheckContext = { taskPath, task: planned.task, plan: planned.plan, options, result, emit };
  return finish(await checkRuns(ctx));
}
