import { INFRA_ERROR_CLASSES, isPassingReward } from '../trial/accounting.js';
import { createHash } from 'node:crypto';
import { configLabelOf, type AgentConfig, type JobSpec } from '../job/spec.js';
import { macroPassAtK } from '../stats/pass-at-k.js';
import type { TrialRow } from '../store/store.js';
import type { TrialErrorClass, TrialResult } from '../trial/schema.js';
import { parseRetries } from '../trial/retries.js';
import type {
  HarborJobConfig,
  HarborJobResult,
  HarborRolloutDetail,
  HarborTrialResult,
  TermgradeCarry,
} from './schema.js';

/**
 * termgrade's records in the shapes of Harbor's job folder (pure: the exporter reads and writes).
 * Accounting stays termgrade's: a trial without a reward (an infrastructure failure) has no
 * verifier_result, never a stand-in 0, and its exception names what failed.
 */

/**
 * The folder, in an imported job and in each imported trial's folder, that keeps the files Harbor
 * wrote (result.json, config.json) as they were: an export of the import writes them back.
 */
export const ORIGINALS = 'harbor';

/** A stable UUID (name-based, version 5 layout) for an identity: re-exports give the same ids. */
export function uuidOf(name: string): string {
  const h = createHash('sha1').update(`termgrade:${name}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/**
 * Harbor's exception type for each termgrade error class. Harbor's own names where Harbor has the
 * concept (so its views count them as it does); infrastructure classes avoid "Agent" in the name,
 * so `termgrade import` reads them back as infrastructure (no reward), never as an agent's 0.
 */
const EXCEPTION_TYPES: Record<TrialErrorClass, string> = {
  build_failed: 'EnvironmentBuildError',
  environment_error: 'EnvironmentStartError',
  agent_setup_error: 'SetupFailedError',
  agent_timeout: 'AgentTimeoutError',
  agent_error: 'NonZeroAgentExitCodeError',
  model_error: 'ModelError',
  model_unavailable: 'ModelUnavailableError',
  tampering: 'TamperingError',
  disk_limit: 'DiskLimitError',
  verifier_timeout: 'VerifierTimeoutError',
  verifier_no_reward: 'RewardFileNotFoundError',
  verifier_bad_reward: 'VerifierOutputParseError',
  verifier_crash: 'VerifierCrashError',
  grading_blocked: 'GradingBlockedError',
  reward_unsupported: 'RewardUnsupportedError',
  cancelled: 'CancelledError',
  internal_error: 'InternalError',
};
export const exceptionTypeOf = (errorClass: string): string =>
  Object.hasOwn(EXCEPTION_TYPES, errorClass) ? EXCEPTION_TYPES[errorClass as TrialErrorClass] : 'TermgradeError';

/**
 * Harbor's own exception types that EXCEPTION_TYPES does not give, by what each means for the
 * record (harbor/trial/trial.py and harbor/verifier/verifier.py): a step of Harbor's verifier that
 * failed is its harness failing (verifier_crash, as ours), an agent's install that timed out is its
 * setup (agent_setup_error), and a timeout of the environment's build or start is the environment's.
 */
const HARBOR_EXCEPTION_CLASSES: Record<string, TrialErrorClass> = {
  AgentSetupTimeoutError: 'agent_setup_error',
  AddTestsDirError: 'verifier_crash',
  DownloadVerifierDirError: 'verifier_crash',
  RewardFileEmptyError: 'verifier_no_reward',
  EnvironmentBuildTimeoutError: 'build_failed',
  EnvironmentStartTimeoutError: 'environment_error',
  // The name exports before 2026-12-02 gave verifier_crash.
  VerifierEngineLostError: 'verifier_crash',
};

/**
 * The error class of a Harbor exception type: a name termgrade's export gives (the inverse of
 * EXCEPTION_TYPES) or one of Harbor's own, exactly; any other name by what it says (a timeout of
 * the agent, the agent, a build), else a failure of the environment.
 */
export function errorClassOfException(exceptionType: string): TrialErrorClass {
  const exact = (Object.keys(EXCEPTION_TYPES) as TrialErrorClass[]).find((c) => EXCEPTION_TYPES[c] === exceptionType);
  if (exact) return exact;
  if (Object.hasOwn(HARBOR_EXCEPTION_CLASSES, exceptionType)) return HARBOR_EXCEPTION_CLASSES[exceptionType]!;
  if (/AgentTimeout|AgentExecutionTimeout/i.test(exceptionType)) return 'agent_timeout';
  if (/Agent/i.test(exceptionType)) return 'agent_error';
  if (/Build/i.test(exceptionType)) return 'build_failed';
  return 'environment_error';
}
/**
 * The exception types of infrastructure failures: what Harbor's retry would retry, as termgrade
 * does. Named from the outcome table's infrastructure classes (INFRA_ERROR_CLASSES), not a list of their own.
 */
export const INFRA_EXCEPTION_TYPES = [
  ...[...INFRA_ERROR_CLASSES].map(exceptionTypeOf),
  // Harbor's own names of infrastructure classes (and an older export's name), read as such.
  ...Object.keys(HARBOR_EXCEPTION_CLASSES).filter((t) => INFRA_ERROR_CLASSES.has(HARBOR_EXCEPTION_CLASSES[t]!)),
];

const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH/i;

/** An endpoint as it may be published: no user or password, no secret-looking query parameter. */
export function publicUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    for (const k of [...u.searchParams.keys()]) if (SECRET_NAME.test(k)) u.searchParams.set(k, 'REDACTED');
    return u.toString().replace(/\/$/, url.endsWith('/') ? '/' : '');
  } catch {
    return 'REDACTED'; // not a URL: nothing in it is known to be safe
  }
}

/** Agent variables as Harbor writes them: a secret-looking one as its ${NAME} template, never its value. */
const publicEnv = (env: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(env).map(([k, v]) => [k, SECRET_NAME.test(k) ? `\${${k}}` : v]));

export function harborAgentConfig(a: AgentConfig): HarborJobConfig['agents'][number] {
  const m = a.model;
  const kwargs: Record<string, unknown> = {};
  if (m) {
    kwargs.api_base = publicUrl(m.baseUrl);
    kwargs.api_key_env = m.apiKeyEnv;
    if (m.temperature !== undefined) kwargs.temperature = m.temperature;
    if (m.topP !== undefined) kwargs.top_p = m.topP;
    if (m.maxTokens !== undefined) kwargs.max_tokens = m.maxTokens;
  }
  if (a.maxTurns !== undefined) kwargs.max_turns = a.maxTurns;
  if (a.label) kwargs.label = a.label;
  return {
    name: a.agent,
    import_path: a.importPath ?? null,
    model_name: m?.model ?? null,
    override_timeout_sec: null,
    override_setup_timeout_sec: null,
    max_timeout_sec: null,
    kwargs,
    env: publicEnv(a.env),
  };
}

const ENVIRONMENT = (forceBuild: boolean): HarborJobConfig['environment'] => ({
  type: 'docker',
  import_path: null,
  force_build: forceBuild,
  delete: true,
  override_cpus: null,
  override_memory_mb: null,
  override_storage_mb: null,
  override_gpus: null,
  kwargs: {},
});
const VERIFIER: HarborJobConfig['verifier'] = { override_timeout_sec: null, max_timeout_sec: null, disable: false };

/** Harbor's three timeout fields from termgrade's two multipliers (a job without a spec, an import: Harbor's defaults). */
function multipliers(spec: JobSpec | null): {
  timeout_multiplier: number;
  agent_timeout_multiplier: number | null;
  verifier_timeout_multiplier: number | null;
} {
  const { agentMultiplier: a, verifierMultiplier: v } = spec?.timeouts ?? { agentMultiplier: 1, verifierMultiplier: 1 };
  return a === v
    ? { timeout_multiplier: a, agent_timeout_multiplier: null, verifier_timeout_multiplier: null }
    : { timeout_multiplier: 1, agent_timeout_multiplier: a, verifier_timeout_multiplier: v };
}

/** The job's config.json: a task path that is a task folder is one of Harbor's `tasks`, any other a dataset. */

/** A task of a job config given by its local folder (no git source, nothing to download). */
const localTask = (p: string): HarborJobConfig['tasks'][number] => ({
  path: p,
  git_url: null,
  git_commit_id: null,
  overwrite: false,
  download_dir: null,
  source: null,
});
export function harborJobConfig(spec: JobSpec, jobsDir: string, taskFolders: ReadonlySet<string>): HarborJobConfig {
  const t = spec.tasks;
  return {
    job_name: spec.name,
    jobs_dir: jobsDir,
    n_attempts: spec.k,
    ...multipliers(spec),
    n_concurrent_trials: spec.concurrency ?? 4,
    quiet: false,
    retry: { max_retries: spec.infraRetries, include_exceptions: INFRA_EXCEPTION_TYPES },
    environment: ENVIRONMENT(spec.forceBuild),
    verifier: VERIFIER,
    metrics: [],
    agents: spec.agents.map(harborAgentConfig),
    datasets: t.paths
      .filter((p) => !taskFolders.has(p))
      .map((p) => ({
        path: p,
        task_names: t.include.length ? t.include : null,
        exclude_task_names: t.exclude.length ? t.exclude : null,
        n_tasks: t.limit ?? null,
      })),
    tasks: t.paths.filter((p) => taskFolders.has(p)).map(localTask),
    artifacts: [],
  };
}

/**
 * The config.json of a job that has no spec (it was imported: it ran elsewhere): what its trials
 * show, each configuration as an agent and each task folder as a task.
 */
export function importedJobConfig(
  name: string,
  jobsDir: string,
  rows: TrialRow[],
  taskPaths: string[],
): HarborJobConfig {
  const agents = new Map<string, HarborJobConfig['agents'][number]>();
  for (const r of rows)
    agents.set(r.config, {
      name: r.agent,
      import_path: null,
      model_name: r.model,
      override_timeout_sec: null,
      override_setup_timeout_sec: null,
      max_timeout_sec: null,
      kwargs: {},
      env: {},
    });
  const perSlot = new Map<string, number>();
  for (const r of rows) perSlot.set(`${r.config}\u0000${r.task}`, (perSlot.get(`${r.config}\u0000${r.task}`) ?? 0) + 1);
  return {
    job_name: name,
    jobs_dir: jobsDir,
    n_attempts: Math.max(1, ...perSlot.values()),
    ...multipliers(null),
    n_concurrent_trials: 4,
    quiet: false,
    retry: { max_retries: 0, include_exceptions: INFRA_EXCEPTION_TYPES },
    environment: ENVIRONMENT(false),
    verifier: VERIFIER,
    metrics: [],
    agents: [...agents.values()],
    datasets: [],
    tasks: [...new Set(taskPaths)].sort().map(localTask),
    artifacts: [],
  };
}

export interface TrialInput {
  row: TrialRow;
  /** The trial's own result.json, when its folder still has it. */
  result: TrialResult | null;
  /** The folder name in the export (unique in the job). */
  trialName: string;
  /** The exported trial folder (absolute). */
  trialDir: string;
  /** The dataset (folder of task folders) the task came from, or null (Harbor's "adhoc"). */
  source: string | null;
  /** Token ids per model turn, from the trial's ATIF trajectory (rolloutDetailsOf). */
  rollout: HarborRolloutDetail[] | null;
}

export interface JobContext {
  /** The job's folder name, Harbor's job_name. */
  name: string;
  /** The job's spec; null for a job that was imported (it ran elsewhere). */
  spec: JobSpec | null;
  jobUuid: string;
  /** The export's jobs folder (absolute), Harbor's trials_dir parent. */
  jobsDir: string;
  version: string;
}

const timing = (p: { startedAt: string; finishedAt: string } | undefined): HarborTrialResult['verifier'] =>
  p ? { started_at: p.startedAt, finished_at: p.finishedAt } : null;
const isoOrNull = (s: string | undefined | null): string | null =>
  s && !Number.isNaN(Date.parse(s)) ? new Date(s).toISOString() : null;

function harborTrialConfig(t: TrialInput, job: JobContext): HarborTrialResult['config'] {
  const { row, result: r } = t;
  const agentConfig = job.spec?.agents.find((a) => configLabelOf(a) === row.config);
  return {
    task: {
      path: r?.task.path ?? row.task,
      git_url: null,
      git_commit_id: null,
      overwrite: false,
      download_dir: null,
      source: t.source,
    },
    trial_name: t.trialName,
    trials_dir: `${job.jobsDir}/${job.name}`,
    ...multipliers(job.spec),
    agent: agentConfig
      ? harborAgentConfig(agentConfig)
      : {
          name: row.agent,
          import_path: null,
          model_name: row.model,
          override_timeout_sec: null,
          override_setup_timeout_sec: null,
          max_timeout_sec: null,
          kwargs: {},
          env: {},
        },
    environment: ENVIRONMENT(job.spec?.forceBuild ?? false),
    verifier: VERIFIER,
    artifacts: [],
    job_id: job.jobUuid,
  };
}

/** What the record holds that Harbor has no field for (see TermgradeCarrySchema); null without the trial's own record. */
export function termgradeCarry(row: TrialRow, r: TrialResult | null): TermgradeCarry | null {
  if (!r) return null;
  return {
    trialId: row.trial_id,
    config: row.config,
    attempt: row.attempt,
    reward: r.reward,
    passed: r.passed,
    steps: r.steps,
    taskVersion: r.taskVersion,
    dataset: r.dataset,
    collected: r.collected,
    error: r.error,
    errors: r.errors,
    exitReason: r.exitReason,
    turns: r.turns,
    tampering: r.tampering,
    protection: r.protection,
    admission: r.admission,
    findings: r.findings,
    evidence: r.evidence,
    image: r.image,
    imageId: r.imageId,
    imageSource: r.imageSource,
    imageCached: r.imageCached,
    engine: r.engine,
    phases: r.phases,
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
    durationMs: r.durationMs,
    infraAttempts: row.infra_attempts,
    retryReasons: parseRetries(row.retry_reasons_json),
  };
}

const intArray = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x));

/**
 * Harbor's rollout_details from an ATIF trajectory: one linear history with, per model turn that
 * has them, the prompt's and the completion's token ids and the completion's logprobs (empty when
 * the server gave ids without logprobs). Null when no step carries token ids (nothing to add).
 */
export function rolloutDetailsOf(trajectory: unknown): HarborRolloutDetail[] | null {
  const steps = (trajectory as { steps?: unknown } | null)?.steps;
  if (!Array.isArray(steps)) return null;
  const detail: HarborRolloutDetail = { prompt_token_ids: [], completion_token_ids: [], logprobs: [] };
  for (const step of steps as Array<{ metrics?: Record<string, unknown> | null }>) {
    const m = step?.metrics;
    if (!m || !intArray(m.completion_token_ids)) continue;
    detail.prompt_token_ids.push(intArray(m.prompt_token_ids) ? m.prompt_token_ids : []);
    detail.completion_token_ids.push(m.completion_token_ids);
    const lp = m.logprobs;
    detail.logprobs.push(Array.isArray(lp) && lp.every((x) => typeof x === 'number') ? lp : []);
  }
  return detail.completion_token_ids.length ? [detail] : null;
}

function harborAgentResult(t: TrialInput): HarborTrialResult['agent_result'] {
  const { row } = t;
  const carry = termgradeCarry(row, t.result);
  return {
    n_input_tokens: row.input_tokens,
    n_cache_tokens: row.cached_tokens,
    n_output_tokens: row.output_tokens,
    cost_usd: row.cost_usd,
    rollout_details: t.rollout,
    metadata: carry ? { termgrade: carry } : { termgrade_trial_id: row.trial_id, config: row.config },
  };
}

/**
 * A reward value as a key of Harbor's reward_stats: as Harbor writes the float it reads from
 * reward.txt (Python's repr: `1.0`, `0.5`), so Harbor's readers get the key type they write.
 */
export const rewardKey = (v: number): string => (Number.isInteger(v) ? `${v}.0` : String(v));

export function harborTrialResult(t: TrialInput, job: JobContext): HarborTrialResult {
  const { row, result: r } = t;
  const rewards = row.reward === null ? null : r && Object.keys(r.rewards).length ? r.rewards : { reward: row.reward };
  const err =
    r?.error ??
    (row.error_class ? { class: row.error_class, message: row.error_message ?? row.error_class, phase: null } : null);
  const finished = isoOrNull(r?.finishedAt);
  const phase = err && r && err.phase ? r.phases[err.phase] : undefined;
  const phases = r?.phases ?? {};
  return {
    id: uuidOf(`${row.job_id}/${row.trial_id}`),
    task_name: row.task,
    trial_name: t.trialName,
    trial_uri: `file://${t.trialDir}`,
    task_id: { path: r?.task.path ?? row.task },
    source: t.source,
    task_checksum: row.task_checksum ?? '',
    config: harborTrialConfig(t, job),
    agent_info: {
      name: row.agent,
      version: `termgrade ${job.version}`,
      model_info: row.model ? { name: row.model, provider: 'openai-compatible' } : null,
    },
    agent_result: harborAgentResult(t),
    verifier_result: rewards ? { rewards } : null,
    exception_info: err
      ? {
          exception_type: exceptionTypeOf(err.class),
          exception_message: err.message,
          exception_traceback: '',
          occurred_at: isoOrNull(phase?.finishedAt) ?? finished ?? new Date(0).toISOString(),
        }
      : null,
    started_at: isoOrNull(r?.startedAt),
    finished_at: finished,
    environment_setup: timing(phases.environment_setup),
    agent_setup: timing(phases.agent_setup),
    agent_execution: timing(phases.agent_run),
    verifier: timing(phases.verification),
  };
}

