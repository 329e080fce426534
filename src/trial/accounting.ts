import { PASS_REWARD, isPassingReward } from '../verifier/reward.js';
import type { TrialErrorClass } from './schema.js';

/**
 * The one accounting policy every number in termgrade follows (stats, compare, select, overlap,
 * adaptive sampling, imports, and what is served or exported):
 * - graded: a reward stands. The agent's own failures are graded failures: a timeout, a crash, a
 *   sandbox it killed, a full context (in any server's wording), a refusal, tampering (voided to
 *   0) are all graded. So is every way grading fails once the agent has touched the sandbox,
 *   except the engine's own: the verifier timed out (a FIFO its tests block on), wrote no or a
 *   malformed reward, or a harness step failed on the sandbox's content (grading_blocked: the
 *   working folder turned into a file). These are graded 0, as Harbor counts them: otherwise an
 *   agent could turn a failure into "no reward" and drop it from the count.
 * - infra: the infrastructure failed (engine, build, sandbox start, the model endpoint unreachable
 *   or erroring after its retries, or refusing the key; the engine lost (environment_error) or not
 *   answering during grading (verifier_crash); see OUTCOME_CLASSES). No reward; retried within the job's infra budget (and again on
 *   resume); shown per configuration as lost coverage, never as 0.
 * - ungraded: no reward and no infrastructure failure: records made before verifier failures were
 *   graded 0 (older jobs, imports). Shown as coverage, never as 0.
 * - not_run: the slot was never run to the end (budget, interrupt); run again on resume.
 * Rates (pass@1, pass@k, intervals, bands) are over graded trials only; a task with none is
 * listed as unmeasured, never dropped silently.
 */
export type Accounting = 'graded' | 'infra' | 'ungraded' | 'not_run';

/**
 * What each outcome class means, in one table (every reader asks `accountingOf` or this table,
 * never a list of its own). `noReward` is how a trial of that class without a reward is counted:
 * infra (retried, lost coverage), ungraded (the verifier's doing in a record made before such
 * failures were graded 0), or not_run. A trial with a reward is graded whatever its class, except
 * a cancelled one.
 */
export const OUTCOME_CLASSES = {
  build_failed: { noReward: 'infra', meaning: "the task's image could not be built" },
  environment_error: {
    noReward: 'infra',
    meaning: 'the engine failed: the sandbox did not start, or its engine was lost (at any phase, grading included)',
  },
  agent_setup_error: { noReward: 'infra', meaning: "the agent's own setup failed in the sandbox" },
  agent_timeout: { noReward: 'ungraded', meaning: "the agent's turn ran out of time (the sandbox is still graded)" },
  agent_error: { noReward: 'ungraded', meaning: 'the agent crashed (the sandbox is still graded)' },
  model_error: { noReward: 'ungraded', meaning: 'the model refused or its context filled (graded)' },
  model_unavailable: {
    noReward: 'infra',
    meaning: "the model endpoint failed after the client's retries (rate limit, overload, 5xx, auth)",
  },
  tampering: { noReward: 'ungraded', meaning: "the agent changed the verifier's machinery: graded 0" },
  disk_limit: { noReward: 'ungraded', meaning: "the agent's files passed the disk limit: graded 0" },
  verifier_timeout: { noReward: 'ungraded', meaning: 'the verifier ran out of time: graded 0' },
  verifier_no_reward: { noReward: 'ungraded', meaning: 'the verifier wrote no reward: graded 0' },
  verifier_bad_reward: { noReward: 'ungraded', meaning: 'the verifier wrote a malformed reward: graded 0' },
  verifier_crash: {
    noReward: 'infra',
    meaning:
      "grading threw for a reason that is neither the sandbox's content (grading_blocked) nor a lost engine " +
      '(environment_error): the engine stopped answering during grading, or a harness step failed; no reward, retried',
  },
  grading_blocked: { noReward: 'ungraded', meaning: "the sandbox's content broke a step of grading: graded 0" },
  reward_unsupported: { noReward: 'ungraded', meaning: "a pass the tests' own reports do not support: graded 0" },
  cancelled: { noReward: 'not_run', meaning: 'the trial was never run to the end (budget, interrupt)' },
  internal_error: { noReward: 'infra', meaning: "termgrade's own failure" },
} as const satisfies Record<TrialErrorClass, { noReward: Exclude<Accounting, 'graded'>; meaning: string }>;

/** Runs again of a trial whose infrastructure failed: a job's default `infraRetries`, and check's. */
export const DEFAULT_INFRA_RETRIES = 2;

/** The classes whose trials carry no reward because the infrastructure failed (retried). */
export const INFRA_ERROR_CLASSES: ReadonlySet<TrialErrorClass> = new Set(
  (Object.keys(OUTCOME_CLASSES) as TrialErrorClass[]).filter((k) => OUTCOME_CLASSES[k].noReward === 'infra'),
);

const isOutcomeClass = (c: string): c is TrialErrorClass => Object.hasOwn(OUTCOME_CLASSES, c);

/** How one trial counts: the one accounting rule (see the comment above). */
export function accountingOf(reward: number | null, errorClass: string | null | undefined): Accounting {
  if (errorClass === 'cancelled') return 'not_run';
  if (reward !== null && Number.isFinite(reward)) return 'graded';
  if (errorClass && isOutcomeClass(errorClass) && OUTCOME_CLASSES[errorClass].noReward === 'infra') return 'infra';
  return 'ungraded';
}

// What a passing reward is lives with the reward files' reading (verifier/reward.ts), which grading
// needs below the trial; re-exported here, beside the accounting that uses it.
export { PASS_REWARD, isPassingReward };

/** A trial that counts as a success in every rate: graded, with a passing reward. */
export function isSuccess(reward: number | null, errorClass: string | null | undefined): boolean {
  return accountingOf(reward, errorClass) === 'graded' && isPassingReward(reward);
}

/**
 * Model failures that are the endpoint's, not the model's: after the client's own retries, the
 * trial says nothing about the model. A refusal or a full context is the model's own doing.
 */
export const ENDPOINT_FAILURE_KINDS: ReadonlySet<string> = new Set([
  'rate_limit',
  'overloaded',
  'transient',
  'timeout',
  'auth',
  'not_found',
  'bad_request',
]);
