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

export const TaskConfigSchema = z.looseObject({
  version: z.union([z.string(), z.number()]).optional(),
  schema_version: z.union([z.string(), z.number()]).optional(),
  task: z
    .looseObject({
      name: z.string().min(1).optional(),
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
    })
    .prefault({}),
  agent: z
    .looseObject({
      timeout_sec: timeoutSec.default(600),
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
