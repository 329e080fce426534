import { z } from 'zod';
import { MAX_TIMEOUT_SEC } from '../util/time.js';

const timeoutSec = z.number().positive().max(MAX_TIMEOUT_SEC, `at most ${MAX_TIMEOUT_SEC} s (about 24 days)`);

/**
 * task.toml, the Harbor / Terminal-Bench 2 contract (schema 1.0, 1.1 and Harbor's newer keys).
 * Every table is loose: keys we do not know are kept as they are, never rejected, so a task
 * written for a newer harness still loads and round-trips.
 */
const envMap = z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String));

/** "2G", "512M", "1024" (MiB) -> MiB; TB2's older `memory` / `storage` keys use this form. */
const sizeInMb = z.union([
  z.number().positive(),
  z
    .string()
    .regex(/^\s*\d+(\.\d+)?\s*([kKmMgGtT][iI]?[bB]?)?\s*$/, 'expected a size such as "2G" or "512M"')
    .transform((s) => {
      const m = /^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT])?/.exec(s)!;
      const n = Number(m[1]);
      const unit = (m[2] ?? 'M').toUpperCase();
      const factor = { K: 1 / 1024, M: 1, G: 1024, T: 1024 * 1024 }[unit as 'K' | 'M' | 'G' | 'T'];
      return Math.max(1, Math.round(n * factor));
    }),
]);

export const NetworkMode = z.enum(['public', 'no-network', 'allowlist']);
export type NetworkMode = z.infer<typeof NetworkMode>;

/**
 * Harbor's newer task schema (1.2 .. 1.4), kept apart from the 1.1 keys below so it reads as one
 * addition: multi-step tasks, collect hooks, per-phase network overrides, a task version.
 */

/** A step's folder name under steps/: letters, digits, `.`, `_`, `-`, starting with a letter or digit. */
export const STEP_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** `[[steps]]`: one step of a multi-step task, run in order in the task's one sandbox. */
export const StepConfigSchema = z.looseObject({
  name: z
    .string()
    .regex(
      STEP_NAME,
      'a step name is a folder name under steps/ (letters, digits, . _ -, starting with a letter or digit)',
    ),
  /** Below this (the primary reward, or each named reward of a map), the trial stops after this step. */
  min_reward: z.union([z.number(), z.record(z.string(), z.number())]).optional(),
  /** false: verified (and a gate through min_reward) but left out of the task's reward. */
  contributes_to_reward: z.boolean().default(true),
  agent: z.looseObject({ timeout_sec: timeoutSec.optional() }).prefault({}),
  verifier: z.looseObject({ timeout_sec: timeoutSec.optional() }).prefault({}),
});
export type StepConfig = z.infer<typeof StepConfigSchema>;

/** `[[verifier.collect]]`: a command run in the verifier's sandbox after the tests, before its logs and artifacts are copied out. */
export const CollectHookSchema = z.looseObject({
  command: z.string().min(1),
  timeout_sec: timeoutSec.default(60),
});
export type CollectHook = z.infer<typeof CollectHookSchema>;

/** An absolute path inside the sandbox with no `.` or `..` part: it names one place and cannot climb out of it. */
const sandboxPath = z
  .string()
  .refine(
    (p) => p.startsWith('/') && p.length > 1 && !p.split('/').some((part) => part === '..' || part === '.'),
    'an absolute path inside the sandbox with no . or .. part',
  );
/** A relative path below the trial's artifacts folder, with no `..` part. */
const artifactDestination = z
  .string()
  .refine(
    (p) =>
      p.length > 0 && !p.startsWith('/') && !p.split('/').some((part) => part === '..' || part === '.' || part === ''),
    'a relative path below the artifacts folder with no . or .. part',
  );

