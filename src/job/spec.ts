import { z } from 'zod';
import { ModelConfigSchema } from '../model/config.js';
import { EngineSpecSchema } from '../sandbox/pool/engine-spec.js';
import { DEFAULT_INFRA_RETRIES } from '../trial/accounting.js';
import { MAX_TIMEOUT_SEC } from '../util/time.js';
import { AdaptiveSpecSchema } from '../records/sampling.js';
import { GradingPolicy } from '../verifier/evidence.js';

const seconds = z.number().positive().max(MAX_TIMEOUT_SEC, `at most ${MAX_TIMEOUT_SEC} s (about 24 days)`);

/** One agent configuration of a job: what runs, against which model, under which cap. */
export const AgentConfigSchema = z.strictObject({
  /** The name trials are grouped, compared and selected by; default agent or agent/model. */
  label: z.string().min(1).optional(),
  /** A registered agent: oracle, nop, terminus, bash-tool, or the name a loaded module gives. */
  agent: z.string().min(1),
  /** A module (file path or package) whose default export is an agent plugin; loaded before the job runs. */
  importPath: z.string().min(1).optional(),
  model: ModelConfigSchema.optional(),
  /** Environment variables for the agent's commands. Stored with the job: put secrets in envFiles. */
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'a variable name'), z.string()).default({}),
  /** Files of KEY=VALUE lines, read afresh at each run; their values are never stored and are scrubbed from records. */
  envFiles: z.array(z.string()).default([]),
  /** At most this many trials at once against this configuration's endpoint. */
  concurrency: z.number().int().positive().optional(),
  maxTurns: z.number().int().positive().optional(),
  commandTimeoutSec: seconds.optional(),
});
export type AgentConfig = z.infer<typeof AgentConfigSchema>;
export type AgentConfigInput = z.input<typeof AgentConfigSchema>;

export const JobSpecSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, dash and underscore only'),
  tasks: z.strictObject({
    /** Task folders, folders of task folders, or globs of either. */
    paths: z.array(z.string()).min(1),
    /** Keep only these task names (globs allowed). */
    include: z.array(z.string()).default([]),
    exclude: z.array(z.string()).default([]),
    /** A file of task names, one per line (a split): only these run. */
    split: z.string().optional(),
    /** After the filters: only the first N tasks by name. */
    limit: z.number().int().positive().optional(),
    /** After the filters: N tasks drawn at random with a seed (the same seed draws the same tasks). */
    sample: z.strictObject({ n: z.number().int().positive(), seed: z.number().int().positive().default(1) }).optional(),
  }),
  agents: z.array(AgentConfigSchema).min(1),
  k: z.number().int().positive().default(1),
  /** Trials at once; default the engines' total capacity, or 4 on the local engine. */
  concurrency: z.number().int().positive().optional(),
  /**
   * Docker engines to spread trials over, each with its capacity; default the local engine.
   * Images are built once and copied to the others; an engine lost mid-run is drained.
   */
  engines: z.array(EngineSpecSchema).min(1).optional(),
  /** Wall-clock budget in seconds; at the end running trials stop and are recorded as not run. */
  budgetSec: seconds.optional(),
  timeouts: z
    .strictObject({
      agentMultiplier: z.number().positive().default(1),
      verifierMultiplier: z.number().positive().default(1),
      environmentSec: seconds.default(120),
      agentSetupSec: seconds.default(600),
    })
    .prefault({}),
  /** Adaptive sampling (records/sampling.ts): k is the cap. */
  adaptive: AdaptiveSpecSchema.optional(),
  /**
   * An isolated network (made by the user on the engine) for tasks that ask for one
   * (allow_internet / network_mode). Without it every trial runs offline; never the host's network.
   */
  network: z.string().min(1).optional(),
  /**
   * How rewards are held against the tests' own reports (verifier/evidence.ts): `evidence` grades a
   * pass they do not support 0; `harbor` keeps Harbor's plain semantics. Absent: evidence.
   */
  grading: GradingPolicy.optional(),
  /** Build each task's Dockerfile even when it names a prebuilt image (docker_image) that is available. */
  forceBuild: z.boolean().default(false),
  /**
   * Also keep the job as Harbor's job folder, `<harborJobsDir>/<name>/` (config.json, result.json, a
   * folder per trial), each trial's folder written as it is recorded and the whole folder when a run
   * ends: `harbor view`, notebooks and trainers that read
   * Harbor's folders open it. Set by `run --format harbor` and by a Harbor job config's `jobs_dir`.
   */
  harborJobsDir: z.string().min(1).optional(),
  /** Infrastructure failures (build, engine, sandbox lost) are retried per trial this many times. */
  infraRetries: z.number().int().nonnegative().max(100).default(DEFAULT_INFRA_RETRIES),
});
export type JobSpec = z.infer<typeof JobSpecSchema>;
export type JobSpecInput = z.input<typeof JobSpecSchema>;

export function configLabelOf(a: AgentConfig): string {
  return a.label ?? (a.model ? `${a.agent}/${a.model.model}` : a.agent);
}

/**
 * What makes two trials of one configuration comparable: everything that changes the agent's
 * behaviour. Caps, keys and timeouts of the request are not part of it.
 */
export function configFingerprint(a: AgentConfig): string {
  const m = a.model;
  return JSON.stringify({
    agent: a.agent,
    // Only when set, so configurations recorded before these fields existed keep their fingerprint.
    ...(a.importPath ? { importPath: a.importPath } : {}),
    ...(Object.keys(a.env ?? {}).length ? { env: a.env } : {}),
    maxTurns: a.maxTurns ?? null,
    commandTimeoutSec: a.commandTimeoutSec ?? null,
    model: m
      ? {
          baseUrl: m.baseUrl,
          model: m.model,
          temperature: m.temperature ?? null,
          topP: m.topP ?? null,
          maxTokens: m.maxTokens ?? null,
          extraBody: m.extraBody,
          contextWindow: m.contextWindow ?? null,
        }
      : null,
  });
}
