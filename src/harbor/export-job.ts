import { cp, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseEnvFile } from '../agent/env.js';
import {} from '../job/job.js';
import { parseSpec } from '../job/load-spec.js';
import type { JobSpec } from '../job/spec.js';
import { JobStore, type TrialRow } from '../store/store.js';
import { TrialResultSchema, type TrialResult } from '../trial/schema.js';
import { TermgradeError, ifMissing } from '../util/errors.js';
import { exists, readTextIfThere } from '../util/files.js';
import { makeScrub, scrubValue, type Scrub } from '../util/scrub.js';
import {
  harborJobConfig,
  harborJobResult,
  harborTrialResult,
  importedJobConfig,
  ORIGINALS,
  rolloutDetailsOf,
  uuidOf,
  type JobContext,
  type TrialInput,
} from './layout.js';
import {
  HarborJobConfigSchema,
  HarborJobResultSchema,
  HarborTrialResultSchema,
  type HarborTrialResult,
} from './schema.js';
import { openJobRecords, recordSource } from '../records/source.js';

const VERSION = '0.1.0';
/** What a trial folder holds that is not copied to the export: its record (written anew) and the import's originals. */
const SKIPPED = new Set(['result.json', 'config.json', ORIGINALS]);

/** A name usable as one folder name: Harbor's trial names are task__id; ours may hold ':' or '/' (imports). */
const folderName = (s: string): string => s.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 200) || 'trial';

/**
 * Secrets the job's records must not carry even by mistake: each model's API key (from its
 * variable) and every value of the agents' env files, when readable now.
 */
async function secretScrub(spec: JobSpec): Promise<Scrub> {
  const secrets: string[] = [];
  for (const a of spec.agents) {
    if (a.model) secrets.push(process.env[a.model.apiKeyEnv] ?? '');
    for (const f of a.envFiles) {
      const text = await readTextIfThere(f);
      if (text) secrets.push(...Object.values(parseEnvFile(text, f)));
    }
  }
  return makeScrub(secrets);
}

/** The job's spec; null for an imported job (it ran elsewhere: its config is what its trials show). */
function storedSpecOf(store: JobStore, source: string): JobSpec | null {
  const raw = store.getMeta('spec');
  return raw ? parseSpec(JSON.parse(raw), `${source}/job.db`) : null;
}

/** A trial folder whose result.json is Harbor's own: a job imported by a version that did not copy trials. */
const isHarborRecord = (v: Record<string, unknown>): boolean => v.schemaVersion === undefined && 'trial_name' in v;

async function readResult(row: TrialRow): Promise<TrialResult | null> {
  const text = row.trial_dir ? await readTextIfThere(path.join(row.trial_dir, 'result.json')) : null;
  if (!text) return null;
  const raw = JSON.parse(text) as Record<string, unknown>;
  if (isHarborRecord(raw)) return null;
  const parsed = TrialResultSchema.safeParse(raw);
  // A record this version cannot read whole is a failure to say, not a trial to half-export.
  if (!parsed.success)
    throw new TermgradeError(
      'bad_input',
      `${row.trial_dir}/result.json: not a termgrade trial record (${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message})`,
    );
  return parsed.data;
}

/** A JSON file Harbor wrote, kept by the import (ORIGINALS); null when there is none. */
async function readOriginal(dir: string | null, name: string): Promise<Record<string, unknown> | null> {
  const text = dir ? await readTextIfThere(path.join(dir, ORIGINALS, name)) : null;
  return text ? (JSON.parse(text) as Record<string, unknown>) : null;
}

/** An imported trial's Harbor record: the one the import kept, or the folder's own when it is Harbor's. */
async function harborOriginalOf(trialDir: string | null): Promise<Record<string, unknown> | null> {
  const kept = await readOriginal(trialDir, 'result.json');
  if (kept || !trialDir) return kept;
  const text = await readTextIfThere(path.join(trialDir, 'result.json'));
  const raw = text ? (JSON.parse(text) as Record<string, unknown>) : null;
  return raw && isHarborRecord(raw) ? raw : null;
}

const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;

