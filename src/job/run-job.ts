import type { SandboxProvider } from '../sandbox/sandbox.js';
import type { JobSummary } from './events.js';
import { ImageCache } from './image-cache.js';
import { openGate } from './job-gate.js';
import {
  baseTrialIdOf,
  endpointCapsOf,
  lanesOf,
  makeConfigs,
  orderedTasksOf,
  queueSlots,
  type JobState,
} from './job-state.js';
import type { Priors } from './adaptive-gate.js';
import type { RunJobOptions } from './options.js';
import { dispatch } from './scheduler.js';
import { diskError, recordSafely, runSlot } from './slot-runner.js';
import { WarmPool } from './warm-pool.js';

export type { JobEvent, JobSummary } from './events.js';
export type { RunJobOptions } from './options.js';
export { DEFAULT_CONCURRENCY } from './job-state.js';

/** How the job is stopped: the caller's signal, the budget (which says so), or a failure (`stop.abort()`). */
function stopControl(options: RunJobOptions): {
  stop: AbortController;
  budgetHit: () => boolean;
  clearBudget: () => void;
  detach: () => void;
} {
  const stop = new AbortController();
  const parentAbort = (): void => stop.abort();
  options.signal?.addEventListener('abort', parentAbort, { once: true });
  let hit = false;
  const budgetSec = options.spec.budgetSec;
  const timer = budgetSec
    ? setTimeout(() => {
        hit = true;
        stop.abort();
      }, budgetSec * 1000)
    : undefined;
  return {
    stop,
    budgetHit: () => hit,
    clearBudget: () => clearTimeout(timer),
    detach: () => options.signal?.removeEventListener('abort', parentAbort),
  };
}

/**
 * The job's state as it starts: every agent made, every slot without a record queued (announced
 * by `job-start`), the image cache, the warm pool and the adaptive gate (fed the earlier records).
 */
async function openJob(options: RunJobOptions, stop: AbortController, startedMs: number): Promise<JobState> {
  const { spec, store, provider } = options;
  const lanes = lanesOf(options, provider);
  const emit = options.onEvent ?? (() => {});
  const configs = await makeConfigs(options);
  const finished = store.finishedSlots(options.retry);
  const priors = JSON.parse(store.getMeta('priors') ?? 'null') as Priors | null;
  const { tasks, ordered } = await orderedTasksOf(options, priors);
  const total = queueSlots(configs, ordered, spec.k, finished);
  const pending = configs.reduce((n, c) => n + c.queue.length, 0);
  const pendingByConfig = Object.fromEntries(configs.map((c) => [c.label, c.queue.length]));
  emit({
    type: 'job-start',
    job: spec.name,
    configs: configs.map((c) => c.label),
    tasks: tasks.length,
    total,
    pending,
    pendingByConfig,
    concurrency: lanes,
  });
  const state: JobState = {
    options,
    lanes,
    emit,
    startedMs,
    stop,
    stoppedBy: 'done',
    configs,
    byName: new Map(tasks.map((t) => [t.name, t])),
    endpointCap: endpointCapsOf(configs),
    endpointRunning: new Map(),
    priors,
    total,
    pending,
    images: new ImageCache({
      provider,
      infraRetries: spec.infraRetries,
      forceBuild: spec.forceBuild,
      signal: stop.signal,
      emit,
    }),
    warm: warmPoolFor(provider, stop.signal, spec.network ?? null),
    gate: null,
    droppedByRule: 0,
    counts: { completed: 0, errors: 0, infra: 0, notRun: 0 },
    running: 0,
    cursor: 0,
    removals: new Set(),
    storeFailure: null,
  };
  state.gate = openGate(state);
  return state;
}

/**
 * A provider with a fixed capacity (an engine pool) has no room for containers kept ready: each
 * would hold a slot a running trial needs.
 */
const warmPoolFor = (provider: SandboxProvider, signal: AbortSignal, network: string | null): WarmPool | null =>
  provider.capacity === undefined ? new WarmPool(provider, signal, network) : null;

/** Slots never started are listed as not run, so the job's record shows what is missing. */
function recordUnstarted(state: JobState): void {
  const why = `not started: ${state.stoppedBy === 'budget' ? 'the budget ran out' : 'the run was stopped'}`;
  for (const c of state.configs) {
    for (const slot of c.queue.splice(0)) {
      recordSafely(state, () =>
        state.options.store.recordNotRun(slot, baseTrialIdOf(slot, c.label), c.agent.name, c.agent.model, why),
      );
      state.counts.notRun += 1;
    }
  }
}

/**
 * Runs every trial slot of a job that has no record yet: configurations interleaved round-robin,
 * at most `concurrency` at once and each endpoint under its own cap; every image built once before
 * its first trial; infrastructure failures retried per trial, outcomes never. Each finished trial
 * is written to the store in its own transaction before the next is counted done. At the budget or
 * on cancellation, running trials are stopped and, with unstarted ones, recorded as not run.
 * A store that cannot be written (disk full, read-only) stops the job and is thrown.
 */
export async function runJob(options: RunJobOptions): Promise<JobSummary> {
  const startedMs = performance.now();
  const control = stopControl(options);
  let state: JobState;
  try {
    state = await openJob(options, control.stop, startedMs);
  } catch (err) {
    // An agent that cannot be made (a custom module that fails to load): no timer or listener outlives the call.
    control.clearBudget();
    control.detach();
    throw err;
  }
  await dispatch(
    state,
    (c, slot, claimed) => runSlot(state, c, slot, claimed),
    (err) => {
      state.storeFailure ??= diskError(options.jobDir, err);
      state.stop.abort();
    },
  );
  control.clearBudget();
  await Promise.all([state.warm?.closeAll(), ...state.removals]);
  control.detach();
  state.stoppedBy = control.budgetHit() ? 'budget' : state.stop.signal.aborted ? 'cancelled' : 'done';
  if (state.storeFailure) throw state.storeFailure;
  recordUnstarted(state);
  if (state.storeFailure) throw state.storeFailure;
  const { total, pending, counts } = state;
  const summary: JobSummary = {
    job: options.spec.name,
    total,
    ...counts,
    skipped: total - pending,
    settledEarly: state.droppedByRule,
    stoppedBy: state.stoppedBy,
    durationMs: performance.now() - startedMs,
  };
  state.emit({ type: 'job-done', summary });
  return summary;
}
