import { accountingOf, isPassingReward } from '../trial/accounting.js';
import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { JobStore } from '../store/store.js';
import type { Phase, PhaseTiming, TrialErrorClass, TrialResult } from '../trial/schema.js';
import { primaryReward } from '../verifier/reward.js';
import { summarizeTests } from '../verifier/schema.js';
import { readTestReports } from '../verifier/outcome.js';
import { exists, filesNamed, readTextIfThere } from '../util/files.js';
import { rewardFindingsOf } from '../verifier/consistency.js';
import { errorClassOfException, ORIGINALS } from './layout.js';
import { TermgradeCarrySchema, type TermgradeCarry } from './schema.js';

type HarborTiming = { started_at?: string | null; finished_at?: string | null } | null;

interface HarborTrial {
  /** Harbor's own id of the trial run (a UUID), unique across its jobs. */
  id?: string;
  task_name?: string;
  trial_name?: string;
  task_checksum?: string;
  task_id?: { path?: string };
  config?: { job_id?: string | null; agent?: { name?: string; model_name?: string | null }; task?: { path?: string } };
  agent_info?: { name?: string; model_info?: { name?: string } | null };
  agent_result?: {
    n_input_tokens?: number | null;
    n_cache_tokens?: number | null;
    n_output_tokens?: number | null;
    cost_usd?: number | null;
    metadata?: Record<string, unknown> | null;
  } | null;
  verifier_result?: { rewards?: Record<string, number | null> | null } | null;
  exception_info?: { exception_type?: string; exception_message?: string } | null;
  started_at?: string | null;
  finished_at?: string | null;
  environment_setup?: HarborTiming;
  agent_setup?: HarborTiming;
  agent_execution?: HarborTiming;
  verifier?: HarborTiming;
}

/**
 * Harbor's accounting, which an import follows: a trial the agent or the verifier ended without a
 * reward (an agent exception, a timeout, a missing reward file) counts as 0, as Harbor's own mean
 * counts it. Failures of the infrastructure (build, container start, the agent's setup, a step of
 * the verifier's harness) stay failures with no reward, and a cancelled trial was never run to the
 * end, as every other termgrade record: the one accounting rule (accountingOf) says which is which.
 */
function harborReward(reward: number | null, errClass: TrialErrorClass | null): number | null {
  if (reward !== null) return reward;
  if (errClass !== null && accountingOf(null, errClass) !== 'ungraded') return null;
  return 0;
}

/** The phase a Harbor trial failed in, by its class (Harbor records the exception, not the phase). */
function phaseOfClass(errClass: TrialErrorClass): Phase {
  if (errClass === 'build_failed' || errClass === 'environment_error') return 'environment_setup';
  if (errClass === 'agent_setup_error') return 'agent_setup';
  if (errClass.startsWith('verifier') || errClass === 'reward_unsupported' || errClass === 'grading_blocked')
    return 'verification';
  return 'agent_run';
}

/**
 * An imported trial's id. A trial termgrade exported keeps its own id (carried in its metadata).
 * Any other is `harbor:` and Harbor's own trial id (a UUID) when the result has one, else its job's
 * id and the trial's name (a trial name alone can repeat across Harbor jobs: two runs of one task
 * set), else the name or the folder. The same Harbor trial imported twice is found by it and skipped.
 */
function harborTrialId(h: HarborTrial, trialDir: string): string {
  if (h.id) return `harbor:${h.id}`;
  if (h.config?.job_id && h.trial_name) return `harbor:${h.config.job_id}/${h.trial_name}`;
  return `harbor:${h.trial_name ?? path.resolve(trialDir)}`;
}

/** Who and what an imported trial is: read from the Harbor result and numbered by the import. */
interface ImportedId {
  trialId: string;
  task: string;
  taskPath: string | undefined;
  agent: string;
  model: string | null;
  attempt: number;
}

/** Harbor's four phase timings as termgrade's phases (a phase without both ends is left out). */
function phasesOf(h: HarborTrial): TrialResult['phases'] {
  const pairs = [
    ['environment_setup', h.environment_setup],
    ['agent_setup', h.agent_setup],
    ['agent_run', h.agent_execution],
    ['verification', h.verifier],
  ] as const;
  const phases: TrialResult['phases'] = {};
  for (const [name, t] of pairs) {
    if (!t?.started_at || !t.finished_at) continue;
    const timing: PhaseTiming = {
      startedAt: t.started_at,
      finishedAt: t.finished_at,
      durationMs: Math.max(0, Date.parse(t.finished_at) - Date.parse(t.started_at)),
    };
    phases[name] = timing;
  }
  return phases;
}

