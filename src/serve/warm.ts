import { WarmPool, type UpcomingStart, type WarmStart } from '../job/warm-pool.js';
import type { PreparedEnvironment, Sandbox, SandboxProvider } from '../sandbox/sandbox.js';
import { DEFAULT_START_TIMEOUT_SEC, untilAborted } from '../sandbox/start.js';
import { TermgradeError } from '../util/errors.js';
import { deadlineSignal } from '../util/time.js';
import type { Task } from '../task/task.js';
import { causeOf, log } from '../util/log.js';

export interface ServeWarmOptions {
  provider: SandboxProvider;
  /** Started, never-used sandboxes kept ready in all (`--warm`). */
  size: number;
  /** The served tasks, in the order the first fill goes round. */
  tasks: Task[];
  /** Aborted when the server stops: no warm start begins after it. */
  signal: AbortSignal;
  /** Labels every warm container carries (the server's own). */
  labels: Record<string, string>;
  /** Sandboxes that fit now besides the live ones (capacity minus live): warm ones never take more. */
  room: () => number;
}

/** The warm share of `budget` each task gets, most recently demanded first. */
export function allot(targets: Map<string, number>, budget: number): Map<string, number> {
  const out = new Map<string, number>();
  let left = Math.max(0, budget);
  for (const [task, want] of [...targets].reverse()) {
    const n = Math.min(want, left);
    if (n > 0) out.set(task, n);
    left -= n;
  }
  return out;
}

/**
 * Warm sandboxes for `serve`: started, never-used containers of the tasks clients ask for, so a
 * session's start is a claim rather than a container start. Which tasks hold them follows demand:
 * the first fill goes round the served tasks; each request for a task raises its target to what
 * that request took (1, or a group's n), so the next request for it is warm too; the total never
 * passes `size`, the least recently demanded task giving up its share first. Warm containers
 * count against the server's capacity: they only use the room live sessions leave, and are given
 * up (newest first) when a session needs it. Each serves one session at most (a claim takes it
 * out of the pool for good), so a warm session is exactly as fresh as a cold one.
 */
export class ServeWarm {
  private readonly pool: WarmPool;
  /** Each task's warm target, least recently demanded first (Map order). */
  private readonly targets = new Map<string, number>();
  private readonly byName: Map<string, Task>;
  private readonly prepared = new Map<string, PreparedEnvironment>();
  private readonly preparing = new Map<string, Promise<void>>();
  /** Tasks whose image could not be prepared: they start cold (their sessions say why). */
  private readonly unwarmable = new Set<string>();
  private scheduled: NodeJS.Immediate | null = null;
  /** Session starts served from a warm sandbox, cold, and warm claims that failed and went cold. */
  readonly counters = { warm: 0, cold: 0, warmFailed: 0 };

  constructor(private readonly options: ServeWarmOptions) {
    this.pool = new WarmPool(options.provider, options.signal, null, options.labels);
    this.byName = new Map(options.tasks.map((t) => [t.name, t]));
    for (let i = 0; i < options.size && options.tasks.length > 0; i++) {
      const name = options.tasks[i % options.tasks.length]!.name;
      this.targets.set(name, (this.targets.get(name) ?? 0) + 1);
    }
  }

  /** The first fill: the images of the tasks it covers prepared (built), then their containers started. */
  async fill(): Promise<void> {
    await Promise.all([...this.targets.keys()].map((t) => this.prepare(t)));
    this.plan();
  }

  /** Warm sandboxes held now (ready or still starting). */
  held(): number {
    return this.pool.size();
  }

  /** Warm sandboxes held now for `task`. */
  heldFor(task: string): number {
    return this.pool.size(task);
  }

  /** A warm start of `task` taken out of the pool for one session, or null when none is held. */
  claim(task: string): WarmStart | null {
    return this.pool.claim(task);
  }

  /**
   * A claimed warm sandbox, awaited within the normal start deadline: its start is given up when
   * the deadline passes or `signal` aborts (the container is then removed as it arrives). It is
   * handed over as the warm start made it ready (/logs made): no engine call on the claim.
   */
  async take(warm: WarmStart, signal: AbortSignal): Promise<Sandbox> {
    const deadline = deadlineSignal(signal, DEFAULT_START_TIMEOUT_SEC * 1000);
    deadline.signal.addEventListener('abort', warm.cancel, { once: true });
    try {
      return await untilAborted(warm.sandbox, deadline.signal, (late) => void late.close());
    } catch (err) {
      if (deadline.timedOut())
        throw new TermgradeError(
          'environment_error',
          `the warm container did not start within ${DEFAULT_START_TIMEOUT_SEC} s`,
          {
            cause: err,
          },
        );
      throw err;
    } finally {
      deadline.clear();
      deadline.signal.removeEventListener('abort', warm.cancel);
    }
  }

  /** A request for `task` took `want` sandboxes: its target becomes at least that, and it is the most recently demanded. */
  demand(task: string, want: number): void {
    if (this.options.size === 0 || this.unwarmable.has(task)) return;
    const target = Math.min(this.options.size, Math.max(want, this.targets.get(task) ?? 0));
    this.targets.delete(task);
    let total = target;
    for (const n of this.targets.values()) total += n;
    for (const [other, n] of this.targets) {
      if (total <= this.options.size) break;
      const cut = Math.min(n, total - this.options.size);
      total -= cut;
      if (n === cut) this.targets.delete(other);
      else this.targets.set(other, n - cut);
    }
    this.targets.set(task, target);
    this.schedule();
  }

  /**
   * Plans again once the current burst of requests is taken in (a group's sessions are created in
   * one go): one plan for all of them rather than starts begun and given up in between.
   */
  schedule(): void {
    if (this.scheduled || this.options.signal.aborted) return;
    this.scheduled = setImmediate(() => {
      this.scheduled = null;
      this.plan();
    });
  }

  /** Keeps each task's allotted share started; what passes the room left is given up at once. */
  plan(): void {
    if (this.options.signal.aborted) return;
    const budget = Math.min(this.options.size, this.options.room());
    const upcoming: UpcomingStart[] = [];
    for (const [name, n] of allot(this.targets, budget)) {
      const prepared = this.prepared.get(name);
      const task = this.byName.get(name);
      if (!task || this.unwarmable.has(name)) continue;
      if (!prepared) {
        void this.prepare(name).then(() => this.schedule());
        continue;
      }
      for (let i = 0; i < n; i++) upcoming.push({ key: name, task, prepared });
    }
    this.pool.plan(upcoming, true);
  }

  /** The task's image, built once; a build that fails is logged and the task gets no warm sandboxes. */
  private prepare(name: string): Promise<void> {
    let p = this.preparing.get(name);
    const task = this.byName.get(name);
    if (!p && task) {
      p = this.options.provider.prepare(task, { signal: this.options.signal }).then(
        (prepared) => void this.prepared.set(name, prepared),
        (err: unknown) => {
          if (this.options.signal.aborted) return;
          log.warn('a task image could not be prepared for warm sandboxes: its sessions start cold', {
            task: name,
            cause: causeOf(err),
          });
          this.unwarmable.add(name);
          this.targets.delete(name);
        },
      );
      this.preparing.set(name, p);
    }
    return p ?? Promise.resolve();
  }

  /** Removes every warm sandbox (started or starting) and waits until the engine holds none. */
  async closeAll(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    await this.pool.closeAll();
  }
}
