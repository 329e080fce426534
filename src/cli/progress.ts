import cliProgress from 'cli-progress';
import type { CheckEvent } from '../check/check.js';
import { taskLine } from './format.js';

/**
 * Live progress on stderr: a bar with the task count and what is running when stderr is a
 * terminal, else one line per finished task (readable in CI logs).
 */
export function checkProgress(total: number, quiet: boolean): { onEvent: (e: CheckEvent) => void; stop: () => void } {
  if (quiet) return { onEvent: () => {}, stop: () => {} };
  let done = 0;
  if (!process.stderr.isTTY) {
    return {
      onEvent: (e) => {
        if (e.type !== 'task-done') return;
        done += 1;
        process.stderr.write(`[${done}/${total}] ${taskLine(e.task)}\n`);
      },
      stop: () => {},
    };
  }
  const running = new Map<string, string>();
  const multi = new cliProgress.MultiBar(
    { format: 'check [{bar}] {value}/{total} | {running}', stream: process.stderr, hideCursor: true, clearOnComplete: true },
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
        multi.log(`${taskLine(e.task)}\n`);
      }
      bar.update(done, { running: show() });
    },
    stop: () => multi.stop(),
  };
}
