import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type TrialRow } from '../store/store.js';
import { combiningLine, TrialFolderJobs, type JobRef } from '../store/identity.js';
import { accountingOf } from '../trial/accounting.js';
import { TermgradeError } from '../util/errors.js';
import { filesNamed, readTextIfThere } from '../util/files.js';
import { MESSAGE, writeParquet, type Column } from './parquet.js';
import { openJobRecords, recordSource } from '../records/source.js';

/** One trial as a dataset row: the record, its per-test results, and the full episode. */
export interface TrialRowOut {
  /** The trial's identity across jobs: `job_id/trial_id` (trial ids alone repeat across jobs). */
  id: string;
  job_id: string;
  /** The job's folder name (or a trial folder's parent), for people. */
  job: string;
  trial_id: string;
  task: string;
  /** The task content's checksum the trial ran (Harbor's task_checksum for an imported trial). */
  task_checksum: string | null;
  config: string;
  agent: string;
  model: string | null;
  attempt: number;
  reward: number | null;
  /** Every named reward (reward.json's keys; a multi-step task's aggregated), as JSON: `reward` is the primary one. */
  rewards: string;
  /** A multi-step trial's steps (name, reward, rewards, ...), as JSON; `[]` for a single-step one. */
  steps: string;
  task_version: string | null;
  dataset_name: string | null;
  dataset_version: string | null;
  status: string;
  error_class: string | null;
  exit_reason: string | null;
  tests: Array<{ name: string; status: string; message: string | null }>;
  messages: Array<Record<string, unknown>>;
  tools: string | null;
  trajectory: string | null;
  input_tokens: number | null;
  cached_tokens: number | null;
  output_tokens: number | null;
  cost_usd: number | null;
  duration_ms: number | null;
  phases: string;
  image_id: string | null;
}

/**
 * What a row is made of: a trial's result.json as far as export reads it (results written by older
 * versions lack some fields, hence the optional ones), or a store row's part of it (recordOfRow).
 */
interface ResultFields {
  trialId: string;
  task: { name: string; checksum?: string | null };
  agent: { name: string; model?: string | null };
  attempt?: number;
  reward?: number | null;
  rewards?: Record<string, number>;
  steps?: unknown;
  taskVersion?: string | null;
  dataset?: { name?: string | null; version?: string | null } | null;
  error?: { class?: string | null } | null;
  exitReason?: string | null;
  tests?: Array<{ name: string; status: string; message?: string | null }>;
  tokens?: { input?: number | null; cached?: number | null; output?: number | null } | null;
  costUsd?: number | null;
  durationMs?: number | null;
  phases?: unknown;
  imageId?: string | null;
}

