import { existsSync } from 'node:fs';
import path from 'node:path';
import { JobStore } from './store.js';

/**
 * A trial's identity across jobs. Trial ids are made from task, configuration and attempt, so two
 * jobs of the same tasks and configurations hold the same ids: a trial is its job's id and its
 * trial id together, wherever records of several jobs meet (stats, report, view, export).
 */
export const trialKey = (job: string, trialId: string): string => `${job}\u0000${trialId}`;

/** A job as the tools that combine several name it: its id, a short name, and where it was read. */
export interface JobRef {
  id: string;
  name: string;
  source: string;
}

/**
 * The job a trial folder's result.json belongs to, for sources given as folders of trial folders:
 * a job's own `trials/` folder answers with that job's id (so the folder and the job given together
 * are one job), any other folder with its real path (two check outputs are two jobs).
 */
export class TrialFolderJobs {
  private readonly known = new Map<string, JobRef>();

  of(resultFile: string): JobRef {
    const parent = path.dirname(path.dirname(path.resolve(resultFile)));
    let ref = this.known.get(parent);
    if (!ref) {
      const db = path.join(path.dirname(parent), 'job.db');
      if (path.basename(parent) === 'trials' && existsSync(db)) {
        const store = JobStore.open(db, { readonly: true });
        try {
          ref = { id: store.jobId(), name: path.basename(path.dirname(parent)), source: path.dirname(parent) };
        } finally {
          store.close();
        }
      } else
        ref = {
          id: `path:${parent}`,
          name: path.basename(path.basename(parent) === 'trials' ? path.dirname(parent) : parent),
          source: parent,
        };
      this.known.set(parent, ref);
    }
    return ref;
  }
}

/** What a tool that combines several jobs says about it; null for one job (nothing combined). */
export function combiningLine(jobs: ReadonlyArray<{ name: string; trials: number }>): string | null {
  if (jobs.length < 2) return null;
  return `combining ${jobs.length} jobs: ${jobs.map((j) => `${j.name} (${j.trials} trial${j.trials === 1 ? '' : 's'})`).join(', ')}`;
}
