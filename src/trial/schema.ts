import { z } from 'zod';
import { EvidenceCheckSchema } from '../verifier/evidence.js';
import { ProtectionMode } from '../verifier/protection.js';
import { CollectedSchema, FindingSchema, TestReportSource, TestResultSchema } from '../verifier/schema.js';

export const PHASES = ['environment_setup', 'agent_setup', 'agent_run', 'verification', 'teardown'] as const;
export type Phase = (typeof PHASES)[number];

export const PhaseTimingSchema = z.object({
  startedAt: z.string(),
  finishedAt: z.string(),
  durationMs: z.number(),
});
export type PhaseTiming = z.infer<typeof PhaseTimingSchema>;

/**
 * Why a trial did not end cleanly. What each class means for the numbers is decided in one place,
 * `accounting.ts`: infrastructure classes carry no reward and are retried, agent classes
 * (timeouts, crashes, model_error for a refusal, tampering) are graded, verifier classes mean the
 * grade is missing.
 */
export const TrialErrorClass = z.enum([
  'build_failed',
  'environment_error',
  'agent_setup_error',
  'agent_timeout',
  'agent_error',
  'model_error',
  'model_unavailable',
  'tampering',
  'disk_limit',
  'verifier_timeout',
  'verifier_no_reward',
  'verifier_bad_reward',
  'verifier_crash',
  'grading_blocked',
  'reward_unsupported',
  'cancelled',
  'internal_error',
]);
export type TrialErrorClass = z.infer<typeof TrialErrorClass>;

export const ExitReason = z.enum([
  'completed',
  'max_turns',
  'context_exhausted',
  'model_error',
  'parse_errors',
  'agent_error',
  'agent_timeout',
  'not_run',
  // A tree's prefix stopped at its branch point (recorded only when its fork then failed).
  'paused',
]);

const TrialErrorSchema = z.object({ class: TrialErrorClass, message: z.string(), phase: z.enum(PHASES) });
const TestsSummarySchema = z.object({
  total: z.number(),
  passed: z.number(),
  failed: z.number(),
  skipped: z.number(),
  other: z.number(),
});

/** One step of a multi-step trial: what the agent ended with and how its verification graded it. */
export const StepResultSchema = z.object({
  name: z.string(),
  /** The step's primary reward; null when it was not verified (the trial stopped before, or grading failed). */
  reward: z.number().nullable(),
  rewards: z.record(z.string(), z.number()),
  /** Whether the step counts toward the task's reward (`contributes_to_reward`). */
  contributes: z.boolean(),
  /** The step's reward missed its `min_reward`: the trial stopped after it. */
  stoppedTrial: z.boolean(),
  exitReason: ExitReason,
  error: TrialErrorSchema.nullable(),
  testsSummary: TestsSummarySchema,
  collected: CollectedSchema.nullable().default(null),
  durationMs: z.number(),
});
export type StepResult = z.infer<typeof StepResultSchema>;

/** Which admission record a grade used: its task content, when it was recorded, and the file it was read from. */
export const AdmissionRefSchema = z.object({
  checksum: z.string(),
  recordedAt: z.string(),
  /** Null when the record was handed over in memory (the library), not read from a store. */
  file: z.string().nullable(),
});
export type AdmissionRef = z.infer<typeof AdmissionRefSchema>;

