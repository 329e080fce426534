import { z } from 'zod';
import { TrialResultSchema } from '../trial/schema.js';

/**
 * The files of Harbor's job folder as termgrade writes them (`export trials --format harbor-job`):
 * the field names and types of Harbor's own models (JobConfig, JobResult with JobStats, and
 * TrialResult with TrialConfig, AgentInfo, AgentContext, VerifierResult, ExceptionInfo, TimingInfo),
 * so Harbor's viewer and the trainers' Harbor readers load them. Validated before writing.
 */

const iso = z.iso.datetime({ offset: true });
const uuid = z.uuid();

export const HarborTimingSchema = z.object({ started_at: iso.nullable(), finished_at: iso.nullable() });

export const HarborAgentConfigSchema = z.object({
  name: z.string(),
  import_path: z.string().nullable(),
  model_name: z.string().nullable(),
  override_timeout_sec: z.number().nullable(),
  override_setup_timeout_sec: z.number().nullable(),
  max_timeout_sec: z.number().nullable(),
  kwargs: z.record(z.string(), z.unknown()),
  env: z.record(z.string(), z.string()),
});

export const HarborEnvironmentConfigSchema = z.object({
  type: z.literal('docker'),
  import_path: z.null(),
  force_build: z.boolean(),
  delete: z.boolean(),
  override_cpus: z.null(),
  override_memory_mb: z.null(),
  override_storage_mb: z.null(),
  override_gpus: z.null(),
  kwargs: z.record(z.string(), z.unknown()),
});

export const HarborVerifierConfigSchema = z.object({
  override_timeout_sec: z.null(),
  max_timeout_sec: z.null(),
  disable: z.literal(false),
});

export const HarborTaskConfigSchema = z.object({
  path: z.string(),
  git_url: z.null(),
  git_commit_id: z.null(),
  overwrite: z.boolean(),
  download_dir: z.null(),
  source: z.string().nullable(),
});

export const HarborTrialConfigSchema = z.object({
  task: HarborTaskConfigSchema,
  trial_name: z.string(),
  trials_dir: z.string(),
  timeout_multiplier: z.number(),
  agent_timeout_multiplier: z.number().nullable(),
  verifier_timeout_multiplier: z.number().nullable(),
  agent: HarborAgentConfigSchema,
  environment: HarborEnvironmentConfigSchema,
  verifier: HarborVerifierConfigSchema,
  artifacts: z.array(z.string()),
  job_id: uuid,
});

/**
 * Harbor's RolloutDetail: one linear chat history as token ids, per model turn (the prompt's ids,
 * the completion's ids, and the completion's log-probabilities), for trainers that must not
 * re-tokenise. termgrade writes one from the ATIF trajectory's per-step metrics.
 */
export const HarborRolloutDetailSchema = z.object({
  prompt_token_ids: z.array(z.array(z.number().int())),
  completion_token_ids: z.array(z.array(z.number().int())),
  logprobs: z.array(z.array(z.number())),
});
export type HarborRolloutDetail = z.infer<typeof HarborRolloutDetailSchema>;

/**
 * What termgrade's trial record holds that Harbor's TrialResult has no field for, carried in
 * `agent_result.metadata.termgrade` under termgrade's own names, so `termgrade import` of an
 * export gives the same trial back. Everything Harbor has a field for (task, agent, model,
 * rewards, tokens, cost, times, exception) is read from Harbor's field, and per-test results
 * from the verifier's reports copied with the trial.
 */
export const TermgradeCarrySchema = TrialResultSchema.pick({
  trialId: true,
  attempt: true,
  reward: true,
  passed: true,
  steps: true,
  taskVersion: true,
  dataset: true,
  collected: true,
  error: true,
  errors: true,
  exitReason: true,
  turns: true,
  tampering: true,
  protection: true,
  admission: true,
  findings: true,
  evidence: true,
  image: true,
  imageId: true,
  imageSource: true,
  imageCached: true,
  engine: true,
  phases: true,
  startedAt: true,
  finishedAt: true,
  durationMs: true,
}).extend({
  /** The configuration's label in the job (an agent's `label`, else agent/model). */
  config: z.string(),
  /** Runs of the slot (1 plus infrastructure retries) and why each earlier one was discarded. */
  infraAttempts: z.number().int().positive(),
  retryReasons: z.array(z.object({ class: z.string(), message: z.string(), durationMs: z.number() })),
});
export type TermgradeCarry = z.infer<typeof TermgradeCarrySchema>;

