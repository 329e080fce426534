import { readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import {
  engineStatus,
  errorMessage,
  GradingStepError,
  gradingStep,
  isGoneFromEngine,
  isMissing,
} from '../../util/errors.js';
import { logged } from '../../util/log.js';
import {
  DEFAULT_COPY_TIMEOUT_SEC,
  DEFAULT_DISK_LIMIT_MB,
  DiskLimitError,
  MAX_SCANNED_CHANGES,
  ScanIncompleteError,
  ScanLimitError,
  type FsChange,
  type SnapshotBounds,
  type SnapshotOptions,
  type Sandbox,
  type SandboxSnapshot,
  type VerifierCommand,
  type VerifierRun,
  type VerifierStartOptions,
} from '../sandbox.js';
import { prepareFoldersInside } from '../verifier-folders.js';
import { LABEL_SNAPSHOT } from './labels.js';
import { copyLayer, measureLayer, prepareFoldersInLayer } from './layer-copy.js';
import { cgroupFreezer } from './freezer.js';
import { holdFrozen, holdNonServices, holdPlace, type Hold } from './hold.js';
import { overlayChanges, readFromUpper, type OverlayLayers } from './overlay.js';
import type { CreatedContainer } from './sandbox.js';
import type { Turn } from './turns.js';

/** What a Docker sandbox lends its snapshot: its engine, its turn in the engine's line, and how to end its processes. */
interface SnapshotHost {
  docker: Docker;
  container: Docker.Container;
  turn: Turn;
  /** The engine's own change list of the container (the slow path); ScanLimitError past `limit`. */
  engineChanges(limit: number): Promise<FsChange[]>;
  /** Bytes the container wrote on top of its image, as the engine counts them; null when it cannot tell. */
  diskUsage(): Promise<number | null>;
  /** Ends every process of the container (it stays, stopped). */
  stopAll(): Promise<void>;
  /** Lets go of the container's helper shell: the next command opens a new one (see holdAgent). */
  dropHelper(): void;
}

export interface CommitHost extends SnapshotHost {
  /** Creates and starts a verifier container from `image`, joined to `networkOf`'s network when given. */
  startVerifier(image: string, networkOf: string | null, signal?: AbortSignal): Promise<Sandbox>;
}

export interface CopyHost extends SnapshotHost {
  /** The container's overlay layers, readable here. */
  layers: OverlayLayers;
  /** Creates (does not start) a verifier container from the container's own image, joined to `networkOf` when given, running `command` when given. */
  createVerifier(networkOf: string | null, command?: VerifierCommand): Promise<CreatedContainer>;
}

/** The engine could not pause the container: its processes would not freeze, or it is no longer running. */
const cannotFreeze = (err: unknown): boolean => /pause|freeze|not running|is not paused/i.test(errorMessage(err));

/** Moves every entry of one layer folder into another, empty one on the same filesystem (renames: no copy). */
async function moveEntries(from: string, to: string): Promise<void> {
  for (const name of await readdir(from)) await rename(path.join(from, name), path.join(to, name));
}

/** Whether the container still runs (one that cannot be inspected does not). */
const isRunning = (container: Docker.Container): Promise<boolean> =>
  container
    .inspect()
    .then(
      (i) => Boolean(i.State.Running),
      logged('inspect a sandbox (taken as stopped)', false, { expected: isGoneFromEngine }),
    );

/** The upper layer of a verifier container just created beside the agent's (readable here, as the agent's is). */
async function upperOf(created: CreatedContainer): Promise<string> {
  const own = await created.sandbox.upperLayers();
  if (!own) throw new Error("the verifier container's layer is not readable here");
  return own.upper;
}

/** A started verifier with its folders made by commands run in it; closed when they cannot be. */
async function withFoldersInside(box: Sandbox, options: VerifierStartOptions): Promise<Sandbox> {
  try {
    await prepareFoldersInside(box, options.tests, options.env);
  } catch (err) {
    await box.close();
    throw err;
  }
  return box;
}

/** The container's configured environment (the image's and the task's), as `KEY=VALUE` lines made a record. */
const envOf = (lines: string[] | undefined): Record<string, string> =>
  Object.fromEntries((lines ?? []).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));

