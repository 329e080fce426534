import PQueue from 'p-queue';

/**
 * Engine work no trial waits on: starting warm containers, removing finished ones. It runs one at
 * a time, and each piece waits (up to `maxWaitMs`) while some trial is at a step that waits on the
 * engine (its sandbox being set up, its grading: a restart, copies, execs). When many trials end
 * together, as they do when they take about as long, their grading then has the engine's cores to
 * itself instead of sharing them with as many removals and starts; the wait is bounded so that
 * background work never starves under a steady stream of grading.
 */
export class BackgroundWork {
  private readonly queue = new PQueue({ concurrency: 1 });
  private waiting = 0;
  private wakers: Array<() => void> = [];

  constructor(private readonly maxWaitMs = 1500) {}

  /** A trial entered a step that waits on the engine; `leave` when it is past it. */
  enter(): void {
    this.waiting += 1;
  }

  leave(): void {
    this.waiting = Math.max(0, this.waiting - 1);
    if (this.waiting === 0) for (const wake of this.wakers.splice(0)) wake();
  }

  /** Runs `work` in its turn, once no trial waits on the engine (or after the longest wait). */
  add<T>(work: () => Promise<T>): Promise<T> {
    return this.queue.add(async () => {
      await this.quiet();
      return work();
    }) as Promise<T>;
  }

  private quiet(): Promise<void> {
    if (this.waiting === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.wakers = this.wakers.filter((w) => w !== wake);
        resolve();
      }, this.maxWaitMs);
      this.wakers.push(wake);
    });
  }
}
