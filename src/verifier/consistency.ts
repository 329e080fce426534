import { isPassingReward } from './reward.js';
import { parseEachRewardFile, type RewardFiles, type RewardParse } from './reward.js';
import type { Finding, TestResult } from './schema.js';

/**
 * Whether a reward agrees with the rest of what the verifier left. Pure. A finding never changes
 * the reward (the verifier's word stands, as Harbor counts it); it flags a trial whose grade a
 * reader should not take at face value:
 * - reward_with_failed_tests: a full reward (>= 1) while the per-test report shows failed or
 *   errored tests (a test.sh that ignores pytest's exit code, a reward written before the tests);
 * - reward_files_disagree: reward.json and reward.txt both written, and their primary values
 *   differ, or one of them cannot be read while the other gives the reward.
 */
export interface ConsistencyInput {
  /** Each reward file parsed on its own (`parseEachRewardFile`). */
  files: RewardFiles;
  /** The per-test results collected from the verifier's reports. */
  tests: TestResult[];
}

/** Primary values this close are one value written with different precision or float noise. */
const SAME = 1e-9;

const describe = (p: RewardParse): string => (p.ok ? String(p.reward) : `unreadable (${p.message})`);

export function rewardFindings(input: ConsistencyInput): Finding[] {
  const { json, txt } = input.files;
  const findings: Finding[] = [];
  // The reward the trial is given: the rule of parseRewardFiles (reward.json, even unreadable, wins).
  const winner: RewardParse | null = json ?? txt;
  if (!winner?.ok) return findings; // no reward: the trial is a verifier error, nothing to flag

  const failed = input.tests.filter((t) => t.status === 'failed' || t.status === 'error');
  if (isPassingReward(winner.reward) && failed.length > 0) {
    const names = failed
      .slice(0, 5)
      .map((t) => t.name)
      .join(', ');
    findings.push({
      code: 'reward_with_failed_tests',
      message: `reward ${winner.reward} from ${winner.source}, but ${failed.length} of ${input.tests.length} tests failed or errored: ${names}${failed.length > 5 ? `, and ${failed.length - 5} more` : ''}`,
    });
  }

  if (json && txt) {
    const differ = json.ok && txt.ok ? Math.abs(json.reward - txt.reward) > SAME : json.ok !== txt.ok;
    if (differ) {
      findings.push({
        code: 'reward_files_disagree',
        message: `reward.json gives ${describe(json)} and reward.txt gives ${describe(txt)}; the reward is reward.json's`,
      });
    }
  }
  return findings;
}

/** The same check from the files' text as the verifier left them (null: not written). */
export function rewardFindingsOf(rewardJson: string | null, rewardTxt: string | null, tests: TestResult[]): Finding[] {
  return rewardFindings({ files: parseEachRewardFile(rewardJson, rewardTxt), tests });
}
