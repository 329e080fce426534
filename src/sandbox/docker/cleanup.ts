import type Docker from 'dockerode';
import { thawLeftHold } from './hold.js';
import { LABEL_MANAGED, LABEL_OWNER, LABEL_SNAPSHOT, ownerIsAlive } from './labels.js';
import { engineStatus, isAbortError, isGoneFromEngine } from '../../util/errors.js';
import { causeOf, log, logged } from '../../util/log.js';

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
      const pid = await container
        .inspect()
        .then(
          (i) => i.State.Pid,
          logged('inspect a left container before removing it', 0, { expected: isGoneFromEngine }),
        );
      if (pid) await thawLeftHold(pid, info.Id);
      await container.remove({ force: true, v: true });
      removed += 1;
    } catch (err) {
      // 409: another process (a cleanup running alongside, its owner) is removing it. Wait for that
      // to finish, so that when cleanup returns no dead owner's container is still listed.
      // 404: gone meanwhile. Anything else is said, and the next cleanup tries again.
      if (engineStatus(err) === 409) await waitRemoved(container);
      else if (!isGoneFromEngine(err))
        log.warn('could not remove a container left by a dead run', {
          container: info.Id.slice(0, 12),
          cause: causeOf(err),
        });
    }
  }
  // Snapshots committed for verifiers whose process died before it removed them.
  for (const image of await docker.listImages({ filters: { label: [`${LABEL_SNAPSHOT}=true`] } })) {
    const owner = image.Labels?.[LABEL_OWNER];
    if (!options.all && (!owner || ownerIsAlive(owner))) continue;
    await docker
      .getImage(image.Id)
      .remove({ force: true })
      .catch(
        // 409: in use by a container being removed; 404: gone meanwhile. Either way the next cleanup.
        logged('remove a left snapshot image', undefined, {
          fields: { image: image.Id },
          expected: (err) => engineStatus(err) === 409 || isGoneFromEngine(err),
        }),
      );
  }
  return removed;
}

/**
 * Until a container removal under way elsewhere is over (at most `boundMs`); never throws. The
 * engine's wait is aborted at the bound, not merely raced: a request left open keeps this process
 * from exiting (seen: a container the engine could not kill held two runs for ten minutes).
 */
export async function waitRemoved(container: Docker.Container, boundMs = 30_000): Promise<void> {
  await container.wait({ condition: 'removed', abortSignal: AbortSignal.timeout(boundMs) }).catch(
    logged('wait for a container removal', undefined, {
      expected: (err) => isGoneFromEngine(err) || isAbortError(err),
    }),
  );
}
