import { hostname } from 'node:os';
import { processAlive } from '../../util/process-alive.js';

/** Every container termgrade starts carries these, so leftovers of a killed run can be found. */
export const LABEL_MANAGED = 'io.termgrade.managed';
export const LABEL_OWNER = 'io.termgrade.owner';
export const LABEL_TASK = 'io.termgrade.task';

/** `host:pid` of this process: a container whose owner process is gone is a leftover. */
export function ownerId(): string {
  return `${hostname()}:${process.pid}`;
}

export function ownerIsAlive(owner: string | undefined): boolean {
  if (!owner) return false;
  const sep = owner.lastIndexOf(':');
  const host = owner.slice(0, sep);
  const pid = Number(owner.slice(sep + 1));
  if (host !== hostname()) return true; // another machine's process: not ours to judge
  return Number.isInteger(pid) && pid > 0 && processAlive(pid);
}
