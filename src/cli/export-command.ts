import { exportSelection, exportTrials } from '../index.js';
import { EXIT } from './signals.js';

export async function exportTrialsCommand(sources: string[], flags: { out: string; jsonl?: boolean }): Promise<number> {
  const r = await exportTrials(sources, flags.out, { format: flags.jsonl ? 'jsonl' : 'parquet' });
  process.stdout.write(`exported ${r.rows} trials to ${r.file} (dataset card: ${flags.out}/README.md)\n`);
  return EXIT.ok;
}

export async function exportTasksCommand(flags: { selection: string; tasks: string[]; out: string; agentName: string }): Promise<number> {
  const r = await exportSelection(flags.selection, flags.tasks, flags.out, { agentName: flags.agentName });
  process.stdout.write(`exported ${r.train} training and ${r.validation} validation tasks to ${flags.out} (task folders in train/ and validation/, verl rows in rl/)\n`);
  return EXIT.ok;
}
