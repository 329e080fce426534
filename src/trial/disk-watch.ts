import { DEFAULT_DISK_LIMIT_MB, taskDiskLimitMb, type Sandbox } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { causeOf, log } from '../util/log.js';
import type { TrialTimeouts } from './options.js';

export { DEFAULT_DISK_LIMIT_MB };

/** Disk an agent may write on top of its image: the run's --disk-limit, else the task's (taskDiskLimitMb). */
export function diskLimitMb(task: Task, t: TrialTimeouts): number {
  return t.diskLimitMb ?? taskDiskLimitMb(task);
}

export interface DiskWatch {
  /** Aborts once the sandbox's disk use passed the limit. */
  signal: AbortSignal;
  over: () => boolean;
  message: () => string;
  stop: () => void;
}

/**
 * Polls the sandbox's disk use while the agent works and aborts the agent once it passes the
 * limit: an agent must not fill the host's disk. Checked every few seconds (the engine walks the
 * sandbox's files to answer), so a fast writer can pass the limit by a few seconds' worth. A
 * reading that fails is logged (the first of a run of failures, then every twelfth), never
 * dropped silently.
 */
export function watchDisk(sandbox: Sandbox, limitMb: number, everyMs = 5000): DiskWatch {
  const ctl = new AbortController();
  let used = 0;
  let busy = false;
  let failures = 0;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    sandbox
      .diskUsage()
      .then((bytes) => {
        if (bytes !== null && bytes > limitMb * 1024 * 1024 && !ctl.signal.aborted) {
          used = bytes;
          ctl.abort();
        }
      })
      .then(
        () => (failures = 0),
        (err: unknown) => {
          // The limit is still held at the end of the turn (the copy measures the layer first), but
          // meanwhile the agent could fill the host's disk: an operator must hear of it.
          if (failures++ % 12 === 0)
            log.warn(
              "could not read a sandbox's disk use; its disk limit is held only when its turn ends until this passes",
              {
                failures,
                cause: causeOf(err),
              },
            );
        },
      )
      .finally(() => {
        busy = false;
      });
  }, everyMs);
  return {
    signal: ctl.signal,
    over: () => ctl.signal.aborted,
    message: () =>
      `the agent wrote ${Math.round(used / 1024 / 1024)} MB to the sandbox's disk, over its limit of ${limitMb} MB; it was stopped and its work graded`,
    stop: () => clearInterval(timer),
  };
}
