import { exportSelection } from '../export/tasks.js';
import { exportTrials } from '../export/trials.js';
import { EXIT } from './signals.js';
import { exportHarborJobs } from '../harbor/export-job.js';
import { TermgradeError } from '../util/errors.js';

export async function exportTrialsCommand(
  sources: string[],
  flags: { out: string; jsonl?: boolean; format?: 'parquet' | 'jsonl' | 'harbor-job' },
): Promise<number> {
  if (flags.format === 'harbor-job') {
    if (flags.jsonl) throw new TermgradeError('usage', '--jsonl and --format harbor-job: choose one');
    for (const j of await exportHarborJobs(sources, flags.out))
      process.stdout.write(
        `exported job ${j.name}: ${j.trials} trials in Harbor's job layout at ${j.dir} (harbor view ${flags.out})\n`,
      );
    return EXIT.ok;
  }
  const r = await exportTrials(sources, flags.out, {
    format: flags.jsonl || flags.format === 'jsonl' ? 'jsonl' : 'parquet',
  });
  process.stdout.write(`exported ${r.rows} trials to ${r.file} (dataset card: ${flags.out}/README.md)\n`);
  return EXIT.ok;
}

export async function exportTasksCommand(flags: {
  selection: string;
  tasks: string[];
  out: string;
  agentName: string;
}): Promise<number> {
  const r = await exportSelection(flags.selection, flags.tasks, flags.out, { agentName: flags.agentName });
  process.stdout.write(
    `exported ${r.train} training and ${r.validation} validation tasks to ${flags.out} (task folders in train/ and validation/, verl rows in rl/)\n`,
  );
  return EXIT.ok;
}