/** What termgrade carried in its own export (TermgradeCarrySchema), or null for any other Harbor trial. */
function carriedOf(h: HarborTrial): TermgradeCarry | null {
  const parsed = TermgradeCarrySchema.safeParse(h.agent_result?.metadata?.termgrade);
  return parsed.success ? parsed.data : null;
}

/** The record of a trial that ran elsewhere: what Harbor's fields say, under Harbor's accounting. */
async function foreignFields(
  h: HarborTrial,
  verifierReward: number | null,
  logsDir: string,
  tests: TrialResult['tests'],
): Promise<Omit<TermgradeCarry, 'trialId' | 'attempt' | 'config'>> {
  const exc = h.exception_info?.exception_type;
  const errClass = exc ? errorClassOfException(exc) : verifierReward === null ? 'verifier_no_reward' : null;
  const reward = harborReward(verifierReward, errClass);
  const started = h.started_at ?? '';
  const finished = h.finished_at ?? '';
  const error = errClass
    ? {
        class: errClass,
        message: h.exception_info?.exception_message ?? exc ?? 'no reward',
        phase: phaseOfClass(errClass),
      }
    : null;
  return {
    reward,
    passed: isPassingReward(reward),
    steps: [],
    taskVersion: null,
    dataset: null,
    collected: null,
    error,
    errors: error ? [error] : [],
    exitReason:
      errClass === 'agent_timeout' || errClass === 'agent_error'
        ? errClass
        : errClass === 'cancelled'
          ? 'not_run'
          : 'completed',
    turns: 0,
    tampering: [],
    protection: 'rules',
    admission: null,
    // Harbor's own reward files, read beside its test reports: the same consistency check as our trials.
    findings:
      reward === null
        ? []
        : rewardFindingsOf(
            await readTextIfThere(path.join(logsDir, 'reward.json')),
            await readTextIfThere(path.join(logsDir, 'reward.txt')),
            tests,
          ),
    // Graded by Harbor under its own semantics: the reward file's number stands (nothing to hold it against here).
    evidence: null,
    image: null,
    imageId: null,
    imageSource: null,
    imageCached: null,
    engine: null,
    phases: phasesOf(h),
    startedAt: started,
    finishedAt: finished,
    durationMs: started && finished ? Math.max(0, Date.parse(finished) - Date.parse(started)) : 0,
    infraAttempts: 1,
    retryReasons: [],
  };
}

/**
 * One Harbor trial folder's result as a termgrade trial record: rewards, tokens, cost and the task
 * from Harbor's fields; per-test results from the verifier's reports in the trial's folder (CTRF,
 * pytest's summary in test-stdout.txt, JUnit: the same reader as a trial termgrade grades); the rest
 * from what termgrade carried when it wrote the folder, else Harbor's accounting.
 */
async function harborResult(
  h: HarborTrial,
  id: ImportedId,
  trialDir: string,
  carried: TermgradeCarry | null,
): Promise<{ result: TrialResult; carried: TermgradeCarry }> {
  const rewards = Object.fromEntries(
    Object.entries(h.verifier_result?.rewards ?? {}).filter((e): e is [string, number] => typeof e[1] === 'number'),
  );
  const verifierReward = Object.keys(rewards).length ? primaryReward(rewards) : null;
  const logsDir = path.join(trialDir, 'verifier');
  const reports = await readTestReports(logsDir);
  const own = carried ?? {
    ...(await foreignFields(h, verifierReward, logsDir, reports.tests)),
    trialId: id.trialId,
    attempt: id.attempt,
    config: id.model ? `${id.agent}/${id.model}` : id.agent,
  };
  const a = h.agent_result;
  const { config: _config, infraAttempts: _runs, retryReasons: _reasons, ...fields } = own;
  const result: TrialResult = {
    schemaVersion: 1,
    ...fields,
    task: { name: id.task, path: id.taskPath ?? '', checksum: h.task_checksum ?? '' },
    agent: { name: id.agent, model: id.model },
    rewards,
    tests: reports.tests,
    testsSource: reports.source,
    testsSourceCounts: reports.counts,
    testsSummary: summarizeTests(reports.tests),
    tokens:
      a && (a.n_input_tokens != null || a.n_output_tokens != null)
        ? { input: a.n_input_tokens ?? 0, cached: a.n_cache_tokens ?? 0, output: a.n_output_tokens ?? 0 }
        : null,
    costUsd: a?.cost_usd ?? null,
  };
  return { result, carried: own };
}

