import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { takeLockNow, type HeldLock } from '../util/lock.js';
import { JobStore, storeError } from '../store/store.js';
import type { Task } from '../task/task.js';
import { TermgradeError } from '../util/errors.js';
import { parseSpec } from './load-spec.js';
import { configFingerprint, configLabelOf, type JobSpec } from './spec.js';
import { readPriors } from '../records/priors.js';
import { resolveTasks } from './tasks.js';
import { jobDbOf, jobDirOf, openJobRecords } from '../records/source.js';

export interface OpenedJob {
  spec: JobSpec;
  store: JobStore;
  jobDir: string;
  tasks: Task[];
  invalid: Array<{ path: string; message: string }>;
  /** Closes the store and lets another process run the job. */
  close(): Promise<void>;
}

/** The spec a job was last run with (to resume by name alone). */
export function storedSpec(jobsDir: string, name: string): JobSpec {
  const dir = jobDirOf(jobsDir, name);
  if (!existsSync(jobDbOf(dir))) throw new TermgradeError('usage', `no job "${name}" in ${path.resolve(jobsDir)}`);
  // A store that exists but cannot be read says why (damaged, newer schema), never "no job".
  const store = openJobRecords(dir);
  try {
    const raw = store.getMeta('spec');
    if (!raw)
      throw new TermgradeError('usage', `job "${name}" has no stored spec (an import?); give a job file or flags`);
    const spec = JSON.parse(raw) as { adaptive?: Record<string, unknown> };
    // Jobs made before the stopping rule could be chosen used predictive curtailment in pairs.
    if (spec.adaptive && spec.adaptive.method === undefined)
      Object.assign(spec.adaptive, { method: 'curtail', step: 2 });
    return parseSpec(spec, `${dir}/job.db`);
  } finally {
    store.close();
  }
}

/**
 * Opens (or creates) a job's folder and store, and refuses a spec that would mix incomparable
 * trials: a configuration whose behaviour-changing settings differ from when its trials were
 * recorded, or a task whose content changed since. More tasks, more configurations, a larger k,
 * other caps or budget are fine: they only add trials.
 */
/**
 * Takes a job folder for this process (made if missing): one writer per job, since two processes
 * would each run every open slot and one's results be lost. A live owner is refused (`job_busy`),
 * a dead one's lock taken over; a folder that cannot be written is a store error.
 */
export async function holdJobFolder(jobDir: string, label: string): Promise<HeldLock> {
  let lock: Awaited<ReturnType<typeof takeLockNow>>;
  try {
    await mkdir(jobDir, { recursive: true });
    lock = await takeLockNow(path.join(jobDir, 'job.lock'));
  } catch (err) {
    throw storeError(jobDbOf(jobDir), err);
  }
  if ('ownerPid' in lock) {
    throw new TermgradeError(
      'job_busy',
      `${label} is being run by another termgrade process (pid ${lock.ownerPid}); wait for it to finish or stop it, then run again (a job has one writer at a time)`,
    );
  }
  return lock;
}

/**
 * `resolved`: the task set when the caller resolved it already (to refuse or skip invalid folders
 * before any job exists). A job this call made and then refused is removed again: a refused run
 * leaves no job behind, so running it again starts afresh instead of being told to resume.
 */
export async function openJob(
  spec: JobSpec,
  jobsDir: string,
  resolved?: Awaited<ReturnType<typeof resolveTasks>>,
  /** Test hook: each trial's write to the store stalls this long (see JobStore.open). */
  storeWriteDelayMs = 0,
): Promise<OpenedJob> {
  const jobDir = jobDirOf(jobsDir, spec.name);
  const { tasks, invalid } = resolved ?? (await resolveTasks(spec));
  const isNew = !existsSync(jobDir);
  const lock = await holdJobFolder(jobDir, `job "${spec.name}"`);
  const undo = async (): Promise<void> => {
    await lock.release();
    if (isNew) await rm(jobDir, { recursive: true, force: true });
  };
  let store: JobStore;
  try {
    store = JobStore.open(jobDbOf(jobDir), { writeDelayMs: storeWriteDelayMs });
  } catch (err) {
    await undo();
    throw err;
  }
  try {
    const known = JSON.parse(store.getMeta('configs') ?? '{}') as Record<string, string>;
    const problems: string[] = [];
    for (const a of spec.agents) {
      const label = configLabelOf(a);
      const fp = configFingerprint(a);
      if (known[label] && known[label] !== fp)
        problems.push(
          `configuration "${label}" changed since its trials were recorded (was ${known[label]}, now ${fp})`,
        );
      known[label] = fp;
    }
    const checksums = store.taskChecksums();
    for (const t of tasks) {
      const was = checksums.get(t.name);
      if (was && was !== t.checksum)
        problems.push(
          `task "${t.name}" changed since its trials were recorded (content checksum ${was.slice(0, 12)} -> ${t.checksum.slice(0, 12)})`,
        );
    }
    // The adaptive rule decides which trials exist and how rates are estimated: it cannot change
    // under recorded trials (and under it, neither can k, the rule's cap).
    const sampling = JSON.stringify(spec.adaptive ? { ...spec.adaptive, kMax: spec.k } : null);
    const wasSampling = store.getMeta('sampling');
    if (wasSampling !== null && wasSampling !== sampling && store.count() > 0) {
      problems.push(`sampling changed since trials were recorded (was ${wasSampling}, now ${sampling})`);
    }
    if (problems.length) {
      throw new TermgradeError(
        'usage',
        `job "${spec.name}" cannot go on with this spec, it would mix incomparable trials:\n  ${problems.join('\n  ')}\nStart a new job (another --name), or restore the old settings.`,
      );
    }
    store.setMeta('configs', JSON.stringify(known));
    store.setMeta('sampling', sampling);
    // An informed prior is read once, when the job is made, and kept: resuming never re-reads it.
    if (spec.adaptive?.prior && store.getMeta('priors') === null)
      store.setMeta('priors', JSON.stringify(await readPriors(spec.adaptive.prior, spec.agents.map(configLabelOf))));
    store.setMeta('spec', JSON.stringify(spec));
    // Slots in all (k x configurations x tasks; adaptive sampling's cap): what a viewer shows progress against.
    store.setMeta('slots', String(spec.k * spec.agents.length * tasks.length));
    // And per configuration, kept across runs of the job with other configurations (a job run with
    // one model, then another): the slots in all are every configuration's, not the last run's.
    const byConfig = JSON.parse(store.getMeta('slots_by_config') ?? '{}') as Record<string, number>;
    for (const a of spec.agents) byConfig[configLabelOf(a)] = spec.k * tasks.length;
    store.setMeta('slots_by_config', JSON.stringify(byConfig));
  } catch (err) {
    store.close();
    await undo();
    throw err;
  }
  const close = async (): Promise<void> => {
    store.close();
    await lock.release();
  };
  return { spec, store, jobDir, tasks, invalid, close };
}
