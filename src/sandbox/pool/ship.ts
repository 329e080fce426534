import type Docker from 'dockerode';
import { TermgradeError, errorMessage } from '../../util/errors.js';
import { withTimeout } from '../../util/time.js';
import { imageIdOf } from '../docker/image.js';

/**
 * Copies an image from one engine to another through the Engine API (`docker save | docker load`,
 * streamed through this process, nothing written to disk). The image keeps its id, which is the
 * digest of its configuration: the target runs exactly what the source built, where a rebuild
 * could pull other packages. Saved by tag when the source's tag names this id (the target then
 * lists it by name too), else by id. Rejects when the target does not have `imageId` afterwards.
 */
export async function shipImage(
  from: Docker,
  to: Docker,
  image: { tag: string; id: string },
  timeoutMs: number,
): Promise<void> {
  const ref = (await imageIdOf(from, image.tag)) === image.id ? image.tag : image.id;
  const saved = (await from.getImage(ref).get()) as NodeJS.ReadableStream & { destroy(): void };
  const load = async (): Promise<void> => {
    const progress = await to.loadImage(saved, { quiet: true });
    await new Promise<void>((resolve, reject) => {
      to.modem.followProgress(
        progress,
        (err, events: Array<{ error?: string; errorDetail?: { message?: string } }>) => {
          const failed = err
            ? errorMessage(err)
            : (events?.find((e) => e.error)?.errorDetail?.message ?? events?.find((e) => e.error)?.error);
          if (failed) reject(new Error(failed));
          else resolve();
        },
      );
    });
  };
  try {
    await withTimeout(load(), timeoutMs, 'environment_error', `not done within ${timeoutMs / 1000} s`);
  } catch (err) {
    saved.destroy(); // a copy cut short (timed out, refused) stops reading the source engine
    throw new TermgradeError(
      'environment_error',
      `copying image ${image.tag} (${image.id.slice(7, 19)}) between engines failed: ${errorMessage(err)}`,
    );
  }
  if ((await imageIdOf(to, image.id)) !== image.id)
    throw new TermgradeError(
      'environment_error',
      `image ${image.tag} was copied but the target engine has no image ${image.id.slice(7, 19)}`,
    );
}
