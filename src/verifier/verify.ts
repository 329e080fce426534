import {
  DiskLimitError,
  ScanIncompleteError,
  type FsChange,
  type Sandbox,
  type SandboxProvider,
  type SandboxSnapshot,
  type SnapshotBounds,
  taskDiskLimitMb,
} from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { GradingStepError, errorMessage, gradingStep, isEngineLost } from '../util/errors.js';
import { nowIso } from '../util/time.js';
import {
  boundPorts,
  librariesUsed,
  parseLdCache,
  protectionModeOf,
  tracedCalls,
  tracedPaths,
  type ProtectionMode,
  type ProtectionRecord,
} from './protection.js';
import type { GradingPolicy } from './evidence.js';
import { outcomeFromLogs } from './outcome.js';
import { pythonSearches } from './python-path.js';
import type { VerifierOutcome } from './schema.js';
import {
  findTampering,
  LD_CACHE,
  MAX_CONTENT_BYTES,
  MAX_CONTENT_FILES,
  needsContent,
  type Tampering,
} from './tampering.js';
import { cappedOutput } from './test-output.js';
import { TESTS_DIR, VERIFIER_LOGS } from '../sandbox/verifier-folders.js';
import { copyArtifacts, runCollect } from './collect.js';

export { TESTS_DIR, VERIFIER_LOGS } from '../sandbox/verifier-folders.js';

export interface VerifyOptions {
  /** Host folder that receives /logs/verifier (test-stdout.txt, reward, reports). */
  hostLogsDir: string;
  timeoutSec?: number;
  signal?: AbortSignal;
  /** The task's protected set from admission; absent: the fixed rules only (the outcome says `rules`). */
  protection?: ProtectionRecord | null;
  /** Record the protected set from this grading (the reference solution's final state): traced, when the backend can. */
  onRecord?: (record: ProtectionRecord) => void;
  /** Host folders copied to /tests in order, a later one's files over an earlier one's (a step's tests over the task's); default the task's tests/. */
  testsDirs?: string[];
  /** Host folder that receives the artifacts (/logs/artifacts and the task's `artifacts`); absent: none are copied. */
  hostArtifactsDir?: string;
  /** What grading takes on at most from the sandbox's files; `maxBytes` defaults to the task's disk limit (storage_mb). */
  bounds?: SnapshotBounds;
  /** How the reward is held against the tests' own evidence; default `evidence` (see evidence.ts). */
  policy?: GradingPolicy;
  /**
   * The step of a multi-step task this grading is for (its name): held against that step's
   * evidence from admission (ProtectionRecord.stepEvidence), and recorded under it.
   */
  step?: string;
}

/** test.sh by bash from the system folders (where the scan watches it), not whatever comes first on the PATH; its output to the logs, capped (see cappedOutput). */
const TEST_COMMAND = cappedOutput(
  `if [ -x /bin/bash ]; then /bin/bash ${TESTS_DIR}/test.sh; elif [ -x /usr/bin/bash ]; then /usr/bin/bash ${TESTS_DIR}/test.sh; else /bin/sh ${TESTS_DIR}/test.sh; fi`,
  `${VERIFIER_LOGS}/test-stdout.txt`,
);

/** The files whose content decides the scan, read whole by the backend; null when there are more than it reads. */
async function readContents(snap: SandboxSnapshot, changes: FsChange[]): Promise<Map<string, Buffer> | null> {
  const wanted = changes.filter(needsContent);
  if (wanted.length > MAX_CONTENT_FILES) return null;
  const content = new Map<string, Buffer>();
  for (const c of wanted) {
    const body = await snap.readFile(c.path, MAX_CONTENT_BYTES + 1);
    // One past the limit means the file was not read whole: left out, so the scan fails closed on it.
    if (body && body.length <= MAX_CONTENT_BYTES) content.set(c.path, body);
  }
  return content;
}

/** A grade of 0 with no test run: the sandbox's state kept the verifier from grading it (tampering, a step it broke). */
export function zeroOutcome(
  error: { class: 'tampering' | 'grading_blocked' | 'disk_limit'; message: string },
  protection: ProtectionMode,
  tampering: Tampering[] = [],
): VerifierOutcome {
  return {
    reward: 0,
    rewards: {},
    rewardSource: null,
    tests: [],
    testsSource: 'none',
    testsSourceCounts: {},
    exitCode: null,
    durationMs: 0,
    tampering,
    protection,
    error,
  };
}

const tampered = (tampering: Tampering[], protection: ProtectionMode): VerifierOutcome => {
  const list = tampering
    .slice(0, 5)
    .map((t) => `${t.path} (${t.kind}: ${t.why})`)
    .join(', ');
  const message = `the agent changed the verifier's machinery, so the reward is void (0): ${list}${tampering.length > 5 ? `, and ${tampering.length - 5} more` : ''}`;
  return zeroOutcome({ class: 'tampering', message }, protection, tampering);
};

/**
 * The grade when the sandbox's files passed what grading takes on (too many to scan, a walk that
 * could not be completed, more bytes than the disk limit): 0 with the reason; null for any other failure.
 */
