import type { Agent } from '../agent/agent.js';
import { createAgent, loadAgentModules } from '../agent/registry.js';
import { agentEnvOf } from '../agent/env.js';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import { slotKey, type Slot } from '../store/store.js';
import type { Task } from '../task/task.js';
import { asGraded } from '../verifier/toolchain/plan.js';
import type { AdaptiveGate, Priors } from './adaptive-gate.js';
import type { JobEvent, JobSummary } from './events.js';
import type { ImageCache } from './image-cache.js';
import type { RunJobOptions } from './options.js';
import { configLabelOf } from './spec.js';
import type { WarmPool } from './warm-pool.js';

/** One configuration of the job as it runs: its agent, its queue of slots, and how many run now. */
export interface ConfigRuntime {
  label: string;
  agent: Agent;
  secrets: string[];
  env: Record<string, string>;
  endpoint: string;
  cap: number;
  queue: Slot[];
  running: number;
}

/** What the job's parts share while it runs; every part reads and writes this one object. */
export interface JobState {
  readonly options: RunJobOptions;
  /** Trials at once. */
  readonly lanes: number;
  readonly emit: (e: JobEvent) => void;
  readonly startedMs: number;
  /** Aborts on the caller's cancel, the budget, or a store that cannot be written. */
  readonly stop: AbortController;
  stoppedBy: JobSummary['stoppedBy'];
  readonly configs: ConfigRuntime[];
  readonly byName: Map<string, Task>;
  /** Per endpoint: the lowest cap among its configurations, and how many of its trials run now. */
  readonly endpointCap: Map<string, number>;
  readonly endpointRunning: Map<string, number>;
  readonly priors: Priors | null;
  /** Slots in the job (k x tasks x configurations), and those without a record when it began. */
  total: number;
  pending: number;
  images: ImageCache;
  warm: WarmPool | null;
  gate: AdaptiveGate | null;
  /** Queued slots the adaptive rule dropped as settled. */
  droppedByRule: number;
  readonly counts: { completed: number; errors: number; infra: number; notRun: number };
  /** Trials running now (all configurations), and the configuration the round-robin looks at first. */
  running: number;
  cursor: number;
  /** Sandboxes of finished trials are removed while the next trials run; the job ends after them. */
  readonly removals: Set<Promise<void>>;
  /** The first store write (or trial folder) that failed: the job stops and throws it. */
  storeFailure: unknown;
}

/** Trials at once when neither the job nor the provider says. */
export const DEFAULT_CONCURRENCY = 4;

export const safeName = (s: string): string => s.replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 80);

/** The trial id of a slot's first run (a retry appends `__retryN`). */
export const baseTrialIdOf = (slot: Slot, config: string): string =>
  `${safeName(slot.task)}__${safeName(config)}__${slot.attempt}`;

/** Trials at once: the job's concurrency, else the provider's capacity, else the default. */
export const lanesOf = (options: RunJobOptions, provider: SandboxProvider): number =>
  options.spec.concurrency ?? provider.capacity ?? DEFAULT_CONCURRENCY;

/** Custom agent modules are loaded and every agent made before any image is built or sandbox started. */
export async function makeConfigs(options: RunJobOptions): Promise<ConfigRuntime[]> {
  const { spec } = options;
  await loadAgentModules(spec.agents);
  const configs: ConfigRuntime[] = [];
  for (const a of spec.agents) {
    const made = options.agentFactory
      ? options.agentFactory(a)
      : createAgent({ name: a.agent, model: a.model, maxTurns: a.maxTurns, commandTimeoutSec: a.commandTimeoutSec });
    const env = await agentEnvOf(a);
    configs.push({
      label: configLabelOf(a),
      agent: made.agent,
      secrets: [...made.secrets, ...env.secrets],
      env: env.env,
      endpoint: a.model?.baseUrl ?? `local:${a.agent}`,
      cap: a.concurrency ?? Number.POSITIVE_INFINITY,
      queue: [],
      running: 0,
    });
  }
  return configs;
}

export function endpointCapsOf(configs: ConfigRuntime[]): Map<string, number> {
  const caps = new Map<string, number>();
  for (const c of configs) caps.set(c.endpoint, Math.min(caps.get(c.endpoint) ?? Number.POSITIVE_INFINITY, c.cap));
  return caps;
}

/**
 * The job's tasks, graded as the job's network allows (offline trials of a verifier that fetches its
 * tools use the offline toolchain), in the order slots are queued: longest first, when an earlier
 * measurement says how long each task takes, so the last trials to start are the short ones and the
 * job drains with every slot busy until near the end.
 */
export async function orderedTasksOf(
  options: RunJobOptions,
  priors: Priors | null,
): Promise<{ tasks: Task[]; ordered: Task[] }> {
  const expectedMs = (task: string): number => Math.max(0, ...Object.values(priors ?? {}).map((p) => p[task]?.ms ?? 0));
  const tasks = await Promise.all(options.tasks.map((t) => asGraded(t, options.spec.network ?? null)));
  const ordered = priors ? [...tasks].sort((a, b) => expectedMs(b.name) - expectedMs(a.name)) : tasks;
  return { tasks, ordered };
}

/**
 * Queues every slot without a record (k rounds, tasks in order, configurations interleaved);
 * returns the job's total.
 */
export function queueSlots(configs: ConfigRuntime[], ordered: Task[], k: number, finished: Set<string>): number {
  let total = 0;
  for (let attempt = 0; attempt < k; attempt++) {
    for (const task of ordered) {
      for (const c of configs) {
        total += 1;
        const slot = { config: c.label, task: task.name, attempt };
        if (!finished.has(slotKey(slot))) c.queue.push(slot);
      }
    }
  }
  return total;
}
