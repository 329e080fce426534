import { z } from 'zod';
import { SlotSchema } from '../store/store.js';
import { PHASES } from '../trial/schema.js';
import { PoolEventSchema } from '../sandbox/pool/provider.js';

/** What a run did, as `run` reports it at the end (and in the job-done event). */
export const JobSummarySchema = z.strictObject({
  job: z.string(),
  total: z.number().int(),
  /** Recorded in this run: graded, errors (no reward; `infra` of them infrastructure failures); and slots not run (budget or interrupt). */
  completed: z.number().int(),
  errors: z.number().int(),
  infra: z.number().int(),
  notRun: z.number().int(),
  /** Already recorded before this run (resumed). */
  skipped: z.number().int(),
  /** Slots adaptive sampling did not need: their task's band decision was settled early. */
  settledEarly: z.number().int(),
  stoppedBy: z.enum(['done', 'budget', 'cancelled']),
  durationMs: z.number(),
});
export type JobSummary = z.infer<typeof JobSummarySchema>;

const withTrial = { trialId: z.string(), slot: SlotSchema };

/**
 * The events of a running job, in order: `run --jsonl` prints each as one line, and library users
 * get them through runJob's onEvent. `type` tells them apart.
 */
export const JobEventSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('job-start'),
    job: z.string(),
    configs: z.array(z.string()),
    tasks: z.number().int(),
    /** Slots in the whole job, and those this run has to do (the rest were recorded before). */
    total: z.number().int(),
    pending: z.number().int(),
    pendingByConfig: z.record(z.string(), z.number().int()),
    concurrency: z.number().int(),
  }),
  /** `run --skip-invalid`: the task folders left out because they cannot be used, each with why. */
  z.strictObject({
    type: z.literal('tasks-skipped'),
    tasks: z.array(z.strictObject({ path: z.string(), message: z.string() })),
  }),
  z.strictObject({ type: z.literal('build-start'), task: z.string() }),
  z.strictObject({ type: z.literal('build-done'), task: z.string(), cached: z.boolean(), ms: z.number() }),
  z.strictObject({ type: z.literal('build-failed'), task: z.string(), message: z.string() }),
  z.strictObject({ type: z.literal('trial-start'), ...withTrial }),
  z.strictObject({ type: z.literal('phase'), ...withTrial, phase: z.enum(PHASES) }),
  z.strictObject({ type: z.literal('trial-recording'), ...withTrial }),
  z.strictObject({
    type: z.literal('trial-done'),
    ...withTrial,
    status: z.enum(['completed', 'error', 'not_run']),
    reward: z.number().nullable(),
    errorClass: z.string().nullable(),
    /** Runs of the slot: 1 plus infrastructure retries. */
    infraAttempts: z.number().int(),
    durationMs: z.number(),
    outputTokens: z.number().int(),
    costUsd: z.number().nullable(),
  }),
  z.strictObject({ type: z.literal('job-done'), summary: JobSummarySchema }),
  // From an engine pool (run with several engines): an engine lost or back, an image copied.
  ...PoolEventSchema.options,
]);
export type JobEvent = z.infer<typeof JobEventSchema>;
