import type { Slot } from '../store/store.js';
import { dropSettled, eligible } from './job-gate.js';
import { imageKeyOf } from './image-cache.js';
import type { ConfigRuntime, JobState } from './job-state.js';
import type { UpcomingStart, WarmStart } from './warm-pool.js';

/** Starts one slot's trial; settles when it is recorded (rejects only on a failure that stops the job). */
export type RunSlot = (c: ConfigRuntime, slot: Slot, claimed: WarmStart | null) => Promise<void>;

/**
 * The next slot to start: round-robin over configurations from the cursor, the first with an
 * eligible slot and room under its endpoint's cap. The slot is taken off its queue and the cursor
 * moves past its configuration.
 */
export function takeNext(state: JobState): { c: ConfigRuntime; slot: Slot } | null {
  const { configs } = state;
  for (let i = 0; i < configs.length; i++) {
    const c = configs[(state.cursor + i) % configs.length]!;
    if ((state.endpointRunning.get(c.endpoint) ?? 0) >= state.endpointCap.get(c.endpoint)!) continue;
    const at = c.queue.findIndex((s) => eligible(state, s));
    if (at >= 0) {
      state.cursor = (state.cursor + i + 1) % configs.length;
      return { c, slot: c.queue.splice(at, 1)[0]! };
    }
  }
  return null;
}

function countStart(state: JobState, c: ConfigRuntime): void {
  state.running += 1;
  c.running += 1;
  state.endpointRunning.set(c.endpoint, (state.endpointRunning.get(c.endpoint) ?? 0) + 1);
}

function countEnd(state: JobState, c: ConfigRuntime): void {
  state.running -= 1;
  c.running -= 1;
  state.endpointRunning.set(c.endpoint, state.endpointRunning.get(c.endpoint)! - 1);
}

/**
 * The trials next in line, as `takeNext` will take them (round-robin over configurations), one per
 * lane, those whose image is ready: the warm pool keeps a container started for each.
 */
export function lookAhead(state: JobState): UpcomingStart[] {
  const { configs, lanes } = state;
  const heads = configs.map((c) => {
    const next: Slot[] = [];
    for (let i = 0; i < c.queue.length && i < 4 * lanes && next.length < lanes; i++)
      if (eligible(state, c.queue[i]!)) next.push(c.queue[i]!);
    return next;
  });
  const out: UpcomingStart[] = [];
  for (let i = 0; out.length < lanes && heads.some((h) => h.length > i); i++) {
    for (let j = 0; j < configs.length && out.length < lanes; j++) {
      const at = (state.cursor + j) % configs.length;
      const slot = heads[at]![i];
      if (!slot) continue;
      const task = state.byName.get(slot.task)!;
      const key = imageKeyOf(task, configs[at]!.agent);
      const prepared = state.images.ready(key);
      if (prepared) out.push({ key, task, prepared });
    }
  }
  return out;
}

/**
 * Done when nothing runs and nothing can start (empty queues, or only slots waiting on attempts
 * that will never be recorded in this run).
 */
const drained = (state: JobState): boolean =>
  state.running === 0 &&
  (state.stop.signal.aborted || state.configs.every((c) => !c.queue.some((s) => eligible(state, s))));

/**
 * Runs the job's queues to the end: slots start as lanes and endpoint caps allow, each slot's warm
 * container claimed as it starts (before the look-ahead moves on); the warm pool is re-planned after
 * every start and end. A failure `runSlot` throws (a store or trial folder that cannot be written)
 * is kept as the job's failure and stops the job. Settles when nothing runs and nothing can start.
 */
export function dispatch(state: JobState, runSlot: RunSlot, onFailure: (err: unknown) => void): Promise<void> {
  return new Promise<void>((resolveAll) => {
    const pump = (): void => {
      while (!state.stop.signal.aborted && state.running < state.lanes) {
        dropSettled(state);
        const next = takeNext(state);
        if (!next) break;
        const { c, slot } = next;
        countStart(state, c);
        const claimed = state.warm?.claim(imageKeyOf(state.byName.get(slot.task)!, c.agent)) ?? null;
        void runSlot(c, slot, claimed)
          .catch(onFailure)
          .finally(() => {
            countEnd(state, c);
            pump();
          });
      }
      dropSettled(state);
      state.warm?.plan(lookAhead(state));
      if (drained(state)) resolveAll();
    };
    state.stop.signal.addEventListener('abort', () => pump(), { once: true });
    pump();
  });
}
