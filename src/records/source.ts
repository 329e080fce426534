import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { JobStore } from '../store/store.js';
import { TermgradeError, ifMissing } from '../util/errors.js';

/**
 * What a path given as records is, decided in one place for every command that reads records
 * (stats, report, export, view, harbor export): a job folder (a job.db inside), another folder (a
 * check output, a folder of trial folders, a jobs folder), or a file (JSONL). A path that does not
 * exist is bad input naming it, whatever the command.
 */
export type RecordSource =
  { kind: 'job'; dir: string } | { kind: 'folder'; dir: string } | { kind: 'file'; file: string };

/** A job's folder: its name under the jobs folder. */
export const jobDirOf = (jobsDir: string, name: string): string => path.resolve(jobsDir, name);
/** The store file of a job folder. */
export const jobDbOf = (jobDir: string): string => path.join(jobDir, 'job.db');

/** Whether `dir` is a job folder (holds a job.db). */
export const isJobFolder = (dir: string): boolean => existsSync(jobDbOf(dir));

export async function recordSource(source: string): Promise<RecordSource> {
  const st = await ifMissing(stat(source), null);
  if (!st) throw new TermgradeError('bad_input', `${source}: no such file or folder`);
  if (!st.isDirectory()) return { kind: 'file', file: source };
  return isJobFolder(source) ? { kind: 'job', dir: source } : { kind: 'folder', dir: source };
}

/**
 * A job folder's store, opened read-only: how every reader of a job's records opens it (only the
 * job that writes it opens it writable). A damaged or newer store says so (store_error).
 */
export function openJobRecords(dir: string): JobStore {
  return JobStore.open(jobDbOf(dir), { readonly: true });
}