/** A trial's result.json as JSON: a file that is not JSON is bad input, named (exit 2), never a crash. */
function parseResult(file: string, text: string): ResultFields {
  try {
    const value: unknown = JSON.parse(text);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not a JSON object');
    return value as ResultFields;
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: not a trial result: ${(err as Error).message}`);
  }
}

/** A stored JSON column, or {} when the store's row lacks it. */
function safeJson(text: string | null | undefined): Record<string, number> {
  return text ? (JSON.parse(text) as Record<string, number>) : {};
}

/** OpenAI messages with non-string content written as JSON text (Parquet wants one type). */
function normaliseMessages(raw: unknown): Array<Record<string, unknown>> {
  if (!Array.isArray(raw)) return [];
  return raw.map((m: Record<string, unknown>) => ({
    ...m,
    content:
      m.content === null || m.content === undefined || typeof m.content === 'string'
        ? m.content
        : JSON.stringify(m.content),
  }));
}

async function fromResult(
  result: ResultFields,
  job: JobRef,
  trialDir: string | null,
  config?: string,
): Promise<TrialRowOut> {
  const agentDir = trialDir ? path.join(trialDir, 'agent') : null;
  const messages = agentDir ? await readTextIfThere(path.join(agentDir, 'messages.json')) : null;
  const errorClass = result.error?.class ?? null;
  return {
    id: `${job.id}/${result.trialId}`,
    job_id: job.id,
    job: job.name,
    trial_id: result.trialId,
    task: result.task?.name,
    task_checksum: result.task?.checksum || null,
    config: config ?? (result.agent?.model ? `${result.agent.name}/${result.agent.model}` : result.agent?.name),
    agent: result.agent?.name,
    model: result.agent?.model ?? null,
    attempt: result.attempt ?? 0,
    reward: result.reward ?? null,
    rewards: JSON.stringify(result.rewards ?? {}),
    steps: JSON.stringify(result.steps ?? []),
    task_version: result.taskVersion ?? null,
    dataset_name: result.dataset?.name ?? null,
    dataset_version: result.dataset?.version ?? null,
    status: accountingOf(result.reward ?? null, errorClass),
    error_class: errorClass,
    exit_reason: result.exitReason ?? null,
    tests: (result.tests ?? []).map((t) => ({
      name: t.name,
      status: t.status,
      message: t.message ?? null,
    })),
    messages: messages ? normaliseMessages(JSON.parse(messages) as unknown) : [],
    tools: agentDir ? await readTextIfThere(path.join(agentDir, 'tools.json')) : null,
    trajectory: agentDir ? await readTextIfThere(path.join(agentDir, 'trajectory.json')) : null,
    input_tokens: result.tokens?.input ?? null,
    cached_tokens: result.tokens?.cached ?? null,
    output_tokens: result.tokens?.output ?? null,
    cost_usd: result.costUsd ?? null,
    duration_ms: result.durationMs ?? null,
    phases: JSON.stringify(result.phases ?? {}),
    image_id: result.imageId ?? null,
  };
}

/** A trial record as far as the store's row holds it (a trial whose own record cannot be read). */
function recordOfRow(r: TrialRow): ResultFields {
  return {
    trialId: r.trial_id,
    task: { name: r.task, checksum: r.task_checksum },
    agent: { name: r.agent, model: r.model },
    reward: r.reward,
    rewards: safeJson(r.rewards_json),
    steps: JSON.parse(r.steps_json) as unknown,
    taskVersion: r.task_version,
    dataset: r.dataset_name || r.dataset_version ? { name: r.dataset_name, version: r.dataset_version } : null,
    error: r.error_class ? { class: r.error_class } : null,
    exitReason: r.exit_reason,
    durationMs: r.duration_ms,
    costUsd: r.cost_usd,
    tokens:
      r.input_tokens === null && r.output_tokens === null
        ? null
        : { input: r.input_tokens ?? 0, cached: r.cached_tokens ?? 0, output: r.output_tokens ?? 0 },
  };
}

/**
 * Trials from job folders (their store, and each trial's folder) or folders of trial folders; each
 * row names its job, and a trial read twice (a job given twice) is one row.
 */
export async function collectTrialRows(sources: string[]): Promise<TrialRowOut[]> {
  const rows: TrialRowOut[] = [];
  const folders = new TrialFolderJobs();
  for (const source of sources) {
    const kind = (await recordSource(source)).kind;
    if (kind === 'file')
      throw new TermgradeError('bad_input', `${source}: not a job folder or a folder of trial folders`);
    if (kind === 'job') {
      const store = openJobRecords(source);
      try {
        const job: JobRef = { id: store.jobId(), name: path.basename(path.resolve(source)), source };
        for (const r of store.listTrials()) {
          if (r.status === 'not_run') continue;
          const text = r.trial_dir ? await readTextIfThere(path.join(r.trial_dir, 'result.json')) : null;
          const record = text ? parseResult(path.join(r.trial_dir!, 'result.json'), text) : null;
          // A termgrade record; else (none, or a job imported by an older version, whose trial folder
          // is Harbor's with Harbor's own result.json) the store's row.
          if (record && typeof record.trialId === 'string')
            rows.push({ ...(await fromResult(record, job, r.trial_dir, r.config)), attempt: r.attempt });
          else rows.push({ ...(await fromResult(recordOfRow(r), job, r.trial_dir, r.config)), attempt: r.attempt });
        }
      } finally {
        store.close();
      }
    } else {
      let found = 0;
      for await (const file of filesNamed(source, 'result.json')) {
        found += 1;
        rows.push(
          await fromResult(parseResult(file, await readFile(file, 'utf8')), folders.of(file), path.dirname(file)),
        );
      }
      if (!found)
        throw new TermgradeError(
          'bad_input',
          `${source}: not a job folder (no job.db) and no trial folders under it (no result.json)`,
        );
    }
  }
  const seen = new Set<string>();
  return rows.filter((r) => (seen.has(r.id) ? false : (seen.add(r.id), true)));
}

const TRIAL_COLUMNS: Array<Column<TrialRowOut>> = [
  { name: 'id', shape: 'string', value: (r) => r.id },
  { name: 'job_id', shape: 'string', value: (r) => r.job_id },
  { name: 'job', shape: 'string', value: (r) => r.job },
  { name: 'trial_id', shape: 'string', value: (r) => r.trial_id },
  { name: 'task', shape: 'string', value: (r) => r.task },
  { name: 'task_checksum', shape: 'string', value: (r) => r.task_checksum },
  { name: 'config', shape: 'string', value: (r) => r.config },
  { name: 'agent', shape: 'string', value: (r) => r.agent },
  { name: 'model', shape: 'string', value: (r) => r.model },
  { name: 'attempt', shape: 'int64', value: (r) => r.attempt },
  { name: 'reward', shape: 'double', value: (r) => r.reward },
  { name: 'rewards', shape: 'string', value: (r) => r.rewards },
  { name: 'steps', shape: 'string', value: (r) => r.steps },
  { name: 'task_version', shape: 'string', value: (r) => r.task_version },
  { name: 'dataset_name', shape: 'string', value: (r) => r.dataset_name },
  { name: 'dataset_version', shape: 'string', value: (r) => r.dataset_version },
  { name: 'status', shape: 'string', value: (r) => r.status },
  { name: 'error_class', shape: 'string', value: (r) => r.error_class },
  { name: 'exit_reason', shape: 'string', value: (r) => r.exit_reason },
  {
    name: 'tests',
    shape: { list: { struct: { name: 'string', status: 'string', message: 'string' } } },
    value: (r) => r.tests,
  },
  { name: 'messages', shape: { list: MESSAGE }, value: (r) => r.messages },
  { name: 'tools', shape: 'string', value: (r) => r.tools },
  { name: 'trajectory', shape: 'string', value: (r) => r.trajectory },
  { name: 'input_tokens', shape: 'int64', value: (r) => r.input_tokens },
  { name: 'cached_tokens', shape: 'int64', value: (r) => r.cached_tokens },
  { name: 'output_tokens', shape: 'int64', value: (r) => r.output_tokens },
  { name: 'cost_usd', shape: 'double', value: (r) => r.cost_usd },
  { name: 'duration_ms', shape: 'double', value: (r) => r.duration_ms },
  { name: 'phases', shape: 'string', value: (r) => r.phases },
  { name: 'image_id', shape: 'string', value: (r) => r.image_id },
];

/** Which jobs the rows come from, as the card says it. */
function jobsLine(rows: TrialRowOut[]): string {
  const jobs = new Map<string, { name: string; trials: number }>();
  for (const r of rows) {
    const j = jobs.get(r.job_id) ?? { name: r.job, trials: 0 };
    j.trials += 1;
    jobs.set(r.job_id, j);
  }
  const line = combiningLine([...jobs.values()]);
  return line ? `\n${line[0]!.toUpperCase()}${line.slice(1)}.\n` : '';
}

function datasetCard(rows: TrialRowOut[]): string {
  const configs = [...new Set(rows.map((r) => r.config))].sort();
  const tasks = new Set(rows.map((r) => r.task)).size;
  const graded = rows.filter((r) => r.status === 'graded').length;
  return `---
configs:
  - config_name: default
    data_files: data/*.parquet
---
# Terminal-agent trials (termgrade export)

${rows.length} trials of ${configs.length} configuration(s) on ${tasks} task(s); ${graded} graded, ${rows.length - graded} without a reward (infrastructure or verifier failures: \`reward\` is null, never 0).

Configurations: ${configs.map((c) => `\`${c}\``).join(', ')}.
${jobsLine(rows)}

## Columns
- \`id\`: the trial's identity, \`job_id/trial_id\`, unique across jobs (a \`trial_id\` is unique only within its job: two jobs of the same tasks and configurations repeat them).
- \`job_id\`, \`job\` (the job's folder name), \`trial_id\`, \`task\`, \`config\`, \`agent\`, \`model\`, \`attempt\`: which trial; \`task_checksum\`: the task content it ran (Harbor's \`task_checksum\` for an imported trial).
- \`reward\` (null without a grade; the primary reward, the one rates use), \`rewards\` (every named reward as JSON text, reward.json's keys), \`steps\` (a multi-step trial's steps as JSON text: name, reward, rewards, stoppedTrial; \`[]\` otherwise), \`task_version\`, \`dataset_name\`, \`dataset_version\`, \`status\` (\`graded\`, \`infra\`, \`ungraded\`), \`error_class\`, \`exit_reason\`.
- \`tests\`: per-test results (\`name\`, \`status\`, \`message\`).
- \`messages\`: the episode in OpenAI chat format (\`role\`, \`content\`, \`tool_calls\` with \`arguments\` as JSON text, \`tool_call_id\`), ready for a chat template; \`tools\`: the tool schemas as JSON text.
- \`trajectory\`: the full ATIF v1.7 trajectory as JSON text, with per-turn token ids and logprobs where the server returned them.
- \`input_tokens\`, \`cached_tokens\`, \`output_tokens\`, \`cost_usd\`, \`duration_ms\`, \`phases\` (JSON text), \`image_id\`.
`;
}

/** Trials as a Hugging Face-style dataset folder: data/trials.parquet (or .jsonl) and a card. */
export async function exportTrials(
  sources: string[],
  outDir: string,
  options: { format?: 'parquet' | 'jsonl' } = {},
): Promise<{ rows: number; file: string }> {
  const rows = await collectTrialRows(sources);
  await mkdir(path.join(outDir, 'data'), { recursive: true });
  const file = path.join(outDir, 'data', options.format === 'jsonl' ? 'trials.jsonl' : 'trials.parquet');
  if (options.format === 'jsonl') await writeFile(file, rows.map((r) => `${JSON.stringify(r)}\n`).join(''));
  else await writeParquet(file, rows, TRIAL_COLUMNS);
  await writeFile(path.join(outDir, 'README.md'), datasetCard(rows));
  return { rows: rows.length, file };
}
