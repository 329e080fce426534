import { appendFile, cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml, stringify as stringifyToml, TomlError } from 'smol-toml';
import { findTaskDirs, loadTask } from '../task/load.js';
import type { Task } from '../task/task.js';
import { TermgradeError } from '../util/errors.js';
import { writeParquet, type Column } from './parquet.js';

interface ManifestRow {
  task: string;
  trials: number;
  successes: number;
  rate: number;
  interval?: [number, number];
}

interface Manifest {
  model?: string;
  training?: ManifestRow[];
  validation?: ManifestRow[];
}

/** A row of verl's RL dataset (data_source, prompt, ability, reward_model, extra_info) plus agent_name. */
export interface VerlRow {
  data_source: string;
  prompt: Array<{ role: string; content: string }>;
  ability: string;
  reward_model: { style: string; ground_truth: string };
  agent_name: string;
  extra_info: {
    task: string;
    task_dir: string;
    image: string | null;
    k: number;
    successes: number;
    rate: number;
    interval_lo: number | null;
    interval_hi: number | null;
    split: string;
    config: string | null;
  };
}

const VERL_COLUMNS: Array<Column<VerlRow>> = [
  { name: 'data_source', shape: 'string', value: (r) => r.data_source },
  { name: 'prompt', shape: { list: { struct: { role: 'string', content: 'string' } } }, value: (r) => r.prompt },
  { name: 'ability', shape: 'string', value: (r) => r.ability },
  {
    name: 'reward_model',
    shape: { struct: { style: 'string', ground_truth: 'string' } },
    value: (r) => r.reward_model,
  },
  { name: 'agent_name', shape: 'string', value: (r) => r.agent_name },
  {
    name: 'extra_info',
    shape: {
      struct: {
        task: 'string',
        task_dir: 'string',
        image: 'string',
        k: 'int64',
        successes: 'int64',
        rate: 'double',
        interval_lo: 'double',
        interval_hi: 'double',
        split: 'string',
        config: 'string',
      },
    },
    value: (r) => r.extra_info,
  },
];

/** task.toml with the measurement under [metadata.termgrade]; comments and layout kept where possible. */
async function annotate(tomlFile: string, measured: Record<string, unknown>): Promise<void> {
  const text = await readFile(tomlFile, 'utf8');
  const table = `\n# Measured by termgrade: this task's success rate for the configuration that selected it.\n${stringifyToml({ metadata: { termgrade: measured } })}\n`;
  try {
    parseToml(text + table);
    await appendFile(tomlFile, table);
  } catch (err) {
    if (!(err instanceof TomlError)) throw err;
    // [metadata] written inline, say: rewrite the whole file instead.
    const doc = parseToml(text) as { metadata?: Record<string, unknown> };
    doc.metadata = { ...doc.metadata, termgrade: measured };
    await writeFile(tomlFile, stringifyToml(doc));
  }
}

/**
 * A `select` output as training data: Harbor task folders (`train/`, `validation/`) whose task.toml
 * carries the measured rate, interval, trials and configuration under [metadata.termgrade], and
 * verl's RL dataset rows (`rl/train.parquet`, `rl/validation.parquet`; `agent_name` picks the
 * agent loop per row).
 */
export async function exportSelection(
  selectionDir: string,
  taskPaths: string[],
  outDir: string,
  options: { agentName?: string; dataSource?: string } = {},
): Promise<{ train: number; validation: number }> {
  const manifestFile = path.join(selectionDir, 'manifest.json');
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(manifestFile, 'utf8')) as Manifest;
  } catch (err) {
    throw new TermgradeError(
      'bad_input',
      `${manifestFile}: cannot read the selection manifest (${(err as Error).message})`,
    );
  }
  const tasks = new Map<string, Task>();
  for (const dir of await findTaskDirs(taskPaths)) {
    const t = await loadTask(dir);
    tasks.set(t.name, t);
  }
  const counts = { train: 0, validation: 0 };
  for (const [split, rows] of [
    ['train', manifest.training ?? []],
    ['validation', manifest.validation ?? []],
  ] as const) {
    const verl: VerlRow[] = [];
    for (const row of rows) {
      const task = tasks.get(row.task);
      if (!task)
        throw new TermgradeError(
          'bad_input',
          `${manifestFile}: task "${row.task}" is selected but no task folder given holds it`,
        );
      const dest = path.join(outDir, split, path.basename(task.path));
      await mkdir(path.dirname(dest), { recursive: true });
      await cp(task.path, dest, { recursive: true, verbatimSymlinks: true });
      const interval = row.interval ?? null;
      await annotate(path.join(dest, 'task.toml'), {
        rate: row.rate,
        interval: interval ?? [],
        trials: row.trials,
        successes: row.successes,
        config: manifest.model ?? '',
        split,
      });
      verl.push({
        data_source: options.dataSource ?? 'termgrade',
        prompt: [{ role: 'user', content: task.instruction }],
        ability: 'terminal',
        reward_model: { style: 'rule', ground_truth: task.name },
        agent_name: options.agentName ?? 'termgrade_agent',
        extra_info: {
          task: task.name,
          task_dir: path.resolve(dest),
          image: task.environment.kind === 'image' ? task.environment.image : task.environment.prebuilt,
          k: row.trials,
          successes: row.successes,
          rate: row.rate,
          interval_lo: interval?.[0] ?? null,
          interval_hi: interval?.[1] ?? null,
          split,
          config: manifest.model ?? null,
        },
      });
      counts[split] += 1;
    }
    await mkdir(path.join(outDir, 'rl'), { recursive: true });
    await writeParquet(path.join(outDir, 'rl', `${split}.parquet`), verl, VERL_COLUMNS);
  }
  return counts;
}