/**
 * The folder to write the job into. One that holds something is refused, unless `replace` is set
 * and it is this job's own earlier export (its result.json has this job's id): `run` rewrites its
 * Harbor folder as trials finish and on every resume.
 */
async function claimJobDir(jobDir: string, jobUuid: string, replace: boolean): Promise<void> {
  if ((await exists(jobDir)) && (await readdir(jobDir)).length) {
    const was = await readTextIfThere(path.join(jobDir, 'result.json'));
    const ours = was !== null && (JSON.parse(was) as { id?: string }).id === jobUuid;
    if (!replace || !ours)
      throw new TermgradeError(
        'bad_input',
        `${jobDir} already exists and is not ${replace ? "this job's Harbor folder" : 'empty'}; choose another folder (${replace ? '--harbor-jobs-dir' : '--out'})`,
      );
    await rm(jobDir, { recursive: true, force: true });
  }
  await mkdir(jobDir, { recursive: true });
}

/** Copies a trial's logs: every file and folder of its trial folder but the record and the import's originals. */
async function copyTrialFiles(from: string | null, to: string): Promise<void> {
  await mkdir(to, { recursive: true });
  if (!from || !(await ifMissing(stat(from), null))?.isDirectory()) return; // no trial folder: no logs to copy
  for (const name of await readdir(from))
    if (!SKIPPED.has(name)) await cp(path.join(from, name), path.join(to, name), { recursive: true });
}

/**
 * One trial as Harbor's TrialResult. A trial imported from Harbor is its original record with the
 * new location (trial_uri, trials_dir): nothing termgrade read from it is lost. Any other is made
 * from the store's row and the trial's own record, with its token ids from the trajectory.
 */
async function trialOf(input: Omit<TrialInput, 'rollout'>, job: JobContext, scrub: Scrub): Promise<HarborTrialResult> {
  const original = await harborOriginalOf(input.row.trial_dir);
  if (original) {
    const config = {
      ...(original.config as Record<string, unknown> | undefined),
      trials_dir: `${job.jobsDir}/${job.name}`,
    };
    return {
      ...original,
      trial_name: input.trialName,
      trial_uri: `file://${input.trialDir}`,
      config,
    } as HarborTrialResult;
  }
  const trajectory = input.row.trial_dir
    ? await readTextIfThere(path.join(input.row.trial_dir, 'agent', 'trajectory.json'))
    : null;
  const rollout = trajectory ? rolloutDetailsOf(JSON.parse(trajectory)) : null;
  return scrubValue(HarborTrialResultSchema.parse(harborTrialResult({ ...input, rollout }, job)), scrub);
}

/** A job as the export sees it: its spec (null for an import), names, ids and what its trials need. */
interface ExportContext {
  spec: JobSpec | null;
  job: JobContext;
  /** The job's Harbor folder (outDir/<name>). */
  jobDir: string;
  scrub: Scrub;
  /** The job's dataset folders (absolute): a trial's task from one of them has it as its source. */
  datasets: Set<string>;
  taskFolders: Set<string>;
  originalJob: Record<string, unknown> | null;
  originalConfig: Record<string, unknown> | null;
}

async function openSource(source: string): Promise<JobStore> {
  if ((await recordSource(source)).kind !== 'job')
    throw new TermgradeError(
      'bad_input',
      `${source}: not a termgrade job folder (no job.db); the Harbor layout is written per job`,
    );
  return openJobRecords(source);
}

async function contextOf(store: JobStore, source: string, outDir: string): Promise<ExportContext> {
  const spec = storedSpecOf(store, source);
  const name = spec?.name ?? path.basename(source);
  const originalJob = await readOriginal(source, 'result.json');
  const jobUuid = typeof originalJob?.id === 'string' ? originalJob.id : uuidOf(store.jobId());
  const taskFolders = new Set<string>();
  for (const p of spec?.tasks.paths ?? []) if (await exists(path.join(p, 'task.toml'))) taskFolders.add(p);
  return {
    spec,
    job: { name, spec, jobUuid, jobsDir: outDir, version: VERSION },
    jobDir: path.join(outDir, name),
    scrub: spec ? await secretScrub(spec) : makeScrub([]),
    datasets: new Set((spec?.tasks.paths ?? []).map((p) => path.resolve(p))),
    taskFolders,
    originalJob,
    originalConfig: await readOriginal(source, 'config.json'),
  };
}

