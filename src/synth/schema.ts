import { z } from 'zod';

/**
 * The data contracts of `termgrade synth`: what the generator model must return for each part of a
 * candidate task, what termgrade records by executing it, and the funnel it reports.
 */

/** One line of the seeds file: free fields; `id` names the seed (else its line number does). */
export const SeedSchema = z.looseObject({
  id: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, dash and underscore only')
    .optional(),
});
export type Seed = z.infer<typeof SeedSchema>;

const RelativeFile = z.strictObject({
  /** Path inside environment/ (or tests/): relative, no `..`. */
  path: z
    .string()
    .min(1)
    .refine((p) => !p.startsWith('/') && !p.split('/').includes('..'), 'a relative path inside the folder, without ..'),
  content: z.string(),
});

/** The seed recast as a scenario: the documented dimensions the model fills. */
export const ScenarioSchema = z.strictObject({
  domain: z.string().min(1),
  startingState: z.string().min(1),
  goal: z.string().min(1),
  constraints: z.array(z.string()),
  /** What can be checked afterwards. */
  checkable: z.array(z.string()).min(1),
  /** Absolute paths the solution must create or change: a solution that leaves one untouched is wrong. */
  outputs: z.array(z.string().startsWith('/')).min(1),
});
export type Scenario = z.infer<typeof ScenarioSchema>;

export const EnvironmentPartSchema = z.strictObject({
  dockerfile: z.string().min(1),
  files: z.array(RelativeFile).default([]),
  /** Folders whose tree (sizes, hashes) is recorded after the build; default the workdir. */
  statePaths: z.array(z.string().startsWith('/')).max(8).default([]),
  /** Programs whose version is recorded (`NAME --version`). */
  tools: z
    .array(z.string().regex(/^[A-Za-z0-9._+-]+$/))
    .max(16)
    .default([]),
  /** Short commands whose output is recorded, run in the built image (offline, 10 s each). */
  commands: z.array(z.string().min(1)).max(8).default([]),
});
export type EnvironmentPart = z.infer<typeof EnvironmentPartSchema>;

export const InstructionPartSchema = z.strictObject({ instruction: z.string().min(1) });
export type InstructionPart = z.infer<typeof InstructionPartSchema>;

export const SolutionPartSchema = z.strictObject({ solveSh: z.string().min(1) });
export type SolutionPart = z.infer<typeof SolutionPartSchema>;

export const TestsPartSchema = z.strictObject({ testSh: z.string().min(1), files: z.array(RelativeFile).default([]) });
export type TestsPart = z.infer<typeof TestsPartSchema>;

export const PART_NAMES = ['scenario', 'environment', 'instruction', 'solution', 'tests'] as const;
export const PartName = z.enum(PART_NAMES);
export type PartName = z.infer<typeof PartName>;

/** A part that a repair may regenerate (the scenario is the seed's reading and stays). */
export const RepairablePart = z.enum(['environment', 'instruction', 'solution', 'tests']);
export type RepairablePart = z.infer<typeof RepairablePart>;

/** One entry of a recorded file tree. */
export const TreeEntrySchema = z.strictObject({
  path: z.string(),
  kind: z.enum(['file', 'dir', 'link', 'other']),
  size: z.number(),
  sha256: z.string().nullable(),
});

/** The built image's real state, recorded before anything else is generated from it. */
export const EnvironmentStateSchema = z.strictObject({
  image: z.string(),
  workdir: z.string(),
  tree: z.array(TreeEntrySchema),
  /** True when the tree had more entries than are recorded. */
  treeTruncated: z.boolean(),
  tools: z.array(z.strictObject({ name: z.string(), version: z.string().nullable() })),
  commands: z.array(z.strictObject({ command: z.string(), exitCode: z.number().nullable(), output: z.string() })),
});
export type EnvironmentState = z.infer<typeof EnvironmentStateSchema>;

/** What the reference solution left, observed by running it in the built image. */
export const SolutionStateSchema = z.strictObject({
  exitCode: z.number().nullable(),
  timedOut: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  changes: z.array(
    z.strictObject({
      path: z.string(),
      kind: z.enum(['added', 'changed', 'deleted']),
      size: z.number().nullable(),
      sha256: z.string().nullable(),
      text: z.string().nullable(),
    }),
  ),
  changesTruncated: z.boolean(),
});
export type SolutionState = z.infer<typeof SolutionStateSchema>;

export const STAGES = [
  'scenario',
  'environment',
  'lint',
  'build',
  'observe',
  'instruction',
  'solution',
  'execute',
  'tests',
  'check',
  'write',
] as const;
export const StageName = z.enum(STAGES);
export type StageName = z.infer<typeof StageName>;

/** Why a candidate ended unadmitted, beyond check's own reason codes. */
export const RejectReason = z.enum([
  'rounds_exhausted',
  'budget_exhausted',
  'generator_malformed',
  'generator_error',
  'duplicate',
  'not_repairable',
]);

/** What a failed stage hands to the repair: the part at fault and the evidence. */
export const FailureSchema = z.strictObject({
  stage: StageName,
  /** Check's reason codes, or the stage's own (dockerfile_invalid, build_failed, solution_wrong ...). */
  reasons: z.array(z.string()),
  /** Log excerpts, failing test names, probe findings. */
  evidence: z.array(z.string()),
  part: RepairablePart.nullable(),
});
export type Failure = z.infer<typeof FailureSchema>;

