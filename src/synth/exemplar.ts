import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { loadTask } from '../task/load.js';
import { TermgradeError, errorMessage, ifMissing } from '../util/errors.js';
import { walk } from '../util/walk.js';
import type { Seed } from './schema.js';

/** How much of each exemplar text the seed carries: enough to show the skill, not a whole task to copy. */
const TEXT_CHARS = 3000;
const MAX_FILES = 40;

/** What the generator is told to do with an exemplar. */
export const EXEMPLAR_BRIEF =
  'The exemplar is an existing task of the pool. Write a different task that exercises the same skill: ' +
  'another starting state, other inputs and another goal. Do not reuse its instruction, environment or tests: ' +
  'a copy of the exemplar is refused as a duplicate.';

const clip = (text: string): string =>
  text.length > TEXT_CHARS ? `${text.slice(0, TEXT_CHARS)}\n[... ${text.length - TEXT_CHARS} more characters]` : text;

/** The files under one of the task's folders, with sizes (names and sizes only: the content is not the skill). */
async function listing(dir: string): Promise<Array<{ path: string; size: number }>> {
  // A multi-step task may have no root tests/ folder: nothing to list.
  const entries = await walk(dir).catch((err: NodeJS.ErrnoException) =>
    err.code === 'ENOENT' ? [] : Promise.reject(err),
  );
  const files = entries.filter((e) => e.kind === 'file').slice(0, MAX_FILES);
  return Promise.all(files.map(async (f) => ({ path: f.rel, size: (await stat(f.abs)).size })));
}

const readIf = (file: string): Promise<string | null> => ifMissing(readFile(file, 'utf8').then(clip), null);

/** The seed id an exemplar folder gets: its folder name, reduced to the id alphabet. */
export function exemplarSeedId(dir: string): string {
  return `exemplar-${path.basename(path.resolve(dir)).replace(/[^A-Za-z0-9._-]/g, '_')}`;
}

/**
 * An existing task folder as a seed: its instruction, environment (Dockerfile, file listing) and
 * tests (test.sh, file listing) summarised, with the brief to write a different task of the same
 * skill. The folder must load as a task; errors name it (bad input).
 */
export async function readExemplar(dir: string): Promise<{ id: string; seed: Seed }> {
  let task;
  try {
    task = await loadTask(dir);
  } catch (err) {
    throw new TermgradeError('usage', `--exemplars ${dir}: not a loadable task folder (${errorMessage(err)})`);
  }
  const env = task.environment;
  const environment =
    env.kind === 'dockerfile'
      ? { dockerfile: await readIf(path.join(env.contextDir, 'Dockerfile')), files: await listing(env.contextDir) }
      : { image: env.image, files: [] };
  const exemplar = {
    name: task.name,
    instruction: clip(task.instruction),
    environment,
    tests: { testSh: await readIf(path.join(task.testsDir, 'test.sh')), files: await listing(task.testsDir) },
  };
  const id = exemplarSeedId(dir);
  return { id, seed: { id, exemplar, brief: EXEMPLAR_BRIEF } };
}

/** Several exemplar folders; two that would get one seed id are refused (bad input). */
export async function readExemplars(dirs: string[]): Promise<Array<{ id: string; seed: Seed }>> {
  const out = await Promise.all(dirs.map(readExemplar));
  const seen = new Map<string, string>();
  out.forEach((e, i) => {
    const other = seen.get(e.id);
    if (other !== undefined)
      throw new TermgradeError(
        'usage',
        `--exemplars ${dirs[i]} and ${other} both give the seed id ${e.id}: rename one folder`,
      );
    seen.set(e.id, dirs[i]!);
  });
  return out;
}
