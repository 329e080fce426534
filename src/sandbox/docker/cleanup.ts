import type Docker from 'dockerode';
import { thawLeftHold } from './hold.js';
import { LABEL_MANAGED, LABEL_OWNER, LABEL_SNAPSHOT, ownerIsAlive } from './labels.js';

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
    const container = docker.getContainer(info.Id);
    try {
      // A hold its dead owner left would keep the engine from killing the container's processes.
      const pid = await container.inspect().then(
        (i) => i.State.Pid,
        () => 0,
      );
      if (pid) await thawLeftHold(pid, info.Id);
      await container.remove({ force: true, v: true });
      removed += 1;
    } catch (err) {
      // 409: another process (a cleanup running alongside, its owner) is removing it. Wait for that
      // to finish, so that when cleanup returns no dead owner's container is still listed.
      // Anything else: gone meanwhile.
      if ((err as { statusCode?: number }).statusCode === 409) await waitRemoved(container);
    }
  }
  // Snapshots committed for verifiers whose process died before it removed them.
  for (const image of await docker.listImages({ filters: { label: [`${LABEL_SNAPSHOT}=true`] } })) {
    const owner = image.Labels?.[LABEL_OWNER];
    if (!options.all && (!owner || ownerIsAlive(owner))) continue;
    await docker
      .getImage(image.Id)
      .remove({ force: true })
      .catch(() => undefined); // in use by a container being removed, or gone meanwhile: the next cleanup
  }
  return removed;
}

/** Until a container removal under way elsewhere is over (at most 30 s); never throws. */
async function waitRemoved(container: Docker.Container): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    container.wait({ condition: 'removed' }).catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, 30_000);
    }),
  ]);
  clearTimeout(timer);
}
