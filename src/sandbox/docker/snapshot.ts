import type Docker from 'dockerode';
import { errorMessage } from '../../util/errors.js';
import { MAX_SCANNED_CHANGES, ScanLimitError, type FsChange, type Sandbox, type SandboxSnapshot } from '../sandbox.js';
import { LABEL_SNAPSHOT } from './labels.js';
import { overlayChanges, readFromUpper, type OverlayLayers } from './overlay.js';
import type { Turn } from './turns.js';

/** What a Docker sandbox lends its snapshot: its engine, its turn in the engine's line, and how to start a verifier. */
export interface SnapshotHost {
  docker: Docker;
  container: Docker.Container;
  turn: Turn;
  /** The container's overlay layers when readable from this machine, else null (ask the engine). */
  layers(): Promise<OverlayLayers | null>;
  /** The engine's own change list of the container (the slow path). */
  engineChanges(): Promise<FsChange[]>;
  /** Ends every process of the container (it stays, stopped). */
  stopAll(): Promise<void>;
  /** Creates and starts a verifier container from `image`, joined to `networkOf`'s network when given. */
  startVerifier(image: string, networkOf: string | null, signal?: AbortSignal): Promise<Sandbox>;
}

/** The engine could not pause the container: its processes would not freeze, or it is no longer running. */
const cannotFreeze = (err: unknown): boolean => /pause|freeze|not running|is not paused/i.test(errorMessage(err));

/** The committed image's own top layer (the agent's changes) and the image's layers under it, when readable here. */
async function imageLayers(docker: Docker, image: string): Promise<OverlayLayers | null> {
  const info = (await docker.getImage(image).inspect()) as { GraphDriver?: { Name?: string; Data?: Record<string, string> } };
  const data = info.GraphDriver?.Data;
  if (info.GraphDriver?.Name !== 'overlay2' || !data?.UpperDir || !data.LowerDir) return null;
  return { upper: data.UpperDir, lowers: data.LowerDir.split(':') };
}

/**
 * Commits the container's filesystem to an image (the engine pauses the container's processes
 * while it copies, so the image is one moment's state; they run on afterwards) and reads the
 * agent's changes from that image's own layer. Where the layers cannot be read from this machine
 * (a remote engine), the container is paused by hand around the engine's change list and the
 * commit, so the list and the image show the same moment.
 */
export async function snapshotContainer(host: SnapshotHost): Promise<SandboxSnapshot> {
  const { docker, container, turn } = host;
  const state = (await container.inspect()).State;
  const running = Boolean(state.Running);
  const local = (await host.layers()) !== null;
  let listed: FsChange[] | ScanLimitError | null = null;
  const commit = (pause: boolean): Promise<string> =>
    turn(async () => {
      // The image keeps the container's labels (its owner among them) and is marked as a snapshot,
      // so `cleanup` removes one a killed process left.
      const made = (await container.commit({ pause, comment: "termgrade: the agent's final state, for its verifier", changes: `LABEL ${LABEL_SNAPSHOT}=true` })) as unknown as { Id: string };
      return made.Id;
    });
  const frozen = async (): Promise<string> => {
    if (local || !running || state.Paused) return commit(running && !state.Paused);
    await turn(() => container.pause());
    try {
      // Too many changes to list is the scan's to judge (it fails closed), not a reason to stop here.
      listed = await host.engineChanges().catch((err: unknown) => {
        if (err instanceof ScanLimitError) return err;
        throw err;
      });
      return await commit(false);
    } finally {
      await turn(() => container.unpause()).catch(() => undefined);
    }
  };
  let image: string;
  try {
    image = await frozen();
  } catch (err) {
    if (!cannotFreeze(err)) throw err;
    // The processes could not be frozen (a fork bomb outruns the freezer, or the container died
    // meanwhile): they are ended, and the filesystem is taken as they left it.
    await host.stopAll();
    listed = null;
    image = await commit(false);
  }
  // On this machine the change list comes from the committed layer only: listing the live container
  // instead would show what the agent's processes left after the commit, not what is graded.
  const layers = local ? await imageLayers(docker, image) : null;
  if (local && !layers) throw new Error(`the snapshot image ${image.slice(7, 19)} has no overlay layer readable here`);
  let verifier: Sandbox | null = null;
  let discarded: Promise<void> | null = null;
  return {
    async changes() {
      if (layers) return overlayChanges(layers, MAX_SCANNED_CHANGES);
      // engineChanges throws ScanLimitError past the limit itself.
      listed ??= await host.engineChanges();
      if (listed instanceof ScanLimitError) throw listed;
      return listed;
    },
    async env() {
      // The commit keeps the container's configured environment (the image's and the task's).
      const info = (await docker.getImage(image).inspect()) as { Config?: { Env?: string[] } };
      return Object.fromEntries((info.Config?.Env ?? []).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
    },
    async readFile(file, maxBytes) {
      if (layers) {
        const here = await readFromUpper(layers, file, maxBytes);
        if (here) return here;
      }
      // Not in the agent's layer (or not readable here): the engine reads it from a container of the image.
      verifier ??= await host.startVerifier(image, null);
      return verifier.readFile(file, maxBytes);
    },
    async startVerifier(options = {}) {
      const alive = running && (await container.inspect().then((i) => Boolean(i.State.Running), () => false));
      return host.startVerifier(image, alive ? container.id : null, options.signal);
    },
    discard() {
      discarded ??= (async () => {
        await verifier?.close();
        await turn(() => docker.getImage(image).remove({ force: true, noprune: false })).catch((err: { statusCode?: number }) => {
          if (err?.statusCode !== 404) process.emitWarning(`could not remove the verifier's snapshot image ${image.slice(7, 19)}: ${errorMessage(err)}`);
        });
      })();
      return discarded;
    },
  };
}
