import { isPassingReward } from '../trial/accounting.js';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { JobStore } from '../store/store.js';
import type { TrialErrorClass, TrialResult } from '../trial/schema.js';
import { primaryReward } from '../verifier/reward.js';
import { summarizeTests } from '../verifier/schema.js';
import { parseCtrf } from '../verifier/test-report.js';
import { filesNamed, readTextIfThere } from '../util/files.js';
import { rewardFindingsOf } from '../verifier/consistency.js';

/** Harbor exception types, by what they mean for the record. */
function errorClassOf(exceptionType: string): TrialErrorClass {
  if (/AgentTimeout|AgentExecutionTimeout/i.test(exceptionType)) return 'agent_timeout';
  if (/VerifierTimeout/i.test(exceptionType)) return 'verifier_timeout';
  if (/RewardFile(NotFound|Empty)/i.test(exceptionType)) return 'verifier_no_reward';
  if (/VerifierOutputParse/i.test(exceptionType)) return 'verifier_bad_reward';
  // termgrade's own graded-0 classes, as its Harbor export names them (harbor/layout.ts).
  if (/RewardUnsupported/i.test(exceptionType)) return 'reward_unsupported';
  if (/Tampering/i.test(exceptionType)) return 'tampering';
  if (/GradingBlocked/i.test(exceptionType)) return 'grading_blocked';
  if (/NonZeroAgentExitCode|Agent/i.test(exceptionType)) return 'agent_error';
  if (/Build/i.test(exceptionType)) return 'build_failed';
  return 'environment_error';
}

interface HarborTrial {
  /** Harbor's own id of the trial run (a UUID), unique across its jobs. */
  id?: string;
  task_name?: string;
  trial_name?: string;
  task_checksum?: string;
  task_id?: { path?: string };
  config?: { job_id?: string | null; agent?: { name?: string; model_name?: string | null }; task?: { path?: string } };
  agent_info?: { name?: string; model_info?: { name?: string } | null };
  agent_result?: {
    n_input_tokens?: number | null;
    n_cache_tokens?: number | null;
    n_output_tokens?: number | null;
    cost_usd?: number | null;
  } | null;
  verifier_result?: { rewards?: Record<string, number | null> | null } | null;
  exception_info?: { exception_type?: string; exception_message?: string } | null;
  started_at?: string | null;
  finished_at?: string | null;
}

/**
 * Harbor's accounting, which an import follows: a trial the agent or the verifier ended without a
 * reward (an agent exception, a timeout, a missing reward file) counts as 0, as Harbor's own mean
 * counts it. Failures of the environment itself (build, container start) stay infrastructure
 * failures with no reward, as every other termgrade record (see trial/accounting.ts).
 */
function harborReward(reward: number | null, errClass: TrialErrorClass | null): number | null {
  if (reward !== null) return reward;
  if (errClass === 'build_failed' || errClass === 'environment_error') return null;
  return 0;
}

/**
 * An imported trial's id: Harbor's own trial id when the result has one, else its job's id and the
 * trial's name (a trial name alone can repeat across Harbor jobs: two runs of one task set), else
 * the name or the folder. The same Harbor trial imported twice is found by it and skipped.
 */
function harborTrialId(h: HarborTrial, trialDir: string): string {
  if (h.id) return `harbor:${h.id}`;
  if (h.config?.job_id && h.trial_name) return `harbor:${h.config.job_id}/${h.trial_name}`;
  return `harbor:${h.trial_name ?? path.resolve(trialDir)}`;
}

/** Who and what an imported trial is: read from the Harbor result and numbered by the import. */
interface ImportedId {
  trialId: string;
  task: string;
  taskPath: string | undefined;
  agent: string;
  model: string | null;
  attempt: number;
}

