import type { Agent } from '../agent/agent.js';
import type { PreparedEnvironment, SandboxProvider } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { errorMessage } from '../util/errors.js';
import type { JobEvent } from './events.js';

/** A trial's image: the task's image with the agent's layer on top. */
export const imageKeyOf = (task: Task, agent: Agent): string => `${task.name}\u0000${agent.imageLayer ?? ''}`;

export interface ImageCacheOptions {
  provider: SandboxProvider;
  /** A build that fails is tried again up to this many times (not after a cancel). */
  infraRetries: number;
  forceBuild?: boolean;
  signal: AbortSignal;
  emit: (e: JobEvent) => void;
}

/**
 * One build per (task image, agent layer), shared by every trial that needs it: the first trial
 * to ask starts it, the others await the same build. Images ready are known by key, for the warm
 * pool's look-ahead.
 */
export class ImageCache {
  private readonly builds = new Map<string, Promise<PreparedEnvironment>>();
  private readonly prepared = new Map<string, PreparedEnvironment>();

  constructor(private readonly options: ImageCacheOptions) {}

  /** The image, built (or found) once; a build that failed is failed for every trial that shares it. */
  ensure(task: Task, agent: Agent): Promise<PreparedEnvironment> {
    const key = imageKeyOf(task, agent);
    let p = this.builds.get(key);
    if (!p) {
      p = this.build(key, task, agent);
      this.builds.set(key, p);
    }
    return p;
  }

  /** The image already made for this key, if any (no build is started). */
  ready(key: string): PreparedEnvironment | undefined {
    return this.prepared.get(key);
  }

  private async build(key: string, task: Task, agent: Agent): Promise<PreparedEnvironment> {
    const { provider, signal, emit } = this.options;
    emit({ type: 'build-start', task: task.name });
    let last: unknown;
    for (let i = 0; i <= this.options.infraRetries; i++) {
      try {
        const prepared = await provider.prepare(task, {
          signal,
          agentLayer: agent.imageLayer,
          forceBuild: this.options.forceBuild,
        });
        this.prepared.set(key, prepared);
        emit({ type: 'build-done', task: task.name, cached: prepared.cached, ms: prepared.durationMs });
        return prepared;
      } catch (err) {
        last = err;
        if (signal.aborted) break;
      }
    }
    emit({ type: 'build-failed', task: task.name, message: errorMessage(last) });
    throw last;
  }
}
