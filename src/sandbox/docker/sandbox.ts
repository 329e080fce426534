import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { shellQuote } from '../../util/shell-quote.js';
import type Docker from 'dockerode';
import {
  CopyLimitError,
  MAX_SCANNED_CHANGES,
  ScanLimitError,
  type CopyOptions,
  type ExecOptions,
  type ExecResult,
  type FileEntry,
  type FsChange,
  type Sandbox,
  type SandboxSnapshot,
  type Shell,
  type SnapshotOptions,
  type VerifierCommand,
  ForkError,
  type ForkOptions,
  type SandboxFork,
} from '../sandbox.js';
import { forkByCopy } from './fork.js';
import { snapshotByCommit, snapshotByCopy } from './snapshot.js';
import { releaseHold } from './hold.js';
import { canTrace, tracedCommand } from './trace.js';
import { DockerShell } from './shell.js';
import { dockerExec, shellExec } from './exec.js';
import { DEFAULT_SPOOL_DIR } from '../exec-wrapper.js';
import { randomBytes } from 'node:crypto';
import { copyFromUpper, overlayChanges, overlayLayers, readFromUpper, type OverlayLayers } from './overlay.js';
import { extractInto, firstFile, packDir, packEntries } from '../tar.js';
import type { EngineTurns, Turn } from './turns.js';
import { CancelledError, TermgradeError, engineStatus, isAbortError, isMissing } from '../../util/errors.js';
import { causeOf, log, logged } from '../../util/log.js';

/**
 * How a Docker sandbox reaches its container: `shell` (default) through a helper shell and reads
 * from the container's layer where it can; `engine` takes every path through a new engine request
 * (the tests run the contract on both).
 */
export type DockerExecVia = 'shell' | 'engine';

const DEFAULT_COPY_OUT_BYTES = 64 * 1024 * 1024;
const SHELL_COPY_LIMIT = 2 * 1024 * 1024;
/** How long a container killed with SIGKILL may take to stop before closing it is said to have failed. */
const STOP_BOUND_MS = 120_000;

