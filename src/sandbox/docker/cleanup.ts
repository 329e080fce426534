import type Docker from 'dockerode';
import { LABEL_MANAGED, LABEL_OWNER, ownerIsAlive } from './labels.js';

/**
 * Removes containers termgrade started whose owning process is gone (a crash, kill -9), or every
 * termgrade container when `all` is set. Returns how many were removed.
 */
export async function removeLeftovers(docker: Docker, options: { all?: boolean } = {}): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } });
  let removed = 0;
  for (const info of list) {
    if (!options.all && ownerIsAlive(info.Labels[LABEL_OWNER])) continue;
    try {
      await docker.getContainer(info.Id).remove({ force: true, v: true });
      removed += 1;
    } catch {
      // Gone meanwhile, or being removed by its owner.
    }
  }
  return removed;
}
