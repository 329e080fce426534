import { DEFAULT_AGREEMENT_FLOOR } from '../stats/adaptive-risk.js';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { admissionStore, type ProtectionStore } from '../verifier/protection-store.js';
import type { Task } from '../task/task.js';
import { readJobFile, parseSpec } from '../job/load-spec.js';
import { runJob } from '../job/run-job.js';
import type { JobSpec, JobSpecInput } from '../job/spec.js';
import { TermgradeError } from '../util/errors.js';
import type { PoolEvent } from '../sandbox/pool/provider.js';
import { openJob, storedSpec } from '../job/job.js';
import type { AgentConfigInput } from '../job/spec.js';
import { agentNeedsModel, isModuleFile, loadAgentModule, loadAgentModules } from '../agent/registry.js';
import { agentEnvOf, parseEnvAssignment } from '../agent/env.js';
import { resolveTasks } from '../job/tasks.js';
import { preflightModels } from '../model/preflight.js';
import { TrialErrorClass } from '../trial/schema.js';
import { JobStore } from '../store/store.js';
import { jobProgress } from './job-progress.js';
import { warnAboutTasks } from './format.js';
import { EXIT, handleSignals } from './signals.js';
import { pct, table, wasteLines } from './table.js';
import { configStats } from '../report/aggregate.js';
import { loadRecords } from '../records/load.js';
import { resolveBuildNetwork } from '../sandbox/docker/build-network.js';
import { harborJobsDirOf, readHarborRunFile } from './harbor-run.js';
import { exportHarborJobs, exportHarborTrial } from '../harbor/export-job.js';
import type { JobEvent } from '../job/events.js';
import { enginesFromFlags } from '../sandbox/pool/engine-spec.js';
import { createProvider } from '../sandbox/registry.js';
import { isJobFolder, jobDbOf, jobDirOf } from '../records/source.js';

export interface RunFlags {
  /** Test hook (hidden flag): each trial's store write stalls this long, so a test can kill the run mid-write. */
  faultStoreWriteDelayMs?: number;
  job?: string;
  name?: string;
  tasks?: string[];
  agent?: string[];
  model?: string[];
  baseUrl?: string;
  agentImportPath?: string[];
  agentEnv?: string[];
  envFile?: string[];
  preflight?: boolean;
  apiKeyEnv: string;
  temperature?: number;
  maxTurns?: number;
  k?: number;
  concurrency?: number;
  endpointConcurrency?: number;
  budget?: number;
  timeoutMultiplier?: number;
  infraRetries?: number;
  jobsDir: string;
  /** --admission-dir: where admission records are read (and an oracle trial's written); see admissionStore. */
  admissionDir?: string;
  jsonl?: boolean;
  quiet?: boolean;
  adaptive?: boolean;
  adaptiveBand?: [number, number];
  adaptiveRisk?: number;
  prior?: string;
  priorConfig?: string;
  network?: string;
  grading?: 'evidence' | 'harbor';
  forceBuild?: boolean;
  task?: string[];
  excludeTask?: string[];
  nTasks?: number;
  sample?: number;
  seed?: number;
  retry?: string;
  skipInvalid?: boolean;
  engine?: string[];
  buildNetwork?: string;
  /** `harbor`: also keep Harbor's job folder (see harborJobsDirOf); `termgrade`: not. */
  format?: string;
  harborJobsDir?: string;
}

/** `--retry errors` or `--retry cls1,cls2`: validated against the known error classes. */
function parseRetry(value: string | undefined): { classes?: string[]; errors?: boolean } | undefined {
  if (!value) return undefined;
  const parts = value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  const unknown = parts.filter((p) => p !== 'errors' && !TrialErrorClass.options.includes(p as never));
  if (unknown.length)
    throw new TermgradeError(
      'usage',
      `--retry: unknown error class ${unknown.map((u) => `"${u}"`).join(', ')} (known: errors, ${TrialErrorClass.options.join(', ')})`,
    );
  return { errors: parts.includes('errors'), classes: parts.filter((p) => p !== 'errors') };
}

