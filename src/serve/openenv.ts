import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { ServeError, type Grade } from './contract.js';
import type { ServeContext } from './context.js';
import type { OpenEnvActionT, OpenEnvObservationT, OpenEnvResetBody } from './openenv-contract.js';
import type { ServedBy } from './sessions.js';

interface OpenEnvEpisode {
  id: string;
  session: string;
  task: string;
  servedBy: ServedBy;
  steps: number;
  maxSteps: number | null;
  done: boolean;
  reward: number | null;
  endedAt: number | null;
}

/** What OpenEnv's reset and step answer. */
export interface OpenEnvResult {
  observation: OpenEnvObservationT;
  reward: number | null;
  done: boolean;
}

/** A step's command timeout when the client gives none (OpenEnv's WebSocket step has no field for it). */
export const STEP_TIMEOUT_SEC = 180;

/** How long a finished episode's state is kept for GET /state. */
const KEEP_DONE_MS = 3600_000;

/**
 * OpenEnv episodes over the session manager: reset starts a session (on a task, or the
 * curriculum's pick), step runs a command in it or, on submit (or at max_steps), grades it. The
 * grade goes through the same path as a session's (grades.jsonl, the curriculum, the accounting
 * policy: an infrastructure failure is reward null, never 0).
 */
export class OpenEnvEpisodes {
  private readonly episodes = new Map<string, OpenEnvEpisode>();

  constructor(private readonly ctx: ServeContext) {}

  async reset(body: z.infer<typeof OpenEnvResetBody>): Promise<OpenEnvResult> {
    this.forgetOld();
    const id = body.episode_id ?? `oe-${randomUUID()}`;
    // OpenEnv's reset starts over: an episode of the same id that is still running ends first.
    const earlier = this.episodes.get(id);
    if (earlier && !earlier.done) await this.end(earlier);
    const policy = body.policy ?? null;
    const chosen = this.ctx.resolveTask(body.task, body.split, policy);
    const created = await this.ctx.sessions.create(chosen.task, policy, { servedBy: chosen.servedBy, group: null });
    const ep: OpenEnvEpisode = {
      id,
      session: String(created.session_id),
      task: chosen.task,
      servedBy: chosen.servedBy,
      steps: 0,
      maxSteps: body.max_steps ?? null,
      done: false,
      reward: null,
      endedAt: null,
    };
    this.episodes.set(id, ep);
    const observation = { ...blank(ep), instruction: String(created.instruction) };
    return { observation, reward: null, done: false };
  }

  async step(id: string, action: OpenEnvActionT, timeoutSec: number): Promise<OpenEnvResult> {
    const ep = this.get(id);
    if (ep.done) throw new ServeError('conflict', `episode ${id} is done; reset to start another`);
    if ('submit' in action) return this.grade(ep, blank(ep));
    ep.steps += 1;
    const r = await this.ctx.sessions.exec(ep.session, action.command, timeoutSec);
    const observation: OpenEnvObservationT = {
      ...blank(ep),
      output: String(r.output),
      exit_code: r.exit_code as number | null,
      timed_out: Boolean(r.timed_out),
      truncated: Boolean(r.truncated),
    };
    if (ep.maxSteps !== null && ep.steps >= ep.maxSteps) return this.grade(ep, observation);
    return { observation, reward: null, done: false };
  }

  state(id: string): Record<string, unknown> {
    const ep = this.get(id);
    return {
      episode_id: ep.id,
      step_count: ep.steps,
      task: ep.task,
      served_by: ep.servedBy,
      done: ep.done,
      reward: ep.reward,
    };
  }

  private async grade(ep: OpenEnvEpisode, observation: OpenEnvObservationT): Promise<OpenEnvResult> {
    const g: Grade = await this.ctx.sessions.verify(ep.session);
    ep.done = true;
    ep.reward = g.reward;
    ep.endedAt = Date.now();
    const grade = { status: g.status, error_class: g.error_class, tests: g.tests };
    return { observation: { ...observation, grade }, reward: g.reward, done: true };
  }

  /** Ends a running episode without a grade (its WebSocket closed): its sandbox is removed. A done one stays as it is. */
  async close(id: string): Promise<void> {
    const ep = this.episodes.get(id);
    if (ep && !ep.done) await this.end(ep);
  }

  /** Ends an episode without a grade (a reset over it, a close): its sandbox is removed. */
  private async end(ep: OpenEnvEpisode): Promise<void> {
    ep.done = true;
    ep.endedAt = Date.now();
    try {
      await this.ctx.sessions.delete(ep.session);
    } catch (err) {
      // Already gone (expired, deleted): nothing left to remove; anything else is the client's to see.
      if (!(err instanceof ServeError && err.code === 'gone')) throw err;
    }
  }

  private get(id: string | undefined): OpenEnvEpisode {
    if (!id)
      throw new ServeError(
        'bad_request',
        'episode_id: required (the reset observation gives it; send it in the body or as X-Episode-Id)',
      );
    const ep = this.episodes.get(id);
    if (!ep) throw new ServeError('not_found', `no OpenEnv episode "${id}"`);
    return ep;
  }

  private forgetOld(): void {
    const now = Date.now();
    for (const [id, ep] of this.episodes)
      if (ep.endedAt !== null && now - ep.endedAt > KEEP_DONE_MS) this.episodes.delete(id);
  }
}

function blank(ep: OpenEnvEpisode): OpenEnvObservationT {
  return {
    episode_id: ep.id,
    task: ep.task,
    instruction: null,
    output: '',
    exit_code: null,
    timed_out: false,
    truncated: false,
    grade: null,
  };
}
