import { z } from 'zod';

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

export const VerifierErrorClass = z.enum(['verifier_timeout', 'verifier_no_reward', 'verifier_bad_reward', 'verifier_crash', 'tampering']);
export type VerifierErrorClass = z.infer<typeof VerifierErrorClass>;

/**
 * Something about a graded trial's evidence that does not add up (see consistency.ts). The reward
 * stands as the verifier gave it; a finding flags it for a reader of the numbers.
 */
export const FindingCode = z.enum(['reward_with_failed_tests', 'reward_files_disagree']);
export type FindingCode = z.infer<typeof FindingCode>;
export const FindingSchema = z.object({ code: FindingCode, message: z.string() });
export type Finding = z.infer<typeof FindingSchema>;

export const VerifierOutcomeSchema = z.object({
  /** The primary reward; null when the verifier failed (a verifier error is never a 0). */
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
  tampering: z.array(z.object({ path: z.string(), kind: z.enum(['added', 'changed', 'deleted']), why: z.string() })).default([]),
  /** Where the reward and the verifier's other evidence disagree (a reward is never changed by one). */
  findings: z.array(FindingSchema).optional(),
});
export type VerifierOutcome = z.infer<typeof VerifierOutcomeSchema>;

export function summarizeTests(tests: TestResult[]): { total: number; passed: number; failed: number; skipped: number; other: number } {
  const count = (s: TestStatus): number => tests.filter((t) => t.status === s).length;
  const passed = count('passed');
  const failed = count('failed') + count('error');
  const skipped = count('skipped');
  return { total: tests.length, passed, failed, skipped, other: tests.length - passed - failed - skipped };
}
