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
  /**
   * Settles once the engine's part of the start is over and, when the start was given up, its
   * container removed: a start cancelled mid-way rejects `sandbox` at once, while the engine may
   * still be making the container that is then removed.
   */
  settled: Promise<void>;
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
    /** Labels every container started here carries (a server's own, so its containers can be found). */
    private readonly labels: Record<string, string> = {},
  ) {}

  /**
   * A sandbox started now, for a trial that waits on it (`background`: for one in line). It has no
   * deadline of its own: the trial that takes it gives it one (and cancels it when it passes).
   */
  start(task: Task, prepared: PreparedEnvironment, background = false): WarmStart {
    const own = new AbortController();
    const network = task.limits.network ? this.network : null;
    // Boxed: a promise resolved with a promise would take on its outcome, not hold it.
    let engineStart: (p: { start: Promise<Sandbox> } | null) => void = () => undefined;
    const engine = new Promise<{ start: Promise<Sandbox> } | null>((resolve) => (engineStart = resolve));
    const sandbox = acquireSandbox({
      provider: this.provider,
      task,
      prepare: prepared,
      deadlineMs: null,
      signal: AbortSignal.any([this.signal, own.signal]),
      // The engine's own start is kept, so a removal can wait for a container made after a cancel.
      start: (signal) => {
        const p = this.provider.start(task, prepared, { signal, labels: this.labels, network, background });
        engineStart({ start: p });
        return p;
      },
    }).then((lease) => lease.sandbox);
    // A start that fails while claimed surfaces in the trial that took it (one failing unclaimed leaves
    // the pool, see keep); one that never reached the engine has nothing to wait on.
    sandbox.catch(() => engineStart(null));
    const settled = engine.then((p) =>
      p?.start.then(
        (sb) => (own.signal.aborted || this.signal.aborted ? sb.close() : undefined),
        () => undefined, // a start that failed: nothing to close (its failure is the claimer's)
      ),
    );
    return { sandbox, cancel: () => own.abort(), settled };
  }

  /** Warm starts held (ready or still starting), for `key`'s image or in all. */
  size(key?: string): number {
    if (key !== undefined) return this.ready.get(key)?.length ?? 0;
    let n = 0;
    for (const pool of this.ready.values()) n += pool.length;
    return n;
  }

  /** The warm sandbox (ready or still starting) for `key`'s image, taken out of the pool; null if none. */
  claim(key: string): WarmStart | null {
    return this.ready.get(key)?.shift() ?? null;
  }

  /**
   * Keeps one container ready (or starting) for each upcoming trial; warm containers of images
   * no longer in line are closed. Called by the dispatcher whenever the line changes. With
   * `exact`, an image holding more than its entries gives up the extra ones (the newest first, the
   * ones least likely to be ready): a caller that must stay within a total (serve's capacity).
   */
  plan(upcoming: UpcomingStart[], exact = false): void {
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
      if (exact) for (const extra of pool.splice(list.length).reverse()) this.discard(extra);
      for (const u of list.slice(pool.length)) this.keep(pool, this.start(u.task, u.prepared, true));
    }
  }

  /**
   * Holds a warm start in its image's pool until it is claimed; one that fails leaves the pool at
   * once (no container to give: a trial or session that comes for it starts cold instead of taking
   * a failure, and the slot is free for the next plan).
   */
  private keep(pool: WarmStart[], warm: WarmStart): void {
    pool.push(warm);
    warm.sandbox.catch(() => {
      // Stopping: every start rejects at once, and closeAll must still wait for each one's container.
      if (this.signal.aborted) return;
      const at = pool.indexOf(warm);
      if (at >= 0) pool.splice(at, 1);
    });
  }

  /** Removes a container (started or still starting: its start is given up) that no trial will use. */
  discard(warm: WarmStart): void {
    warm.cancel();
    const removal = warm.sandbox.then(
      (sb) => sb.close(),
      () => warm.settled, // a start that failed: only what it left is waited for
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
