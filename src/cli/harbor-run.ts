import path from 'node:path';
import { readHarborJobFile } from '../harbor/read-config.js';
import type { JobSpec } from '../job/spec.js';
import { TermgradeError } from '../util/errors.js';
import type { RunFlags } from './job-commands.js';

/** `run -c job.yaml` (Harbor's spelling) or `--config FILE`: the job file. `-c N` stays the concurrency. */
export function harborRunArgs(
  file: string | undefined,
  opts: RunFlags & { config?: string; concurrency?: number | string },
): [string | undefined, RunFlags] {
  const { config, concurrency, ...rest } = opts;
  const fromC = typeof concurrency === 'string' ? concurrency : undefined;
  const given = [file, fromC, config].filter((f): f is string => f !== undefined);
  if (given.length > 1) throw new TermgradeError('usage', `give one job file (got ${given.join(', ')})`);
  return [given[0], { ...rest, ...(typeof concurrency === 'number' ? { concurrency } : {}) }];
}

/**
 * A Harbor job config read for `run`, its warning printed once; null when the file is a termgrade
 * job file. Its jobs_dir is where the run writes Harbor's job folder (the spec's harborJobsDir);
 * termgrade's own store stays in --jobs-dir.
 */
export async function readHarborRunFile(file: string): Promise<JobSpec | null> {
  const harbor = await readHarborJobFile(file);
  if (!harbor) return null;
  if (harbor.warning) process.stderr.write(`termgrade: warning: ${harbor.warning}\n`);
  return harbor.spec;
}

/**
 * `run --format harbor` (`--harbor-jobs-dir DIR`, default Harbor's `jobs`): the job also keeps
 * Harbor's job folder. Refused where it would be termgrade's own job folder (one folder, two layouts).
 */
export function harborJobsDirOf(spec: JobSpec, flags: RunFlags): string | undefined {
  if (flags.format !== undefined && flags.format !== 'harbor' && flags.format !== 'termgrade')
    throw new TermgradeError('usage', `--format ${flags.format}: choose harbor or termgrade`);
  const dir =
    flags.harborJobsDir !== undefined || flags.format === 'harbor'
      ? path.resolve(flags.harborJobsDir ?? 'jobs')
      : flags.format === 'termgrade'
        ? undefined
        : spec.harborJobsDir;
  if (dir && path.resolve(flags.jobsDir, spec.name) === path.resolve(dir, spec.name))
    throw new TermgradeError(
      'usage',
      `${path.resolve(dir, spec.name)} would hold both termgrade's store and Harbor's job folder: give another --jobs-dir (termgrade's) or --harbor-jobs-dir (Harbor's)`,
    );
  return dir;
}
