import { isPassingReward } from '../trial/accounting.js';
import { z } from 'zod';
import type { AdaptiveRule } from '../stats/adaptive.js';
import { parseRetries } from '../trial/retries.js';

/**
 * What the measurement commands need of a trial, and nothing more: read from full trial results
 * (result.json, or one per line in JSONL) or from the job listing's snake_case lines.
 */
export interface StatsRecord {
  /** Unique within its job only: with `job`, the trial's identity (see store/identity.ts). */
  trialId: string;
  /** The id of the job the trial belongs to; '' when its source does not say (JSONL of trial results). */
  job?: string;
  task: string;
  /** The configuration compared and selected on: agent, plus model when there is one. */
  config: string;
  /** null: no verifier reward (an infrastructure or verifier error); not counted as a trial. */
  reward: number | null;
  passed: boolean;
  errorClass: string | null;
  durationMs: number;
  outputTokens: number | null;
  costUsd: number | null;
  testsPassed: number;
  testsFailed: number;
  /** Set when the trial came from an adaptive job: its rates need the unbiased estimator. */
  adaptive?: AdaptiveRule | null;
  /** Runs of this slot that were discarded (infrastructure retries, records replaced by --retry). */
  retries?: Array<{ class: string; durationMs: number }>;
  /** The engine's id of the image the trial ran on, when recorded. */
  imageId?: string | null;
  /** Codes of the trial's reward-consistency findings (verifier/consistency.ts); none when absent. */
  findings?: string[];
  /** Every named reward (reward.json's keys); `reward` is the primary one, the only one rates use. */
  rewards?: Record<string, number>;
}

export function configLabel(agent: string, model: string | null | undefined): string {
  return model ? `${agent}/${model}` : agent;
}

// Plain (stripping) objects: only the fields read here are copied, which keeps parsing 100,000
// full trial results fast; the rest of each record is simply not looked at.
const TrialResultLine = z.object({
  trialId: z.string(),
  task: z.object({ name: z.string() }),
  agent: z.object({ name: z.string(), model: z.string().nullable().optional() }),
  reward: z.number().nullable(),
  passed: z.boolean().optional(),
  error: z.object({ class: z.string() }).nullable().optional(),
  durationMs: z.number().default(0),
  tokens: z.object({ output: z.number() }).nullable().optional(),
  costUsd: z.number().nullable().optional(),
  testsSummary: z.object({ passed: z.number(), failed: z.number() }).optional(),
  imageId: z.string().nullable().optional(),
  findings: z.array(z.object({ code: z.string() })).optional(),
  rewards: z.record(z.string(), z.number()).optional(),
});

const JobListingLine = z.object({
  job_id: z.string().optional(),
  trial_id: z.string(),
  config: z.string().optional(),
  status: z.string().optional(),
  task: z.string(),
  agent: z.string(),
  model: z.string().nullable().optional(),
  reward: z.number().nullable(),
  error_class: z.string().nullable().optional(),
  duration_ms: z.number().optional(),
  output_tokens: z.number().nullable().optional(),
  cost_usd: z.number().nullable().optional(),
  tests_passed: z.number().optional(),
  tests_failed: z.number().optional(),
  retry_reasons_json: z.string().optional(),
  image_id: z.string().nullable().optional(),
  findings_json: z.string().optional(),
  rewards_json: z.string().optional(),
});

/** Finding codes from a listing's findings_json (a JSON array of {code, message}). */
function findingCodes(json: string | undefined): string[] {
  if (json === undefined) return [];
  const parsed = z.array(z.object({ code: z.string() })).safeParse(JSON.parse(json));
  if (!parsed.success)
    throw new Error(`findings_json is not a list of findings: ${parsed.error.issues[0]?.message ?? ''}`);
  return parsed.data.map((f) => f.code);
}

/** A job-listing row for a slot the job never ran (budget, interrupt): not a trial at all. */
export function isNotRun(raw: unknown): boolean {
  return raw !== null && typeof raw === 'object' && (raw as { status?: unknown }).status === 'not_run';
}

/** Parses one record; throws with the first problem (the caller adds file and line). */
export function toStatsRecord(raw: unknown): StatsRecord {
  if (raw !== null && typeof raw === 'object' && 'trial_id' in raw) {
    const r = JobListingLine.parse(raw);
    return {
      trialId: r.trial_id,
      job: r.job_id ?? '',
      task: r.task,
      config: r.config ?? configLabel(r.agent, r.model),
      reward: r.reward,
      passed: isPassingReward(r.reward),
      errorClass: r.error_class ?? null,
      durationMs: r.duration_ms ?? 0,
      outputTokens: r.output_tokens ?? null,
      costUsd: r.cost_usd ?? null,
      testsPassed: r.tests_passed ?? 0,
      testsFailed: r.tests_failed ?? 0,
      retries: parseRetries(r.retry_reasons_json).map((x) => ({ class: x.class, durationMs: x.durationMs })),
      imageId: r.image_id ?? null,
      findings: findingCodes(r.findings_json),
      ...(r.rewards_json ? { rewards: z.record(z.string(), z.number()).parse(JSON.parse(r.rewards_json)) } : {}),
    };
  }
  const r = TrialResultLine.parse(raw);
  return {
    trialId: r.trialId,
    job: '',
    task: r.task.name,
    config: configLabel(r.agent.name, r.agent.model),
    reward: r.reward,
    // One rule: a file's own `passed` is not taken over the reward it records.
    passed: isPassingReward(r.reward),
    errorClass: r.error?.class ?? null,
    durationMs: r.durationMs,
    outputTokens: r.tokens?.output ?? null,
    costUsd: r.costUsd ?? null,
    testsPassed: r.testsSummary?.passed ?? 0,
    testsFailed: r.testsSummary?.failed ?? 0,
    imageId: r.imageId ?? null,
    findings: (r.findings ?? []).map((f) => f.code),
    ...(r.rewards ? { rewards: r.rewards } : {}),
  };
}
