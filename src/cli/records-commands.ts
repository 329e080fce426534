// `trials` and `import`: commands over a job's records that run no trial, in a module of their own
// so they load the store and the Harbor reader, not the Docker client, the model client and the
// scheduler that `run` needs (half the start-up of a command that only reads).
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { importHarbor } from '../harbor/import-job.js';
import { isJobFolder, jobDbOf, jobDirOf, openJobRecords } from '../records/source.js';
import { JobStore, type TrialStatus } from '../store/store.js';
import { ifMissing, TermgradeError } from '../util/errors.js';
import { outermostMissing, removeMade } from '../util/files.js';
import { EXIT } from './signals.js';
import { table } from './table.js';

function openStore(jobsDir: string, name: string): JobStore {
  const dir = jobDirOf(jobsDir, name);
  if (!isJobFolder(dir)) throw new TermgradeError('usage', `no job "${name}" in ${path.resolve(jobsDir)}`);
  return openJobRecords(dir); // a damaged store says so (exit 5)
}

export async function trialsCommand(flags: {
  job: string;
  jobsDir: string;
  json?: boolean;
  status?: TrialStatus;
}): Promise<number> {
  const store = openStore(flags.jobsDir, flags.job);
  try {
    if (flags.json) {
      // One write per chunk of lines: 100,000 rows should not be 100,000 syscalls.
      let buf = '';
      for (const row of store.listTrials({ status: flags.status })) {
        buf += `${JSON.stringify(row)}\n`;
        if (buf.length > 1 << 16) {
          process.stdout.write(buf);
          buf = '';
        }
      }
      process.stdout.write(buf);
      return EXIT.ok;
    }
    const rows = [...store.listTrials({ status: flags.status })];
    process.stdout.write(
      `${table(
        ['trial', 'config', 'task', 'attempt', 'status', 'reward', 'error class', 'tests passed', 'runs'],
        rows.map((r) => [
          r.trial_id,
          r.config,
          r.task,
          r.attempt,
          r.status,
          r.reward ?? '-',
          r.error_class ?? '',
          `${r.tests_passed}/${r.tests_total}`,
          r.infra_attempts,
        ]),
      )}\n${rows.length} trials\n`,
    );
    return EXIT.ok;
  } finally {
    store.close();
  }
}

export async function importCommand(dir: string, flags: { job: string; jobsDir: string }): Promise<number> {
  const st = await ifMissing(stat(dir), null);
  if (!st) throw new TermgradeError('bad_input', `${dir}: no such folder`);
  if (!st.isDirectory())
    throw new TermgradeError('bad_input', `${dir}: not a folder (a Harbor jobs folder, job folder or trial folder)`);
  const jobDir = jobDirOf(flags.jobsDir, flags.job);
  // A job this import makes is removed again when nothing is imported, with the folders made for it
  // (the jobs folder too): a failed import leaves nothing behind.
  const made = outermostMissing(jobDir);
  const store = JobStore.open(jobDbOf(jobDir));
  let result: { imported: number; skipped: string[] };
  try {
    result = await importHarbor(path.resolve(dir), store);
  } catch (err) {
    store.close();
    if (made) await removeMade(jobDir, made);
    throw err;
  }
  store.close();
  const { imported, skipped } = result;
  for (const s of skipped) process.stderr.write(`skipped ${s}\n`);
  if (imported === 0) {
    if (made) await removeMade(jobDir, made);
    // Every trial already imported is not an error: the job holds them.
    if (skipped.length && skipped.every((s) => s.includes('already imported as'))) {
      process.stdout.write(`nothing new: every Harbor trial under ${dir} is already in job ${flags.job}\n`);
      return EXIT.ok;
    }
    throw new TermgradeError(
      'bad_input',
      `${dir}: no Harbor trial results to import (a trial folder's result.json with task_name and verifier_result or exception_info)${made ? `; job ${flags.job} was not made` : ''}`,
    );
  }
  process.stdout.write(`imported ${imported} Harbor trials into job ${flags.job} (${jobDbOf(jobDir)})\n`);
  return EXIT.ok;
}