/** A candidate's whole state, as the store keeps it after each stage. */
export const CandidateStateSchema = z.strictObject({
  id: z.string(),
  seedId: z.string(),
  seed: z.record(z.string(), z.unknown()),
  status: z.enum(['active', 'admitted', 'rejected']),
  /** Stages still to run, the next first. */
  plan: z.array(StageName),
  round: z.number().int().nonnegative(),
  parts: z.strictObject({
    scenario: ScenarioSchema.optional(),
    environment: EnvironmentPartSchema.optional(),
    instruction: InstructionPartSchema.optional(),
    solution: SolutionPartSchema.optional(),
    tests: TestsPartSchema.optional(),
  }),
  /** sha256 of each part's canonical JSON, as generated: a repair changes only its own. */
  hashes: z.record(z.string(), z.string()),
  image: z.string().nullable(),
  environmentState: EnvironmentStateSchema.nullable(),
  solutionState: SolutionStateSchema.nullable(),
  /** The failure the next generation stage repairs (null on the first pass). */
  failure: FailureSchema.nullable(),
  repairs: z.array(z.strictObject({ round: z.number().int(), part: RepairablePart, reasons: z.array(z.string()) })),
  tokens: z.strictObject({ prompt: z.number().int(), completion: z.number().int() }),
  costUsd: z.number().nullable(),
  /** Why it was rejected: check's reasons of the last failure and a RejectReason. */
  rejected: z.array(z.string()),
  tests: z.array(z.string()),
  admittedPath: z.string().nullable(),
  /**
   * Left unfinished because the generator's endpoint did not answer (after the client's retries):
   * an outage, not an outcome. The same command resumes it; the next recorded stage clears this.
   */
  waiting: z
    .strictObject({ on: z.literal('generator'), why: z.string() })
    .nullable()
    .default(null),
});
export type CandidateState = z.infer<typeof CandidateStateSchema>;

const Count = z.number().int().nonnegative();

export const FunnelStageSchema = z.strictObject({
  stage: StageName,
  /** Candidates that entered the stage at least once. */
  candidates: Count,
  /** Of those, how many got through it (at some round). */
  passed: Count,
  /** passed / candidates (null when none entered). */
  yield: z.number().nullable(),
  /** Runs of the stage, first passes and repairs. */
  runs: Count,
  wallMs: z.number(),
  /** Share of all stage time spent here. */
  timeShare: z.number(),
});

/** Where one candidate ended (so far): the funnel's per-candidate listing. */
export const CandidateOutcomeSchema = z.strictObject({
  candidate: z.string(),
  seed: z.string(),
  /** waiting_generator: left unfinished by a generator outage; unfinished: interrupted. Both resume. */
  state: z.enum(['admitted', 'rejected', 'waiting_generator', 'unfinished']),
  /** Why it was rejected (its reasons, joined), or what it waits on; null when admitted. */
  reason: z.string().nullable(),
  /** Repair rounds run. */
  rounds: Count,
  /** The stage it is at (unfinished) or ended in. */
  stage: StageName.nullable(),
  tests: Count,
  path: z.string().nullable(),
});
export type CandidateOutcome = z.infer<typeof CandidateOutcomeSchema>;

/** `synth --json`: the funnel. */
export const SynthReportSchema = z.strictObject({
  candidates: Count,
  admitted: Count,
  rejected: Count,
  /** Not finished (interrupted, or waiting on the generator): resumed by running the same command again. */
  unfinished: Count,
  /** Of the unfinished, those left so by a generator outage (the endpoint did not answer after retries). */
  waitingOnGenerator: Count,
  /** Candidates this run of the command took up where an earlier run left them (0 outside a run). */
  resumed: Count,
  endToEndYield: z.number().nullable(),
  stages: z.array(FunnelStageSchema),
  /** Per part: repairs run, candidates repaired, and how many of those were admitted in the end. */
  repairs: z.array(z.strictObject({ part: RepairablePart, attempts: Count, candidates: Count, admitted: Count })),
  /** Rejection reasons, counted over rejected candidates. */
  rejections: z.record(z.string(), Count),
  testsPerAdmitted: z.strictObject({
    mean: z.number().nullable(),
    min: z.number().nullable(),
    max: z.number().nullable(),
  }),
  tokens: z.strictObject({ prompt: Count, completion: Count, calls: Count, malformedReplies: Count }),
  costUsd: z.number().nullable(),
  /** Stage time summed over candidates (above the elapsed time when candidates run side by side). */
  wallMs: z.number(),
  /** The job's elapsed (wall-clock) time, summed over every run of the command. */
  elapsedMs: z.number(),
  /** Every candidate: seed, state, reason, rounds. */
  candidateList: z.array(CandidateOutcomeSchema),
  admittedTasks: z.array(
    z.strictObject({ candidate: z.string(), seed: z.string(), path: z.string(), rounds: Count, tests: Count }),
  ),
  outDir: z.string(),
});
export type SynthReport = z.infer<typeof SynthReportSchema>;
