import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { findTaskDirs, loadTask } from '../task/load.js';
import { TermgradeError } from '../util/errors.js';
import { asGraded } from '../verifier/toolchain/plan.js';
import type { ServedTask } from './sessions.js';

interface ManifestRow {
  task: string;
  rate: number;
  interval?: [number, number];
  trials?: number;
  successes?: number;
}

/**
 * The tasks a server offers: task folders, narrowed to a `select` output folder's training and
 * validation sets when one is given (with their measured rates). A task the selection names that
 * no folder holds is an error naming it.
 */
export async function loadServedTasks(paths: string[], selectionDir?: string): Promise<ServedTask[]> {
  const loaded = await Promise.all((await findTaskDirs(paths)).map((d) => loadTask(d)));
  // A session serves one instruction and grades once: a multi-step task (steps run and graded in
  // order by `run`) would be served without its steps, so it is left out and named.
  const multiStep = loaded.filter((t) => (t.steps?.length ?? 0) > 0);
  if (multiStep.length > 0)
    process.emitWarning(
      `serve leaves out multi-step tasks (run grades them step by step; sessions serve single-step tasks): ${multiStep.map((t) => t.name).join(', ')}`,
    );
  // Sandboxes are offline: a verifier that fetches its tools (TB2's uvx pytest) is graded with the
  // offline toolchain, as `run` does, or it would fail every session for want of a network.
  const tasks = await Promise.all(loaded.filter((t) => !multiStep.includes(t)).map((t) => asGraded(t, null)));
  if (!selectionDir) return tasks.map((task) => ({ task, split: null, rate: null, interval: null, measured: null }));
  const file = path.join(selectionDir, 'manifest.json');
  let manifest: { training?: ManifestRow[]; validation?: ManifestRow[] };
  try {
    manifest = JSON.parse(await readFile(file, 'utf8')) as typeof manifest;
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: cannot read the selection manifest (${(err as Error).message})`);
  }
  const byName = new Map(tasks.map((t) => [t.name, t]));
  const out: ServedTask[] = [];
  for (const [split, rows] of [
    ['train', manifest.training ?? []],
    ['validation', manifest.validation ?? []],
  ] as const) {
    for (const row of rows) {
      const task = byName.get(row.task);
      if (!task && multiStep.some((t) => t.name === row.task))
        throw new TermgradeError(
          'bad_input',
          `${file}: task "${row.task}" is a multi-step task, which serve does not serve (its sessions serve one instruction, graded once)`,
        );
      if (!task)
        throw new TermgradeError(
          'bad_input',
          `${file}: task "${row.task}" is selected but no task folder given holds it`,
        );
      // The counts are the live curriculum's prior (see curriculum.ts).
      const measured =
        Number.isInteger(row.trials) &&
        Number.isInteger(row.successes) &&
        row.trials! >= row.successes! &&
        row.successes! >= 0
          ? { n: row.trials!, c: row.successes! }
          : null;
      out.push({ task, split, rate: row.rate ?? null, interval: row.interval ?? null, measured });
    }
  }
  return out;
}
