import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { SYSTEM_PATH, type Sandbox } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { readTextIfThere } from '../util/files.js';
import { rewardFindingsOf } from './consistency.js';
import { parseRewardFiles } from './reward.js';
import type { VerifierOutcome } from './schema.js';
import { findTampering, needsContent, type Tampering } from './tampering.js';
import { collectTests } from './test-report.js';

export const TESTS_DIR = '/tests';
export const VERIFIER_LOGS = '/logs/verifier';

export interface VerifyOptions {
  /** Host folder that receives /logs/verifier (test-stdout.txt, reward, reports). */
  hostLogsDir: string;
  timeoutSec?: number;
  signal?: AbortSignal;
}

/**
 * /tests and /logs/verifier made afresh, whatever the agent left there (/logs as a file, a link, a
 * read-only mode), and the tests copied in by the backend. Returns the PATH test.sh will run with
 * (the engine's, with the verifier's env: not something the agent can change), for the scan.
 */
async function freshFolders(sandbox: Sandbox, task: Task): Promise<string> {
  const fresh = await sandbox.exec(['/bin/sh', '-c', `printf '%s' "$PATH"; PATH=${SYSTEM_PATH}; rm -rf ${TESTS_DIR} ${VERIFIER_LOGS}; [ -d /logs ] && [ ! -L /logs ] || rm -rf /logs; mkdir -p ${VERIFIER_LOGS} && chmod 755 /logs ${VERIFIER_LOGS} && test -z "$(ls -A ${VERIFIER_LOGS})"`], { env: task.config.verifier.env });
  if (fresh.exitCode !== 0) throw new Error(`cannot empty ${VERIFIER_LOGS} and ${TESTS_DIR} before grading: ${fresh.stderr.text.trim() || `exit ${fresh.exitCode}`}`);
  await sandbox.copyIn(task.testsDir, TESTS_DIR, { trusted: true });
  return fresh.stdout.text;
}

/** The agent's filesystem changes that touch the verifier's machinery (read through the backend). */
async function scanForTampering(sandbox: Sandbox, testPath: Promise<string | null>): Promise<Tampering[]> {
  const changes = await sandbox.changes();
  const content = new Map<string, string>();
  for (const c of changes.filter(needsContent).slice(0, 200)) {
    const body = await sandbox.readFile(c.path, 64 * 1024);
    if (body) content.set(c.path, body.toString('utf8'));
  }
  return findTampering(changes, content, (await testPath)?.split(':') ?? []);
}

/**
 * Grades the sandbox as the agent left it, so that nothing the agent did can forge the grade:
 * 1. every process the agent started is ended (unless the task keeps them for its tests, see
 *    `[verifier] keep_agent_processes`), so nothing can write into the verifier's folders later;
 * 2. the filesystem is scanned for tampering with the verifier's machinery; any finding voids the
 *    reward (0, with the paths) and the tests are not run;
 * 3. /tests and /logs/verifier are removed and made afresh, and tests/ is copied in by the backend
 *    itself (no program in the sandbox takes part), so nothing the agent planted is read;
 * 4. test.sh runs; its exit code is ignored; the reward files are copied out by the backend.
 * No reward file is an error, never a 0.
 */
export async function verify(sandbox: Sandbox, task: Task, options: VerifyOptions): Promise<VerifierOutcome> {
  let ending: Promise<void>;
  if (!task.config.verifier.keep_agent_processes) ending = sandbox.endProcesses();
  else {
    // Processes are kept for the tests; a sandbox the agent brought down is revived all the same.
    const alive = await sandbox.exec(['true'], { timeoutSec: 30 }).then((r) => r.exitCode === 0, () => false);
    ending = alive ? Promise.resolve() : sandbox.endProcesses();
  }
  // The scan starts as soon as no agent process is left (changes() waits for that, not for the
  // sandbox to come back), and reads the agent's changes while the verifier's folders are made
  // afresh and the tests copied in: those touch only /tests and /logs, which the scan never flags.
  const fresh = ending.then(() => freshFolders(sandbox, task)).then(
    (testPath) => ({ testPath, err: null as unknown }),
    (err: unknown) => ({ testPath: null, err }),
  );
  const [tampering, folders] = await Promise.all([scanForTampering(sandbox, fresh.then((f) => f.testPath)), fresh.then((f) => f.err)]);
  const none = { tests: [], testsSource: 'none' as const, testsSourceCounts: {}, exitCode: null, durationMs: 0, rewardSource: null };
  if (tampering.length > 0) {
    const list = tampering.slice(0, 5).map((t) => `${t.path} (${t.kind}: ${t.why})`).join(', ');
    return { ...none, reward: 0, rewards: {}, tampering, error: { class: 'tampering', message: `the agent changed the verifier's machinery, so the reward is void (0): ${list}${tampering.length > 5 ? `, and ${tampering.length - 5} more` : ''}` } };
  }
  if (folders) throw folders;
  const timeoutSec = options.timeoutSec ?? task.config.verifier.timeout_sec;
  const run = await sandbox.exec(
    // bash from the system folders (where the scan watches it), not whatever comes first on the PATH.
    `if [ -x /bin/bash ]; then /bin/bash ${TESTS_DIR}/test.sh; elif [ -x /usr/bin/bash ]; then /usr/bin/bash ${TESTS_DIR}/test.sh; else /bin/sh ${TESTS_DIR}/test.sh; fi > ${VERIFIER_LOGS}/test-stdout.txt 2>&1`,
    { env: task.config.verifier.env, timeoutSec, signal: options.signal },
  );
  await sandbox.copyOut(VERIFIER_LOGS, options.hostLogsDir, { trusted: true });

  const local = (name: string): string => path.join(options.hostLogsDir, name);
  const files = await readdir(options.hostLogsDir).catch(() => [] as string[]);
  const junit = await Promise.all(files.filter((f) => f.endsWith('.xml')).sort().map((f) => readFile(local(f), 'utf8')));
  const { tests, source, counts } = collectTests({
    ctrf: await readTextIfThere(local('ctrf.json')),
    stdout: await readTextIfThere(local('test-stdout.txt')),
    junit,
  });
  const base = { tests, testsSource: source, testsSourceCounts: counts, exitCode: run.exitCode, durationMs: run.durationMs, tampering: [] };

  if (run.timedOut) {
    return { ...base, reward: null, rewards: {}, rewardSource: null, error: { class: 'verifier_timeout', message: `test.sh did not finish within ${timeoutSec} s` } };
  }
  const parsed = parseRewardFiles(await readTextIfThere(local('reward.json')), await readTextIfThere(local('reward.txt')));
  if (!parsed.ok) {
    const cls = parsed.problem === 'missing' ? 'verifier_no_reward' : 'verifier_bad_reward';
    return { ...base, reward: null, rewards: {}, rewardSource: null, error: { class: cls, message: `${parsed.message} (test.sh exit code ${run.exitCode})` } };
  }
  return { ...base, reward: parsed.reward, rewards: parsed.rewards, rewardSource: parsed.source, error: null, findings: rewardFindingsOf(await readTextIfThere(local('reward.json')), await readTextIfThere(local('reward.txt')), tests) };
}
