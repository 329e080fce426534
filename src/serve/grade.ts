import { accountingOf, isPassingReward } from '../trial/accounting.js';
import type { AdmissionRef } from '../trial/schema.js';
import type { TestResult } from '../verifier/schema.js';
import type { Grade } from './contract.js';

/** What protected a grade: the mode, and the admission record used (null with the fixed rules only). */
export interface GradeProtection {
  protection: 'admission' | 'rules';
  admission: AdmissionRef | null;
}

/** A grade given without the verifier's scan (it crashed before one): nothing protected it. */
export const UNPROTECTED: GradeProtection = { protection: 'rules', admission: null };

/**
 * A grade as trainers read it: the reward (null unless graded), `acc` for DAPO's filter_groups
 * (1 when solved, else 0; null without a grade), the fraction of tests passed.
 */
export function gradeOf(
  reward: number | null,
  errorClass: string | null,
  tests: TestResult[],
  protected_: GradeProtection,
): Grade {
  const status = accountingOf(reward, errorClass);
  const graded = status === 'graded';
  const passed = tests.filter((t) => t.status === 'passed').length;
  return {
    reward: graded ? reward : null,
    status,
    error_class: errorClass,
    metrics: {
      acc: graded ? (isPassingReward(reward) ? 1 : 0) : null,
      pass_rate: tests.length ? passed / tests.length : null,
      tests_passed: passed,
      tests_total: tests.length,
    },
    tests: tests.map((t) => ({ name: t.name, status: t.status })),
    protection: protected_.protection,
    admission: protected_.admission && {
      checksum: protected_.admission.checksum,
      recorded_at: protected_.admission.recordedAt,
      file: protected_.admission.file,
    },
  };
}
