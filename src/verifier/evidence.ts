import { z } from 'zod';
import type { TestReportSource, TestResult } from './schema.js';

/**
 * A reward stands only on evidence the agent could not write: what the tests themselves reported.
 * Admission records, from the reference solution's grading, what a pass of the task looks like
 * (which reports name which tests, which reward files test.sh writes and which programs write
 * them); a trial's pass is then held against it. Pure: data in, a verdict out.
 *
 * What this cannot tell: agent code that runs inside the tests' own process (an import of the
 * agent's module) can make every report say "passed" and write the reward as test.sh would. Only
 * the task's tests can stop that; admission's hack probes (check --probes all) try it.
 */

export const REWARD_FILES = ['reward.json', 'reward.txt'] as const;
export const RewardFileName = z.enum(REWARD_FILES);
export type RewardFileName = z.infer<typeof RewardFileName>;

export const AdmissionEvidenceSchema = z.object({
  /** The reward files test.sh wrote for the reference solution. */
  rewardFiles: z.array(RewardFileName),
  /** For each reward file, the programs the trace saw open it for writing (diagnostic: gradings are not traced). */
  rewardWriters: z.partialRecord(RewardFileName, z.array(z.string())).default({}),
  /** For each report the tests left (CTRF, pytest's -rA summary, JUnit), the tests it named, every one passed. */
  reports: z.record(z.string(), z.array(z.string())),
});
export type AdmissionEvidence = z.infer<typeof AdmissionEvidenceSchema>;

/**
 * How a trial's reward is judged: `evidence` (the default) grades a pass 0 when the tests' own
 * reports do not support it; `harbor` keeps Harbor's plain semantics (the reward file's number
 * stands; disagreements are only flagged as findings). Recorded on every grading.
 */
export const GradingPolicy = z.enum(['evidence', 'harbor']);
export type GradingPolicy = z.infer<typeof GradingPolicy>;

/** Why a reward was not supported by the tests' evidence (the trial is then graded 0). */
export const EvidenceVerdict = z.enum([
  'supported',
  // A report admission saw is missing, or names fewer of the tests the reference solution passed.
  'tests_missing',
  // A report shows a failed or errored test while the reward says the task was solved.
  'tests_failed',
  // The reward comes from a file test.sh never wrote for the reference solution.
  'reward_not_from_tests',
  // With no admission record: reward.json claims more than the reward.txt beside it.
  'reward_files_disagree',
  // Nothing to check: no reward above 0, or the policy is harbor.
  'not_checked',
]);
export type EvidenceVerdict = z.infer<typeof EvidenceVerdict>;

export const EvidenceCheckSchema = z.object({
  policy: GradingPolicy,
  /** `admission` when the task's recorded evidence was known; `rules` when only the rules that need none applied. */
  basis: z.enum(['admission', 'rules']),
  verdict: EvidenceVerdict,
  /** What the verdict rests on, in words (null when supported or not checked). */
  message: z.string().nullable(),
  /** The reward the files claimed (the trial's reward is 0 when the verdict voids it). */
  claimed: z.number().nullable(),
  /** The reward files the verifier left. */
  rewardFiles: z.array(RewardFileName),
  /** Per report the verifier left: tests named, passed, failed or errored. */
  reports: z.record(z.string(), z.object({ tests: z.number(), passed: z.number(), failed: z.number() })),
});
export type EvidenceCheck = z.infer<typeof EvidenceCheckSchema>;

// Report sources are keys of TestReportSource (schema.ts); typed loosely here so that schema.ts can
// import this file without a cycle.

/** What one grading left: the claimed reward, the reward files present (and whether they agree), each report's tests. */
export interface GradingEvidence {
  /** The reward the files give (reward.json's if present, else reward.txt's); null when none could be read. */
  claimed: number | null;
  /** The file the reward was taken from (reward.ts's rule: reward.json wins). */
  source: RewardFileName;
  rewardFiles: RewardFileName[];
  /** Both reward files written and readable, and reward.json (which wins) claims more than reward.txt. */
  jsonAboveTxt: boolean;
  reports: Partial<Record<TestReportSource, TestResult[]>>;
}

const failedTests = (tests: TestResult[]): TestResult[] =>
  tests.filter((t) => t.status === 'failed' || t.status === 'error');

const names = (tests: TestResult[], limit = 5): string =>
  tests
    .slice(0, limit)
    .map((t) => t.name)
    .join(', ') + (tests.length > limit ? `, and ${tests.length - limit} more` : '');

function reportCounts(reports: GradingEvidence['reports']): EvidenceCheck['reports'] {
  const out: EvidenceCheck['reports'] = {};
  for (const [source, tests] of Object.entries(reports) as Array<[TestReportSource, TestResult[]]>) {
    out[source] = {
      tests: tests.length,
      passed: tests.filter((t) => t.status === 'passed').length,
      failed: failedTests(tests).length,
    };
  }
  return out;
}

type Judged = { verdict: EvidenceVerdict; message: string | null };

/** The reports admission saw, each held against this grading's: present, every recorded test named and passed. */
function missingTests(seen: GradingEvidence['reports'], admitted: AdmissionEvidence['reports']): Judged | null {
  for (const [source, expected] of Object.entries(admitted) as Array<[TestReportSource, string[]]>) {
    const tests = seen[source];
    if (!tests || tests.length === 0)
      return {
        verdict: 'tests_missing',
        message: `the ${source} report the tests left at admission (${expected.length} tests) is missing`,
      };
    const passed = new Set(tests.filter((t) => t.status === 'passed').map((t) => t.name));
    const absent = expected.filter((n) => !passed.has(n));
    if (absent.length > 0)
      return {
        verdict: 'tests_missing',
        message: `the ${source} report does not show ${absent.length} of the ${expected.length} tests the reference solution passed as passed: ${absent.slice(0, 5).join(', ')}${absent.length > 5 ? ', ...' : ''}`,
      };
  }
  return null;
}

