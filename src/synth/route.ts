import { STAGES, type Failure, type RepairablePart } from './schema.js';

/**
 * Which part a failure is the fault of (pure). Build and parse errors are the environment's; a
 * solution that exits non-zero, times out or leaves a named output untouched is the solution's;
 * an oracle that fails a state the solution did produce, a do-nothing agent that passes, weak,
 * flaky, forgeable, hackable or nondeterministic tests, and tests that report no per-test result, are the tests'; a leaked answer is the instruction's
 * when the instruction carries it, else the environment's. A duplicate, or what termgrade itself
 * could not do (check's infra_error), is no part's: not repairable.
 */
export function routeFailure(stage: Failure['stage'], reasons: string[], evidence: string[]): RepairablePart | null {
  const has = (r: string): boolean => reasons.includes(r);
  if (stage === 'lint' || stage === 'build' || stage === 'observe') return 'environment';
  if (stage === 'execute') return 'solution';
  if (stage !== 'check') return null;
  if (has('duplicate') || has('invalid_task')) return null;
  if (has('build_failed')) return 'environment';
  if (has('solution_leaked'))
    return evidence.some((e) => /^solution_leaked:.*instruction/i.test(e)) ? 'instruction' : 'environment';
  if (has('timeout')) return 'solution';
  if (
    [
      'oracle_failed',
      'nop_passed',
      'weak_tests',
      'flaky',
      'reward_forgeable',
      'verifier_nondeterministic',
      'reward_hackable',
      'verifier_error',
      'no_test_report',
    ].some(has)
  )
    return 'tests';
  return null;
}

/**
 * The stages a repair of `part` runs: the part regenerated, what executes it again, and the
 * generation of any later part not written yet (a build error comes before the instruction).
 */
export function repairPlan(part: RepairablePart, present: ReadonlySet<string>): Array<Failure['stage']> {
  const own = new Set(ownStages(part));
  const from = FIRST_PLAN.indexOf(part);
  return FIRST_PLAN.filter((s, i) => own.has(s) || (i > from && GENERATED.has(s) && !present.has(s)));
}

const GENERATED = new Set<string>(['scenario', 'environment', 'instruction', 'solution', 'tests']);

function ownStages(part: RepairablePart): Array<Failure['stage']> {
  switch (part) {
    case 'environment':
      return ['environment', 'lint', 'build', 'observe', 'execute', 'check'];
    case 'solution':
      return ['solution', 'execute', 'check'];
    case 'tests':
      return ['tests', 'check'];
    case 'instruction':
      return ['instruction', 'check'];
  }
}

/** The first pass: environment first, then instruction, solution and tests grounded in it. */
export const FIRST_PLAN: Array<Failure['stage']> = STAGES.filter((stage) => stage !== 'write');
