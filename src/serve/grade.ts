import { accountingOf } from '../trial/accounting.js';
import type { TestResult } from '../verifier/schema.js';
import type { Grade } from './contract.js';

/**
 * A grade as trainers read it: the reward (null unless graded), `acc` for DAPO's filter_groups
 * (1 when solved, else 0; null without a grade), the fraction of tests passed.
 */
export function gradeOf(reward: number | null, errorClass: string | null, tests: TestResult[]): Grade {
  const status = accountingOf(reward, errorClass);
  const graded = status === 'graded';
  const passed = tests.filter((t) => t.status === 'passed').length;
  return {
    reward: graded ? reward : null,
    status,
    error_class: errorClass,
    metrics: {
      acc: graded ? (reward !== null && reward >= 1 ? 1 : 0) : null,
      pass_rate: tests.length ? passed / tests.length : null,
      tests_passed: passed,
      tests_total: tests.length,
    },
    tests: tests.map((t) => ({ name: t.name, status: t.status })),
  };
}
