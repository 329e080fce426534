import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { processAlive } from '../../util/process-alive.js';

/** Every container termgrade starts carries these, so leftovers of a killed run can be found. */
export const LABEL_MANAGED = 'io.termgrade.managed';
export const LABEL_OWNER = 'io.termgrade.owner';
export const LABEL_TASK = 'io.termgrade.task';

/** When a process started, in clock ticks since boot (Linux), so a reused pid is told apart. */
function startTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22; the command name (field 2) may hold spaces, so count from its closing paren.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

let self: string | null = null;

/**
 * `host:pid:start` of this process: unique across machines sharing an engine and across pid reuse.
 * A container whose owner process is gone is a leftover.
 */
export function ownerId(): string {
  self ??= `${hostname()}:${process.pid}:${startTicks(process.pid) ?? '0'}`;
  return self;
}

/**
 * Whether the owner is a live process. Another machine's process is not ours to judge (alive); an
 * empty owner is not a termgrade process at all (an image build's container, say): treated as
 * alive too, so cleanup never removes it.
 */
export function ownerIsAlive(owner: string | undefined): boolean {
  if (!owner) return true;
  const [host, pidText, start] = owner.split(':');
  if (host !== hostname()) return true;
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return false;
  if (start === undefined || start === '0') return true;
  const now = startTicks(pid);
  return now === null || now === start;
}
