import { Readable } from 'node:stream';
import { TermgradeError } from '../util/errors.js';
import { execByRun, type RunProcess } from './exec-wrapper.js';
import {
  CopyLimitError,
  DiskLimitError,
  MAX_SCANNED_CHANGES,
  ScanLimitError,
  SYSTEM_PATH,
  type FsChange,
  type Sandbox,
  type SandboxProvider,
  type SandboxSnapshot,
  type Shell,
  type SnapshotOptions,
  type VerifierStartOptions,
} from './sandbox.js';
import { extractInto, firstFile, packDir, packEntries } from './tar.js';
import { prepareFoldersInside } from './verifier-folders.js';

/*
 * The least a backend implements. A backend's provider gives `prepare` and `start`; its sandbox a
 * way to run a process (`run`, or the whole `exec`), two archive transfers and `close` (what
 * agents need), and a `snapshot` (what grading needs); its snapshot its changes, its environment,
 * an archive read and a new sandbox started from it. Everything else of Sandbox, SandboxSnapshot
 * and SandboxProvider has a default here, built on those; a backend that can do a part better (or
 * at all: fork, tracing, runVerifier) gives that method too, and its own is used.
 * `completeProvider` turns a BackendProvider into the SandboxProvider every caller uses;
 * createProvider (registry.ts) applies it to every registered backend.
 */

/** What a backend's sandbox must give; any other Sandbox method it gives replaces the default. */
export interface BackendSandbox extends Partial<Omit<Sandbox, 'id' | 'engine' | 'close' | 'snapshot'>> {
  readonly id: string;
  /** The engine of a pool it runs on; unset on a single engine. */
  readonly engine?: string;
  /**
   * Runs one process to its end (see RunProcess): the default `exec`, the whole exec contract,
   * is built on it (execByRun). A backend that gives its own `exec` has it used instead.
   */
  run: RunProcess;
  /**
   * Unpacks a tar archive (names relative to /, folders created as needed) into the sandbox, by
   * the backend itself: no program in the sandbox takes part (the verifier's tests travel this way).
   */
  putArchive(tar: Readable): Promise<void>;
  /**
   * A tar archive of `path` (a file or a folder; its own name the first entry, as `docker cp` and
   * the Engine API give it), read by the backend, also once the sandbox is stopped; null when absent.
   */
  getArchive(path: string): Promise<Readable | null>;
  /** Idempotent, never throws; removes everything the sandbox made. After it, commands and puts reject. */
  close(): Promise<void>;
  /**
   * Grading's part: the sandbox's files frozen at this moment (see Sandbox.snapshot). Absent: the
   * backend's sandboxes cannot be graded, and grading says so.
   */
  snapshot?(options?: SnapshotOptions): Promise<BackendSnapshot | SandboxSnapshot>;
}

/** What a backend's snapshot must give; any other SandboxSnapshot method it gives replaces the default. */
export interface BackendSnapshot extends Partial<Omit<SandboxSnapshot, 'changes' | 'env' | 'discard'>> {
  /** Every path the snapshot differs in from the image (see SandboxSnapshot.changes); the default bounds their count. */
  changes(): Promise<FsChange[]>;
  /** The environment the sandbox's commands start with, as the backend configured it (see SandboxSnapshot.env). */
  env(): Promise<Record<string, string>>;
  /** A tar archive of one path of the snapshot, read by the backend (see BackendSandbox.getArchive). */
  getArchive(path: string): Promise<Readable | null>;
  /**
   * A new sandbox from the snapshot, isolated from the original as SandboxSnapshot.startVerifier
   * says, its files as the agent left them: the default startVerifier then makes /tests and
   * /logs/verifier afresh by commands (prepareFoldersInside) and copies the tests in.
   */
  start(options: { signal?: AbortSignal }): Promise<BackendSandbox | Sandbox>;
  /** Removes what the snapshot holds. Idempotent, never throws. */
  discard(): Promise<void>;
}

/** What a backend's provider must give; any other SandboxProvider member it gives replaces the default. */
export type BackendProvider = Pick<SandboxProvider, 'name' | 'capabilities' | 'capacity' | 'prepare'> & {
  start(...args: Parameters<SandboxProvider['start']>): Promise<BackendSandbox | Sandbox>;
} & Partial<Omit<SandboxProvider, 'name' | 'capabilities' | 'capacity' | 'prepare' | 'start'>>;

