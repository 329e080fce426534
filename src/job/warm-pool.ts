import type { PreparedEnvironment, Sandbox, SandboxProvider } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';

/** A trial about to be dispatched, whose image is ready: the warm pool starts a container for it. */
export interface UpcomingStart {
  key: string;
  task: Task;
  prepared: PreparedEnvironment;
}

/**
 * Warm sandboxes: containers for the trials next in line are started while the running trials
 * work, so container start-up (the engine's slowest step under load) is off a trial's critical
 * path. Which containers to keep is the dispatcher's look-ahead (`plan`), not a fixed number per
 * image: a job over many images keeps only the next ones warm, never a spare per image. Warm starts
 * are background starts (the engine serves what trials wait on first). Each container still
 * serves exactly one trial; those left over are closed with `closeAll`.
 */
export class WarmPool {
  private readonly ready = new Map<string, Array<Promise<Sandbox>>>();
  /** Removals of containers no trial will use, awaited by `closeAll`. */
  private readonly closing = new Set<Promise<void>>();

  constructor(
    private readonly provider: SandboxProvider,
    private readonly signal: AbortSignal,
    /** The isolated network for tasks that ask for one; null: every sandbox offline. */
    private readonly network: string | null = null,
  ) {}

  /** A sandbox started now, for a trial that waits on it (`background`: for one in line). */
  start(task: Task, prepared: PreparedEnvironment, background = false): Promise<Sandbox> {
    return this.provider.start(task, prepared, { signal: this.signal, network: task.limits.network ? this.network : null, background }).then(async (sandbox) => {
      await sandbox.exec(['mkdir', '-p', '/logs/agent', '/logs/verifier']); // opens the helper shell too
      return sandbox;
    });
  }

  /** The warm sandbox (ready or still starting) for `key`'s image, taken out of the pool; null if none. */
  claim(key: string): Promise<Sandbox> | null {
    return this.ready.get(key)?.shift() ?? null;
  }

  /**
   * Keeps one container ready (or starting) for each upcoming trial; warm containers of images
   * no longer in line are closed. Called by the dispatcher whenever the line changes.
   */
  plan(upcoming: UpcomingStart[]): void {
    if (this.signal.aborted) return;
    const wanted = new Map<string, UpcomingStart[]>();
    for (const u of upcoming) {
      const list = wanted.get(u.key);
      if (list) list.push(u);
      else wanted.set(u.key, [u]);
    }
    for (const [key, pool] of this.ready) {
      if (wanted.has(key)) continue;
      this.ready.delete(key);
      for (const p of pool) this.discard(p);
    }
    for (const [key, list] of wanted) {
      let pool = this.ready.get(key);
      if (!pool) this.ready.set(key, (pool = []));
      for (const u of list.slice(pool.length)) {
        const next = this.start(u.task, u.prepared, true);
        next.catch(() => undefined); // a failed warm start surfaces in the trial that takes it
        pool.push(next);
      }
    }
  }

  /** Removes a container (started or still starting) that no trial will use. */
  discard(sandbox: Promise<Sandbox>): void {
    const removal = sandbox.then((sb) => sb.close(), () => undefined);
    this.closing.add(removal);
    void removal.finally(() => this.closing.delete(removal));
  }

  /** Removes every container left ready, and waits for all removals under way. */
  async closeAll(): Promise<void> {
    for (const p of [...this.ready.values()].flat()) this.discard(p);
    this.ready.clear();
    await Promise.all([...this.closing]);
  }
}
