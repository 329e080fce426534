/**
 * TEST DOUBLE. A reader of Harbor's job folder written from Harbor's published pydantic models
 * (harbor/models/job/config.py JobConfig, job/result.py JobResult + JobStats + AgentDatasetStats,
 * trial/result.py TrialResult + AgentInfo + ModelInfo + ExceptionInfo + TimingInfo,
 * trial/config.py TrialConfig + TaskConfig + AgentConfig + EnvironmentConfig + VerifierConfig,
 * agent/context.py AgentContext, agent/rollout_detail.py RolloutDetail, verifier/result.py
 * VerifierResult, task/id.py LocalTaskId).
 * Independent of src/harbor/schema.ts on purpose: it checks what Harbor requires (fields without
 * defaults present; datetimes, UUIDs and numbers parse as pydantic parses them) and, being strict,
 * that no field is written under a name Harbor's models do not have.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

/** pydantic's datetime: an ISO 8601 string it parses. */
const datetime = z
  .string()
  .refine(
    (s) => !Number.isNaN(Date.parse(s)) && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(s),
    'a datetime pydantic parses',
  );
const uuid = z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'a UUID');
const opt = <T extends z.ZodType>(t: T) => t.nullable().optional();

const TimingInfo = z.strictObject({ started_at: opt(datetime), finished_at: opt(datetime) });
const ExceptionInfo = z.strictObject({
  exception_type: z.string(),
  exception_message: z.string(),
  exception_traceback: z.string(),
  occurred_at: datetime,
});
const ModelInfo = z.strictObject({ name: z.string(), provider: z.string() });
const AgentInfo = z.strictObject({ name: z.string(), version: z.string(), model_info: opt(ModelInfo) });
/** agent/rollout_detail.py RolloutDetail: a TypedDict, total=False (every key optional, no other key). */
const RolloutDetail = z.strictObject({
  prompt_token_ids: z.array(z.array(z.number().int())).optional(),
  completion_token_ids: z.array(z.array(z.number().int())).optional(),
  logprobs: z.array(z.array(z.number())).optional(),
});
const AgentContext = z.strictObject({
  n_input_tokens: opt(z.number().int()),
  n_cache_tokens: opt(z.number().int()),
  n_output_tokens: opt(z.number().int()),
  cost_usd: opt(z.number()),
  rollout_details: opt(z.array(RolloutDetail)),
  metadata: opt(z.record(z.string(), z.unknown())),
});
const VerifierResult = z.strictObject({ rewards: opt(z.record(z.string(), z.number())) });
const LocalTaskId = z.strictObject({ path: z.string() });

const TaskConfig = z.strictObject({
  path: opt(z.string()),
  git_url: opt(z.string()),
  git_commit_id: opt(z.string()),
  overwrite: z.boolean().optional(),
  download_dir: opt(z.string()),
  source: opt(z.string()),
});
const AgentConfig = z.strictObject({
  name: opt(z.string()),
  import_path: opt(z.string()),
  model_name: opt(z.string()),
  override_timeout_sec: opt(z.number()),
  override_setup_timeout_sec: opt(z.number()),
  max_timeout_sec: opt(z.number()),
  kwargs: z.record(z.string(), z.unknown()).optional(),
  env: z.record(z.string(), z.string()).optional(),
});
const EnvironmentConfig = z.strictObject({
  type: opt(z.enum(['docker', 'daytona', 'e2b', 'modal', 'runloop', 'gke'])),
  import_path: opt(z.string()),
  force_build: z.boolean().optional(),
  delete: z.boolean().optional(),
  override_cpus: opt(z.number().int()),
  override_memory_mb: opt(z.number().int()),
  override_storage_mb: opt(z.number().int()),
  override_gpus: opt(z.number().int()),
  kwargs: z.record(z.string(), z.unknown()).optional(),
});
const VerifierConfig = z.strictObject({
  override_timeout_sec: opt(z.number()),
  max_timeout_sec: opt(z.number()),
  disable: z.boolean().optional(),
});
const TrialConfig = z.strictObject({
  task: TaskConfig,
  trial_name: z.string().optional(),
  trials_dir: z.string().optional(),
  timeout_multiplier: z.number().optional(),
  agent_timeout_multiplier: opt(z.number()),
  verifier_timeout_multiplier: opt(z.number()),
  agent: AgentConfig.optional(),
  environment: EnvironmentConfig.optional(),
  verifier: VerifierConfig.optional(),
  artifacts: z.array(z.unknown()).optional(),
  job_id: opt(uuid),
});

export const TrialResult = z.strictObject({
  id: uuid.optional(),
  task_name: z.string(),
  trial_name: z.string(),
  trial_uri: z.string(),
  task_id: LocalTaskId,
  source: opt(z.string()),
  task_checksum: z.string(),
  config: TrialConfig,
  agent_info: AgentInfo,
  agent_result: opt(AgentContext),
  verifier_result: opt(VerifierResult),
  exception_info: opt(ExceptionInfo),
  started_at: opt(datetime),
  finished_at: opt(datetime),
  environment_setup: opt(TimingInfo),
  agent_setup: opt(TimingInfo),
  agent_execution: opt(TimingInfo),
  verifier: opt(TimingInfo),
});
export type TrialResult = z.infer<typeof TrialResult>;