/** The verdict on a reward above 0 (first reason found, in order of how directly it shows forgery). */
function judge(seen: GradingEvidence, admitted: AdmissionEvidence | null): Judged {
  const claimed = seen.claimed ?? 0;
  if (admitted) {
    const foreign = seen.rewardFiles.filter((f) => !admitted.rewardFiles.includes(f));
    const winner = seen.source;
    if (foreign.includes(winner))
      return {
        verdict: 'reward_not_from_tests',
        message: `the reward comes from ${winner}, which test.sh never wrote at admission (it wrote ${admitted.rewardFiles.join(' and ') || 'no reward file'})`,
      };
  }
  // With a record, the file set above decides; without one, the forging direction (a reward.json
  // above test.sh's reward.txt) is all that can be told from a task that may write both.
  if (!admitted && seen.jsonAboveTxt)
    return {
      verdict: 'reward_files_disagree',
      message: 'reward.json (which wins) claims more than the reward.txt written beside it',
    };
  // Reports the tests never leave (by admission's record) are not the tests' evidence: not read for the verdict.
  const trusted = admitted
    ? Object.fromEntries(Object.entries(seen.reports).filter(([s]) => s in admitted.reports))
    : seen.reports;
  if (claimed >= 1)
    for (const [source, tests] of Object.entries(trusted) as Array<[TestReportSource, TestResult[]]>) {
      const failed = failedTests(tests);
      if (failed.length > 0)
        return {
          verdict: 'tests_failed',
          message: `reward ${claimed}, but the ${source} report shows ${failed.length} of ${tests.length} tests failed or errored: ${names(failed)}`,
        };
    }
  return (admitted && missingTests(seen.reports, admitted.reports)) || { verdict: 'supported', message: null };
}

/**
 * The verdict on one grading's reward. Under `evidence`, a reward above 0 stands only when the
 * reward file is one test.sh wrote at admission, no trusted report shows a failed test beside a
 * full reward, and every report admission saw names every test the reference solution passed, as
 * passed. Without an admission record only the rules that need none apply (failed tests beside a
 * full reward; a reward.json above the reward.txt beside it). Under `harbor` nothing is voided.
 */
export function checkEvidence(
  seen: GradingEvidence,
  admitted: AdmissionEvidence | null,
  policy: GradingPolicy,
): EvidenceCheck {
  const base = {
    policy,
    basis: admitted ? ('admission' as const) : ('rules' as const),
    claimed: seen.claimed,
    rewardFiles: seen.rewardFiles,
    reports: reportCounts(seen.reports),
  };
  if (policy === 'harbor' || seen.claimed === null || seen.claimed <= 0)
    return { ...base, verdict: 'not_checked', message: null };
  return { ...base, ...judge(seen, admitted) };
}

/**
 * What admission records from the reference solution's passing grading: its reward files, the
 * programs the trace saw write them, and each report's test names.
 */
export function admissionEvidence(seen: GradingEvidence, trace: string | null): AdmissionEvidence {
  const reports: AdmissionEvidence['reports'] = {};
  for (const [source, tests] of Object.entries(seen.reports) as Array<[TestReportSource, TestResult[]]>)
    if (tests.length > 0) reports[source] = tests.filter((t) => t.status === 'passed').map((t) => t.name);
  return { rewardFiles: seen.rewardFiles, rewardWriters: trace ? rewardWriters(trace) : {}, reports };
}

/**
 * The programs an strace log (`-f -y`, as src/sandbox/docker/trace.ts takes it) shows opening a
 * reward file for writing: each process's last execve before the open (a forked process that
 * never executed anything is its parent's program, unknown here: named `(forked)`). The file is
 * the path `-y` prints for the descriptor the open returned, so relative opens count too.
 */
export function rewardWriters(log: string): AdmissionEvidence['rewardWriters'] {
  const program = new Map<string, string>();
  const pendingOpen = new Map<string, string>();
  const out: Record<string, Set<string>> = {};
  const opened = (pid: string, flags: string, result: string): void => {
    const file = /=\s*\d+<([^>]*)>\s*$/.exec(result)?.[1];
    const name = REWARD_FILES.find((f) => file === `/logs/verifier/${f}`);
    if (name && /O_WRONLY|O_RDWR/.test(flags)) (out[name] ??= new Set()).add(program.get(pid) ?? '(forked)');
  };
  for (const line of log.split('\n')) {
    const m =
      /^(\d+)\s+(?:(execve|execveat|open|openat|openat2)\((.*)|<\.\.\. (?:open|openat|openat2) resumed>(.*))$/.exec(
        line,
      );
    if (!m) continue;
    const [, pid, call, rest, resumed] = m as unknown as [string, string, string?, string?, string?];
    if (resumed !== undefined) {
      opened(pid, pendingOpen.get(pid) ?? '', resumed);
      pendingOpen.delete(pid);
    } else if (call?.startsWith('exec')) {
      const file = /^"((?:[^"\\]|\\.)*)"/.exec(rest ?? '')?.[1];
      if (file && !/=\s*-1/.test(rest ?? '')) program.set(pid, file);
    } else if (rest?.includes('<unfinished ...>')) pendingOpen.set(pid, rest);
    else if (rest) opened(pid, rest, rest);
  }
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v].sort()]));
}
