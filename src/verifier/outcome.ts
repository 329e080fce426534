import { constants } from 'node:fs';
import { open, readdir } from 'node:fs/promises';
import path from 'node:path';
import { rewardFindings } from './consistency.js';
import {
  admissionEvidence,
  checkEvidence,
  type AdmissionEvidence,
  type GradingEvidence,
  type GradingPolicy,
  type RewardFileName,
} from './evidence.js';
import type { ProtectionMode } from './protection.js';
import { parseEachRewardFile, parseRewardFiles } from './reward.js';
import type { VerifierOutcome } from './schema.js';
import { collectTests } from './test-report.js';
import { ifMissing } from '../util/errors.js';

/** Reward files larger than this are not a number the tests wrote: read as malformed. */
export const MAX_REWARD_FILE_BYTES = 1024 * 1024;
/** Reports (CTRF, JUnit) larger than this are not read (absent for the grade). */
export const MAX_REPORT_BYTES = 32 * 1024 * 1024;
/** Of test-stdout.txt, the last this many bytes are read (pytest's summary is at its end). */
export const MAX_STDOUT_BYTES = 32 * 1024 * 1024;
/** At most this many JUnit files (`*.xml` in /logs/verifier) are read, in name order. */
export const MAX_JUNIT_FILES = 64;

/** What a log file held: its text, or why it was not read (a folder, a link, too large). */
type Read = { text: string } | { problem: string } | null;

/**
 * A file of the verifier's logs as the tests left it, read without following a link (whatever the
 * code the tests ran put there: a folder where a report was expected, a link out of the logs, a file
 * of gigabytes). Null when absent. `tail` reads the last `maxBytes` of a larger file instead of
 * refusing it.
 */
async function readLog(file: string, maxBytes: number, tail = false): Promise<Read> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    return { problem: `${path.basename(file)} could not be opened (${code ?? 'error'})` };
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return { problem: `${path.basename(file)} is not a regular file` };
    if (info.size > maxBytes && !tail)
      return { problem: `${path.basename(file)} is ${info.size} bytes, over the ${maxBytes} read` };
    const length = Math.min(info.size, maxBytes);
    const buf = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buf, 0, length, info.size - length);
    return { text: buf.toString('utf8', 0, bytesRead) };
  } finally {
    await handle.close();
  }
}

const textOf = (r: Read): string | null => (r && 'text' in r ? r.text : null);

/** Each reward file's text; one that is not a readable regular file is given as unreadable text (malformed). */
async function readRewardFiles(logsDir: string): Promise<{ json: string | null; txt: string | null }> {
  const read = async (name: RewardFileName): Promise<string | null> => {
    const r = await readLog(path.join(logsDir, name), MAX_REWARD_FILE_BYTES);
    // Not readable as a file, yet there: a reward file the verifier cannot read is malformed, never missing.
    return r === null ? null : 'text' in r ? r.text : `(${r.problem})`;
  };
  return { json: await read('reward.json'), txt: await read('reward.txt') };
}

/** The per-test reports the verifier left: CTRF, pytest's summary in the output, JUnit files. */
export async function readTestReports(logsDir: string): Promise<ReturnType<typeof collectTests>> {
  const names = await ifMissing(readdir(logsDir), [] as string[]); // the verifier left no logs folder
  const junit: string[] = [];
  for (const f of names.filter((n) => n.endsWith('.xml')).sort()) {
    if (junit.length >= MAX_JUNIT_FILES) break;
    const text = textOf(await readLog(path.join(logsDir, f), MAX_REPORT_BYTES));
    if (text !== null) junit.push(text);
  }
  return collectTests({
    ctrf: textOf(await readLog(path.join(logsDir, 'ctrf.json'), MAX_REPORT_BYTES)),
    stdout: textOf(await readLog(path.join(logsDir, 'test-stdout.txt'), MAX_STDOUT_BYTES, true)),
    junit,
  });
}

export interface OutcomeInput {
  run: { exitCode: number | null; timedOut: boolean; durationMs: number; trace?: string };
  collected?: VerifierOutcome['collected'];
  mode: ProtectionMode;
  timeoutSec: number;
  policy: GradingPolicy;
  /** Admission's evidence of a pass (null: none recorded; the rules that need none apply). */
  admitted: AdmissionEvidence | null;
}

/**
 * The grade from the logs the verifier left (copied to `logsDir`): reward files, per-test results,
 * what kept a reward away, and the reward held against the tests' own evidence (a pass they do not
 * support is graded 0, `reward_unsupported`). With it, the evidence admission would record from
 * this grading (used only when it is the reference solution's).
 */
export async function outcomeFromLogs(
  logsDir: string,
  how: OutcomeInput,
): Promise<{ outcome: VerifierOutcome; evidence: AdmissionEvidence | null }> {
  const { run, collected, mode, timeoutSec } = how;
  const { tests, source, counts, reports } = await readTestReports(logsDir);
  const base = {
    tests,
    testsSource: source,
    testsSourceCounts: counts,
    exitCode: run.exitCode,
    durationMs: run.durationMs,
    tampering: [],
    protection: mode,
    ...(collected ? { collected } : {}),
  };
  const none = { reward: 0, rewards: {}, rewardSource: null };
  if (run.timedOut) {
    const message = `test.sh did not finish within ${timeoutSec} s (graded 0: the sandbox's state kept the verifier from a reward)`;
    return { outcome: { ...base, ...none, error: { class: 'verifier_timeout', message } }, evidence: null };
  }
  const files = await readRewardFiles(logsDir);
  const parsed = parseRewardFiles(files.json, files.txt);
  if (!parsed.ok) {
    const cls = parsed.problem === 'missing' ? 'verifier_no_reward' : 'verifier_bad_reward';
    const message = `${parsed.message} (test.sh exit code ${run.exitCode}; graded 0)`;
    return { outcome: { ...base, ...none, error: { class: cls, message } }, evidence: null };
  }
  // Each file parsed once, for the findings and the evidence alike.
  const each = parseEachRewardFile(files.json, files.txt);
  const findings = rewardFindings({ files: each, tests });
  const seen: GradingEvidence = {
    claimed: parsed.reward,
    source: parsed.source,
    rewardFiles: [
      ...(files.json !== null ? ['reward.json' as const] : []),
      ...(files.txt !== null ? ['reward.txt' as const] : []),
    ],
    jsonAboveTxt: each.json?.ok === true && each.txt?.ok === true && each.json.reward > each.txt.reward,
    reports,
  };
  const evidence = checkEvidence(seen, how.admitted, how.policy);
  const graded = { ...base, rewards: parsed.rewards, rewardSource: parsed.source, findings, evidence };
  const recordable = admissionEvidence(seen, run.trace ?? null);
  if (evidence.verdict === 'supported' || evidence.verdict === 'not_checked')
    return { outcome: { ...graded, reward: parsed.reward, error: null }, evidence: recordable };
  const message = `reward ${parsed.reward} voided (graded 0), ${evidence.verdict}: ${evidence.message ?? ''}`;
  return {
    outcome: { ...graded, reward: 0, error: { class: 'reward_unsupported', message } },
    evidence: recordable,
  };
}
