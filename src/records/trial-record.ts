import type { JobStore } from '../store/store.js';
import { isPassingReward } from '../trial/accounting.js';

/**
 * One trial as the store holds it, in the shape of a trial's result.json (the fields the store
 * keeps): what the viewer shows for a trial whose folder has no termgrade result.json of its own
 * (an imported Harbor trial, whose result.json is Harbor's) and fills in for one that does.
 */
export interface StoredTrialRecord {
  trialId: string;
  source: string;
  reward: number | null;
  rewards: Record<string, number>;
  passed: boolean;
  error: { class: string; message: string; phase: string | null } | null;
  exitReason: string | null;
  turns: number;
  tokens: { input: number; cached: number; output: number } | null;
  costUsd: number | null;
  tests: Array<{ name: string; status: string; durationMs: number | null; message: string | null }>;
  testsSource: string | null;
  testsSummary: { total: number; passed: number; failed: number };
  phases: Record<string, { startedAt: string; finishedAt: string; durationMs: number }>;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  infraAttempts: number;
  retries: unknown[];
  image: string | null;
  imageId: string | null;
  taskChecksum: string | null;
  findings: Array<{ code: string; message: string }>;
  tampering: unknown[];
  steps: unknown[];
  taskVersion: string | null;
  dataset: { name: string | null; version: string | null } | null;
}

const parsed = <T>(text: string | null | undefined, fallback: T): T => {
  if (!text) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback; // a column written by this store is JSON; an unreadable one shows as empty
  }
};

/** The stored record of `trialId` in `store`; null when the store has no such trial. */
export function storedTrialRecord(store: JobStore, trialId: string): StoredTrialRecord | null {
  const stored = store.trialStored(trialId);
  if (!stored) return null;
  const { row, tests } = stored;
  const hasTokens = row.input_tokens !== null || row.output_tokens !== null;
  return {
    trialId: row.trial_id,
    source: row.source,
    reward: row.reward,
    rewards: parsed(row.rewards_json, {}),
    passed: isPassingReward(row.reward),
    error: row.error_class
      ? { class: row.error_class, message: row.error_message ?? '', phase: row.error_phase }
      : null,
    exitReason: row.exit_reason,
    turns: row.turns,
    tokens: hasTokens
      ? { input: row.input_tokens ?? 0, cached: row.cached_tokens ?? 0, output: row.output_tokens ?? 0 }
      : null,
    costUsd: row.cost_usd,
    tests: tests.map((t) => ({ name: t.name, status: t.status, durationMs: t.duration_ms, message: t.message })),
    testsSource: row.tests_source,
    testsSummary: { total: row.tests_total, passed: row.tests_passed, failed: row.tests_failed },
    phases: parsed(row.phases_json, {}),
    startedAt: row.started_at || null,
    finishedAt: row.finished_at || null,
    durationMs: row.duration_ms,
    infraAttempts: row.infra_attempts,
    retries: parsed(row.retry_reasons_json, []),
    image: row.image,
    imageId: row.image_id,
    taskChecksum: row.task_checksum || null,
    findings: parsed(row.findings_json, []),
    tampering: parsed(row.tampering_json, []),
    steps: parsed(row.steps_json, []),
    taskVersion: row.task_version,
    dataset: row.dataset_name || row.dataset_version ? { name: row.dataset_name, version: row.dataset_version } : null,
  };
}
