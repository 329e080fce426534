import { readFile, stat } from 'node:fs/promises';
import { parse as parseToml } from 'smol-toml';
import path from 'node:path';
import { glob } from 'tinyglobby';
import { readTaskList } from '../task/list.js';
import { findTaskDirs, loadTask } from '../task/load.js';
import type { Task } from '../task/task.js';
import { errorMessage, isMissing, readFailure, TermgradeError } from '../util/errors.js';
import type { JobSpec } from './spec.js';
import { seededUniform } from '../stats/random.js';

/** A task-name glob (`*`, `?`, `[a-z]`, `[!x]`) as a regular expression. */
const toRegex = (pattern: string): RegExp =>
  new RegExp(
    `^${pattern
      .replace(/[.+^${}()|\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')
      .replace(/\[!/g, '[^')}$`,
  );

/**
 * The name a task folder goes by before it is loaded: task.toml's [task].name when the file reads,
 * else the folder's name (as loadTask names it). The filters need it for folders that do not load.
 */
async function nameBeforeLoading(dir: string): Promise<string> {
  // Absent or unreadable: loadTask says so (when the filters keep this folder); the folder name stands.
  const text = await readFile(path.join(dir, 'task.toml'), 'utf8').catch(() => null);
  if (text !== null) {
    try {
      const name = (parseToml(text) as { task?: { name?: unknown } }).task?.name;
      if (typeof name === 'string' && name) return name;
    } catch {
      // Not TOML: loadTask says so (when the filters keep this folder); the folder name stands.
    }
  }
  return path.basename(dir);
}

/**
 * The job's task set: every path (folders or globs) expanded, filtered by include, exclude and
 * split, then loaded. The filters come first, so a folder they leave out is never judged. A kept
 * folder that does not load is returned in `invalid`, for the caller to refuse or skip.
 */
export async function resolveTasks(
  spec: JobSpec,
): Promise<{ tasks: Task[]; invalid: Array<{ path: string; message: string }> }> {
  const roots: string[] = [];
  for (const p of spec.tasks.paths) {
    if (/[*?[\]{}]/.test(p)) {
      const found = await glob(p, { onlyDirectories: true, absolute: true, expandDirectories: false });
      if (found.length === 0) throw new TermgradeError('bad_input', `no task folder matches ${p}`);
      roots.push(...found.map((f) => f.replace(/\/$/, '')));
    } else {
      await stat(p).catch((err: unknown) => {
        throw new TermgradeError(
          'bad_input',
          `task path ${p}: ${isMissing(err) ? 'no such folder' : readFailure(err)}`,
        );
      });
      roots.push(p);
    }
  }
  let split: Set<string> | null = null;
  if (spec.tasks.split) {
    split = await readTaskList(spec.tasks.split, 'split file');
  }
  const include = spec.tasks.include.map(toRegex);
  const exclude = spec.tasks.exclude.map(toRegex);
  const tasks: Task[] = [];
  const invalid: Array<{ path: string; message: string }> = [];
  const seen = new Set<string>();
  const kept = (name: string): boolean =>
    (!include.length || include.some((r) => r.test(name))) &&
    !exclude.some((r) => r.test(name)) &&
    (!split || split.has(name));
  for (const dir of await findTaskDirs(roots)) {
    if (!kept(await nameBeforeLoading(dir))) continue;
    let task: Task;
    try {
      task = await loadTask(dir);
    } catch (err) {
      invalid.push({ path: dir, message: errorMessage(err) });
      continue;
    }
    if (!kept(task.name)) continue;
    if (seen.has(task.name)) {
      invalid.push({
        path: dir,
        message: `task name "${task.name}" is used by another task folder too (${path.basename(dir)})`,
      });
      continue;
    }
    seen.add(task.name);
    tasks.push(task);
  }
  tasks.sort((a, b) => (a.name < b.name ? -1 : 1));
  let chosen = tasks;
  if (spec.tasks.sample) {
    // A seeded Fisher-Yates draw over the name-sorted set: the same seed, the same tasks.
    const u = seededUniform(spec.tasks.sample.seed);
    const pool = [...tasks];
    for (let i = pool.length - 1; i > 0; i--) {
      const j = Math.floor(u() * (i + 1));
      [pool[i], pool[j]] = [pool[j]!, pool[i]!];
    }
    chosen = pool.slice(0, spec.tasks.sample.n).sort((a, b) => (a.name < b.name ? -1 : 1));
  }
  if (spec.tasks.limit) chosen = chosen.slice(0, spec.tasks.limit);
  if (chosen.length === 0 && invalid.length === 0)
    throw new TermgradeError(
      'bad_input',
      `no task is left after the filters (include ${JSON.stringify(spec.tasks.include)}, exclude ${JSON.stringify(spec.tasks.exclude)}${spec.tasks.split ? `, split ${spec.tasks.split}` : ''})`,
    );
  return { tasks: chosen, invalid };
}