/** Harbor's key of an agent x model x dataset group in JobStats.evals. */
export const evalsKey = (agent: string, model: string | null, source: string | null): string =>
  model ? `${agent}__${model}__${source ?? 'adhoc'}` : `${agent}__${source ?? 'adhoc'}`;

/** pass@k over tasks for k = 1, 2, 4, ... up to the fewest graded trials of any task (unbiased only there). */
function passAtKOf(trials: HarborTrialResult[], primary: Map<string, number | null>): Record<string, number> {
  const byTask = new Map<string, { n: number; c: number }>();
  for (const t of trials) {
    const reward = primary.get(t.trial_name);
    if (reward === null || reward === undefined) continue;
    const s = byTask.get(t.task_name) ?? { n: 0, c: 0 };
    s.n += 1;
    s.c += isPassingReward(reward) ? 1 : 0;
    byTask.set(t.task_name, s);
  }
  if (!byTask.size) return {};
  const minN = Math.min(...[...byTask.values()].map((s) => s.n));
  const out: Record<string, number> = {};
  for (let k = 1; k <= minN; k *= 2) out[String(k)] = macroPassAtK([...byTask.values()], k).value;
  return out;
}

const sum = (xs: Array<number | null>): number | null =>
  xs.some((x) => x !== null) ? xs.reduce<number>((a, x) => a + (x ?? 0), 0) : null;

