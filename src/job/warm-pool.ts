import type { PreparedEnvironment, Sandbox, SandboxProvider } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';

/**
 * Warm sandboxes: while trials run, the next containers for an image are started, so container
 * start-up (the engine's slowest step under load) is off a trial's critical path. Each container
 * still serves exactly one trial; those left over are closed with `closeAll`.
 */
export class WarmPool {
  private readonly pools = new Map<string, Array<Promise<Sandbox>>>();

  constructor(
    private readonly provider: SandboxProvider,
    private readonly signal: AbortSignal,
    /** Containers kept ready per image. */
    private readonly size: number,
    /** The isolated network for tasks that ask for one; null: every sandbox offline. */
    private readonly network: string | null = null,
  ) {}

  private start(task: Task, prepared: PreparedEnvironment): Promise<Sandbox> {
    return this.provider.start(task, prepared, { signal: this.signal, network: task.limits.network ? this.network : null }).then(async (sandbox) => {
      await sandbox.exec(['mkdir', '-p', '/logs/agent', '/logs/verifier']); // opens the helper shell too
      return sandbox;
    });
  }

  /** A started sandbox for `key`'s image; refills the pool while `stillQueued` trials will need one. */
  take(key: string, task: Task, prepared: PreparedEnvironment, stillQueued: number): Promise<Sandbox> {
    let pool = this.pools.get(key);
    if (!pool) this.pools.set(key, (pool = []));
    const taken = pool.shift() ?? this.start(task, prepared);
    while (pool.length < Math.min(stillQueued, this.size) && !this.signal.aborted) {
      const next = this.start(task, prepared);
      next.catch(() => undefined); // a failed warm start surfaces in the trial that takes it
      pool.push(next);
    }
    return taken;
  }

  async closeAll(): Promise<void> {
    const all = [...this.pools.values()].flat();
    this.pools.clear();
    await Promise.all(all.map((p) => p.then((sb) => sb.close(), () => undefined)));
  }
}
