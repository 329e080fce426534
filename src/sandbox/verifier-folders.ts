import { SYSTEM_PATH, type Sandbox } from './sandbox.js';

/** Where the verifier's tests are copied in, and where they write their logs and reward. */
export const TESTS_DIR = '/tests';
export const VERIFIER_LOGS = '/logs/verifier';

/** A harness command in the verifier's sandbox that takes longer than this failed (the sandbox's content stalls it). */
const HARNESS_STEP_SEC = 120;

/**
 * /tests and /logs/verifier made afresh in a started verifier's sandbox by commands run there,
 * whatever the agent left (/logs as a file, a link, a read-only mode), and the tests copied in
 * (folders in order, a later one's files over an earlier one's).
 * For backends that cannot prepare the verifier's filesystem before it starts (see
 * SandboxSnapshot.startVerifier). The commands use the system folders' programs only.
 */
export async function prepareFoldersInside(
  box: Sandbox,
  testsDirs: string[],
  env: Record<string, string> = {},
): Promise<void> {
  const fresh = await box.exec(
    [
      '/bin/sh',
      '-c',
      `PATH=${SYSTEM_PATH}; rm -rf ${TESTS_DIR} ${VERIFIER_LOGS}; [ -d /logs ] && [ ! -L /logs ] || rm -rf /logs; mkdir -p ${VERIFIER_LOGS} && chmod 755 /logs ${VERIFIER_LOGS} && test -z "$(ls -A ${VERIFIER_LOGS})"`,
    ],
    { env, timeoutSec: HARNESS_STEP_SEC },
  );
  if (fresh.exitCode !== 0)
    throw new Error(
      `cannot empty ${VERIFIER_LOGS} and ${TESTS_DIR}: ${fresh.timedOut ? `not done in ${HARNESS_STEP_SEC} s` : fresh.stderr.text.trim() || `exit ${fresh.exitCode}`}`,
    );
  for (const dir of testsDirs) await box.copyIn(dir, TESTS_DIR, { trusted: true });
}