/**
 * The imported trial's own folder in the job (`trials/<id>`): every log of the Harbor trial folder
 * copied, and Harbor's result.json and config.json kept as they were under ORIGINALS.
 */
async function copyTrialFolder(from: string, trialsDir: string, trialId: string): Promise<string> {
  const base = trialId.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 200) || 'trial';
  let to = path.join(trialsDir, base);
  for (let i = 2; await exists(to); i++) to = path.join(trialsDir, `${base}-${i}`);
  await mkdir(path.join(to, ORIGINALS), { recursive: true });
  for (const name of await readdir(from)) {
    const keep = name === 'result.json' || name === 'config.json';
    await cp(path.join(from, name), path.join(to, keep ? ORIGINALS : '', name), { recursive: true });
  }
  return to;
}

/** A Harbor job folder's own config.json and result.json, kept with an import of that one job (ORIGINALS). */
async function keepJobFiles(root: string, jobDir: string): Promise<void> {
  await mkdir(path.join(jobDir, ORIGINALS), { recursive: true });
  for (const name of ['config.json', 'result.json'])
    await cp(path.join(root, name), path.join(jobDir, ORIGINALS, name));
}

/** One trial folder found under the import's root: its result (for a pending trial, made from its config.json). */
interface Found {
  file: string;
  h: HarborTrial;
  /** Harbor set the trial up but did not run it to the end: no result.json, or one with no end, reward or exception. */
  pending: boolean;
}

const readJson = async (file: string): Promise<unknown> => JSON.parse(await readFile(file, 'utf8'));

/** A job folder's result.json (JobResult: counts, no task), not a trial's. */
const isJobResult = (v: Record<string, unknown>): boolean =>
  'n_total_trials' in v && !('task_name' in v) && !('trial_name' in v);

/**
 * What is under the root: Harbor's trial folders (finished, cancelled or pending: a folder with its
 * TrialConfig only) and its job folders (config.json and a JobResult), whether the root is a job
 * folder or a jobs folder of them.
 */
async function harborFolders(root: string, skipped: string[]): Promise<{ trials: Found[]; jobs: string[] }> {
  const files: string[] = [];
  for await (const f of filesNamed(root, 'result.json')) files.push(f);
  for await (const f of filesNamed(root, 'config.json'))
    if (!(await exists(path.join(path.dirname(f), 'result.json')))) files.push(f);
  files.sort();
  const trials: Found[] = [];
  const jobs: string[] = [];
  for (const file of files) {
    let v: Record<string, unknown>;
    try {
      v = (await readJson(file)) as Record<string, unknown>;
    } catch (err) {
      skipped.push(`${file}: not JSON (${(err as Error).message})`);
      continue;
    }
    const dir = path.dirname(file);
    if (path.basename(file) === 'config.json') {
      // A trial Harbor set up and never ran: its TrialConfig alone (a job's config.json has no trial_name).
      const task = (v.task as { path?: string } | undefined)?.path;
      if (typeof v.trial_name === 'string' && task)
        trials.push({
          file,
          pending: true,
          h: { trial_name: v.trial_name, task_name: path.basename(task), config: v },
        });
      continue;
    }
    if (isJobResult(v)) {
      if (await exists(path.join(dir, 'config.json'))) jobs.push(dir);
      continue;
    }
    const h = v as HarborTrial;
    const unfinished = !h.verifier_result && !h.exception_info && !h.finished_at;
    trials.push({ file, h, pending: unfinished });
  }
  return { trials, jobs };
}

/** Who ran a Harbor trial: its agent and model (a pending one's from its config: the model's name past its provider). */
function agentOf(h: HarborTrial): { agent: string; model: string | null } {
  const agent = h.agent_info?.name ?? h.config?.agent?.name ?? 'unknown';
  const configured = h.config?.agent?.model_name;
  const model = h.agent_info?.model_info?.name ?? (configured ? configured.slice(configured.indexOf('/') + 1) : null);
  return { agent, model };
}

/**
 * Attempt numbers for the found trials, per configuration x task: a trial termgrade exported keeps
 * its own when it is free (not held by the job, nor by an earlier one of this import), whatever
 * order the folders come in; every other takes the next free one after what the job holds, in
 * the folders' order (the same order on every import of the same folders).
 */