/** A trial's folder name in the export: Harbor's own for an imported trial, else termgrade's id. */
async function baseNameOf(row: TrialRow): Promise<string> {
  // A pending trial has only Harbor's TrialConfig, which names it too.
  const original = (await harborOriginalOf(row.trial_dir)) ?? (await readOriginal(row.trial_dir, 'config.json'));
  return folderName(typeof original?.trial_name === 'string' ? original.trial_name : row.trial_id);
}

/**
 * How a row is exported: a trial (it ran, to the end or until it was cancelled: it has a record), a
 * pending trial with a folder (imported from Harbor: set up, never run; its folder is written with
 * its config.json and no result), or a slot not run (counted as pending in the job's result only).
 */
async function exportKindOf(row: TrialRow): Promise<'trial' | 'pending' | 'slot'> {
  if (row.status !== 'not_run') return 'trial';
  if ((await readResult(row)) || (await harborOriginalOf(row.trial_dir))) return 'trial';
  return (await readOriginal(row.trial_dir, 'config.json')) ? 'pending' : 'slot';
}

/** A pending trial's folder as Harbor left it: its files and its config.json (Harbor's TrialConfig), no result. */
async function writePendingFolder(ctx: ExportContext, row: TrialRow, trialName: string): Promise<void> {
  const trialDir = path.join(ctx.jobDir, trialName);
  await rm(trialDir, { recursive: true, force: true });
  await copyTrialFiles(row.trial_dir, trialDir);
  const config = await readOriginal(row.trial_dir, 'config.json');
  await writeFile(
    path.join(trialDir, 'config.json'),
    json({ ...config, trials_dir: `${ctx.job.jobsDir}/${ctx.job.name}` }),
  );
}

/** Writes one trial's folder: result.json (TrialResult), config.json, exception.txt when it failed, its logs. */
async function writeTrialFolder(
  ctx: ExportContext,
  row: TrialRow,
  trialName: string,
): Promise<{ trial: HarborTrialResult; taskPath: string | null }> {
  const result = await readResult(row);
  const taskParent = result?.task.path ? path.dirname(path.resolve(result.task.path)) : null;
  const trialDir = path.join(ctx.jobDir, trialName);
  const source = taskParent && ctx.datasets.has(taskParent) ? path.basename(taskParent) : null;
  const trial = await trialOf({ row, result, trialName, trialDir, source }, ctx.job, ctx.scrub);
  await rm(trialDir, { recursive: true, force: true });
  await copyTrialFiles(row.trial_dir, trialDir);
  await writeFile(path.join(trialDir, 'config.json'), json(trial.config));
  if (trial.exception_info && !(await exists(path.join(trialDir, 'exception.txt'))))
    await writeFile(
      path.join(trialDir, 'exception.txt'),
      `${trial.exception_info.exception_type}: ${trial.exception_info.exception_message}\n`,
    );
  await writeFile(path.join(trialDir, 'result.json'), json(trial));
  return { trial, taskPath: result?.task.path ?? null };
}

/** The job's config.json and result.json, from its spec (or what the import kept) and its trials. */
async function writeJobFiles(
  ctx: ExportContext,
  { rows, pending }: { rows: TrialRow[]; pending: number },
  trials: HarborTrialResult[],
  primary: Map<string, number | null>,
  taskPaths: string[],
): Promise<void> {
  const { spec, job, originalJob } = ctx;
  const config = spec
    ? scrubValue(HarborJobConfigSchema.parse(harborJobConfig(spec, job.jobsDir, ctx.taskFolders)), ctx.scrub)
    : ctx.originalConfig
      ? { ...ctx.originalConfig, job_name: job.name, jobs_dir: job.jobsDir }
      : HarborJobConfigSchema.parse(importedJobConfig(job.name, job.jobsDir, rows, taskPaths));
  await writeFile(path.join(ctx.jobDir, 'config.json'), json(config));
  const retries = rows.reduce((a, r) => a + Math.max(0, r.infra_attempts - 1), 0);
  const made = harborJobResult(job.jobUuid, trials, primary, {
    notRun: pending,
    retries,
    now: new Date().toISOString(),
  });
  // An imported job's start and end are the Harbor job's own (its trials do not say when it began).
  const when = (s: unknown): string | null =>
    typeof s === 'string' && !Number.isNaN(Date.parse(s)) ? new Date(s).toISOString() : null;
  const result = HarborJobResultSchema.parse({
    ...made,
    started_at: when(originalJob?.started_at) ?? made.started_at,
    finished_at: originalJob ? when(originalJob.finished_at) : made.finished_at,
  });
  // Checked in termgrade's form above, written as Harbor wrote them (its naive local times): a round trip keeps them.
  const kept = originalJob
    ? { started_at: originalJob.started_at ?? result.started_at, finished_at: originalJob.finished_at ?? null }
    : {};
  await writeFile(path.join(ctx.jobDir, 'result.json'), json({ ...result, ...kept }));
}