export const TrialResultSchema = z.object({
  schemaVersion: z.literal(1),
  trialId: z.string(),
  task: z.object({ name: z.string(), path: z.string(), checksum: z.string() }),
  agent: z.object({ name: z.string(), model: z.string().nullable() }),
  attempt: z.number().int().nonnegative(),
  /** A verifier-produced reward; null when there is none (never a stand-in 0). */
  reward: z.number().nullable(),
  rewards: z.record(z.string(), z.number()),
  /** reward >= 1: the task was solved. */
  passed: z.boolean(),
  /**
   * A branch of a tree-shaped trial (run-trial --branch-at, serve's branched episodes): the trial
   * whose run it continues (`prefix`, that trial's folder holds the prefix's log and tree.json),
   * its index among the `of` branches, and the turn they branched after. Absent for any other trial.
   */
  branch: z
    .object({ prefix: z.string(), index: z.number().int().nonnegative(), of: z.number().int(), atTurn: z.number() })
    .optional(),
  /** A multi-step task's steps, in the order run (empty for a single-step task); `reward` is their aggregate. */
  steps: z.array(StepResultSchema).default([]),
  /** `[task].version` and the dataset.toml beside the task, as they were when the trial ran. */
  taskVersion: z.string().nullable().default(null),
  dataset: z.object({ name: z.string().nullable(), version: z.string().nullable() }).nullable().default(null),
  /** `[[verifier.collect]]` commands and artifacts copied out with the verifier's logs (single-step; a step's are on the step). */
  collected: CollectedSchema.nullable().default(null),
  tests: z.array(TestResultSchema),
  testsSource: TestReportSource,
  /** Tests found in each report the verifier left (the most complete one is `testsSource`). */
  testsSourceCounts: z.partialRecord(TestReportSource, z.number()).default({}),
  testsSummary: z.object({
    total: z.number(),
    passed: z.number(),
    failed: z.number(),
    skipped: z.number(),
    other: z.number(),
  }),
  /**
   * The error that decides the trial's accounting: with a reward, the first thing that went wrong;
   * without one, what kept the reward from being given (infrastructure first, then the verifier's).
   * `errors` lists them all in order.
   */
  error: z.object({ class: TrialErrorClass, message: z.string(), phase: z.enum(PHASES) }).nullable(),
  errors: z.array(z.object({ class: TrialErrorClass, message: z.string(), phase: z.enum(PHASES) })),
  exitReason: ExitReason,
  turns: z.number().int().nonnegative(),
  tokens: z.object({ input: z.number(), cached: z.number(), output: z.number() }).nullable(),
  costUsd: z.number().nullable(),
  /** Set when the verifier found the agent had tampered with its machinery (the reward is then 0). */
  tampering: z
    .array(z.object({ path: z.string(), kind: z.enum(['added', 'changed', 'deleted']), why: z.string() }))
    .default([]),
  /** The protected set the tamper scan used: the task's from admission, or the fixed rules only. */
  protection: ProtectionMode.default('rules'),
  /** The admission record the trial was graded against (`protection: admission`); null with the fixed rules only. */
  admission: AdmissionRefSchema.nullable().default(null),
  /**
   * Where a graded trial's reward disagrees with the verifier's other evidence (a full reward with
   * failed tests; reward.json and reward.txt that differ). The reward is kept; this flags it.
   */
  findings: z.array(FindingSchema).default([]),
  /**
   * How the reward was held against the tests' own reports and admission's record of a pass (the
   * grading policy, the verdict, what each report showed). A pass they do not support is graded 0
   * (error class reward_unsupported). Null when no reward file was read.
   */
  evidence: EvidenceCheckSchema.nullable().default(null),
  image: z.string().nullable(),
  /** The engine's id of that image: trials on different builds of one tag are told apart by it. */
  imageId: z.string().nullable().default(null),
  /** Which image source was used: the task's prebuilt image, its Dockerfile, or the Dockerfile because the prebuilt one could not be had. */
  imageSource: z.enum(['prebuilt', 'dockerfile', 'dockerfile-fallback']).nullable().default(null),
  imageCached: z.boolean().nullable(),
  /** The Docker engine of a pool the trial ran on (`--engine`); null on the single local engine. */
  engine: z.string().nullable().default(null),
  phases: z.partialRecord(z.enum(PHASES), PhaseTimingSchema),
  startedAt: z.string(),
  finishedAt: z.string(),
  durationMs: z.number(),
});
export type TrialResult = z.infer<typeof TrialResultSchema>;
export type TrialError = NonNullable<TrialResult['error']>;
