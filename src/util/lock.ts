import { link, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CancelledError, ifMissing, isMissing } from './errors.js';
import { processAlive } from './process-alive.js';

/** A lock file without a readable owner (left by an older termgrade) is stale once it is old. */
async function olderThan(file: string, ms: number): Promise<boolean> {
  try {
    return Date.now() - (await stat(file)).mtimeMs > ms;
  } catch (err) {
    if (isMissing(err)) return true; // released meanwhile: try to take it
    throw err;
  }
}

/**
 * Runs `work` holding a machine-wide lock named `name` (a file in the temp folder holding the
 * owner's pid). A lock whose owner died is taken over; waiting stops when `signal` aborts.
 * Used so two termgrade processes never build the same image at once.
 */
export async function withFileLock<T>(name: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const file = path.join(tmpdir(), `termgrade-${name.replace(/[^A-Za-z0-9._-]/g, '_')}.lock`);
  // The lock file appears with its owner's pid already in it (written aside, then hard-linked into
  // place), so a process killed at any instant never leaves a lock nobody can judge.
  const mine = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  await writeFile(mine, String(process.pid));
  try {
    for (;;) {
      if (signal?.aborted) throw new CancelledError('waiting for a lock');
      try {
        await link(mine, file);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const text = (await ifMissing(readFile(file, 'utf8'), '')).trim(); // released meanwhile
        const owner = Number(text);
        const stale = Number.isInteger(owner) && owner > 0 ? !processAlive(owner) : await olderThan(file, 10_000);
        if (stale) {
          await rm(file, { force: true });
          continue;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  } finally {
    await rm(mine, { force: true });
  }
  try {
    return await work();
  } finally {
    await rm(file, { force: true });
  }
}

/** A lock held by this process until `release` is called (or the process dies). */
export interface HeldLock {
  release(): Promise<void>;
}

/**
 * Takes the lock file `file` at once, or fails with the live owner's pid: for work that must have
 * one process at a time and should not wait (a job has one writer). A lock whose owner died is
 * taken over.
 */
export async function takeLockNow(file: string): Promise<HeldLock | { ownerPid: number }> {
  const mine = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  await writeFile(mine, String(process.pid));
  try {
    for (let tries = 0; tries < 5; tries++) {
      try {
        await link(mine, file);
        return { release: () => rm(file, { force: true }) };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const owner = Number((await ifMissing(readFile(file, 'utf8'), '')).trim()); // released meanwhile
        const stale = Number.isInteger(owner) && owner > 0 ? !processAlive(owner) : await olderThan(file, 10_000);
        if (!stale) return { ownerPid: owner };
        await rm(file, { force: true });
      }
    }
    throw new Error(`cannot take the lock ${file}`);
  } finally {
    await rm(mine, { force: true });
  }
}