function refusedOutcome(err: unknown, mode: ProtectionMode): VerifierOutcome | null {
  if (err instanceof DiskLimitError)
    return zeroOutcome({ class: 'disk_limit', message: `${err.message} (graded 0)` }, mode);
  if (err instanceof ScanIncompleteError) return tampered([{ path: '/', kind: 'changed', why: err.message }], mode);
  return null;
}

/**
 * Grades the agent's sandbox so that nothing the agent did can forge the grade, while whatever it
 * left running keeps running (Harbor's semantics: a service the task asked for still answers):
 * 1. the sandbox's filesystem is snapshotted (its processes paused for that moment only);
 * 2. the snapshot's changes are scanned for tampering with the verifier's machinery (the task's
 *    protected set from admission, and fixed rules); any finding voids the reward (0), and a scan
 *    that cannot be completed (too many changes, a file too large to read whole) is one;
 * 3. only then is the verifier's own sandbox started from the snapshot in the agent sandbox's
 *    network (localhost services answer, but no agent process can write, signal or trace it),
 *    with /tests and /logs/verifier made afresh by the backend and tests/ copied in;
 * 4. test.sh runs (exit code ignored), as that sandbox's own process where the backend can (see
 *    runTests); then every process there is ended, and the logs are copied out by the backend.
 * No reward file (or a timeout) is graded 0, as Harbor counts it: after the agent's turn it is the
 * sandbox's state that kept the verifier from a reward. Failures of grading steps throw
 * GradingStepError (the caller asks the engine whether it is at fault); engine failures before
 * the snapshot throw as they are.
 */
export async function verify(sandbox: Sandbox, task: Task, options: VerifyOptions): Promise<VerifierOutcome> {
  const { signal } = options;
  const mode = protectionModeOf(options.protection);
  const timeoutSec = options.timeoutSec ?? task.config.verifier.timeout_sec;
  // A wide terminal for tools that cut lines to its width (pytest's summary of failed tests keeps
  // each message whole); the task's own setting wins.
  const env = { COLUMNS: '400', ...task.config.verifier.env };
  // Collect hooks and artifacts are diagnostics: recorded, never part of the grade. Only for a
  // task that declares some (ordinary gradings pay no extra command).
  const collects =
    Boolean(options.hostArtifactsDir) && (task.config.verifier.collect.length > 0 || task.config.artifacts.length > 0);
  // When test.sh is all the verifier does (no trace, nothing collected after it), the backend may
  // run it as the verifier sandbox's own process: no command sent in, nothing left to end after.
  const alone = !options.onRecord && !collects;
  const bounds = { ...options.bounds, maxBytes: options.bounds?.maxBytes ?? taskDiskLimitMb(task) * 1024 * 1024 };
  let snap: SandboxSnapshot;
  try {
    // Ports the tests bind: an agent process holding one refuses the grading (see SnapshotOptions).
    const ports = options.protection?.boundPorts ?? [];
    snap = await sandbox.snapshot({
      signal,
      bounds,
      ports,
      ...(alone ? { verifier: { command: TEST_COMMAND, env } } : {}),
    });
  } catch (err) {
    const refused = refusedOutcome(err, mode);
    if (refused) return refused;
    throw err;
  }
  let box: Sandbox | null = null;
  try {
    const scanned = await scan(snap, task, options, mode);
    if ('outcome' in scanned) return scanned.outcome;
    const { changes, content } = scanned;
    // Only now does anything of the snapshot run: the verifier's sandbox, with /tests and an empty
    // /logs/verifier made afresh whatever the agent left there.
    const { box: verifierBox, run, collected } = await runTests(snap, task, options, { env, timeoutSec, collects });
    box = verifierBox;
    await gradingStep("the verifier's logs could not be copied out", () =>
      verifierBox.copyOut(VERIFIER_LOGS, options.hostLogsDir, { trusted: true }),
    );
    const record = options.protection;
    const admitted = (options.step === undefined ? record?.evidence : record?.stepEvidence?.[options.step]) ?? null;
    const policy = options.policy ?? 'evidence';
    const graded = await outcomeFromLogs(options.hostLogsDir, { run, collected, mode, timeoutSec, policy, admitted });
    if (options.onRecord && run.trace !== undefined && !run.timedOut) {
      const made = await recordOf(task, verifierBox, { changes, content, trace: run.trace });
      options.onRecord(
        options.step === undefined
          ? { ...made, ...(graded.evidence ? { evidence: graded.evidence } : {}) }
          : { ...made, ...(graded.evidence ? { stepEvidence: { [options.step]: graded.evidence } } : {}) },
      );
    }
    return graded.outcome;
  } finally {
    await box?.close();
    await snap.discard();
  }
}

/**
 * The snapshot's changes judged before anything of it runs (a tampered grade discards it
 * unstarted): the outcome when they void the grade, else the changes and the contents read. The
 * PATH test.sh will have is the engine's configuration with the verifier's env: nothing a process
 * in the sandbox can change.
 */
