import path from 'node:path';
import { scrubValue, type Scrub } from '../../util/scrub.js';
import { nowIso } from '../../util/time.js';
import { protectionModeOf } from '../../verifier/protection.js';
import { summarizeTests } from '../../verifier/schema.js';
import { INFRA_ERROR_CLASSES, isPassingReward } from '../accounting.js';
import type { TrialError, TrialResult } from '../schema.js';
import { timed, type TrialState } from '../state.js';
import { admissionRefOf } from './verification.js';
import { writeFileAtomic } from '../../util/files.js';

/**
 * Teardown, on every path: the sandbox closed (never throws: Sandbox.close), or its removal handed
 * over to the job (`removeInBackground`: the trial then has no teardown phase).
 */
export async function teardownPhase(state: TrialState): Promise<void> {
  const box = state.sandbox;
  if (box && state.options.removeInBackground) state.options.removeInBackground(box.close());
  else if (box) await timed(state, 'teardown', () => box.close());
}

/** Without a reward, the error that explains it leads: infrastructure first, then the verifier's. */
function primaryError(errors: TrialError[], reward: number | null): TrialError | undefined {
  if (reward !== null) return errors[0];
  return (
    errors.find((e) => e.class === 'cancelled') ??
    errors.find((e) => INFRA_ERROR_CLASSES.has(e.class)) ??
    errors.find((e) => e.phase === 'verification') ??
    errors[0]
  );
}

/** The trial's result, from its state as the phases left it. */
export function resultOf(state: TrialState): TrialResult {
  const { task, options, errors, usage, prepared } = state;
  const v = state.verdict;
  const reward = v?.reward ?? null;
  const protection = v?.protection ?? protectionModeOf(options.protection);
  return {
    schemaVersion: 1,
    trialId: state.trialId,
    task: { name: task.name, path: task.path, checksum: task.checksum },
    agent: { name: options.agent.name, model: options.agent.model },
    attempt: state.attempt,
    reward,
    rewards: v?.rewards ?? {},
    passed: isPassingReward(reward),
    ...(options.branchOf ? { branch: options.branchOf } : {}),
    steps: state.stepResults,
    taskVersion: task.version ?? null,
    dataset: task.dataset ?? null,
    collected: v?.collected ?? null,
    tests: v?.tests ?? [],
    testsSource: v?.testsSource ?? 'none',
    testsSourceCounts: v?.testsSourceCounts ?? {},
    testsSummary: summarizeTests(v?.tests ?? []),
    error: primaryError(errors, reward) ?? null,
    errors,
    exitReason: state.exitReason,
    turns: usage.turns,
    tokens: usage.tokens,
    costUsd: usage.costUsd,
    tampering: v?.tampering ?? [],
    protection,
    admission: protection === 'admission' ? admissionRefOf(options.protection, options.admissionFile) : null,
    findings: v?.findings ?? [],
    evidence: v?.evidence ?? null,
    image: prepared?.image ?? null,
    imageSource: prepared?.source ?? null,
    imageId: prepared?.imageId ?? null,
    imageCached: prepared?.cached ?? null,
    engine: state.sandbox?.engine ?? null,
    phases: state.phases,
    startedAt: state.startedAt,
    finishedAt: nowIso(),
    durationMs: performance.now() - state.t0,
  };
}

async function writeJsonAtomic(file: string, data: unknown, scrub: Scrub): Promise<void> {
  await writeFileAtomic(file, `${scrub(JSON.stringify(data, null, 2))}\n`);
}

/**
 * Collection: the result scrubbed and written as result.json; what is returned is what is
 * recorded (the store, listings).
 */
export async function collectionPhase(state: TrialState): Promise<TrialResult> {
  const clean = scrubValue(resultOf(state), state.scrub);
  state.log.info('trial ended', {
    reward: clean.reward,
    error: clean.error?.class ?? null,
    exit_reason: clean.exitReason,
    duration_ms: Math.round(clean.durationMs),
  });
  await writeJsonAtomic(path.join(state.trialDir, 'result.json'), clean, state.scrub);
  return clean;
}