/**
 * For an engine whose layers cannot be read from this machine (a remote one): the container is
 * paused around the engine's change list and a commit of its filesystem to an image, so the list
 * and the image show the same moment; the verifier is started from that image.
 */
export async function snapshotByCommit(host: CommitHost, options: SnapshotOptions = {}): Promise<SandboxSnapshot> {
  const { docker, container, turn } = host;
  const bounds = boundsOf(options.bounds);
  const state = (await container.inspect()).State;
  const running = Boolean(state.Running);
  // Listed by every commit, right before it, the container paused or stopped: the list and the image show the same moment.
  let listed: FsChange[] = [];
  // The engine's commit cannot be stopped midway: the bounds are checked before it (the time
  // bound holds for the copy on this machine only). The agent's files can break the engine's
  // listing or commit (a path longer than the engine can name): a grading step the sandbox broke,
  // unless the engine itself is found at fault (see gradeSandbox).
  const commit = async (): Promise<string> => {
    try {
      listed = await host.engineChanges(bounds.maxChanges);
      const used = await host.diskUsage();
      if (used !== null && used > bounds.maxBytes) throw new DiskLimitError(used, bounds.maxBytes);
      return await commitImage();
    } catch (err) {
      if (err instanceof ScanLimitError || err instanceof DiskLimitError || cannotFreeze(err)) throw err;
      throw new GradingStepError("the engine could not take the agent's files for its verifier", err);
    }
  };
  const commitImage = (): Promise<string> =>
    turn(async () => {
      // The image keeps the container's labels (its owner among them) and is marked as a snapshot,
      // so `cleanup` removes one a killed process left.
      const made = (await container.commit({
        pause: false,
        comment: "termgrade: the agent's final state, for its verifier",
        changes: `LABEL ${LABEL_SNAPSHOT}=true`,
      })) as unknown as { Id: string };
      return made.Id;
    });
  const frozen = async (): Promise<string> => {
    if (!running || state.Paused) return commit();
    await turn(() => container.pause());
    try {
      return await commit();
    } finally {
      await turn(() => container.unpause()).catch(logged('unpause a committed sandbox', undefined, stillStopped));
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
    image = await commit();
  }
  let reader: Sandbox | null = null;
  let hold: Hold | null = null;
  let discarded: Promise<void> | null = null;
  return {
    async changes() {
      return listed;
    },
    async env() {
      return envOf(((await docker.getImage(image).inspect()) as { Config?: { Env?: string[] } }).Config?.Env);
    },
    async readFile(file, maxBytes) {
      // The engine reads it from a container of the image.
      reader ??= await host.startVerifier(image, null);
      return reader.readFile(file, maxBytes);
    },
    async startVerifier(start) {
      // Held before the alive check: a fork bomb that cannot be frozen is ended, and the verifier then has no network.
      if (running) hold = await holdAgent(host, state.Pid, options.ports ?? []);
      const alive = running && (await isRunning(container));
      return withFoldersInside(await host.startVerifier(image, alive ? container.id : null, start.signal), start);
    },
    discard() {
      discarded ??= (async () => {
        await hold?.release();
        await reader?.close();
        await turn(() => docker.getImage(image).remove({ force: true, noprune: false })).catch(
          (err: { statusCode?: number }) => {
            if (err?.statusCode !== 404)
              process.emitWarning(
                `could not remove the verifier's snapshot image ${image.slice(7, 19)}: ${errorMessage(err)}`,
              );
          },
        );
      })();
      return discarded;
    },
  };
}

/** The bounds a snapshot holds to, each default filled in. */
type Bounds = Required<SnapshotBounds>;

export function boundsOf(b: SnapshotBounds = {}): Bounds {
  return {
    maxChanges: b.maxChanges ?? MAX_SCANNED_CHANGES,
    maxBytes: b.maxBytes ?? DEFAULT_DISK_LIMIT_MB * 1024 * 1024,
    copyTimeoutSec: b.copyTimeoutSec ?? DEFAULT_COPY_TIMEOUT_SEC,
  };
}

/**
 * The agent's layer measured, then copied into `to` if within `bounds`, all within its time
 * bound: a layer past a bound is never copied (the sandbox's content decided: ScanLimitError,
 * DiskLimitError thrown as they are), and a copy that cannot finish in time is stopped (the
 * content's doing, as a copy that fails: GradingStepError).
 */
async function boundedCopy(from: string, to: string, bounds: Bounds): Promise<void> {
  const deadline = AbortSignal.timeout(bounds.copyTimeoutSec * 1000);
  const step = "the agent's files could not be copied for its verifier";
  try {
    await measureLayer(from, bounds, deadline);
    await copyLayer(from, to, deadline);
  } catch (err) {
    if (err instanceof ScanLimitError || err instanceof DiskLimitError) throw err;
    // This machine lacks find or cp: its own failure, not the sandbox's.
    if (/^spawn /.test(String((err as NodeJS.ErrnoException).syscall))) throw err;
    if (deadline.aborted)
      throw new GradingStepError(step, new Error(`the copy did not finish within ${bounds.copyTimeoutSec} s`));
    // The agent's files decide whether they can be copied (a tree too deep, say): a grading step the sandbox broke.
    throw new GradingStepError(step, err);
  }
}

/**
 * The agent's layer copied into `to` (see boundedCopy) while its processes are frozen (through
 * its cgroup here when it can be, else by the engine; see freezer.ts) and running on after; ended
 * instead when they cannot be frozen (a fork bomb outruns the freezer, or the container died
 * meanwhile), the filesystem then taken as they left it. Nothing the agent runs can write between
 * the measuring and the copy: the disk limit holds to the last byte of its turn.
 *
 * With `reserved` (the ports the tests bind), the same freeze also holds the agent's processes that
 * are not services (see hold.ts) from here until the snapshot is discarded: one freeze for both,
 * the processes sorted while the layer is copied. Null when they could not be held this way (the
 * engine paused them, or nothing runs): the caller holds them before the tests start, if it can.
 */
async function copyFrozen(
  host: CopyHost,
  state: { Running?: boolean; Paused?: boolean; Pid: number },
  to: string,
  how: { bounds: Bounds; reserved: number[] | null },
): Promise<Hold | null> {
  const { container, turn } = host;
  const copy = (): Promise<void> => boundedCopy(host.layers.upper, to, how.bounds);
  if (!state.Running || state.Paused) {
    await copy();
    return null;
  }
  const place = how.reserved ? await holdPlace(state.Pid, container.id) : null;
  const freezer = place?.freezer ?? (await cgroupFreezer(state.Pid, container.id));
  let paused = false;
  try {
    await (freezer ? freezer.freeze() : turn(() => container.pause()));
    paused = true;
  } catch (err) {
    await place?.drop();
    if (!cannotFreeze(err)) throw err;
    await host.stopAll();
  }
  try {
    if (!paused || !place) {
      await copy();
      return null;
    }
    // The helper shell is held like every process there: a command sent into the agent's sandbox
    // meanwhile opens a new one, which runs (a process of the harness's, as every command is).
    host.dropHelper();
    const [copied, held] = await Promise.allSettled([copy(), holdFrozen(place, how.reserved ?? [])]);
    if (copied.status === 'rejected') {
      if (held.status === 'fulfilled') await held.value.release();
      throw copied.reason;
    }
    if (held.status === 'rejected') throw held.reason; // it let go of what it held
    return held.value;
  } finally {
    if (paused)
      await (freezer ? freezer.thaw() : turn(() => container.unpause())).catch(
        logged('thaw a sandbox after copying its layer', undefined, stillStopped),
      );
  }
}

/**
 * Unpausing or thawing a sandbox after a copy: a container no longer paused (409) or gone (404, its
 * cgroup removed) is expected; anything else leaves the agent's processes stopped, so it is a warning.
 */
const stillStopped = {
  level: 'warn' as const,
  expected: (err: unknown): boolean => engineStatus(err) === 409 || isGoneFromEngine(err) || isMissing(err),
};

/** The scan of the copy; a walk that cannot be completed is the content's doing (a path too long to follow, say). */
async function listChanges(target: OverlayLayers, limit: number): Promise<FsChange[]> {
  try {
    return await overlayChanges(target, limit);
  } catch (err) {
    if (err instanceof ScanIncompleteError) throw err;
    throw new ScanIncompleteError(
      `the agent's files could not be walked whole (${errorMessage(err)}); a scan cut short could miss a change, so the grade fails closed`,
    );
  }
}

/** A verifier container created (not started) with the agent's layer copied into its own; closed when the copy fails. */
async function copiedVerifier(
  host: CopyHost,
  how: {
    info: Docker.ContainerInspectInfo;
    running: boolean;
    command?: VerifierCommand;
    bounds: Bounds;
    reserved: number[] | null;
  },
): Promise<{ verifier: CreatedContainer; target: OverlayLayers; hold: Hold | null }> {
  const verifier = await host.createVerifier(how.running ? how.info.Id : null, how.command);
  try {
    // What lies below is the agent's image for both; the agent's lower list is the one its changes were judged against.
    const target = { upper: await upperOf(verifier), lowers: host.layers.lowers };
    const hold = await copyFrozen(host, how.info.State, target.upper, how);
    return { verifier, target, hold };
  } catch (err) {
    await verifier.sandbox.close();
    throw err;
  }
}

/**
 * On this machine: a verifier container is created (not started) from the agent's image, in the
 * agent sandbox's network and pids, and the agent's layer is copied into the verifier's while the
 * agent's processes are paused (they run on afterwards). The scan reads that copy (exactly what
 * the verifier will start from), and the verifier's folders are made in it before it starts, so
 * grading costs the engine one container's create, start and removal: no commit, no image, no
 * command to prepare folders. With `command`, that container's own process is the verifier's
 * command (runVerifier): nothing is sent into it and nothing has to end it.
 */
export async function snapshotByCopy(host: CopyHost, options: SnapshotOptions = {}): Promise<SandboxSnapshot> {
  const { container } = host;
  const command = options.verifier;
  const bounds = boundsOf(options.bounds);
  const reserved = options.ports ?? [];
  const info = await container.inspect();
  const running = Boolean(info.State.Running);
  let { verifier, target, hold } = await copiedVerifier(host, { info, running, command, bounds, reserved });
  // Listed now, before anything is added for the verifier: the scan judges the agent's files only.
  const listing = listChanges(target, bounds.maxChanges);
  listing.catch(() => undefined); // its failure is the verifier's to read through changes(), below

  /** The copy moved (renames) into a new verifier container, the old one removed. */
  const replace = async (networkOf: string | null, own: VerifierCommand | undefined): Promise<void> => {
    const next = await host.createVerifier(networkOf, own);
    try {
      const upper = await upperOf(next);
      await moveEntries(target.upper, upper);
      target = { upper, lowers: target.lowers };
    } catch (err) {
      await next.sandbox.close();
      throw err;
    } finally {
      await verifier.sandbox.close();
    }
    verifier = next;
  };
  let started = false;
  /**
   * The verifier made ready to start, once: the agent's processes that are not services held
   * (see hold.ts); in the agent's network while the agent's sandbox runs (a container cannot join
   * the network of one that stopped since, so the copy then moves to one with no network), running
   * `own` or idle, with its folders made in the layer where they can be (whether they were is returned).
   */
  const ready = async (
    start: VerifierStartOptions,
    own: VerifierCommand | undefined,
  ): Promise<{ inLayer: boolean; networkOf: string | null }> => {
    if (started) throw new Error('a snapshot starts one verifier');
    started = true;
    await listing.catch(() => undefined); // only waited for here: changes() gives its failure
    // Held by the copy's freeze when it could be; else now, if it can be (an engine's pause copied).
    if (hold) refuseSquatters(hold);
    else if (running) hold = await holdAgent(host, info.State.Pid, reserved);
    const networkOf = running && (await isRunning(container)) ? container.id : null;
    if ((running && !networkOf) || own !== command) await replace(networkOf, own);
    return { inLayer: await prepareFoldersInLayer(target, start.tests), networkOf };
  };
  const snap: SandboxSnapshot = {
    changes: () => listing,
    async env() {
      return envOf((info.Config as { Env?: string[] } | undefined)?.Env);
    },
    async readFile(file, maxBytes) {
      // From the copy when it holds the file, else the engine reads the not yet started container.
      return (await readFromUpper(target, file, maxBytes)) ?? verifier.sandbox.readFile(file, maxBytes);
    },
    async startVerifier(options) {
      const { inLayer } = await ready(options, undefined);
      await verifier.start(options.signal);
      return inLayer ? verifier.sandbox : withFoldersInside(verifier.sandbox, options);
    },
    async discard() {
      await hold?.release();
      await verifier.sandbox.close();
    },
  };
  if (!command) return snap;
  snap.runVerifier = async (options) => {
    // Steps up to the command's start are grading steps (the sandbox's content can break them); an
    // engine failure while the command runs is thrown as it is (an exec's would be).
    const made = 'the verifier sandbox did not start with fresh folders';
    const { inLayer, networkOf } = await gradingStep(made, () => ready(options, command));
    if (!inLayer) {
      // The folders need commands run in the verifier first: an idle one, the command sent in after.
      const box = await gradingStep(made, async () => {
        await replace(networkOf, undefined);
        await verifier.start(options.signal);
        return withFoldersInside(verifier.sandbox, options);
      });
      return runSentIn(box, command, options);
    }
    const begun = performance.now();
    await gradingStep('the verifier sandbox did not start test.sh', () => verifier.start(options.signal));
    const ended = await verifier.sandbox.waitForExit(options.timeoutSec, options.signal);
    return { box: verifier.sandbox, ...ended, durationMs: performance.now() - begun };
  };
  return snap;
}

/**
 * The agent's processes that are not services held while the tests run (see hold.ts); ended
 * instead when they cannot all be frozen (a fork bomb outruns the freezer), as for the copy. An
 * agent process holding a port the tests bind (admission saw them bind it) throws: the tests' own
 * server could not start, or the agent's would answer in its place.
 */
async function holdAgent(host: SnapshotHost, initPid: number, ports: number[]): Promise<Hold | null> {
  // The helper shell is held like every process there: a command sent into the agent's sandbox
  // meanwhile opens a new one, which runs (a process of the harness's, as every command is).
  host.dropHelper();
  let hold: Hold | null;
  try {
    hold = await holdNonServices(initPid, host.container.id, ports);
  } catch (err) {
    if (!cannotFreeze(err)) throw err;
    await host.stopAll();
    return null;
  }
  if (hold) refuseSquatters(hold);
  return hold;
}

/** Throws (the hold let go) when an agent process holds a port the tests bind: their own server could not start, or the agent's would answer in its place. */
function refuseSquatters(hold: Hold): void {
  if (hold.squatted.length === 0) return;
  void hold.release();
  throw new Error(
    `an agent process holds port ${hold.squatted.join(', ')}, which the tests bind (admission saw them bind it): their own server could not start, or the agent's would answer in its place`,
  );
}

/** The verifier's command sent into its started sandbox (not its own process), which is stopped after. */
async function runSentIn(
  box: Sandbox,
  command: VerifierCommand,
  options: { timeoutSec: number; signal?: AbortSignal },
): Promise<VerifierRun> {
  const run = await box.exec(command.command, {
    env: command.env,
    timeoutSec: options.timeoutSec,
    signal: options.signal,
  });
  await gradingStep('the verifier sandbox could not be stopped', () => box.stop());
  return { box, exitCode: run.exitCode, timedOut: run.timedOut, durationMs: run.durationMs };
}
