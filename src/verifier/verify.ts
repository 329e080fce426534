import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Sandbox } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { parseRewardFiles } from './reward.js';
import type { VerifierOutcome } from './schema.js';
import { collectTests } from './test-report.js';

export const TESTS_DIR = '/tests';
export const VERIFIER_LOGS = '/logs/verifier';

export interface VerifyOptions {
  /** Host folder that receives /logs/verifier (test-stdout.txt, reward, reports). */
  hostLogsDir: string;
  timeoutSec?: number;
  signal?: AbortSignal;
}

async function readIfThere(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return null;
  }
}

/**
 * Grades the sandbox as the agent left it. tests/ arrives only now, so the agent never saw it.
 * test.sh's exit code is ignored: the reward file is the verdict, and no reward file is an error.
 */
export async function verify(sandbox: Sandbox, task: Task, options: VerifyOptions): Promise<VerifierOutcome> {
  await sandbox.copyIn(task.testsDir, TESTS_DIR);
  const timeoutSec = options.timeoutSec ?? task.config.verifier.timeout_sec;
  const run = await sandbox.exec(
    `mkdir -p ${VERIFIER_LOGS}; if command -v bash >/dev/null 2>&1; then bash ${TESTS_DIR}/test.sh; else sh ${TESTS_DIR}/test.sh; fi > ${VERIFIER_LOGS}/test-stdout.txt 2>&1`,
    { env: task.config.verifier.env, timeoutSec, signal: options.signal },
  );
  await sandbox.copyOut(VERIFIER_LOGS, options.hostLogsDir);

  const local = (name: string): string => path.join(options.hostLogsDir, name);
  const files = await readdir(options.hostLogsDir).catch(() => [] as string[]);
  const junit = await Promise.all(files.filter((f) => f.endsWith('.xml')).sort().map((f) => readFile(local(f), 'utf8')));
  const { tests, source } = collectTests({
    ctrf: await readIfThere(local('ctrf.json')),
    stdout: await readIfThere(local('test-stdout.txt')),
    junit,
  });
  const base = { tests, testsSource: source, exitCode: run.exitCode, durationMs: run.durationMs };

  if (run.timedOut) {
    return { ...base, reward: null, rewards: {}, rewardSource: null, error: { class: 'verifier_timeout', message: `test.sh did not finish within ${timeoutSec} s` } };
  }
  const parsed = parseRewardFiles(await readIfThere(local('reward.json')), await readIfThere(local('reward.txt')));
  if (!parsed.ok) {
    const cls = parsed.problem === 'missing' ? 'verifier_no_reward' : 'verifier_bad_reward';
    return { ...base, reward: null, rewards: {}, rewardSource: null, error: { class: cls, message: `${parsed.message} (test.sh exit code ${run.exitCode})` } };
  }
  return { ...base, reward: parsed.reward, rewards: parsed.rewards, rewardSource: parsed.source, error: null };
}
