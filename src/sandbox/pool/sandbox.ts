import { CancelledError, EngineLostError, errorMessage } from '../../util/errors.js';
import type {
  CopyOptions,
  ExecOptions,
  ExecResult,
  FileEntry,
  ForkOptions,
  FsChange,
  Sandbox,
  SandboxFork,
  SandboxSnapshot,
  Shell,
  SnapshotOptions,
} from '../sandbox.js';
import type { Engine, EnginePool } from './provider.js';

/** Settles once `signal` is aborted (at once if it already is); `stop` takes the listener off when the wait is over. */
function whenAborted(signal: AbortSignal): { settled: Promise<void>; stop: () => void } {
  let onAbort = (): void => undefined;
  const settled = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return { settled, stop: () => signal.removeEventListener('abort', onAbort) };
}

/**
 * A sandbox on one engine of a pool. It adds one rule to the engine's own sandbox: once the engine
 * has been lost (even if it answers again since), every call fails as the environment's failure,
 * naming the engine, so the trial is re-run elsewhere and never graded on a half-dead container.
 */
export class PoolSandbox implements Sandbox {
  /** The engine's lost signal when this sandbox was made: aborted once the engine is lost, for good. */
  private readonly lost: AbortSignal;
  private closing: Promise<void> | null = null;

  constructor(
    private readonly pool: EnginePool,
    readonly home: Engine,
    private readonly inner: Sandbox,
    private readonly onClosed: () => void,
  ) {
    this.lost = home.lostSignal.signal;
    if (inner.fork) this.fork = (n, options) => this.forkOnHome(n, options);
  }

  fork?: (n: number, options?: ForkOptions) => Promise<SandboxFork>;

  /** The children live on this sandbox's engine, in slots taken there first (see EnginePool.reserveOn); same loss rule. */
  private forkOnHome(n: number, options?: ForkOptions): Promise<SandboxFork> {
    return this.call(async () => {
      const slots = this.pool.reserveOn(this.home, n);
      let made: SandboxFork;
      try {
        made = await this.inner.fork!(n, options);
      } catch (err) {
        slots.giveBack(n);
        throw err;
      }
      return { ...made, children: made.children.map((c) => slots.adopt(c)) };
    });
  }

  get id(): string {
    return this.inner.id;
  }

  get engine(): string {
    return this.home.name;
  }

  private lostError(cause?: unknown): EngineLostError {
    const why = this.home.reason || (cause ? errorMessage(cause) : 'it stopped answering');
    return new EngineLostError(`engine ${this.home.name} was lost during this trial: ${why}`, { cause });
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    if (this.lost.aborted) throw this.lostError();
    const lost = whenAborted(this.lost);
    try {
      // A call to an engine that hangs would wait for its own timeout; once the engine is found
      // lost (by the pool's ping), it gives up at once. The call itself is left to fail on its own.
      const pending = fn();
      pending.catch(() => undefined); // its failure reaches us through the race below; this keeps a losing call from being unhandled
      return await Promise.race([
        pending,
        lost.settled.then((): never => {
          throw this.lostError();
        }),
      ]);
    } catch (err) {
      if (err instanceof CancelledError) throw err;
      if ((await this.pool.lost(this.home, err)) || this.lost.aborted) throw this.lostError(err);
      throw err;
    } finally {
      lost.stop();
    }
  }

  exec(command: string | string[], options?: ExecOptions): Promise<ExecResult> {
    return this.call(() => this.inner.exec(command, options));
  }

  shell(): Promise<Shell> {
    return this.call(async () => {
      const s = await this.inner.shell();
      return { run: (command, options) => this.call(() => s.run(command, options)) };
    });
  }

  copyIn(hostDir: string, destDir: string, options?: CopyOptions): Promise<void> {
    return this.call(() => this.inner.copyIn(hostDir, destDir, options));
  }

  putFiles(entries: FileEntry[]): Promise<void> {
    return this.call(() => this.inner.putFiles(entries));
  }

  copyOut(srcDir: string, hostDir: string, options?: CopyOptions & { maxBytes?: number }): Promise<void> {
    return this.call(() => this.inner.copyOut(srcDir, hostDir, options));
  }

  setNetwork(network: string | null): Promise<void> {
    return this.call(() => this.inner.setNetwork(network));
  }

  readFile(path: string, maxBytes: number): Promise<Buffer | null> {
    return this.call(() => this.inner.readFile(path, maxBytes));
  }

  changes(): Promise<FsChange[]> {
    return this.call(() => this.inner.changes());
  }

  /** The snapshot lives on this sandbox's engine; its verifier is a pool sandbox there too (same loss rule). */
  snapshot(options?: SnapshotOptions): Promise<SandboxSnapshot> {
    return this.call(async () => {
      const snap = await this.inner.snapshot(options);
      const runVerifier = snap.runVerifier?.bind(snap);
      return {
        changes: () => this.call(() => snap.changes()),
        env: () => this.call(() => snap.env()),
        readFile: (file, max) => this.call(() => snap.readFile(file, max)),
        startVerifier: (o) =>
          this.call(async () => new PoolSandbox(this.pool, this.home, await snap.startVerifier(o), () => undefined)),
        ...(runVerifier
          ? {
              runVerifier: (o) =>
                this.call(async () => {
                  const run = await runVerifier(o);
                  return { ...run, box: new PoolSandbox(this.pool, this.home, run.box, () => undefined) };
                }),
            }
          : {}),
        discard: () => snap.discard(),
      };
    });
  }

  stop(): Promise<void> {
    return this.call(() => this.inner.stop());
  }

  diskUsage(): Promise<number | null> {
    return this.call(() => this.inner.diskUsage());
  }

  /**
   * Removes the container and frees the slot. On a lost engine it does not try (or stops waiting,
   * if the engine is lost meanwhile: a hung engine would hold the job's end); what is left there is
   * removed when the engine is taken back.
   */
  close(): Promise<void> {
    if (!this.closing) {
      const lost = whenAborted(this.lost);
      this.closing = (this.lost.aborted ? Promise.resolve() : Promise.race([this.inner.close(), lost.settled])).finally(
        () => {
          lost.stop();
          this.onClosed();
        },
      );
    }
    return this.closing;
  }
}
