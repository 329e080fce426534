import { accountingOf, isPassingReward } from '../trial/accounting.js';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { trialKey, TrialFolderJobs } from '../store/identity.js';
import { filesNamed, readJsonIfThere } from '../util/files.js';
import { configLabel } from '../records/record.js';
import type { TrialDetail } from './page-data.js';
import { summarizeTrajectory } from './trajectory.js';
import { openJobRecords, recordSource } from '../records/source.js';
import { ifMissing } from '../util/errors.js';

interface ResultFields {
  trialId?: string;
  task?: { name?: string };
  agent?: { name?: string; model?: string | null };
  reward?: number | null;
  passed?: boolean;
  error?: { class?: string } | null;
  tokens?: { input?: number; output?: number } | null;
  tests?: Array<{ name?: string; status?: string }>;
  testsSummary?: { passed?: number; failed?: number };
  findings?: Array<{ code?: string; message?: string }>;
}

/** Findings as recorded (result.json or the store's findings_json); anything else is none. */
function findingsOf(raw: unknown): TrialDetail['findings'] {
  if (!Array.isArray(raw)) return [];
  return raw
    .filter(
      (f: unknown): f is { code: string; message?: unknown } =>
        f !== null && typeof f === 'object' && 'code' in f && typeof f.code === 'string',
    )
    .map((f) => ({ code: f.code, message: typeof f.message === 'string' ? f.message : '' }));
}

/** `fn` over every item, 64 at a time (file reads overlap; order kept). */
async function inBatches<T, R>(items: T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += 64) out.push(...(await Promise.all(items.slice(i, i + 64).map(fn))));
  return out;
}

/** One trial's detail from its folder (result.json, agent/trajectory.json); `fallback` when the folder is gone. */
async function fromFolder(
  dir: string | null,
  fallback: Omit<TrialDetail, 'trajectory' | 'failedTests' | 'findings'>,
): Promise<TrialDetail> {
  const result = dir ? ((await readJsonIfThere(path.join(dir, 'result.json'))) as ResultFields | null) : null;
  const trajectory = dir
    ? summarizeTrajectory(await readJsonIfThere(path.join(dir, 'agent', 'trajectory.json')))
    : null;
  const failedTests = (result?.tests ?? [])
    .filter((t) => t.status === 'failed' || t.status === 'error')
    .map((t) => t.name ?? '?');
  return { ...fallback, failedTests, findings: findingsOf(result?.findings), trajectory };
}

/**
 * What the report reads beyond the stats records: failing test names, tokens and trajectories,
 * from each trial's folder. Job folders give their store's rows (and each row's trial folder);
 * folders of trial folders give every result.json; JSONL sources have no folders, so only what
 * their lines hold. A trial folder that is gone leaves its row's own figures.
 */
export async function loadDetails(sources: string[]): Promise<TrialDetail[]> {
  const out: TrialDetail[] = [];
  const seen = new Set<string>();
  const folders = new TrialFolderJobs();
  // A trial is its job and its id: the same trial read twice is kept once, two jobs' alike ids both.
  const push = (d: TrialDetail): void => {
    const key = trialKey(d.job ?? '', d.trialId);
    if (seen.has(key)) return;
    seen.add(key);
    out.push(d);
  };
  for (const source of sources) {
    const kind = (await recordSource(source)).kind;
    if (kind === 'file') continue; // a JSONL listing holds no trial folders to read details from
    if (kind === 'job') {
      const store = openJobRecords(source);
      const rows = [...store.listTrials()].filter((r) => r.status !== 'not_run');
      const failed = store.failedTests();
      const job = store.jobId();
      store.close();
      // Which trial folders exist, one listing per parent folder (a moved or pruned job has none).
      const present = new Set<string>();
      for (const parent of new Set(rows.flatMap((r) => (r.trial_dir ? [path.dirname(r.trial_dir)] : [])))) {
        for (const name of await ifMissing(readdir(parent), [] as string[])) present.add(path.join(parent, name));
      }
      const details = await inBatches(rows, async (r) => ({
        trialId: r.trial_id,
        job,
        config: r.config,
        task: r.task,
        passed: isPassingReward(r.reward),
        graded: accountingOf(r.reward, r.error_class) === 'graded',
        errorClass: r.error_class,
        inputTokens: r.input_tokens,
        outputTokens: r.output_tokens,
        testsPassed: r.tests_passed,
        testsFailed: r.tests_failed,
        failedTests: failed.get(r.trial_id) ?? [],
        findings: findingsOf(JSON.parse(r.findings_json)),
        reward: r.reward,
        trajectory:
          r.trial_dir && present.has(r.trial_dir)
            ? summarizeTrajectory(await readJsonIfThere(path.join(r.trial_dir, 'agent', 'trajectory.json')))
            : null,
      }));
      details.forEach(push);
      continue;
    }
    for await (const file of filesNamed(source, 'result.json')) {
      const r = (await readJsonIfThere(file)) as ResultFields | null;
      if (!r?.trialId || !r.task?.name || !r.agent?.name) continue;
      push(
        await fromFolder(path.dirname(file), {
          trialId: r.trialId,
          job: folders.of(file).id,
          config: configLabel(r.agent.name, r.agent.model),
          task: r.task.name,
          passed: isPassingReward(r.reward),
          graded: accountingOf(r.reward ?? null, r.error?.class) === 'graded',
          reward: r.reward ?? null,
          errorClass: r.error?.class ?? null,
          inputTokens: r.tokens?.input ?? null,
          outputTokens: r.tokens?.output ?? null,
          testsPassed: r.testsSummary?.passed ?? 0,
          testsFailed: r.testsSummary?.failed ?? 0,
        }),
      );
    }
  }
  return out;
}
