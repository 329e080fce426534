import { readHarborJobFile } from '../harbor/read-config.js';
import type { JobSpec } from '../job/spec.js';
import { TermgradeError } from '../util/errors.js';
import type { RunFlags } from './job-commands.js';

/**
 * `run -c job.yaml` (Harbor's spelling) or `--config FILE`: the job file. `-c N` stays the
 * concurrency. `jobsDirIsDefault` lets a Harbor config's jobs_dir apply when --jobs-dir was not given.
 */
export function harborRunArgs(
  file: string | undefined,
  opts: RunFlags & { config?: string; concurrency?: number | string },
  jobsDirIsDefault: boolean,
): [string | undefined, RunFlags] {
  const { config, concurrency, ...rest } = opts;
  const fromC = typeof concurrency === 'string' ? concurrency : undefined;
  const given = [file, fromC, config].filter((f): f is string => f !== undefined);
  if (given.length > 1) throw new TermgradeError('usage', `give one job file (got ${given.join(', ')})`);
  return [given[0], { ...rest, ...(typeof concurrency === 'number' ? { concurrency } : {}), jobsDirIsDefault }];
}

/**
 * A Harbor job config read for `run`: its warning printed once, its jobs_dir used unless
 * --jobs-dir was given. Null when the file is a termgrade job file.
 */
export async function readHarborRunFile(file: string, flags: RunFlags): Promise<JobSpec | null> {
  const harbor = await readHarborJobFile(file);
  if (!harbor) return null;
  if (harbor.warning) process.stderr.write(`termgrade: warning: ${harbor.warning}\n`);
  if (harbor.jobsDir && flags.jobsDirIsDefault) flags.jobsDir = harbor.jobsDir;
  return harbor.spec;
}