/** `artifacts`: a sandbox path copied out with the verifier's logs, as a string or `{ source, destination }`. */
export const ArtifactSchema = z.union([
  sandboxPath.transform((source) => ({ source, destination: source.slice(1) })),
  z
    .looseObject({ source: sandboxPath, destination: artifactDestination.optional() })
    .transform((a) => ({ source: a.source, destination: a.destination ?? a.source.slice(1) })),
]);
export type Artifact = z.infer<typeof ArtifactSchema>;

export const TaskConfigSchema = z.looseObject({
  version: z.union([z.string(), z.number()]).optional(),
  schema_version: z.union([z.string(), z.number()]).optional(),
  /** Multi-step tasks: how the steps' rewards make the task's ("mean" by default, as Harbor). */
  multi_step_reward_strategy: z.enum(['mean', 'final']).optional(),
  steps: z.array(StepConfigSchema).min(1).optional(),
  /** Paths copied out of the verifier's sandbox with its logs (besides /logs/artifacts, always copied). */
  artifacts: z.array(ArtifactSchema).default([]),
  task: z
    .looseObject({
      name: z.string().min(1).optional(),
      /** The task's own version (schema 1.4), recorded on every trial. */
      version: z.union([z.string(), z.number()]).transform(String).optional(),
      description: z.string().optional(),
      keywords: z.array(z.string()).optional(),
      authors: z.array(z.unknown()).optional(),
    })
    .optional(),
  metadata: z.record(z.string(), z.unknown()).prefault({}),
  verifier: z
    .looseObject({
      timeout_sec: timeoutSec.default(900),
      env: envMap.default({}),
      /**
       * termgrade's former extension, still read so old tasks load: the agent's processes are now
       * always kept through grading (the tests run in their own sandbox beside them), so it
       * changes nothing.
       */
      keep_agent_processes: z.boolean().default(false),
      collect: z.array(CollectHookSchema).default([]),
      /** The verifier phase's network, overriding [environment] (Harbor's per-phase policy). */
      network_mode: NetworkMode.optional(),
    })
    .prefault({}),
  agent: z
    .looseObject({
      timeout_sec: timeoutSec.default(600),
      /** The agent phase's network, overriding [environment] (Harbor's per-phase policy). */
      network_mode: NetworkMode.optional(),
      allowed_hosts: z.array(z.string()).optional(),
    })
    .prefault({}),
  solution: z.looseObject({ env: envMap.default({}) }).prefault({}),
  environment: z
    .looseObject({
      build_timeout_sec: timeoutSec.default(600),
      docker_image: z.string().min(1).optional(),
      cpus: z.number().positive().default(1),
      memory_mb: sizeInMb.optional(),
      memory: sizeInMb.optional(),
      storage_mb: sizeInMb.optional(),
      storage: sizeInMb.optional(),
      gpus: z.number().int().nonnegative().default(0),
      allow_internet: z.boolean().default(false),
      network_mode: NetworkMode.optional(),
      workdir: z.string().optional(),
      env: envMap.default({}),
      /** termgrade extension: cap on processes in the container (fork bombs). */
      pids_limit: z.number().int().positive().optional(),
    })
    .prefault({}),
});
export type TaskConfig = z.infer<typeof TaskConfigSchema>;

/** Resource limits resolved from the config, in the units the sandbox wants. */
export const ResourceLimitsSchema = z.object({
  cpus: z.number().positive(),
  memoryMb: z.number().positive(),
  pidsLimit: z.number().int().positive(),
  network: z.boolean(),
});
export type ResourceLimits = z.infer<typeof ResourceLimitsSchema>;

export const DEFAULT_MEMORY_MB = 2048;
export const DEFAULT_PIDS_LIMIT = 1024;

export function resourceLimits(config: TaskConfig): ResourceLimits {
  const env = config.environment;
  const network = env.network_mode ? env.network_mode !== 'no-network' : env.allow_internet;
  return {
    cpus: env.cpus,
    memoryMb: env.memory_mb ?? env.memory ?? DEFAULT_MEMORY_MB,
    pidsLimit: env.pids_limit ?? DEFAULT_PIDS_LIMIT,
    network,
  };
}
