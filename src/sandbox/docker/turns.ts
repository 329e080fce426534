import PQueue from 'p-queue';

/**
 * Ahead of how many later arrivals a background request (a warm start, a removal) still goes:
 * background work waits while trials wait on the engine, but never for ever.
 */
export const BACKGROUND_LAG = 16;

/**
 * The order in which one engine serves the heavy requests of its sandboxes (container starts and
 * stops, exec set-ups, archive copies, removals): a few at once (about the engine's cores), the
 * trial that began waiting first served first.
 *
 * Why: these requests are CPU work for the engine (runc, the shim, overlay mounts), and trials of
 * about the same length end together; the engine shares its cores among all their gradings at
 * once, so each ends only when the last does, and they stay in step for the next round. Served in
 * order, the first grading ends after its own work, the next after two, and so on: half the mean
 * wait for the same total, and the trials fall out of step, so the next round barely queues.
 * A trial's place is the moment it began waiting (its start, its grading), so its later requests
 * go before those of trials that came after it. Background requests take a place BACKGROUND_LAG
 * arrivals later.
 */
export class EngineTurns {
  private readonly queue: PQueue;
  private clock = 0;

  constructor(concurrency = 2) {
    this.queue = new PQueue({ concurrency });
  }

  /** Requests served at once (set from the engine's core count once known). */
  set concurrency(n: number) {
    this.queue.concurrency = Math.max(1, Math.floor(n));
  }

  get concurrency(): number {
    return this.queue.concurrency;
  }

  /** A place in line for a trial that begins waiting now. */
  place(background = false): number {
    this.clock += 1;
    return this.clock + (background ? BACKGROUND_LAG : 0);
  }

  /** Runs `request` when its place comes up. Never call from inside another request (it would wait on itself). */
  run<T>(place: number, request: () => Promise<T>): Promise<T> {
    return this.queue.add<T>(request, { priority: -place });
  }
}

/** Runs one heavy engine request in its sandbox's turn. */
export type Turn = <T>(request: () => Promise<T>) => Promise<T>;