/**
 * The job's result.json (`primary`: each trial's reward as termgrade's rates use it, by trial name): counts, the reward and exception tallies per agent x model x dataset, and
 * totals of tokens and cost. `notRun` slots are Harbor's pending trials (run on resume).
 */
export function harborJobResult(
  jobUuid: string,
  trials: HarborTrialResult[],
  primary: Map<string, number | null>,
  extra: { notRun: number; retries: number; now: string },
): HarborJobResult {
  // A trial imported from Harbor is its original record, where Harbor allows null agent_result and rewards.
  const evals: HarborJobResult['stats']['evals'] = {};
  const groups = new Map<string, HarborTrialResult[]>();
  for (const t of trials) {
    const key = evalsKey(t.agent_info.name, t.agent_info.model_info?.name ?? null, t.source);
    groups.set(key, [...(groups.get(key) ?? []), t]);
  }
  for (const [key, group] of groups) {
    const rewardStats: Record<string, Record<string, string[]>> = {};
    const exceptionStats: Record<string, string[]> = {};
    const graded: number[] = [];
    for (const t of group) {
      if (t.verifier_result) {
        for (const [name, value] of Object.entries(t.verifier_result.rewards ?? {}))
          ((rewardStats[name] ??= {})[rewardKey(value)] ??= []).push(t.trial_name);
        const p = primary.get(t.trial_name);
        if (p !== null && p !== undefined) graded.push(p);
      }
      if (t.exception_info) (exceptionStats[t.exception_info.exception_type] ??= []).push(t.trial_name);
    }
    evals[key] = {
      n_trials: group.filter((t) => t.verifier_result).length,
      n_errors: group.filter((t) => t.exception_info).length,
      // Harbor's default metric; over graded trials only (termgrade's accounting: no reward is not a 0).
      metrics: graded.length ? [{ mean: graded.reduce((a, b) => a + b, 0) / graded.length }] : [],
      pass_at_k: passAtKOf(group, primary),
      reward_stats: rewardStats,
      exception_stats: exceptionStats,
    };
  }
  const errored = trials.filter((t) => t.exception_info).length;
  // Harbor writes naive local times (datetime.now()); the job's are written with their offset.
  const starts = trials
    .map((t) => isoOrNull(t.started_at))
    .filter((s): s is string => !!s)
    .sort();
  const ends = trials
    .map((t) => isoOrNull(t.finished_at))
    .filter((s): s is string => !!s)
    .sort();
  return {
    id: jobUuid,
    started_at: starts[0] ?? extra.now,
    updated_at: extra.now,
    finished_at: extra.notRun ? null : (ends.at(-1) ?? null),
    n_total_trials: trials.length + extra.notRun,
    stats: {
      n_trials: trials.length,
      n_errors: errored,
      n_completed_trials: trials.length,
      n_errored_trials: errored,
      n_running_trials: 0,
      n_pending_trials: extra.notRun,
      n_cancelled_trials: trials.filter((t) => t.exception_info?.exception_type === 'CancelledError').length,
      n_retries: extra.retries,
      evals,
      n_input_tokens: sum(trials.map((t) => t.agent_result?.n_input_tokens ?? null)),
      n_cache_tokens: sum(trials.map((t) => t.agent_result?.n_cache_tokens ?? null)),
      n_output_tokens: sum(trials.map((t) => t.agent_result?.n_output_tokens ?? null)),
      cost_usd: sum(trials.map((t) => t.agent_result?.cost_usd ?? null)),
    },
    trial_results: [],
  };
}
