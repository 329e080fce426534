import { readFile, writeFile } from 'node:fs/promises';
import { sleep } from '../../util/time.js';
import { ifMissing, isMissing } from '../../util/errors.js';
import { causeOf, log, logged } from '../../util/log.js';

/**
 * Freezes a container's processes through its cgroup on this machine, as the engine's pause does
 * through runc, without the engine: a pause and an unpause cost the engine ~90 ms each of its
 * time (a runc process, state updates, events), the two writes here well under a millisecond
 * (bench/job-throughput; the engine is the bottleneck of many trials on few cores). Only used
 * around the copy of the agent's layer, a few milliseconds, with nothing else asking the engine
 * for that container meanwhile.
 */
export interface Freezer {
  /** Every process of the cgroup stopped; throws (having thawed it) when they do not all stop in time. */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
}

/** How long freezing may take before the processes are taken as unfreezable (a fork bomb outruns it). */
const FREEZE_DEADLINE_MS = 2000;

export interface CgroupFiles {
  /** The container's cgroup folder (in the freezer hierarchy for cgroup v1). */
  dir: string;
  /** The name of the file in a cgroup folder written to freeze and thaw it. */
  controlName: string;
  /** The file written to freeze and thaw. */
  control: string;
  frozenValue: string;
  thawedValue: string;
  /** Whether the cgroup reports itself frozen. */
  isFrozen(): Promise<boolean>;
}

/** The container's freezer files from its init's /proc entry: cgroup v1's freezer, or v2's cgroup.freeze. */
export function filesOf(procCgroup: string, containerId: string): CgroupFiles | null {
  const lines = procCgroup.split('\n');
  const v1 = lines.map((l) => /^\d+:freezer:(\/.*)$/.exec(l)?.[1]).find(Boolean);
  if (v1) {
    if (!v1.includes(containerId)) return null;
    const dir = `/sys/fs/cgroup/freezer${v1}`;
    return {
      dir,
      controlName: 'freezer.state',
      control: `${dir}/freezer.state`,
      frozenValue: 'FROZEN',
      thawedValue: 'THAWED',
      isFrozen: async () => (await readFile(`${dir}/freezer.state`, 'utf8')).trim() === 'FROZEN',
    };
  }
  const v2 = lines.map((l) => /^0::(\/.*)$/.exec(l)?.[1]).find(Boolean);
  if (v2 && v2.includes(containerId)) {
    const dir = `/sys/fs/cgroup${v2}`;
    return {
      dir,
      controlName: 'cgroup.freeze',
      control: `${dir}/cgroup.freeze`,
      frozenValue: '1',
      thawedValue: '0',
      isFrozen: async () => /^frozen 1$/m.test(await readFile(`${dir}/cgroup.events`, 'utf8')),
    };
  }
  return null;
}

/**
 * The freezer of the container whose init has `pid` on this machine; null when its cgroup cannot be
 * found or written here (a remote engine, no privileges): the caller asks the engine to pause.
 */
export async function cgroupFreezer(pid: number, containerId: string): Promise<Freezer | null> {
  if (!pid) return null;
  const procCgroup = await ifMissing(readFile(`/proc/${pid}/cgroup`, 'utf8'), null);
  const files = procCgroup ? filesOf(procCgroup, containerId) : null;
  if (!files) return null;
  try {
    // Thawing a running cgroup changes nothing: this proves the file can be written before relying on it.
    await writeFile(files.control, files.thawedValue);
  } catch (err) {
    // Not writable here (no privileges, a read-only cgroup file system): the engine pauses instead.
    log.debug("cannot write a container's freezer (the engine pauses it)", { cause: causeOf(err) });
    return null;
  }
  const thaw = (): Promise<void> => writeFile(files.control, files.thawedValue);
  return {
    async freeze() {
      const deadline = performance.now() + FREEZE_DEADLINE_MS;
      try {
        // Written again on each look: a process forked while the cgroup was freezing can leave it
        // "FREEZING" in cgroup v1 until asked once more (runc does the same).
        for (;;) {
          await writeFile(files.control, files.frozenValue);
          if (await files.isFrozen()) return;
          if (performance.now() > deadline) throw new Error(`not all stopped within ${FREEZE_DEADLINE_MS} ms`);
          await sleep(5);
        }
      } catch (err) {
        // The cgroup is gone when the container stopped meanwhile: nothing is left to thaw.
        await thaw().catch(logged('thaw a cgroup that did not freeze', undefined, { expected: isMissing }));
        throw new Error(`the container's processes could not freeze: ${(err as Error).message}`, { cause: err });
      }
    },
    thaw,
  };
}
