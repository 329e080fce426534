import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml, TomlError } from 'smol-toml';
import { TaskError, errnoOf, isMissing, readFailure } from '../util/errors.js';
import { exists } from '../util/files.js';
import { hashTree, isInside, symlinkTarget, walk } from '../util/walk.js';
import { resourceLimits, TaskConfigSchema, type TaskConfig } from './schema.js';
import { loadDataset, loadSteps } from './steps.js';
import type { Task, TaskEnvironment } from './task.js';
import { unknownTaskKeys } from './unknown-keys.js';

async function readConfig(taskPath: string): Promise<{ config: TaskConfig; warnings: string[] }> {
  const file = path.join(taskPath, 'task.toml');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new TaskError(
      taskPath,
      'task.toml',
      isMissing(err) ? 'missing (every task folder needs a task.toml)' : `cannot be read (${readFailure(err)})`,
    );
  }
  let raw: unknown;
  try {
    raw = parseToml(text);
  } catch (err) {
    const where = err instanceof TomlError ? ` at line ${err.line}, column ${err.column}` : '';
    const first = (err instanceof Error ? err.message : String(err)).split('\n')[0];
    throw new TaskError(taskPath, 'task.toml', `not valid TOML${where}: ${first}`);
  }
  const parsed = TaskConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TaskError(taskPath, 'task.toml', `[${issue.path.join('.')}] ${issue.message}`);
  }
  return { config: parsed.data, warnings: unknownTaskKeys(raw).map((w) => `${file}: ${w}`) };
}

/**
 * Refuses any entry that reaches outside the task folder: a symlink (at any depth, or one of the
 * top-level parts itself) whose target resolves elsewhere, or a dangling one. A task that could
 * read the host's files through its build context or tests is not a task we run.
 */
async function checkContainment(taskPath: string, realRoot: string): Promise<void> {
  for (const entry of await walk(taskPath)) {
    if (entry.kind !== 'symlink') continue;
    const target = await symlinkTarget(entry.abs);
    if (target === null) throw new TaskError(taskPath, entry.rel, 'dangling symlink');
    if (!isInside(realRoot, target)) {
      throw new TaskError(taskPath, entry.rel, `symlink escapes the task folder (points to ${target})`);
    }
  }
}

/** Dockerfile COPY/ADD sources with `..` or absolute paths would reach outside the build context. */
async function checkDockerfile(taskPath: string, dockerfile: string): Promise<void> {
  const text = await readFile(dockerfile, 'utf8');
  const lines = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  lines.forEach((line) => {
    const m = /^\s*(COPY|ADD)\s+(.*)$/i.exec(line);
    if (!m) return;
    const args = m[2]!.split(/\s+/).filter((a) => a && !a.startsWith('--'));
    for (const src of args.slice(0, -1)) {
      if (/^[a-z]+:\/\//i.test(src)) continue;
      const norm = path.posix.normalize(src);
      if (norm.startsWith('../') || norm === '..') {
        throw new TaskError(
          taskPath,
          'environment/Dockerfile',
          `${m[1]} source "${src}" escapes the build context through ..`,
        );
      }
    }
  });
}

export async function loadTask(dir: string): Promise<Task> {
  const taskPath = path.resolve(dir);
  let realRoot: string;
  try {
    realRoot = await symlinkTarget(taskPath).then((r) => r ?? Promise.reject(new Error('missing')));
    if (!(await stat(realRoot)).isDirectory()) throw new Error('not a folder');
  } catch (err) {
    // Absent, dangling, not a folder, or unreadable: the reason, unless it is one of the first three.
    const why = isMissing(err) || !errnoOf(err) ? '' : ` (${readFailure(err)})`;
    throw new TaskError(taskPath, '.', `not a readable folder${why}`);
  }
  const { config, warnings } = await readConfig(taskPath);
  await checkContainment(taskPath, realRoot);

  // A multi-step task's instruction and tests are its steps' (the root ones optional, as in Harbor).
  const multiStep = (config.steps?.length ?? 0) > 0;
  const instructionFile = path.join(taskPath, 'instruction.md');
  let instruction = '';
  try {
    instruction = await readFile(instructionFile, 'utf8');
  } catch (err) {
    if (!isMissing(err)) throw new TaskError(taskPath, 'instruction.md', `cannot be read (${readFailure(err)})`);
    if (!multiStep) throw new TaskError(taskPath, 'instruction.md', 'missing (the agent would be told nothing)');
  }
  if (instruction.trim() === '' && !multiStep) throw new TaskError(taskPath, 'instruction.md', 'empty');

  const testsDir = path.join(taskPath, 'tests');
  if (!multiStep && !(await exists(path.join(testsDir, 'test.sh')))) {
    throw new TaskError(taskPath, 'tests/test.sh', 'missing (the verifier entry point)');
  }

  const envDir = path.join(taskPath, 'environment');
  const dockerfile = path.join(envDir, 'Dockerfile');
  let environment: TaskEnvironment;
  if (await exists(dockerfile)) {
    await checkDockerfile(taskPath, dockerfile);
    environment = {
      kind: 'dockerfile',
      contextDir: envDir,
      contentHash: await hashTree(envDir),
      prebuilt: config.environment.docker_image ?? null,
    };
  } else if (config.environment.docker_image) {
    environment = { kind: 'image', image: config.environment.docker_image };
  } else {
    throw new TaskError(
      taskPath,
      'environment/Dockerfile',
      'missing, and task.toml names no [environment].docker_image',
    );
  }

  const solutionDir = path.join(taskPath, 'solution');
  const hasSolution = await exists(path.join(solutionDir, 'solve.sh'));
  const steps = multiStep ? await loadSteps(taskPath, config, hasSolution ? solutionDir : null) : [];

  return {
    path: taskPath,
    name: config.task?.name ?? path.basename(taskPath),
    config,
    instruction,
    environment,
    limits: resourceLimits(config),
    solutionDir: hasSolution ? solutionDir : null,
    testsDir,
    checksum: await hashTree(taskPath),
    warnings,
    steps,
    version: config.task?.version ?? null,
    dataset: await loadDataset(taskPath),
  };
}

/**
 * Expands the folders a user names: a folder holding task.toml (or instruction.md) is one task;
 * any other folder is a collection whose direct children are tasks (hidden ones left out). Sorted,
 * deduplicated.
 */
export async function findTaskDirs(roots: string[]): Promise<string[]> {
  const found = new Set<string>();
  for (const root of roots) {
    let abs = path.resolve(root);
    if (!(await exists(abs))) throw new TaskError(abs, '.', 'no such folder');
    if (!(await stat(abs)).isDirectory()) {
      // A task.toml named directly stands for its task folder; any other file is a mistake.
      if (path.basename(abs) !== 'task.toml')
        throw new TaskError(abs, '.', 'a file, not a task folder (give the folder that holds task.toml)');
      abs = path.dirname(abs);
    }
    if ((await exists(path.join(abs, 'task.toml'))) || (await exists(path.join(abs, 'instruction.md')))) {
      found.add(abs);
      continue;
    }
    for (const entry of await readdir(abs, { withFileTypes: true })) {
      // Hidden folders are a tool's own (synth's .synth record, a write's .partial, .git), never tasks.
      if (entry.name.startsWith('.')) continue;
      if (entry.isDirectory() || entry.isSymbolicLink()) found.add(path.join(abs, entry.name));
    }
  }
  return [...found].sort();
}