async function scan(
  snap: SandboxSnapshot,
  task: Task,
  options: VerifyOptions,
  mode: ProtectionMode,
): Promise<{ outcome: VerifierOutcome } | { changes: FsChange[]; content: Map<string, Buffer> }> {
  let changes: FsChange[];
  try {
    changes = await snap.changes();
  } catch (err) {
    const refused = refusedOutcome(err, mode);
    if (refused) return { outcome: refused };
    throw err;
  }
  const content = await readContents(snap, changes);
  if (!content) {
    const why = `more than ${MAX_CONTENT_FILES} files whose content decides the scan; it cannot read them all, so it fails closed`;
    return { outcome: tampered([{ path: '/', kind: 'changed', why }], mode) };
  }
  const testPath = task.config.verifier.env.PATH ?? (await snap.env()).PATH ?? '';
  const tampering = findTampering(changes, {
    content,
    pathDirs: testPath.split(':'),
    protection: options.protection ?? null,
  });
  if (tampering.length > 0) return { outcome: tampered(tampering, mode) };
  return { changes, content };
}

interface TestsRun {
  /** The verifier's sandbox, stopped. */
  box: Sandbox;
  run: { exitCode: number | null; timedOut: boolean; durationMs: number; trace?: string };
  collected?: VerifierOutcome['collected'];
}

/**
 * test.sh in the verifier's sandbox, which is stopped after it (nothing the tests left running may
 * rewrite the reward while it is read): run as that sandbox's own process when the backend can and
 * nothing else is asked of it, else sent in as a command, traced and followed by the collect hooks
 * as asked.
 */
async function runTests(
  snap: SandboxSnapshot,
  task: Task,
  options: VerifyOptions,
  how: { env: Record<string, string>; timeoutSec: number; collects: boolean },
): Promise<TestsRun> {
  const { signal } = options;
  const start = {
    tests: options.testsDirs ?? [task.testsDir],
    env: task.config.verifier.env,
    signal,
  };
  if (snap.runVerifier) {
    // Not a step as a whole: the backend names its own steps up to test.sh's start (GradingStepError);
    // an engine failure while test.sh runs is thrown as it is, as an exec's is below.
    const done = await snap.runVerifier({ ...start, timeoutSec: how.timeoutSec });
    return { box: done.box, run: done };
  }
  const box = await gradingStep('the verifier sandbox did not start with fresh folders', () =>
    snap.startVerifier(start),
  );
  try {
    const run = await box.exec(TEST_COMMAND, {
      env: how.env,
      timeoutSec: how.timeoutSec,
      signal,
      trace: Boolean(options.onRecord),
    });
    const collecting =
      how.collects && !run.timedOut
        ? await gradingStep('the collect commands could not be run', () => runCollect(box, task, signal))
        : null;
    await gradingStep('the verifier sandbox could not be stopped', () => box.stop());
    if (!collecting || !options.hostArtifactsDir) return { box, run };
    return {
      box,
      run,
      collected: {
        hooks: collecting.hooks,
        artifacts: await copyArtifacts(box, task, collecting.kinds, options.hostArtifactsDir),
      },
    };
  } catch (err) {
    await box.close();
    throw err;
  }
}

/**
 * The protected set this grading shows: what test.sh touched, what the solution changed, the
 * libraries the loader resolved, and what a pass looked like (the reports and reward files).
 */
async function recordOf(
  task: Task,
  box: Sandbox,
  seen: { changes: FsChange[]; content: Map<string, Buffer>; trace: string },
): Promise<ProtectionRecord> {
  const { changes, content, trace } = seen;
  const accessed = tracedPaths(trace);
  const searches = pythonSearches(tracedCalls(trace));
  const cache = content.get(LD_CACHE) ?? (await box.readFile(LD_CACHE, 64 * 1024 * 1024));
  return {
    schemaVersion: 1,
    task: task.name,
    checksum: task.checksum,
    recordedAt: nowIso(),
    accessed,
    outputs: changes.map((c) => c.path).sort(),
    libraries: librariesUsed(cache ? parseLdCache(cache) : null, accessed),
    boundPorts: boundPorts(trace),
    pythonSearches: searches,
  };
}

/**
 * `verify`, with the rule for a grading step that failed after the agent's turn: when the engine
 * still answers (and was not lost), the sandbox's content broke the step, and the grade is 0
 * (grading_blocked); otherwise the failure is the engine's and is thrown, as every other one.
 */
export async function gradeSandbox(
  sandbox: Sandbox,
  task: Task,
  options: VerifyOptions,
  provider: Pick<SandboxProvider, 'health'>,
): Promise<VerifierOutcome> {
  try {
    return await verify(sandbox, task, options);
  } catch (err) {
    if (!(err instanceof GradingStepError)) throw err;
    if (isEngineLost(err)) throw err;
    if (!(await provider.health()).ok) throw err;
    const message = `${errorMessage(err)} (graded 0: the sandbox's state broke a step of grading)`;
    return zeroOutcome({ class: 'grading_blocked', message }, protectionModeOf(options.protection));
  }
}