/** The whole stream, or null as soon as it passes `limit` bytes. */
async function streamToBuffer(stream: Readable, limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      stream.destroy();
      return null;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** A container created but not started, and how to start it (closing it if it does not start). */
export interface CreatedContainer {
  sandbox: DockerSandbox;
  start(signal?: AbortSignal): Promise<void>;
}

/** How a trial's sandbox makes its verifiers: from a committed image, or beside it from the same image (not started). */
export interface VerifierFactory {
  fromImage(image: string, networkOf: string | null, signal?: AbortSignal): Promise<Sandbox>;
  /** With `command`: the container's own process is that command (see SandboxSnapshot.runVerifier). */
  beside(networkOf: string | null, command?: VerifierCommand): Promise<CreatedContainer>;
}

/** Creates (does not start) a container beside a sandbox from its image, limits and labels, plus `labels`, on `network` (see fork.ts). */
export type SiblingFactory = (labels: Record<string, string>, network: string | null) => Promise<CreatedContainer>;

export class DockerSandbox implements Sandbox {
  private closing: Promise<void> | null = null;
  private helper: Promise<DockerShell> | null = null;

  constructor(
    private readonly docker: Docker,
    private readonly container: Docker.Container,
    private readonly turns: EngineTurns,
    /** This sandbox's place in the engine's line: when its trial began waiting (see EngineTurns). */
    private place: number,
    private readonly onClosed: () => void,
    /** Makes this sandbox's verifiers (the provider knows the task's limits); absent on a verifier. */
    private readonly verifiers?: VerifierFactory,
    private readonly execVia: DockerExecVia = 'shell',
    /** Makes this sandbox's forks; absent on a verifier. */
    private readonly siblings?: SiblingFactory,
  ) {
    // A verifier's sandbox spools on its own fresh /dev/shm, under a name the agent could not have
    // prepared (whatever it did to /tmp lives on in the snapshot).
    if (!verifiers) this.spoolDir = `/dev/shm/.termgrade-exec-${randomBytes(6).toString('hex')}`;
  }

  /** Runs a heavy engine request in this sandbox's turn. */
  private readonly turn: Turn = (request) => this.turns.run(this.place, request);

  get id(): string {
    return this.container.id;
  }

  private shellBusy = false;

  /** Whether the helper shell may take a request now: free, the sandbox not closing, not turned off. */
  private get helperFree(): boolean {
    return !this.shellBusy && !this.closing && this.execVia !== 'engine';
  }
  /**
   * Where commands spool their output. A verifier's sandbox spools under a new name on its own
   * tmpfs /dev/shm, which nothing of the agent's could have prepared.
   */
  private spoolDir = DEFAULT_SPOOL_DIR;

  /**
   * Through the helper shell when it is free (no engine exec per command: the engine is the
   * bottleneck of many trials on few cores), else, or for another user, through a new engine exec.
   * Both paths run the same wrapper and keep the same contract.
   */
  async exec(command: string | string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (options.trace) return this.tracedExec(command, options);
    if (options.user || !this.helperFree) {
      return dockerExec(this.docker, this.container, this.turn, command, options, this.spoolDir);
    }
    this.shellBusy = true;
    try {
      let shell: DockerShell;
      try {
        shell = (await this.shell()) as DockerShell;
      } catch (err) {
        // No helper shell (an image without /bin/sh, a shell that died): the engine runs it.
        log.debug('no helper shell; the engine runs the command', { cause: causeOf(err) });
        return await dockerExec(this.docker, this.container, this.turn, command, options, this.spoolDir);
      }
      return await shellExec(this.docker, this.container, this.turn, shell, command, options, this.spoolDir);
    } finally {
      this.shellBusy = false;
    }
  }

  /** The command with its file calls recorded by this machine's strace, when the engine runs here. */
  private async tracedExec(command: string | string[], options: ExecOptions): Promise<ExecResult> {
    const rest = { ...options, trace: false };
    if (!(await this.onThisMachine()) || !(await canTrace())) return this.exec(command, rest);
    const traced = tracedCommand(typeof command === 'string' ? ['/bin/sh', '-c', command] : command);
    const running = this.exec(traced.argv, rest);
    const attached = traced.attach();
    const result = await running;
    await attached;
    const log = await traced.finish();
    return log === null ? result : { ...result, trace: log };
  }

  async shell(): Promise<Shell> {
    const current = this.helper ? await this.helper.catch(() => null) : null; // it failed to open: opened again below
    if (!current || !current.alive) this.helper = DockerShell.open(this.docker, this.container, this.turn);
    return this.helper!;
  }

  /**
   * Small folders (tests/, solution/) travel through the helper shell as base64 tar, which costs
   * the engine nothing; larger ones, or images without base64 and tar, use the archive API.
   */
  async copyIn(hostDir: string, destDir: string, options: CopyOptions = {}): Promise<void> {
    const tar = options.trusted ? null : await streamToBuffer(packDir(hostDir, destDir), SHELL_COPY_LIMIT + 1);
    if (tar && this.helperFree) {
      try {
        const shell = await this.shell();
        const marker = `TG_EOF_${Date.now().toString(36)}`;
        const r = await shell.run(
          `base64 -d <<'${marker}' | tar -x -C / -f -\n${tar.toString('base64').replace(/.{1,76}/g, '$&\n')}${marker}`,
          { timeoutSec: 120 },
        );
        if (r.exitCode === 0) return;
      } catch (err) {
        log.debug('could not copy in through the helper shell (the archive API does)', { cause: causeOf(err) });
      }
    }
    await this.turn(() =>
      this.container.putArchive(packDir(hostDir, destDir) as unknown as NodeJS.ReadableStream, { path: '/' }),
    );
  }

  async putFiles(entries: FileEntry[]): Promise<void> {
    const tar = await packEntries(entries);
    await this.turn(() => this.container.putArchive(tar, { path: '/' }));
  }

  async copyOut(
    srcDir: string,
    hostDir: string,
    options: CopyOptions & { maxBytes?: number; whole?: boolean } = {},
  ): Promise<void> {
    await mkdir(hostDir, { recursive: true });
    const max = options.maxBytes ?? DEFAULT_COPY_OUT_BYTES;
    // A whole copy goes through the engine's archive, whose extraction counts what it leaves out.
    if (options.whole) {
      const { skipped } = await this.turn(async () =>
        extractInto((await this.container.getArchive({ path: srcDir })) as unknown as Readable, hostDir, max),
      );
      if (skipped > 0) throw new CopyLimitError(srcDir, max);
      return;
    }
    // Small untrusted folders come back through the helper shell; trusted ones through the engine.
    if (!options.trusted && this.helperFree) {
      try {
        const shell = await this.shell();
        const dir = path.posix.dirname(srcDir);
        const base = path.posix.basename(srcDir);
        const kb = Math.floor(SHELL_COPY_LIMIT / 1024);
        const r = await shell.run(
          `s=$(du -sk ${shellQuote(srcDir)} | cut -f1) && [ "$s" -lt ${kb} ] || exit 3; tar -c -C ${shellQuote(dir)} -f - ${shellQuote(base)} | base64`,
          { timeoutSec: 120 },
        );
        if (r.exitCode === 0) {
          await extractInto(Readable.from([Buffer.from(r.output, 'base64')]), hostDir, max);
          return;
        }
      } catch (err) {
        log.debug('could not copy out through the helper shell (the archive API does)', { cause: causeOf(err) });
      }
    }
    // Read straight from the container's layer on this machine when it can be: no engine work (the
    // engine's copy of a small folder costs ~40 ms of CPU, this ~2 ms).
    const layers = await this.upperLayers();
    if (layers && (await copyFromUpper(layers, srcDir, hostDir, max))) return;
    // A process left running that removes files while the engine archives the folder breaks the
    // archive midway ("unexpected end of data"): the copy is tried again before it fails.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.turn(async () =>
          extractInto((await this.container.getArchive({ path: srcDir })) as unknown as Readable, hostDir, max),
        );
        return;
      } catch (err) {
        if (attempt >= 3 || (err as { statusCode?: number }).statusCode !== undefined) throw err;
      }
    }
  }

  async setNetwork(network: string | null): Promise<void> {
    await this.turn(async () => {
      const info = await this.container.inspect();
      const mode = info.HostConfig?.NetworkMode ?? 'none';
      if (mode === 'none' || mode === 'host' || mode.startsWith('container:')) {
        if (network === null) return;
        throw new TermgradeError(
          'environment_error',
          `sandbox ${this.id} was started with no network (${mode}); it cannot be put on ${network}`,
        );
      }
      const attached = Object.keys(info.NetworkSettings?.Networks ?? {});
      for (const name of attached)
        if (name !== network)
          await this.docker.getNetwork(name).disconnect({ Container: this.container.id, Force: true });
      if (network !== null && !attached.includes(network))
        await this.docker.getNetwork(network).connect({ Container: this.container.id });
    });
  }

  async readFile(file: string, maxBytes: number): Promise<Buffer | null> {
    // A file the agent wrote is read from the container's layer here, without the engine (the tamper
    // scan reads every .pth and entry_points file an install left: tens of files).
    const layers = await this.upperLayers();
    const here = layers ? await readFromUpper(layers, file, maxBytes) : undefined;
    if (here) return here;
    return this.turn(async () => {
      let tar: Readable;
      try {
        tar = (await this.container.getArchive({ path: file })) as unknown as Readable;
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return null;
        throw err;
      }
      return firstFile(tar, maxBytes);
    });
  }

  /** Every process gone: the container killed (its init, so the whole pid namespace) and stopped. */
  private async stopAll(): Promise<void> {
    // A process held frozen for the tests cannot be killed (cgroup v1): the container would not stop.
    await releaseHold(this.container.id);
    const state = (await this.container.inspect()).State;
    if (state.Running || state.Paused || state.Restarting) {
      if (state.Paused)
        await this.container.unpause().catch(
          // 409: no longer paused; the kill below stops it either way.
          logged('unpause a container before killing it', undefined, { expected: (err) => engineStatus(err) === 409 }),
        );
      await this.container.kill({ signal: 'SIGKILL' }).catch((err: { statusCode?: number }) => {
        if (err?.statusCode !== 409) throw err; // 409: it stopped meanwhile
      });
      // Bounded: an engine that cannot kill it (seen after a daemon restart left its shim behind)
      // would hold this turn, and the process, for ever.
      await this.container
        .wait({ condition: 'not-running', abortSignal: AbortSignal.timeout(STOP_BOUND_MS) })
        .catch((err: unknown) => {
          if (!isAbortError(err)) throw err;
          throw new TermgradeError(
            'environment_error',
            `the engine did not stop container ${this.container.id.slice(0, 12)} within ${STOP_BOUND_MS / 1000} s of SIGKILL`,
          );
        });
    }
  }

  private local: boolean | null = null;

  /**
   * Whether the container's processes run on this machine (its init is in our /proc, in its
   * cgroup): a remote engine's are not. Kept once known; an engine that does not answer (or a
   * container not running) leaves it unknown, asked again next time, so that a passing fault never
   * turns tracing and layer reads off for the sandbox's life.
   */
  private async onThisMachine(): Promise<boolean> {
    if (this.local !== null) return this.local;
    let pid: number;
    try {
      pid = (await this.container.inspect()).State.Pid;
    } catch (err) {
      log.warn('could not tell whether a sandbox runs on this machine (asked again next time)', {
        container: this.container.id.slice(0, 12),
        cause: causeOf(err),
      });
      return false;
    }
    if (!pid) return false;
    let cgroup: string;
    try {
      cgroup = await readFile(`/proc/${pid}/cgroup`, 'utf8');
    } catch (err) {
      if (!isMissing(err)) {
        // Unknown, not "elsewhere": asked again next time, like an engine that does not answer.
        log.warn("could not read a sandbox's cgroup (asked again next time)", { pid, cause: causeOf(err) });
        return false;
      }
      cgroup = ''; // not in our /proc: another machine's
    }
    this.local = cgroup.includes(this.container.id);
    return this.local;
  }

  private layers: OverlayLayers | null | undefined;

  /**
   * The container's overlay layers when readable from here (not for a remote engine, another
   * storage driver). Kept once known; an engine that does not answer leaves it unknown (the
   * engine's slower paths serve this call), asked again next time.
   */
  async upperLayers(): Promise<OverlayLayers | null> {
    if (this.execVia === 'engine') return null;
    if (this.layers !== undefined) return this.layers;
    try {
      this.layers = await overlayLayers(this.container);
    } catch (err) {
      log.warn("could not read a sandbox's layers from the engine (asked again next time)", {
        container: this.container.id.slice(0, 12),
        cause: causeOf(err),
      });
      return null;
    }
    return this.layers;
  }

  async snapshot(options: SnapshotOptions = {}): Promise<SandboxSnapshot> {
    const verifiers = this.verifiers;
    if (!verifiers) throw new Error('this sandbox cannot start a verifier (it is one)');
    // Grading begins: this trial now waits on the engine, from here in the line.
    this.place = this.turns.place();
    const host = {
      docker: this.docker,
      container: this.container,
      turn: this.turn,
      engineChanges: (limit: number) => this.engineChanges(limit),
      diskUsage: () => this.diskUsage(),
      stopAll: () => this.turn(() => this.stopAll()),
      dropHelper: () => this.dropHelper(),
    };
    const layers = await this.upperLayers();
    if (layers) return snapshotByCopy({ ...host, layers, createVerifier: verifiers.beside }, options);
    return snapshotByCommit({ ...host, startVerifier: verifiers.fromImage }, options);
  }

  /** Branches this sandbox (see Sandbox.fork and fork.ts); a verifier's sandbox cannot be. */
  async fork(n: number, options: ForkOptions = {}): Promise<SandboxFork> {
    const siblings = this.siblings;
    if (!siblings) throw new ForkError("a verifier's sandbox cannot be forked");
    return forkByCopy(
      { container: this.container, turn: this.turn, layers: await this.ownLayers(), createSibling: siblings },
      n,
      options,
    );
  }

  /** The container's overlay layers when readable from here, whatever path its commands take (fork.ts copies them). */
  ownLayers(): Promise<OverlayLayers | null> {
    return overlayLayers(this.container);
  }

  /** The host pid of the container's init (0 when it does not run). */
  async initPid(): Promise<number> {
    return (await this.container.inspect()).State.Pid;
  }

  /** Closes the helper shell (its process is about to die with the container's): the next use opens a new one. */
  private dropHelper(): void {
    const helper = this.helper;
    this.helper = null;
    void helper?.then(
      (h) => h.close(),
      () => undefined, // it never opened: nothing to close
    );
  }

  /**
   * Once started with its own command (see VerifierFactory.beside): waits for the command to end,
   * or for `timeoutSec` (every process then ended, exit code null); an abort ends them and throws.
   * Waiting holds no turn: the engine only answers when the container stops.
   */
  async waitForExit(timeoutSec: number, signal?: AbortSignal): Promise<{ exitCode: number | null; timedOut: boolean }> {
    const exited = (this.container.wait({ condition: 'not-running' }) as Promise<{ StatusCode?: number }>).then(
      (r) => ({ code: r.StatusCode ?? null }),
    );
    exited.catch(() => undefined); // raced below; a loser's rejection (the container removed on stop) is not a failure
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const ended = new Promise<'timeout' | 'abort'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutSec * 1000);
      onAbort = () => resolve('abort');
      if (signal?.aborted) onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const first = await Promise.race([exited, ended]);
      if (typeof first === 'object') return { exitCode: first.code, timedOut: false };
      await this.stop();
      if (first === 'abort') throw new CancelledError('verifier');
      return { exitCode: null, timedOut: true };
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Every process ended (the container killed and stopped); its files stay readable. */
  async stop(): Promise<void> {
    this.dropHelper();
    await this.turn(() => this.stopAll());
  }

  private async engineChanges(limit = MAX_SCANNED_CHANGES): Promise<FsChange[]> {
    const list = ((await this.turn(() => this.container.changes())) ?? []) as Array<{ Path: string; Kind: number }>;
    if (list.length > limit) throw new ScanLimitError(list.length, limit);
    const kinds = ['changed', 'added', 'deleted'] as const;
    return list.map((c) => ({ path: c.Path, kind: kinds[c.Kind] ?? 'changed' }));
  }

  async changes(): Promise<FsChange[]> {
    const layers = await this.upperLayers();
    if (layers) {
      try {
        return await overlayChanges(layers);
      } catch (err) {
        if (err instanceof ScanLimitError) throw err;
        // the layer went away or is unreadable: ask the engine
      }
    }
    return this.engineChanges();
  }

  async diskUsage(): Promise<number | null> {
    const info = (await this.container.inspect({ size: true } as Docker.ContainerInspectOptions)) as {
      SizeRw?: number;
    };
    return typeof info.SizeRw === 'number' ? info.SizeRw : null;
  }

  close(): Promise<void> {
    void this.helper?.then(
      (h) => h.close(),
      () => undefined, // it never opened: nothing to close
    );
    // No trial waits on a removal: it takes a background place in the engine's line.
    const place = this.turns.place(true);
    this.closing ??= this.turns
      .run(place, async () => {
        await releaseHold(this.container.id); // see stopAll
        await this.container.remove({ force: true, v: true });
      })
      .catch((err: { statusCode?: number }) => {
        // 404: already gone; 409: removal already in progress. Anything else is left for `cleanup`.
        if (err?.statusCode !== 404 && err?.statusCode !== 409) {
          process.emitWarning(`could not remove container ${this.container.id.slice(0, 12)}: ${String(err)}`);
        }
      })
      .finally(this.onClosed);
    return this.closing;
  }
}
