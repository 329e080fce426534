import { cp, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseEnvFile } from '../agent/env.js';
import { jobDbOf } from '../job/job.js';
import { parseSpec } from '../job/load-spec.js';
import type { JobSpec } from '../job/spec.js';
import { JobStore, type TrialRow } from '../store/store.js';
import { TrialResultSchema, type TrialResult } from '../trial/schema.js';
import { TermgradeError } from '../util/errors.js';
import { exists, readTextIfThere } from '../util/files.js';
import { makeScrub, scrubValue, type Scrub } from '../util/scrub.js';
import { harborJobConfig, harborJobResult, harborTrialResult, uuidOf, type TrialInput } from './layout.js';
import {
  HarborJobConfigSchema,
  HarborJobResultSchema,
  HarborTrialConfigSchema,
  HarborTrialResultSchema,
  type HarborTrialResult,
} from './schema.js';

const VERSION = '0.1.0';
/** What a trial folder holds that Harbor's layout has too: copied as they are. */
const COPIED = ['agent', 'verifier', 'artifacts'];

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

function storedSpecOf(store: JobStore, source: string): JobSpec {
  const raw = store.getMeta('spec');
  if (!raw)
    throw new TermgradeError(
      'bad_input',
      `${source}: the job has no stored spec (an import?); the Harbor layout is written for jobs termgrade ran`,
    );
  return parseSpec(JSON.parse(raw), `${source}/job.db`);
}

async function readResult(row: TrialRow): Promise<TrialResult | null> {
  const text = row.trial_dir ? await readTextIfThere(path.join(row.trial_dir, 'result.json')) : null;
  if (!text) return null;
  const parsed = TrialResultSchema.safeParse(JSON.parse(text));
  // A record this version cannot read whole is a failure to say, not a trial to half-export.
  if (!parsed.success)
    throw new TermgradeError(
      'bad_input',
      `${row.trial_dir}/result.json: not a termgrade trial record (${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message})`,
    );
  return parsed.data;
}

const json = (v: unknown): string => `${JSON.stringify(v, null, 2)}\n`;

/**
 * Writes one termgrade job folder as Harbor's job folder, DIR/<job name>/: config.json (JobConfig),
 * result.json (JobResult), and per trial <trial name>/ with result.json (TrialResult), config.json
 * (TrialConfig), exception.txt when it failed, and the trial's agent/, verifier/ and artifacts/.
 */
async function exportOne(source: string, outDir: string): Promise<{ name: string; dir: string; trials: number }> {
  if (!(await exists(jobDbOf(source))))
    throw new TermgradeError(
      'bad_input',
      `${source}: not a termgrade job folder (no job.db); the Harbor layout is written per job`,
    );
  const store = JobStore.open(jobDbOf(source), { readonly: true });
  try {
    const spec = storedSpecOf(store, source);
    const jobDir = path.join(outDir, spec.name);
    if ((await exists(jobDir)) && (await readdir(jobDir)).length)
      throw new TermgradeError(
        'bad_input',
        `${jobDir} already exists and is not empty; export into another --out folder`,
      );
    await mkdir(jobDir, { recursive: true });
    const scrub = await secretScrub(spec);
    const jobUuid = uuidOf(store.jobId());
    const job = { spec, jobUuid, jobsDir: outDir, version: VERSION };
    const datasets = new Set(spec.tasks.paths.map((p) => path.resolve(p)));
    const taskFolders = new Set<string>();
    for (const p of spec.tasks.paths) if (await exists(path.join(p, 'task.toml'))) taskFolders.add(p);

    const rows = [...store.listTrials()];
    const notRun = rows.filter((r) => r.status === 'not_run').length;
    const trials: HarborTrialResult[] = [];
    const primary = new Map<string, number | null>();
    const used = new Set<string>();
    for (const row of rows) {
      if (row.status === 'not_run') continue;
      let trialName = folderName(row.trial_id);
      for (let i = 2; used.has(trialName); i++) trialName = `${folderName(row.trial_id)}-${i}`;
      used.add(trialName);
      const result = await readResult(row);
      const taskParent = result?.task.path ? path.dirname(path.resolve(result.task.path)) : null;
      const input: TrialInput = {
        row,
        result,
        trialName,
        trialDir: path.join(jobDir, trialName),
        source: taskParent && datasets.has(taskParent) ? path.basename(taskParent) : null,
      };
      const trial = scrubValue(HarborTrialResultSchema.parse(harborTrialResult(input, job)), scrub);
      await mkdir(input.trialDir, { recursive: true });
      for (const sub of COPIED) {
        const from = row.trial_dir ? path.join(row.trial_dir, sub) : null;
        if (from && (await stat(from).catch(() => null))?.isDirectory())
          await cp(from, path.join(input.trialDir, sub), { recursive: true });
      }
      await writeFile(path.join(input.trialDir, 'config.json'), json(HarborTrialConfigSchema.parse(trial.config)));
      if (trial.exception_info)
        await writeFile(
          path.join(input.trialDir, 'exception.txt'),
          `${trial.exception_info.exception_type}: ${trial.exception_info.exception_message}\n`,
        );
      await writeFile(path.join(input.trialDir, 'result.json'), json(trial));
      trials.push(trial);
      primary.set(trialName, row.reward);
    }
    const retries = rows.reduce((a, r) => a + Math.max(0, r.infra_attempts - 1), 0);
    const config = scrubValue(HarborJobConfigSchema.parse(harborJobConfig(spec, outDir, taskFolders)), scrub);
    await writeFile(path.join(jobDir, 'config.json'), json(config));
    const result = HarborJobResultSchema.parse(
      harborJobResult(jobUuid, trials, primary, { notRun, retries, now: new Date().toISOString() }),
    );
    await writeFile(path.join(jobDir, 'result.json'), json(result));
    return { name: spec.name, dir: jobDir, trials: trials.length };
  } finally {
    store.close();
  }
}

/** Each job folder as Harbor's job folder under outDir (a Harbor jobs folder: `harbor view outDir`). */
export async function exportHarborJobs(
  sources: string[],
  outDir: string,
): Promise<Array<{ name: string; dir: string; trials: number }>> {
  const out = path.resolve(outDir);
  const done: Array<{ name: string; dir: string; trials: number }> = [];
  for (const source of sources) done.push(await exportOne(path.resolve(source), out));
  return done;
}

/** Reads a trial's exported result.json back (for callers that check what was written). */
export async function readExportedTrial(file: string): Promise<HarborTrialResult> {
  return HarborTrialResultSchema.parse(JSON.parse(await readFile(file, 'utf8')));
}