/** `--model NAME` (endpoint from --base-url) or `--model NAME@URL` (its own endpoint). */
function modelsFrom(f: RunFlags): Array<{ model: string; baseUrl: string }> {
  return (f.model ?? []).map((m) => {
    const at = m.search(/@https?:\/\//);
    if (at > 0) return { model: m.slice(0, at), baseUrl: m.slice(at + 1) };
    if (!f.baseUrl)
      throw new TermgradeError(
        'usage',
        `--model ${m}: give its endpoint, as ${m}@http://HOST:PORT/v1 or with --base-url`,
      );
    return { model: m, baseUrl: f.baseUrl };
  });
}

/** A module path as stored in the job: absolute for a file, as given for a package. */
const modulePath = (p: string): string => (isModuleFile(p) ? path.resolve(p) : p);

/**
 * The agent configurations from flags: every agent named with --agent, and each loaded custom
 * agent; an agent that needs a model runs once per --model.
 */
async function agentsFrom(f: RunFlags): Promise<AgentConfigInput[]> {
  const imported = new Map<string, string>();
  for (const p of f.agentImportPath ?? []) imported.set(await loadAgentModule(p), modulePath(p));
  const names = [...new Set([...(f.agent ?? []), ...imported.keys()])];
  if (!names.length)
    throw new TermgradeError(
      'usage',
      'give a job file, or --tasks and at least one --agent or --agent-import-path (or --job NAME to resume)',
    );
  const models = modelsFrom(f);
  return names.flatMap((name): AgentConfigInput[] => {
    const base = {
      agent: name,
      importPath: imported.get(name),
      maxTurns: f.maxTurns,
      concurrency: f.endpointConcurrency,
    };
    if (!agentNeedsModel(name) && !imported.has(name)) return [{ agent: name, importPath: imported.get(name) }];
    if (!models.length) return [base];
    return models.map((m) => ({
      ...base,
      model: { baseUrl: m.baseUrl, model: m.model, apiKeyEnv: f.apiKeyEnv, temperature: f.temperature },
    }));
  });
}

/**
 * A job spec from a job file, a stored job (resume by name), or flags. Precedence: flags override
 * the job file's (or the stored job's) values; --agent-env and --env-file add to every
 * configuration's own. The merged spec is validated again as a whole.
 */
async function resolveSpec(file: string | undefined, f: RunFlags): Promise<JobSpec> {
  let spec: JobSpec;
  const fromFlags = !file && !(f.job && !f.tasks?.length);
  const agentFlags = [
    'agent',
    'agentImportPath',
    'model',
    'baseUrl',
    'maxTurns',
    'temperature',
    'endpointConcurrency',
  ] as const;
  const misplaced = agentFlags.filter((k) => f[k] !== undefined);
  if (!fromFlags && misplaced.length) {
    const flag = misplaced.map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(', ');
    throw new TermgradeError(
      'usage',
      `${flag}: agent settings come from ${file ? `the job file ${file}` : `the stored job "${f.job}"`}; edit ${file ? 'it' : 'a job file'} instead (flags would leave them silently unused)`,
    );
  }
  if (file) spec = (await readHarborRunFile(file)) ?? (await readJobFile(file));
  else if (!fromFlags) spec = storedSpec(f.jobsDir, f.job!);
  else {
    if (!f.tasks?.length)
      throw new TermgradeError(
        'usage',
        'give a job file, or --tasks and at least one --agent (or --job NAME to resume)',
      );
    const input: JobSpecInput = {
      name: f.name ?? f.job ?? `job-${new Date().toISOString().replace(/[:.]/g, '-')}`,
      tasks: { paths: f.tasks.map((p) => path.resolve(p)) },
      agents: await agentsFrom(f),
    };
    spec = parseSpec(input, 'command line');
  }
  if (f.name && file) spec.name = f.name;
  if (f.k !== undefined) spec.k = f.k;
  if (f.concurrency !== undefined) spec.concurrency = f.concurrency;
  if (f.budget !== undefined) spec.budgetSec = f.budget;
  if (f.infraRetries !== undefined) spec.infraRetries = f.infraRetries;
  if (f.adaptive || f.adaptiveBand || f.adaptiveRisk !== undefined || f.prior) {
    const was = spec.adaptive;
    spec.adaptive = {
      lo: f.adaptiveBand?.[0] ?? was?.lo ?? 0.25,
      hi: f.adaptiveBand?.[1] ?? was?.hi ?? 0.75,
      method: was?.method ?? 'optimal',
      risk: f.adaptiveRisk ?? was?.risk,
      step: was?.step ?? 1,
      prior: f.prior
        ? {
            source: path.resolve(f.prior),
            config: f.priorConfig,
            weight: was?.prior?.weight,
            maxTrials: was?.prior?.maxTrials,
            floor: was?.prior?.floor ?? DEFAULT_AGREEMENT_FLOOR,
          }
        : was?.prior,
    };
  }
  if (f.timeoutMultiplier !== undefined) {
    spec.timeouts.agentMultiplier = f.timeoutMultiplier;
    spec.timeouts.verifierMultiplier = f.timeoutMultiplier;
  }
  if (f.network !== undefined) spec.network = f.network;
  if (f.grading !== undefined) spec.grading = f.grading;
  if (f.task?.length) spec.tasks.include = f.task;
  if (f.excludeTask?.length) spec.tasks.exclude = [...spec.tasks.exclude, ...f.excludeTask];
  if (f.nTasks !== undefined) spec.tasks.limit = f.nTasks;
  if (f.sample !== undefined) spec.tasks.sample = { n: f.sample, seed: f.seed ?? 1 };
  if (f.forceBuild) spec.forceBuild = true;
  const engines = enginesFromFlags(f.engine);
  if (engines) spec.engines = engines;
  spec.harborJobsDir = harborJobsDirOf(spec, f);
  const env = Object.fromEntries((f.agentEnv ?? []).map(parseEnvAssignment));
  for (const a of spec.agents) {
    a.env = { ...a.env, ...env };
    a.envFiles = [...a.envFiles, ...(f.envFile ?? []).map((p) => path.resolve(p))];
  }
  // Validated again after the flags are merged: a flag must meet the same schema as the file.
  return parseSpec(spec, file ? `${file} with the command-line flags` : 'command line');
}

/** The invalid task folders a run leaves out, one per line with its error. */
const invalidLines = (invalid: Array<{ path: string; message: string }>): string =>
  invalid.map((b) => `  ${b.path}: ${b.message.replace(`task ${b.path}: `, '')}`).join('\n');

/** Refuses a run with invalid task folders (unless --skip-invalid), or with none left to run. */
function refuseInvalidTasks(
  invalid: Array<{ path: string; message: string }>,
  taskCount: number,
  skipInvalid: boolean | undefined,
): void {
  if (invalid.length && !skipInvalid) {
    throw new TermgradeError(
      'bad_input',
      `${invalid.length} task folder(s) cannot be used (leave them out with --exclude-task, or run the rest with --skip-invalid):\n${invalidLines(invalid)}`,
    );
  }
  if (invalid.length && !taskCount)
    throw new TermgradeError(
      'bad_input',
      `no task is left to run: every one of the ${invalid.length} task folder(s) cannot be used:\n${invalidLines(invalid)}`,
    );
}

/** Every model endpoint answers (or, without the preflight, its API key is at least set). */
async function checkModels(spec: JobSpec, preflight: boolean | undefined): Promise<void> {
  const models = spec.agents.flatMap((a) => (a.model ? [a.model] : []));
  if (preflight !== false) {
    for (const w of await preflightModels(models)) process.stderr.write(`termgrade: warning: ${w}\n`);
  } else {
    for (const m of models)
      if (!process.env[m.apiKeyEnv])
        process.stderr.write(
          `termgrade: warning: ${m.apiKeyEnv} is not set, so requests to ${m.baseUrl} carry no API key\n`,
        );
  }
}

/** The task folders --skip-invalid left out: an event with --jsonl, else a warning. */
function announceSkipped(
  skipped: Array<{ path: string; message: string }>,
  jsonl: boolean | undefined,
  onEvent: ReturnType<typeof jobProgress>['onEvent'],
): void {
  if (jsonl) onEvent({ type: 'tasks-skipped', tasks: skipped });
  else
    process.stderr.write(
      `termgrade: warning: skipped ${skipped.length} task folder(s) that cannot be used (--skip-invalid):\n${invalidLines(skipped)}\n`,
    );
}

/** The run's closing lines: what was recorded, where, and the table of the job as a whole. */
async function printRunSummary(
  spec: JobSpec,
  summary: Awaited<ReturnType<typeof runJob>>,
  skippedCount: number,
  job: Awaited<ReturnType<typeof openJob>>,
): Promise<void> {
  process.stdout.write(
    `job ${spec.name}: ${summary.completed + summary.errors} trials recorded this run (${summary.completed} graded, ${summary.errors} without reward${summary.infra ? `: ${summary.infra} infrastructure failures, run again on resume` : ''}), ` +
      `${summary.notRun} not run, ${summary.skipped} recorded before` +
      `${spec.adaptive ? `, ${summary.settledEarly} not needed (settled early by adaptive sampling)` : ''}; ${summary.total} slots in all` +
      (summary.stoppedBy === 'budget' ? ' -- stopped by the budget; run again to continue' : '') +
      `${skippedCount ? `; ${skippedCount} invalid task folder(s) skipped (listed above)` : ''}\n` +
      `store: ${jobDbOf(job.jobDir)}\n`,
  );
  process.stdout.write(
    `\n${await endingTable(job.store, job.jobDir)}\nmore: termgrade stats ${job.jobDir} --tasks   |   termgrade trials --job ${spec.name}\n`,
  );
}

/**
 * Says how many tasks will be graded without an admission record (fixed rules only), and where
 * records were looked for; a record that cannot be read refuses the run now (exit 2), not per trial.
 */
async function announceAdmission(store: ProtectionStore, tasks: Task[], log: (m: string) => void): Promise<void> {
  let missing = 0;
  for (const t of tasks) if (!(await store.find(t))) missing += 1;
  if (missing)
    log(
      `${missing} of ${tasks.length} task(s) have no admission record in ${store.dir}${store.alsoIn.length ? ` (nor in ${store.alsoIn.join(', ')})` : ''}: graded with the fixed rules only (check them first, or name the records' folder with --admission-dir)`,
    );
}

export async function runCommand(file: string | undefined, flags: RunFlags): Promise<number> {
  const spec = await resolveSpec(file, flags);
  // Before anything starts (and before any job exists): the task set, filtered then loaded;
  // custom agents load, env files read, and every model endpoint answers.
  const resolved = await resolveTasks(spec);
  refuseInvalidTasks(resolved.invalid, resolved.tasks.length, flags.skipInvalid);
  warnAboutTasks(resolved.tasks);
  await loadAgentModules(spec.agents);
  for (const a of spec.agents) await agentEnvOf(a); // a missing or malformed env file: exit 2 now, not a failed trial each
  await checkModels(spec, flags.preflight);
  const log = (m: string): void => {
    if (!flags.quiet && !flags.jsonl) process.stderr.write(`${m}\n`);
  };
  // Engine events go where the job's events go, once the progress display exists.
  let onPoolEvent: (e: PoolEvent) => void = () => {};
  const provider = createProvider({
    engines: spec.engines ?? [],
    buildNetwork: resolveBuildNetwork(flags.buildNetwork),
    onEvent: (e) => onPoolEvent(e),
  });
  for (const w of await provider.ping()) process.stderr.write(`termgrade: warning: ${w}\n`);
  // A network named for internet tasks must exist and be isolated: refused now, not per trial.
  if (spec.network) await provider.checkNetwork(spec.network);
  const removed = await provider.cleanup();
  if (removed) log(`removed ${removed} container(s) left by runs that were killed`);
  // --name of a job that already has trials would silently extend it: resuming is said with --job.
  if (!file && flags.name && !flags.job && isJobFolder(jobDirOf(flags.jobsDir, flags.name))) {
    throw new TermgradeError(
      'usage',
      `job "${flags.name}" already exists in ${path.resolve(flags.jobsDir)}: resume it with --job ${flags.name}, or choose another --name`,
    );
  }

  await refuseForeignHarborFolder(spec, flags.jobsDir);
  const admission = admissionStore({ admissionDir: flags.admissionDir, near: [flags.jobsDir] });
  await announceAdmission(admission, resolved.tasks, log);
  const job = await openJob(spec, flags.jobsDir, resolved, flags.faultStoreWriteDelayMs ?? 0);
  const skipped = job.invalid;
  const signals = handleSignals(provider, log);
  const progress = jobProgress(flags.quiet ? 'quiet' : flags.jsonl ? 'jsonl' : process.stderr.isTTY ? 'tty' : 'lines');
  onPoolEvent = progress.onEvent;
  // --skip-invalid: what was left out is said before the run (even with --quiet), and is an event.
  if (skipped.length) announceSkipped(skipped, flags.jsonl, progress.onEvent);
  try {
    const harbor = harborFolderKeeper(job.jobDir, job.spec.harborJobsDir);
    await harbor.start();
    const summary = await runJob({
      retry: parseRetry(flags.retry),
      spec: job.spec,
      tasks: job.tasks,
      store: job.store,
      provider,
      jobDir: job.jobDir,
      signal: signals.signal,
      onEvent: (e) => {
        progress.onEvent(e);
        harbor.onEvent(e);
      },
      protection: admission,
    });
    progress.stop();
    // --quiet silences progress, not the result: the summary is what the run was for.
    if (!flags.jsonl) await printRunSummary(spec, summary, skipped.length, job);
    await harbor.finish(flags);
    const interrupted = signals.exitCode();
    if (interrupted !== null) return interrupted;
    return summary.notRun > 0 ? EXIT.rejected : EXIT.ok;
  } catch (err) {
    progress.stop();
    if (err instanceof TermgradeError && err.code.startsWith('store_')) {
      process.stderr.write(`termgrade: ${err.message}\n`);
      return EXIT.store;
    }
    throw err;
  } finally {
    await provider.closeAll();
    await job.close();
    signals.dispose();
  }
}

/** A new job's Harbor folder must not be someone else's: refused before the job exists (a resumed job's is checked by its id). */
async function refuseForeignHarborFolder(spec: JobSpec, jobsDir: string): Promise<void> {
  if (!spec.harborJobsDir || isJobFolder(jobDirOf(jobsDir, spec.name))) return;
  const dir = path.join(spec.harborJobsDir, spec.name);
  if (existsSync(dir) && (await readdir(dir)).length)
    throw new TermgradeError(
      'bad_input',
      `${dir} already exists and is not this job's Harbor folder; choose another folder (--harbor-jobs-dir, or jobs_dir in the Harbor config)`,
    );
}

/**
 * The job's Harbor job folder (the spec's harborJobsDir), kept as Harbor keeps its own: written from
 * the store when the run starts, each trial's folder as the trial is recorded, and the whole folder
 * again when the run ends (the job's counts and statistics), which then says where it is. A folder
 * there that is not this job's earlier one is refused (exit 2) before any trial runs. A trial's
 * folder that cannot be written is a warning: the end of the run writes every trial again.
 */
function harborFolderKeeper(
  jobDir: string,
  harborJobsDir: string | undefined,
): { start(): Promise<void>; onEvent(e: JobEvent): void; finish(flags: RunFlags): Promise<void> } {
  let queue: Promise<void> = Promise.resolve();
  return {
    start: async () => {
      if (harborJobsDir) await exportHarborJobs([jobDir], harborJobsDir, { replace: true });
    },
    onEvent: (e) => {
      if (!harborJobsDir || e.type !== 'trial-done' || e.status === 'not_run') return;
      queue = queue
        .then(() => exportHarborTrial(jobDir, harborJobsDir, e.trialId))
        .catch((err: unknown) => {
          process.stderr.write(
            `termgrade: warning: trial ${e.trialId} not yet in Harbor's job folder (${(err as Error).message}); the end of the run writes it\n`,
          );
        });
    },
    finish: async (flags) => {
      await queue;
      if (!harborJobsDir) return;
      const [written] = await exportHarborJobs([jobDir], harborJobsDir, { replace: true });
      if (written && !flags.jsonl)
        process.stdout.write(
          `harbor job folder: ${written.dir} (${written.trials} trials; harbor view ${harborJobsDir})\n`,
        );
    },
  };
}

/**
 * The job as a whole, per configuration: graded trials, pass@1 with its interval, errors, cost,
 * time, and the share of sandbox time lost to runs that gave no grade, read the way `stats` reads
 * the job (so the figures are the same).
 */
async function endingTable(store: JobStore, jobDir: string): Promise<string> {
  const rows = [...store.listTrials()];
  const stats = configStats(await loadRecords([jobDir]));
  const main = table(
    [
      'config',
      'graded',
      'pass@1 %',
      '95% CI',
      'no reward (by class)',
      'not run',
      'cost $',
      'trial time h',
      'time wasted %',
    ],
    stats.map((c) => {
      const mine = rows.filter((r) => r.config === c.config);
      const errors =
        Object.entries(c.errorsByClass)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || '-';
      const cost = mine.reduce((a, r) => a + (r.cost_usd ?? 0), 0);
      return [
        c.config,
        c.trials,
        pct(c.pass1.mean),
        c.pass1.ciLo === null ? '-' : `[${pct(c.pass1.ciLo)}, ${pct(c.pass1.ciHi)}]`,
        errors,
        mine.filter((r) => r.status === 'not_run').length,
        cost ? cost.toFixed(4) : '-',
        (c.retryWaste.sandboxMs / 3_600_000).toFixed(2),
        pct(c.retryWaste.share),
      ];
    }),
  );
  return `${main}\n${wasteLines(stats)}`;
}