/** One Harbor trial folder's result as a termgrade trial record (rewards, tests, error, usage). */
async function harborResult(h: HarborTrial, id: ImportedId, trialDir: string): Promise<TrialResult> {
  const rewards = Object.fromEntries(
    Object.entries(h.verifier_result?.rewards ?? {}).filter((e): e is [string, number] => typeof e[1] === 'number'),
  );
  const verifierReward = Object.keys(rewards).length ? primaryReward(rewards) : null;
  const ctrf = await readTextIfThere(path.join(trialDir, 'verifier', 'ctrf.json')); // optional: no CTRF, no tests
  const tests = (ctrf && parseCtrf(ctrf)) || [];
  const exc = h.exception_info?.exception_type;
  const errClass = exc ? errorClassOf(exc) : verifierReward === null ? 'verifier_no_reward' : null;
  const reward = harborReward(verifierReward, errClass);
  const started = h.started_at ?? '';
  const finished = h.finished_at ?? '';
  const durationMs = started && finished ? Math.max(0, Date.parse(finished) - Date.parse(started)) : 0;
  const a = h.agent_result;
  return {
    schemaVersion: 1,
    trialId: id.trialId,
    task: { name: id.task, path: id.taskPath ?? '', checksum: h.task_checksum ?? '' },
    agent: { name: id.agent, model: id.model },
    attempt: id.attempt,
    reward,
    rewards,
    passed: isPassingReward(reward),
    steps: [],
    taskVersion: null,
    dataset: null,
    collected: null,
    tests,
    testsSource: tests.length ? 'ctrf' : 'none',
    testsSourceCounts: tests.length ? { ctrf: tests.length } : {},
    testsSummary: summarizeTests(tests),
    tampering: [],
    protection: 'rules',
    admission: null,
    // Harbor's own reward files, read beside its CTRF: the same consistency check as our trials.
    findings:
      reward === null
        ? []
        : rewardFindingsOf(
            await readTextIfThere(path.join(trialDir, 'verifier', 'reward.json')),
            await readTextIfThere(path.join(trialDir, 'verifier', 'reward.txt')),
            tests,
          ),
    // Graded by Harbor under its own semantics: the reward file's number stands (nothing to hold it against here).
    evidence: null,
    error: errClass
      ? {
          class: errClass,
          message: h.exception_info?.exception_message ?? exc ?? 'no reward',
          phase: errClass.startsWith('verifier') ? 'verification' : 'agent_run',
        }
      : null,
    errors: [],
    exitReason:
      errClass === 'agent_timeout' ? 'agent_timeout' : errClass === 'agent_error' ? 'agent_error' : 'completed',
    turns: 0,
    tokens:
      a && (a.n_input_tokens != null || a.n_output_tokens != null)
        ? { input: a.n_input_tokens ?? 0, cached: a.n_cache_tokens ?? 0, output: a.n_output_tokens ?? 0 }
        : null,
    costUsd: a?.cost_usd ?? null,
    image: null,
    imageSource: null,
    imageId: null,
    engine: null,
    imageCached: null,
    phases: {},
    startedAt: started,
    finishedAt: finished,
    durationMs,
  };
}

/**
 * Reads Harbor job folders (a trial folder per trial with result.json, verifier/ctrf.json) into a
 * termgrade job, so published or earlier runs can be measured and selected from. Job-level
 * result.json files (no task) are skipped. Imports append: attempt numbers continue after what the
 * job already holds, and a trial imported before (same Harbor trial) is not imported again.
 * Returns how many trials were imported.
 */
export async function importHarbor(root: string, store: JobStore): Promise<{ imported: number; skipped: string[] }> {
  const items: Parameters<JobStore['recordMany']>[0] = [];
  const skipped: string[] = [];
  const attempts = store.nextAttempts();
  const known = store.trialIds();
  const files: string[] = [];
  for await (const f of filesNamed(root, 'result.json')) files.push(f);
  files.sort();
  for (const file of files) {
    let h: HarborTrial;
    try {
      h = JSON.parse(await readFile(file, 'utf8')) as HarborTrial;
    } catch (err) {
      skipped.push(`${file}: not JSON (${(err as Error).message})`);
      continue;
    }
    const taskPath = h.task_id?.path ?? h.config?.task?.path;
    const task = h.task_name ?? (taskPath ? path.basename(taskPath) : undefined);
    if (!task || (!h.verifier_result && !h.exception_info && !h.trial_name)) continue; // a job-level summary
    const agent = h.agent_info?.name ?? h.config?.agent?.name ?? 'unknown';
    const model = h.agent_info?.model_info?.name ?? h.config?.agent?.model_name ?? null;
    const config = model ? `${agent}/${model}` : agent;
    const key = `${config}\u0000${task}`;
    const attempt = attempts.get(key) ?? 0;
    attempts.set(key, attempt + 1);
    const trialDir = path.dirname(file);
    const trialId = harborTrialId(h, trialDir);
    if (known.has(trialId)) {
      skipped.push(`${file}: already imported as ${trialId}`);
      attempts.set(key, attempt);
      continue;
    }
    known.add(trialId);
    const result = await harborResult(h, { trialId, task, taskPath, agent, model, attempt }, trialDir);
    // A task checksum from another harness is not ours to compare; keep it out of the change check.
    result.task.checksum = '';
    items.push({
      result,
      extra: { slot: { config, task, attempt }, trialDir, infraAttempts: 1, retryReasons: [], source: 'harbor' },
    });
  }
  store.recordMany(items);
  return { imported: items.length, skipped };
}