/**
 * Writes one termgrade job folder as Harbor's job folder, DIR/<job name>/: config.json (JobConfig),
 * result.json (JobResult), and per trial <trial name>/ with result.json (TrialResult), config.json
 * (TrialConfig), exception.txt when it failed, and every log of the trial (agent/, verifier/, ...).
 */
async function exportOne(
  source: string,
  outDir: string,
  replace: boolean,
): Promise<{ name: string; dir: string; trials: number }> {
  const store = await openSource(source);
  try {
    const ctx = await contextOf(store, source, outDir);
    await claimJobDir(ctx.jobDir, ctx.job.jobUuid, replace);
    const rows = [...store.listTrials()];
    const trials: HarborTrialResult[] = [];
    const primary = new Map<string, number | null>();
    const used = new Set<string>();
    const taskPaths: string[] = [];
    let pending = 0;
    for (const row of rows) {
      const kind = await exportKindOf(row);
      if (kind !== 'trial') pending += 1;
      if (kind === 'slot') continue;
      const base = await baseNameOf(row);
      let trialName = base;
      for (let i = 2; used.has(trialName); i++) trialName = `${base}-${i}`;
      used.add(trialName);
      if (kind === 'pending') {
        await writePendingFolder(ctx, row, trialName);
        continue;
      }
      const { trial, taskPath } = await writeTrialFolder(ctx, row, trialName);
      if (taskPath) taskPaths.push(taskPath);
      trials.push(trial);
      primary.set(trialName, row.reward);
    }
    await writeJobFiles(ctx, { rows, pending }, trials, primary, taskPaths);
    return { name: ctx.job.name, dir: ctx.jobDir, trials: trials.length };
  } finally {
    store.close();
  }
}

/**
 * Writes one recorded trial of a job into the job's Harbor folder under outDir (made by an earlier
 * export of this job): `run` calls it as each trial is recorded, so the folder holds every trial
 * that finished, as Harbor's does while it runs; the job's own files are rewritten when the run ends.
 */
export async function exportHarborTrial(source: string, outDir: string, trialId: string): Promise<void> {
  const store = await openSource(path.resolve(source));
  try {
    const ctx = await contextOf(store, path.resolve(source), path.resolve(outDir));
    const [row] = store.listTrials({ trialId });
    if (!row || (await exportKindOf(row)) !== 'trial') return;
    await writeTrialFolder(ctx, row, await baseNameOf(row));
  } finally {
    store.close();
  }
}

/** Each job folder as Harbor's job folder under outDir (a Harbor jobs folder: `harbor view outDir`). */
export async function exportHarborJobs(
  sources: string[],
  outDir: string,
  options: { replace?: boolean } = {},
): Promise<Array<{ name: string; dir: string; trials: number }>> {
  const out = path.resolve(outDir);
  const done: Array<{ name: string; dir: string; trials: number }> = [];
  for (const source of sources) done.push(await exportOne(path.resolve(source), out, options.replace ?? false));
  return done;
}

/** Reads a trial's exported result.json back (for callers that check what was written). */
export async function readExportedTrial(file: string): Promise<HarborTrialResult> {
  return HarborTrialResultSchema.parse(JSON.parse(await readFile(file, 'utf8')));
}
