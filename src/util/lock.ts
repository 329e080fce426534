import { open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CancelledError } from './errors.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs `work` holding a machine-wide lock named `name` (a file in the temp folder holding the
 * owner's pid). A lock whose owner died is taken over; waiting stops when `signal` aborts.
 * Used so two termgrade processes never build the same image at once.
 */
export async function withFileLock<T>(name: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const file = path.join(tmpdir(), `termgrade-${name.replace(/[^A-Za-z0-9._-]/g, '_')}.lock`);
  for (;;) {
    if (signal?.aborted) throw new CancelledError('waiting for a lock');
    try {
      const fh = await open(file, 'wx');
      await fh.writeFile(String(process.pid));
      await fh.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = Number((await readFile(file, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(owner) && owner > 0 && !alive(owner)) {
        await rm(file, { force: true });
        continue;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  try {
    return await work();
  } finally {
    await rm(file, { force: true });
  }
}