const SANDBOX_METHODS = [
  'exec',
  'shell',
  'copyIn',
  'putFiles',
  'copyOut',
  'readFile',
  'changes',
  'diskUsage',
  'snapshot',
  'stop',
  'setNetwork',
  'close',
] as const satisfies ReadonlyArray<keyof Sandbox>;
const PROVIDER_METHODS = [
  'prepare',
  'start',
  'closeAll',
  'health',
  'ping',
  'checkNetwork',
  'cleanup',
] as const satisfies ReadonlyArray<keyof SandboxProvider>;

const gives = (o: object, names: readonly string[]): boolean =>
  names.every((n) => typeof (o as Record<string, unknown>)[n] === 'function');

/** A usage error naming the backend and what its object lacks (a module from outside, checked at its first use). */
function lacking(backend: string, what: string): TermgradeError {
  return new TermgradeError('usage', `backend ${backend}: ${what}`);
}

/** The sandbox every caller uses: the backend's own methods, and the defaults for the rest. A complete one is returned as it is. */
export function completeSandbox(s: BackendSandbox | Sandbox, backend: string): Sandbox {
  if (gives(s, SANDBOX_METHODS)) return s as Sandbox;
  const b = s as BackendSandbox;
  if (!gives(b, ['run', 'putArchive', 'getArchive', 'close']))
    throw lacking(backend, 'its sandbox must give run, putArchive, getArchive and close');
  const exec: Sandbox['exec'] = b.exec?.bind(b) ?? ((command, options) => execByRun(b.run.bind(b), command, options));
  const archive = async (path: string): Promise<Readable> => {
    const tar = await b.getArchive(path);
    if (!tar) throw new Error(`${path}: no such file or folder in the sandbox`);
    return tar;
  };
  const box: Sandbox = {
    get id() {
      return b.id;
    },
    get engine() {
      return b.engine;
    },
    exec,
    shell: b.shell?.bind(b) ?? (async () => shellByExec(exec)),
    copyIn: b.copyIn?.bind(b) ?? ((hostDir, destDir) => b.putArchive(packDir(hostDir, destDir))),
    putFiles: b.putFiles?.bind(b) ?? (async (entries) => b.putArchive(Readable.from([await packEntries(entries)]))),
    copyOut:
      b.copyOut?.bind(b) ??
      (async (srcDir, hostDir, options = {}) => {
        const max = options.maxBytes ?? DEFAULT_COPY_OUT_BYTES;
        const { skipped } = await extractInto(await archive(srcDir), hostDir, max);
        if (options.whole && skipped > 0) throw new CopyLimitError(srcDir, max);
      }),
    readFile:
      b.readFile?.bind(b) ??
      (async (path, maxBytes) => {
        const tar = await b.getArchive(path);
        return tar ? firstFile(tar, maxBytes) : null;
      }),
    changes: b.changes?.bind(b) ?? (() => changesBySnapshot(box)),
    diskUsage: b.diskUsage?.bind(b) ?? (async () => null),
    snapshot: async (options) => {
      if (!b.snapshot)
        throw new TermgradeError('environment_error', `the ${backend} backend takes no snapshot to grade`);
      return completeSnapshot(await boundedSnapshot(box, () => b.snapshot!(options), options), backend, options);
    },
    stop: b.stop?.bind(b) ?? (() => stopByExec(exec)),
    setNetwork:
      b.setNetwork?.bind(b) ??
      (async () => {
        throw new TermgradeError('environment_error', `the ${backend} backend cannot change a sandbox's network`);
      }),
    close: b.close.bind(b),
    ...(b.fork ? { fork: b.fork.bind(b) } : {}),
  };
  return box;
}

/** What a copy out keeps when the caller sets no limit. */
const DEFAULT_COPY_OUT_BYTES = 64 * 1024 * 1024;

/** A helper shell made of fresh commands (a backend with no persistent shell): the same answers, a command's cost each. */
function shellByExec(exec: Sandbox['exec']): Shell {
  return {
    run: async (command, options = {}) => {
      const r = await exec(['/bin/sh', '-c', `{ ${command}\n} 2>&1`], { timeoutSec: options.timeoutSec });
      if (r.timedOut) throw new Error(`the shell command did not end within ${options.timeoutSec} s`);
      return { output: r.stdout.text, exitCode: r.exitCode ?? -1 };
    },
  };
}

