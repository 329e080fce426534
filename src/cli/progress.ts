import { fstatSync } from 'node:fs';
import cliProgress from 'cli-progress';
import type { CheckEvent } from '../check/check.js';
import { taskBlock, taskLine } from './format.js';

/**
 * Whether stdout and stderr are one and the same file, pipe or terminal (`2>&1`, or a terminal for
 * both): then what the progress display printed is already where the final report goes.
 */
export function stdoutIsStderr(): boolean {
  try {
    const out = fstatSync(1);
    const err = fstatSync(2);
    return out.dev === err.dev && out.ino === err.ino;
  } catch {
    return false; // a closed descriptor: print both, the safe side
  }
}

/**
 * Live progress on stderr: a bar with the task count and what is running when stderr is a
 * terminal, else one line per finished task (readable in CI logs). `whole`: each finished task's
 * whole block (problems and warnings too), for when the final report will not list the tasks.
 */
export function checkProgress(
  total: number,
  quiet: boolean,
  whole = false,
): { onEvent: (e: CheckEvent) => void; stop: () => void; listed: ReadonlyMap<string, string> } {
  const listed = new Map<string, string>();
  const shown = (t: Parameters<typeof taskLine>[0]): string => {
    if (!whole) return taskLine(t);
    const block = taskBlock(t).join('\n');
    listed.set(t.path, block);
    return block;
  };
  if (quiet) return { onEvent: () => {}, stop: () => {}, listed };
  let done = 0;
  if (!process.stderr.isTTY) {
    return {
      onEvent: (e) => {
        if (e.type !== 'task-done') return;
        done += 1;
        process.stderr.write(`[${done}/${total}] ${shown(e.task)}\n`);
      },
      stop: () => {},
      listed,
    };
  }
  const running = new Map<string, string>();
  const multi = new cliProgress.MultiBar(
    {
      format: 'check [{bar}] {value}/{total} | {running}',
      stream: process.stderr,
      hideCursor: true,
      clearOnComplete: true,
    },
    cliProgress.Presets.shades_classic,
  );
  const bar = multi.create(total, 0, { running: '' });
  const show = (): string => [...running.values()].join(', ').slice(0, 80);
  return {
    onEvent: (e) => {
      if (e.type === 'phase') running.set(e.path, `${e.path.split('/').pop()}:${e.phase}${e.run ? e.run : ''}`);
      if (e.type === 'task-done') {
        running.delete(e.task.path);
        done += 1;
        multi.log(`${shown(e.task)}\n`);
      }
      bar.update(done, { running: show() });
    },
    stop: () => multi.stop(),
    listed,
  };
}