/** dict keys that pydantic reads as float | int. */
const numberKey = z
  .string()
  .refine((k) => k.trim() !== '' && Number.isFinite(Number(k)), 'a reward value (float | int key)');
const AgentDatasetStats = z.strictObject({
  n_trials: z.number().int().optional(),
  n_errors: z.number().int().optional(),
  metrics: z.array(z.record(z.string(), z.unknown())).optional(),
  pass_at_k: z.record(z.string().regex(/^\d+$/, 'an int key'), z.number()).optional(),
  reward_stats: z.record(z.string(), z.record(numberKey, z.array(z.string()))).optional(),
  exception_stats: z.record(z.string(), z.array(z.string())).optional(),
});
/** JobStats in both of Harbor's spellings: n_trials / n_errors (older) and n_completed_trials ... (newer). */
const JobStats = z.strictObject({
  n_trials: z.number().int().optional(),
  n_errors: z.number().int().optional(),
  n_completed_trials: z.number().int().optional(),
  n_errored_trials: z.number().int().optional(),
  n_running_trials: z.number().int().optional(),
  n_pending_trials: z.number().int().optional(),
  n_cancelled_trials: z.number().int().optional(),
  n_retries: z.number().int().optional(),
  evals: z.record(z.string(), AgentDatasetStats).optional(),
  n_input_tokens: opt(z.number().int()),
  n_cache_tokens: opt(z.number().int()),
  n_output_tokens: opt(z.number().int()),
  cost_usd: opt(z.number()),
});
export const JobResult = z.strictObject({
  id: uuid,
  started_at: datetime,
  updated_at: opt(datetime),
  finished_at: opt(datetime),
  n_total_trials: z.number().int(),
  stats: JobStats,
  trial_results: z.array(TrialResult).optional(),
});
export type JobResult = z.infer<typeof JobResult>;

const DatasetConfig = z.strictObject({
  path: opt(z.string()),
  name: opt(z.string()),
  version: opt(z.string()),
  task_names: opt(z.array(z.string())),
  exclude_task_names: opt(z.array(z.string())),
  n_tasks: opt(z.number().int()),
});
const RetryConfig = z.strictObject({
  max_retries: z.number().int().min(0).optional(),
  include_exceptions: opt(z.array(z.string())),
  exclude_exceptions: opt(z.array(z.string())),
});
export const JobConfig = z.strictObject({
  job_name: z.string().optional(),
  jobs_dir: z.string().optional(),
  n_attempts: z.number().int().optional(),
  timeout_multiplier: z.number().optional(),
  agent_timeout_multiplier: opt(z.number()),
  verifier_timeout_multiplier: opt(z.number()),
  n_concurrent_trials: z.number().int().min(1).optional(),
  quiet: z.boolean().optional(),
  retry: RetryConfig.optional(),
  /** Harbor's newer JobConfig nests the concurrency and retry settings here (OrchestratorConfig). */
  orchestrator: z
    .strictObject({
      type: z.string().optional(),
      n_concurrent_trials: z.number().int().min(1).optional(),
      quiet: z.boolean().optional(),
      retry: RetryConfig.optional(),
      kwargs: z.record(z.string(), z.unknown()).optional(),
    })
    .optional(),
  environment: EnvironmentConfig.optional(),
  verifier: VerifierConfig.optional(),
  metrics: z.array(z.unknown()).optional(),
  agents: z.array(AgentConfig).optional(),
  datasets: z.array(DatasetConfig).optional(),
  tasks: z.array(TaskConfig).optional(),
  artifacts: z.array(z.unknown()).optional(),
});
export type JobConfig = z.infer<typeof JobConfig>;

export interface HarborJobFolder {
  config: JobConfig;
  result: JobResult;
  trials: Array<{ dir: string; result: TrialResult; config: z.infer<typeof TrialConfig> }>;
  /** Trials Harbor set up and has not run: a folder with its TrialConfig and no result.json. */
  pending: Array<{ dir: string; config: z.infer<typeof TrialConfig> }>;
}

/** Reads a job folder as Harbor does: config.json, result.json, and each sub-folder's result.json. */
export async function readHarborJobFolder(dir: string): Promise<HarborJobFolder> {
  const config = JobConfig.parse(JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8')));
  const result = JobResult.parse(JSON.parse(await readFile(path.join(dir, 'result.json'), 'utf8')));
  const trials: HarborJobFolder['trials'] = [];
  const pending: HarborJobFolder['pending'] = [];
  for (const name of (await readdir(dir)).sort()) {
    const sub = path.join(dir, name);
    if (!(await stat(sub)).isDirectory()) continue;
    if (!(await stat(path.join(sub, 'result.json')).catch(() => null))) {
      pending.push({
        dir: sub,
        config: TrialConfig.parse(JSON.parse(await readFile(path.join(sub, 'config.json'), 'utf8'))),
      });
      continue;
    }
    trials.push({
      dir: sub,
      result: TrialResult.parse(JSON.parse(await readFile(path.join(sub, 'result.json'), 'utf8'))),
      config: TrialConfig.parse(JSON.parse(await readFile(path.join(sub, 'config.json'), 'utf8'))),
    });
  }
  return { config, result, trials, pending };
}