/** Ends every process of the sandbox but its init, by a command: kill(-1) spares only init and the caller, which ends with it. */
async function stopByExec(exec: Sandbox['exec']): Promise<void> {
  await exec(['/bin/sh', '-c', `PATH=${SYSTEM_PATH}; kill -KILL -1`], { timeoutSec: 30 }).catch(
    // Expected: the kill ends the command's own wrapper too, so the run may come back without its answer.
    () => undefined,
  );
}

/** The live sandbox's changes, read from a snapshot taken for them and discarded. */
async function changesBySnapshot(box: Sandbox): Promise<FsChange[]> {
  const snap = await box.snapshot();
  try {
    return await snap.changes();
  } finally {
    await snap.discard();
  }
}

/** The disk bound checked before the backend's snapshot copies anything, when the sandbox can tell its usage. */
async function boundedSnapshot<T>(box: Sandbox, take: () => Promise<T>, options: SnapshotOptions = {}): Promise<T> {
  const limit = options.bounds?.maxBytes;
  if (limit !== undefined) {
    const used = await box.diskUsage();
    if (used !== null && used > limit) throw new DiskLimitError(used, limit);
  }
  return take();
}

/** The snapshot every caller uses: the backend's own methods, and the defaults for the rest. A complete one is returned as it is. */
export function completeSnapshot(
  snap: BackendSnapshot | SandboxSnapshot,
  backend: string,
  options: SnapshotOptions = {},
): SandboxSnapshot {
  if (gives(snap, ['changes', 'env', 'readFile', 'startVerifier', 'discard'])) return snap as SandboxSnapshot;
  const b = snap as BackendSnapshot;
  if (!gives(b, ['changes', 'env', 'getArchive', 'start', 'discard']))
    throw lacking(backend, 'its snapshot must give changes, env, getArchive, start and discard');
  const limit = options.bounds?.maxChanges ?? MAX_SCANNED_CHANGES;
  const startVerifier = async (o: VerifierStartOptions): Promise<Sandbox> => {
    const box = completeSandbox(await b.start({ signal: o.signal }), backend);
    try {
      await prepareFoldersInside(box, o.tests, o.env);
      return box;
    } catch (err) {
      await box.close();
      throw err;
    }
  };
  return {
    changes: async () => {
      const list = await b.changes();
      if (list.length > limit) throw new ScanLimitError(list.length, limit);
      return list;
    },
    env: b.env.bind(b),
    readFile:
      b.readFile?.bind(b) ??
      (async (path, maxBytes) => {
        const tar = await b.getArchive(path);
        return tar ? firstFile(tar, maxBytes) : null;
      }),
    startVerifier: b.startVerifier?.bind(b) ?? startVerifier,
    ...(b.runVerifier ? { runVerifier: b.runVerifier.bind(b) } : {}),
    discard: b.discard.bind(b),
  };
}

/**
 * The provider every caller uses: the backend's own members, and the defaults for the rest (every
 * sandbox it starts completed, and closed by closeAll; no health check; no networks; nothing to
 * clean up). A complete provider is returned as it is.
 */
export function completeProvider(p: BackendProvider | SandboxProvider): SandboxProvider {
  if (gives(p, PROVIDER_METHODS)) return p as SandboxProvider;
  if (!gives(p, ['prepare', 'start'])) throw lacking(p.name, 'its provider must give prepare and start');
  const open = new Set<Sandbox>();
  const name = p.name;
  return {
    name,
    capabilities: p.capabilities,
    ...(p.capacity !== undefined ? { capacity: p.capacity } : {}),
    prepare: p.prepare.bind(p),
    start: async (task, prepared, options) => {
      const box = completeSandbox(await p.start(task, prepared, options), name);
      open.add(box);
      const close = box.close;
      box.close = () => close().finally(() => open.delete(box));
      return box;
    },
    closeAll: p.closeAll?.bind(p) ?? (async () => void (await Promise.all([...open].map((s) => s.close())))),
    health: p.health?.bind(p) ?? (async () => ({ ok: true, detail: `the ${name} backend has no health check` })),
    ping: p.ping?.bind(p) ?? (async () => []),
    checkNetwork:
      p.checkNetwork?.bind(p) ??
      (async (network) => {
        throw new TermgradeError('bad_input', `the ${name} backend gives trials no network (${network}); run offline`);
      }),
    cleanup: p.cleanup?.bind(p) ?? (async () => 0),
  };
}
