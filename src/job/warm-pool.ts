import type { PreparedEnvironment, Sandbox, SandboxProvider } from '../sandbox/sandbox.js';
import { acquireSandbox } from '../sandbox/lease.js';
import type { Task } from '../task/task.js';

/** A trial about to be dispatched, whose image is ready: the warm pool starts a container for it. */
export interface UpcomingStart {
  key: string;
  task: Task;
  prepared: PreparedEnvironment;
}

/** A warm start: the sandbox (ready or still starting), and how to give it up (it is then closed, now or as it arrives). */
export interface WarmStart {
  sandbox: Promise<Sandbox>;
  cancel: () => void;
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
  private readonly ready = new Map<string, WarmStart[]>();
  /** Removals of containers no trial will use, awaited by `closeAll`. */
  private readonly closing = new Set<Promise<void>>();

  constructor(
    private readonly provider: SandboxProvider,
    private readonly signal: AbortSignal,
    /** The isolated network for tasks that ask for one; null: every sandbox offline. */
    private readonly network: string | null = null,
  ) {}

  /**
   * A sandbox started now, for a trial that waits on it (`background`: for one in line). It has no
   * deadline of its own: the trial that takes it gives it one (and cancels it when it passes).
   */
  start(task: Task, prepared: PreparedEnvironment, background = false): WarmStart {
    const own = new AbortController();
    const sandbox = acquireSandbox({
      provider: this.provider,
      task,
      prepare: prepared,
      deadlineMs: null,
      signal: AbortSignal.any([this.signal, own.signal]),
      network: task.limits.network ? this.network : null,
      background,
    }).then((lease) => lease.sandbox);
    sandbox.catch(() => undefined); // a failed warm start surfaces in the trial that takes it
    return { sandbox, cancel: () => own.abort() };
  }

  /** The warm sandbox (ready or still starting) for `key`'s image, taken out of the pool; null if none. */
  claim(key: string): WarmStart | null {
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
        pool.push(this.start(u.task, u.prepared, true));
      }
    }
  }

  /** Removes a container (started or still starting: its start is given up) that no trial will use. */
  discard(warm: WarmStart): void {
    warm.cancel();
    const removal = warm.sandbox.then(
      (sb) => sb.close(),
      () => undefined,
    );
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
