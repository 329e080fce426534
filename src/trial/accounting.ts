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
 *   or erroring after its retries, or refusing the key; the engine lost or not answering during
 *   grading: verifier_crash). No reward; retried within the job's infra budget (and again on
 *   resume); shown per configuration as lost coverage, never as 0.
 * - ungraded: no reward and no infrastructure failure: records made before verifier failures were
 *   graded 0 (older jobs, imports). Shown as coverage, never as 0.
 * - not_run: the slot was never run to the end (budget, interrupt); run again on resume.
 * Rates (pass@1, pass@k, intervals, bands) are over graded trials only; a task with none is
 * listed as unmeasured, never dropped silently.
 */
export type Accounting = 'graded' | 'infra' | 'ungraded' | 'not_run';

export const INFRA_ERROR_CLASSES: ReadonlySet<string> = new Set([
  'build_failed',
  'environment_error',
  'agent_setup_error',
  'model_unavailable',
  'verifier_crash',
  'internal_error',
]);

export function accountingOf(reward: number | null, errorClass: string | null | undefined): Accounting {
  if (errorClass === 'cancelled') return 'not_run';
  if (reward !== null && Number.isFinite(reward)) return 'graded';
  if (errorClass && INFRA_ERROR_CLASSES.has(errorClass)) return 'infra';
  return 'ungraded';
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
