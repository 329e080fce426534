import type Docker from 'dockerode';
import { LABEL_MANAGED, LABEL_OWNER, ownerIsAlive } from './labels.js';

/**
 * Removes containers termgrade started whose owning process is gone (a crash, kill -9), or every
 * termgrade container when `all` is set. A container with no owner label is never removed unless
 * `all`: image builds run in such containers (they inherit the base image's labels), and another
 * live process may own the build. Returns how many were removed.
 */
export async function removeLeftovers(docker: Docker, options: { all?: boolean } = {}): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } });
  let removed = 0;
  for (const info of list) {
    const owner = info.Labels[LABEL_OWNER];
    if (!options.all && (!owner || ownerIsAlive(owner))) continue;
    try {
      await docker.getContainer(info.Id).remove({ force: true, v: true });
      removed += 1;
    } catch {
      // Gone meanwhile, or being removed by its owner.
    }
  }
  return removed;
}