function attemptsOf(
  keys: string[],
  carried: Array<number | null>,
  next: ReadonlyMap<string, number>,
): { attempts: number[]; after: Map<string, number> } {
  const taken = new Map<string, Set<number>>();
  const takenOf = (k: string): Set<number> => taken.get(k) ?? taken.set(k, new Set()).get(k)!;
  const attempts: number[] = keys.map(() => -1);
  keys.forEach((k, i) => {
    const c = carried[i];
    if (c !== null && c !== undefined && c >= (next.get(k) ?? 0) && !takenOf(k).has(c)) {
      attempts[i] = c;
      takenOf(k).add(c);
    }
  });
  keys.forEach((k, i) => {
    if (attempts[i]! >= 0) return;
    let a = next.get(k) ?? 0;
    while (takenOf(k).has(a)) a++;
    attempts[i] = a;
    takenOf(k).add(a);
  });
  const after = new Map(next);
  for (const [k, used] of taken) after.set(k, Math.max(after.get(k) ?? 0, ...[...used].map((a) => a + 1)));
  return { attempts, after };
}

/**
 * Reads Harbor job folders (a trial folder per trial with result.json and its logs) into a
 * termgrade job, so published or earlier runs can be measured, selected from and exported. The
 * root is a job folder or a jobs folder of them. Each trial's folder is copied into the job
 * (`trials/<id>/`, Harbor's own files under `harbor/`), so the job stands alone; a cancelled trial
 * is kept as one (not run to the end), a pending one (set up, never run) as a not_run slot with its
 * folder. The job's own config.json and result.json are kept when the root holds exactly one job.
 * Imports append: attempt numbers continue after what the job already holds (a trial termgrade
 * exported keeps its own when free), and a trial imported before (same id) is not imported again.
 */
export async function importHarbor(root: string, store: JobStore): Promise<{ imported: number; skipped: string[] }> {
  const jobDir = path.dirname(store.file);
  const skipped: string[] = [];
  const known = store.trialIds();
  const fresh = store.count() === 0;
  const found = await harborFolders(root, skipped);
  const fresh_: Array<
    Found & {
      task: string;
      taskPath: string | undefined;
      agent: string;
      model: string | null;
      carried: TermgradeCarry | null;
      config: string;
      trialId: string;
    }
  > = [];
  for (const f of found.trials) {
    const { h } = f;
    const taskPath = h.task_id?.path ?? h.config?.task?.path;
    const task = h.task_name ?? (taskPath ? path.basename(taskPath) : undefined);
    if (!task) continue;
    const { agent, model } = agentOf(h);
    const carried = carriedOf(h);
    const trialId = carried?.trialId ?? harborTrialId(h, path.dirname(f.file));
    if (known.has(trialId)) {
      skipped.push(`${f.file}: already imported as ${trialId}`);
      continue;
    }
    known.add(trialId);
    const config = carried?.config ?? (model ? `${agent}/${model}` : agent);
    fresh_.push({ ...f, task, taskPath, agent, model, carried, config, trialId });
  }
  const { attempts } = attemptsOf(
    fresh_.map((t) => `${t.config}\u0000${t.task}`),
    fresh_.map((t) => t.carried?.attempt ?? null),
    store.nextAttempts(),
  );
  const items: Parameters<JobStore['recordMany']>[0] = [];
  const pending: Array<{ t: (typeof fresh_)[number]; attempt: number; dest: string }> = [];
  for (const [i, t] of fresh_.entries()) {
    const attempt = attempts[i]!;
    const dest = await copyTrialFolder(path.dirname(t.file), path.join(jobDir, 'trials'), t.trialId);
    if (t.pending) {
      pending.push({ t, attempt, dest });
      continue;
    }
    const own = t.carried && { ...t.carried, attempt };
    const id = { trialId: t.trialId, task: t.task, taskPath: t.taskPath, agent: t.agent, model: t.model, attempt };
    const { result, carried: c } = await harborResult(t.h, id, dest, own);
    await writeFile(path.join(dest, 'result.json'), `${JSON.stringify(result, null, 2)}\n`);
    items.push({
      result,
      extra: {
        slot: { config: t.config, task: t.task, attempt },
        trialDir: dest,
        infraAttempts: c.infraAttempts,
        retryReasons: c.retryReasons,
        source: 'harbor',
      },
    });
  }
  const [job] = found.jobs;
  if (fresh && found.jobs.length === 1 && job && (items.length || pending.length)) await keepJobFiles(job, jobDir);
  if (found.jobs.length > 1)
    skipped.push(
      `${root}: ${found.jobs.length} Harbor jobs in one import; their own config.json and result.json are not kept`,
    );
  store.recordMany(items);
  for (const { t, attempt, dest } of pending)
    store.recordNotRun({ config: t.config, task: t.task, attempt }, t.trialId, t.agent, t.model, 'pending in Harbor', {
      trialDir: dest,
      source: 'harbor',
    });
  return { imported: items.length + pending.length, skipped };
}
