import { accountingOf, INFRA_ERROR_CLASSES, isPassingReward } from '../trial/accounting.js';
import { z } from 'zod';
import type { TrialErrorClass, TrialResult } from '../trial/schema.js';

/** Why a candidate task is rejected. These exact codes are part of `check --json`'s contract. */
export const ReasonCode = z.enum([
  'invalid_task',
  'build_failed',
  // The infrastructure failed on every run check gave a trial (the engine, the sandbox's start,
  // grading's harness, termgrade itself): nothing is known of the task; check it again.
  'infra_error',
  'oracle_failed',
  // The reference solution failed because test.sh could not fetch its tools with no network
  // (a Terminal-Bench 2 verifier the offline toolchain does not serve).
  'verifier_needs_network',
  'nop_passed',
  'flaky',
  'verifier_error',
  'timeout',
  // Probes (check --probes): weaknesses proven by executing them.
  'reward_forgeable',
  'solution_leaked',
  'weak_tests',
  'verifier_nondeterministic',
  // A published reward hack played on a file the tests run or import is graded a pass.
  'reward_hackable',
  'duplicate',
]);
export type ReasonCode = z.infer<typeof ReasonCode>;

/**
 * A clean pass, as admission and the probes judge a grading: a passing reward (the one rule,
 * isPassingReward) and no test that failed or errored (skipped ones count as passed).
 */
export function isCleanPass(reward: number | null, tests: ReadonlyArray<{ status: string }>): boolean {
  return isPassingReward(reward) && tests.every((t) => t.status === 'passed' || t.status === 'skipped');
}

/** An oracle run counts as a pass only when clean (isCleanPass) and its verifier finished in time. */
export function oracleRunPassed(trial: TrialResult): boolean {
  return isCleanPass(trial.reward, trial.tests) && trial.error?.class !== 'verifier_timeout';
}

/** Whether a trial's infrastructure failed (the one accounting rule): it says nothing of the task. */
const infraFailed = (trial: TrialResult): boolean => accountingOf(trial.reward, trial.error?.class) === 'infra';

const reasonFor = (cls: TrialErrorClass): ReasonCode | null => {
  if (cls === 'build_failed') return 'build_failed';
  // Every other infrastructure class of the outcome table (OUTCOME_CLASSES): not the task's doing.
  if (INFRA_ERROR_CLASSES.has(cls)) return 'infra_error';
  switch (cls) {
    case 'agent_timeout':
    case 'verifier_timeout':
      return 'timeout';
    case 'verifier_no_reward':
    case 'verifier_bad_reward':
      return 'verifier_error';
    default:
      return null;
  }
};

/**
 * The reasons a trial's errors give. An infrastructure failure is one only when it left the trial
 * without a grade: a trial graded in spite of it (an engine lost at teardown) was decided by the task.
 */
function errorReasons(trial: TrialResult): ReasonCode[] {
  return trial.errors
    .map((e) => reasonFor(e.class))
    .filter((r): r is ReasonCode => r !== null && (r !== 'infra_error' || infraFailed(trial)));
}

/** What one failed trial says about the task: its error classes first, else a wrong answer. */
function failureReasons(trial: TrialResult, wrong: ReasonCode): ReasonCode[] {
  const fromErrors = errorReasons(trial);
  return fromErrors.length > 0 ? fromErrors : [wrong];
}

/**
 * The admission rule, pure: the oracle passes every time (else oracle_failed, or flaky when runs
 * disagree), the do-nothing agent fails (else nop_passed), and the verifier always gives a reward
 * in time (else verifier_error / timeout). A run whose infrastructure failed through its retries
 * still rejects (fail closed), as infra_error, never as a wrong answer or flakiness. Reasons are
 * deduplicated, in a fixed order.
 */
export function judge(oracleRuns: TrialResult[], nop: TrialResult | null): ReasonCode[] {
  const reasons = new Set<ReasonCode>();
  const passes = oracleRuns.filter(oracleRunPassed).length;
  // Flakiness is disagreement between runs the task decided: a run whose infrastructure failed is not one.
  if (passes > 0 && passes < oracleRuns.filter((r) => !infraFailed(r)).length) reasons.add('flaky');
  for (const run of oracleRuns) {
    if (oracleRunPassed(run)) continue;
    for (const r of failureReasons(run, 'oracle_failed')) {
      // A wrong answer that other runs got right is flakiness, not a second reason.
      if (!(r === 'oracle_failed' && passes > 0)) reasons.add(r);
    }
  }
  if (nop) {
    if (nop.passed) reasons.add('nop_passed');
    for (const r of errorReasons(nop)) reasons.add(r);
  }
  return ReasonCode.options.filter((r) => reasons.has(r));
}
