import { z } from 'zod';
import { EvidenceCheckSchema } from './evidence.js';
import { ProtectionMode } from './protection.js';

/** One named test's outcome, whatever report format it came from. */
export const TestStatus = z.enum(['passed', 'failed', 'skipped', 'error', 'other']);
export type TestStatus = z.infer<typeof TestStatus>;

export const TestResultSchema = z.object({
  name: z.string(),
  status: TestStatus,
  durationMs: z.number().nullable().default(null),
  message: z.string().nullable().default(null),
});
export type TestResult = z.infer<typeof TestResultSchema>;

export const TestReportSource = z.enum(['ctrf', 'pytest-rA', 'junit', 'none']);
export type TestReportSource = z.infer<typeof TestReportSource>;

/**
 * Why the verifier gave no reward of its own. After the agent's turn every one of these but
 * verifier_crash (grading could not finish on the engine's side: infrastructure, no reward; see
 * OUTCOME_CLASSES in trial/accounting.ts) is the sandbox's doing and is graded 0, as Harbor counts it:
 * a verifier that timed out (a FIFO the tests block on), wrote no or a malformed reward, a harness
 * step the sandbox's content broke (grading_blocked: the working folder turned into a file), or
 * tampering with the verifier's machinery, or the agent's files over its disk limit when grading
 * began (disk_limit: they are not copied for the verifier).
 */
export const VerifierErrorClass = z.enum([
  'verifier_timeout',
  'verifier_no_reward',
  'verifier_bad_reward',
  'verifier_crash',
  'grading_blocked',
  'tampering',
  'disk_limit',
  // The reward claimed a pass the tests' own reports do not support (see evidence.ts).
  'reward_unsupported',
]);
export type VerifierErrorClass = z.infer<typeof VerifierErrorClass>;

/**
 * Something about a graded trial's evidence that does not add up (see consistency.ts). The reward
 * stands as the verifier gave it; a finding flags it for a reader of the numbers.
 */
export const FindingCode = z.enum(['reward_with_failed_tests', 'reward_files_disagree']);
export type FindingCode = z.infer<typeof FindingCode>;
export const FindingSchema = z.object({ code: FindingCode, message: z.string() });
export type Finding = z.infer<typeof FindingSchema>;

export const ArtifactCopySchema = z.object({
  source: z.string(),
  destination: z.string(),
  ok: z.boolean(),
  message: z.string().nullable(),
});
export const CollectedSchema = z.object({
  hooks: z.array(z.object({ command: z.string(), exitCode: z.number().nullable(), timedOut: z.boolean() })),
  artifacts: z.array(ArtifactCopySchema),
});

export const VerifierOutcomeSchema = z.object({
  /** The primary reward: 0 when the sandbox's state kept the verifier from giving one (see VerifierErrorClass); null only when the engine failed. */
  reward: z.number().nullable(),
  /** Every named reward from reward.json ({reward: x} for reward.txt). */
  rewards: z.record(z.string(), z.number()),
  rewardSource: z.enum(['reward.json', 'reward.txt']).nullable(),
  tests: z.array(TestResultSchema),
  testsSource: TestReportSource,
  /** Tests found in each report the verifier left; the most complete one is `testsSource`. */
  testsSourceCounts: z.partialRecord(TestReportSource, z.number()).default({}),
  error: z.object({ class: VerifierErrorClass, message: z.string() }).nullable(),
  exitCode: z.number().nullable(),
  durationMs: z.number(),
  /** Changes the agent made to the verifier's machinery; any one voids the reward (it becomes 0). */
  tampering: z
    .array(z.object({ path: z.string(), kind: z.enum(['added', 'changed', 'deleted']), why: z.string() }))
    .default([]),
  /** Which protected set the tamper scan used: the task's from admission, or the fixed rules only. */
  protection: ProtectionMode.default('rules'),
  /** Where the reward and the verifier's other evidence disagree (a reward is never changed by one). */
  findings: z.array(FindingSchema).optional(),
  /** `[[verifier.collect]]` commands run and artifacts copied out with the logs (diagnostics, never the grade). */
  collected: CollectedSchema.optional(),
  /** How the reward was held against the tests' own evidence (absent when no reward file was read). */
  evidence: EvidenceCheckSchema.optional(),
});
export type VerifierOutcome = z.infer<typeof VerifierOutcomeSchema>;

export function summarizeTests(tests: TestResult[]): {
  total: number;
  passed: number;
  failed: number;
  skipped: number;
  other: number;
} {
  const count = (s: TestStatus): number => tests.filter((t) => t.status === s).length;
  const passed = count('passed');
  const failed = count('failed') + count('error');
  const skipped = count('skipped');
  return { total: tests.length, passed, failed, skipped, other: tests.length - passed - failed - skipped };
}
