import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadTask } from '../task/load.js';
import { CancelledError, TaskError } from '../util/errors.js';
import { mapPool } from '../util/pool.js';
import { hashTree } from '../util/walk.js';
import { checkOne } from './check-one.js';
import type { CheckOptions } from './options.js';
import { findDuplicates, type DuplicateCandidate } from './duplicates.js';
import { CheckedTaskSchema, type CheckedTask, type CheckReport } from './schema.js';
import { logged } from '../util/log.js';

export type { CheckEvent, CheckOptions } from './options.js';

/** What the duplicate probe compares, read from a task folder: environment and tests content, and the instruction. */
export async function readDuplicateKey(taskPath: string): Promise<DuplicateCandidate> {
  const t = await loadTask(taskPath);
  return {
    name: taskPath,
    environment: t.environment.kind === 'dockerfile' ? t.environment.contentHash : t.environment.image,
    tests: await hashTree(t.testsDir),
    instruction: t.instruction,
  };
}

/** A task that does not load has no key: its own check says why (TaskError); anything else is logged. */
const duplicateKey = (taskPath: string): Promise<DuplicateCandidate | null> =>
  readDuplicateKey(taskPath).catch(
    logged('read a task for the duplicate check', null, {
      fields: { task: taskPath },
      expected: (err) => err instanceof TaskError,
    }),
  );

/** Checks every task folder; one bad task never stops the others. */
export async function checkTasks(taskPaths: string[], options: CheckOptions): Promise<CheckReport> {
  const started = performance.now();
  await mkdir(path.join(options.outDir, 'builds'), { recursive: true });
  let cancelled = false;
  const done = options.store ? options.store.checkedTasks() : new Map<string, unknown>();
  const results = await mapPool(
    taskPaths,
    options.concurrency ?? 2,
    async (p) => {
      const earlier = done.get(path.resolve(p));
      if (earlier) return CheckedTaskSchema.parse(earlier);
      try {
        const checked = await checkOne(p, options);
        options.store?.recordChecked({ ...checked, path: path.resolve(checked.path) });
        return checked;
      } catch (err) {
        if (err instanceof CancelledError || options.signal?.aborted) {
          cancelled = true;
          return undefined;
        }
        throw err;
      }
    },
    options.signal,
  );
  const tasks = results.filter((r): r is CheckedTask => r !== undefined);
  const level = options.probes ?? 'fast';
  const p0 = performance.now();
  if (level !== 'none') {
    // The same task twice among the admitted: the later one (by path) is the duplicate, naming the
    // earlier (a rejected task is out already, whatever it duplicates).
    const keys = (await Promise.all(tasks.filter((t) => t.verdict === 'admissible').map((t) => duplicateKey(t.path))))
      .filter((k): k is DuplicateCandidate => k !== null)
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const pair of findDuplicates(keys)) {
      const dup = tasks.find((t) => t.path === pair.b)!;
      const finding = {
        probe: 'duplicate' as const,
        rejects: true,
        did: `compared ${path.basename(pair.b)} with every other task`,
        saw: `the same task as ${path.basename(pair.a)}: ${pair.why}`,
      };
      dup.findings.push(finding);
      dup.details.push(`duplicate: ${finding.saw}`);
      if (!dup.reasons.includes('duplicate')) dup.reasons.push('duplicate');
      dup.verdict = 'rejected';
      options.store?.recordChecked({ ...dup, path: path.resolve(dup.path) });
    }
  }
  const probeMs = tasks.reduce((a, t) => a + (t.probeMs ?? 0), 0) + (performance.now() - p0);
  const reasons: Record<string, number> = {};
  for (const t of tasks) for (const r of t.reasons) reasons[r] = (reasons[r] ?? 0) + 1;
  const admissible = tasks.filter((t) => t.verdict === 'admissible').length;
  const report: CheckReport = {
    tasks,
    summary: {
      total: tasks.length,
      admissible,
      rejected: tasks.length - admissible,
      yield: tasks.length ? admissible / tasks.length : 0,
      reasons,
      cancelled: cancelled || (options.signal?.aborted ?? false),
      probes: level,
      probeMs,
      durationMs: performance.now() - started,
      outDir: options.outDir,
    },
  };
  await writeFile(path.join(options.outDir, 'check.json'), `${JSON.stringify(report, null, 2)}\n`);
  return report;
}