export const HarborTrialResultSchema = z.object({
  id: uuid,
  task_name: z.string(),
  trial_name: z.string(),
  trial_uri: z.string(),
  task_id: z.object({ path: z.string() }),
  source: z.string().nullable(),
  task_checksum: z.string(),
  config: HarborTrialConfigSchema,
  agent_info: z.object({
    name: z.string(),
    version: z.string(),
    model_info: z.object({ name: z.string(), provider: z.string() }).nullable(),
  }),
  agent_result: z.object({
    n_input_tokens: z.number().int().nullable(),
    n_cache_tokens: z.number().int().nullable(),
    n_output_tokens: z.number().int().nullable(),
    cost_usd: z.number().nullable(),
    rollout_details: z.array(HarborRolloutDetailSchema).nullable(),
    metadata: z.record(z.string(), z.unknown()).nullable(),
  }),
  verifier_result: z.object({ rewards: z.record(z.string(), z.number()) }).nullable(),
  exception_info: z
    .object({
      exception_type: z.string(),
      exception_message: z.string(),
      exception_traceback: z.string(),
      occurred_at: iso,
    })
    .nullable(),
  started_at: iso.nullable(),
  finished_at: iso.nullable(),
  environment_setup: HarborTimingSchema.nullable(),
  agent_setup: HarborTimingSchema.nullable(),
  agent_execution: HarborTimingSchema.nullable(),
  verifier: HarborTimingSchema.nullable(),
});
export type HarborTrialResult = z.infer<typeof HarborTrialResultSchema>;

export const HarborEvalStatsSchema = z.object({
  n_trials: z.number().int(),
  n_errors: z.number().int(),
  metrics: z.array(z.record(z.string(), z.number())),
  pass_at_k: z.record(z.string(), z.number()),
  /** reward key -> reward value (as JSON text) -> trial names. */
  reward_stats: z.record(z.string(), z.record(z.string(), z.array(z.string()))),
  /** exception type -> trial names. */
  exception_stats: z.record(z.string(), z.array(z.string())),
});

export const HarborJobStatsSchema = z.object({
  // Harbor's older names and its newer ones, both written: each version reads its own.
  n_trials: z.number().int(),
  n_errors: z.number().int(),
  n_completed_trials: z.number().int(),
  n_errored_trials: z.number().int(),
  n_running_trials: z.number().int(),
  n_pending_trials: z.number().int(),
  n_cancelled_trials: z.number().int(),
  n_retries: z.number().int(),
  evals: z.record(z.string(), HarborEvalStatsSchema),
  n_input_tokens: z.number().int().nullable(),
  n_cache_tokens: z.number().int().nullable(),
  n_output_tokens: z.number().int().nullable(),
  cost_usd: z.number().nullable(),
});

export const HarborJobResultSchema = z.object({
  id: uuid,
  started_at: iso,
  updated_at: iso,
  finished_at: iso.nullable(),
  n_total_trials: z.number().int(),
  stats: HarborJobStatsSchema,
  trial_results: z.array(HarborTrialResultSchema),
});
export type HarborJobResult = z.infer<typeof HarborJobResultSchema>;

export const HarborJobConfigSchema = z.object({
  job_name: z.string(),
  jobs_dir: z.string(),
  n_attempts: z.number().int(),
  timeout_multiplier: z.number(),
  agent_timeout_multiplier: z.number().nullable(),
  verifier_timeout_multiplier: z.number().nullable(),
  n_concurrent_trials: z.number().int(),
  quiet: z.boolean(),
  retry: z.object({ max_retries: z.number().int(), include_exceptions: z.array(z.string()) }),
  environment: HarborEnvironmentConfigSchema,
  verifier: HarborVerifierConfigSchema,
  metrics: z.array(z.unknown()),
  agents: z.array(HarborAgentConfigSchema),
  datasets: z.array(
    z.object({
      path: z.string(),
      task_names: z.array(z.string()).nullable(),
      exclude_task_names: z.array(z.string()).nullable(),
      n_tasks: z.number().int().nullable(),
    }),
  ),
  tasks: z.array(HarborTaskConfigSchema),
  artifacts: z.array(z.string()),
});
export type HarborJobConfig = z.infer<typeof HarborJobConfigSchema>;
