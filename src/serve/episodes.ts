import path from 'node:path';
import type { z } from 'zod';
import { createAgent } from '../agent/registry.js';
import { readJsonIfThere, readTextIfThere, writeFileAtomic } from '../util/files.js';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import { runTrial } from '../trial/run.js';
import { trialAdmission } from '../trial/admission.js';
import type { TrialResult } from '../trial/schema.js';
import type { TrialOptions } from '../trial/options.js';
import { runTreeEpisode } from './tree-episode.js';
import { branchTrialId } from '../trial/branch.js';
import { recordedTurns } from './recorded-turns.js';
import type { Agent } from '../agent/agent.js';
import type { Task } from '../task/task.js';
import { ServeError, type EpisodeBody, type GroupEpisode } from './contract.js';
import { gradeOf } from './grade.js';
import type { ProtectionStore } from '../verifier/protection-store.js';
import type { GradingPolicy } from '../verifier/evidence.js';
import { childDir } from './ids.js';
import { joinTurns } from './token-stream.js';
import { episodeModel, type ServedModel } from './models.js';
import type { GradeEvent, ServedBy, SessionManager } from './sessions.js';

type EpisodeRequest = z.infer<typeof EpisodeBody>;

/** How an episode is run: as a member of a group, on a slot of capacity already taken for it. */
interface EpisodeHow {
  group?: string;
  /** Gives back the slot the caller took for this episode (called once it settles). */
  reserved?: () => void;
}

/** How the server grades: the admission records it finds tasks' records in, and the timeout multiplier. */
export interface ServeGrading {
  admission?: ProtectionStore;
  timeoutMultiplier?: number;
  grading?: GradingPolicy;
}

/** A new episode's id (when the client gave none). */
export const newEpisodeId = (): string => `ep-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

/** The ids an episode's grades are given under: its own, or a tree's branches' (`<id>.b<j>`). */
export const gradedIdsOf = (id: string, req: { branch?: { n: number } }): string[] =>
  req.branch ? Array.from({ length: req.branch.n }, (_, j) => branchTrialId(id, j)) : [id];

/** Episode i of a group run by the server. */
export const groupEpisodeId = (groupId: string, i: number): string => `${groupId}.${i}`;

/** The answer of a finished episode, kept in its folder so the same id is answered after it left memory. */
const RECORD = 'episode.json';

/**
 * Episodes for trainers that hand the environment an OpenAI-compatible endpoint the server was
 * configured with: termgrade runs a whole trial with one of its scaffolds against that endpoint and
 * returns the grade, the messages and, per model call, the token ids and logprobs the server
 * returned (never re-tokenised). The trainer's session id rides on every model call, as header
 * `X-Session-Id` and body `session_id`. Idempotent by episode_id: a running episode is answered
 * from memory, a finished one from its folder (`<dataDir>/episodes/<id>/episode.json`), so memory
 * holds only the episodes running now.
 */
export class EpisodeRunner {
  private readonly running = new Map<string, Promise<Record<string, unknown>>>();
  readonly counters = { started: 0 };
  private readonly outDir: string;

  constructor(
    private readonly provider: SandboxProvider,
    private readonly sessions: SessionManager,
    dataDir: string,
    private readonly models: ServedModel[],
    private readonly onGrade?: (g: GradeEvent) => void,
    private readonly grading: ServeGrading = {},
  ) {
    this.outDir = path.join(dataDir, 'episodes');
  }

  /** Episodes running now (what memory holds). */
  inMemory(): number {
    return this.running.size;
  }

  run(
    req: EpisodeRequest & { task: string },
    servedBy: ServedBy = 'named',
    how: EpisodeHow = {},
  ): Promise<Record<string, unknown>> {
    const model = episodeModel(this.models, req.model);
    const served = this.sessions.task(req.task);
    const id = req.episode_id ?? newEpisodeId();
    // An id answers only for the task it ran on: a named task (or a group's) that differs is 409;
    // a repeated "auto" call is answered by the earlier pick.
    const strict = servedBy === 'named' || how.group !== undefined;
    // The answer's own task is compared (an entry running now may be an "auto" call's record).
    const sameTask = (r: Record<string, unknown>): Record<string, unknown> => {
      if (strict && r.task !== served.task.name) throw otherTask(id, String(r.task), served.task.name);
      return r;
    };
    const known = this.running.get(id);
    if (known) {
      how.reserved?.();
      return known.then(sameTask);
    }
    const work = (async () =>
      (await this.recorded(id)) ?? this.fresh(id, req, served, model, servedBy, how.group ?? null, how.reserved))();
    this.running.set(id, work);
    // Settled either way, the episode leaves memory and gives back a slot reserved for it: a result
    // is on disk, a failure (a bug, not a grade) may be retried with the same id.
    work.then(
      () => this.settle(id, how),
      () => this.settle(id, how),
    );
    return work.then(sameTask);
  }

  /**
   * The task and how it was chosen of a group whose episodes are recorded (the first of its n
   * found), or null: a group the server forgot (restart, expiry) keeps its task on a repeated call.
   */
  async recordedGroup(groupId: string, n: number): Promise<{ task: string; servedBy: ServedBy } | null> {
    for (let i = 0; i < n; i += 1) {
      const record = await this.recorded(groupEpisodeId(groupId, i));
      if (record) return { task: String(record.task), servedBy: record.served_by === 'auto' ? 'auto' : 'named' };
    }
    return null;
  }

  private settle(id: string, how: EpisodeHow): void {
    this.running.delete(id);
    how.reserved?.();
  }

  /**
   * A group's n episodes of one task, run at once: capacity for all n is taken before any starts
   * (429 when they do not fit: a group starts whole or not at all), episode i is `<groupId>.<i>`
   * (so a repeated call with the same group id answers from the episodes' records and runs only
   * what is missing). Answers in order once every episode is settled; the first failure (not a
   * grade: a fault of the server or the request) is thrown after the others finished.
   */
  async runGroup(g: {
    groupId: string;
    task: string;
    n: number;
    policy: string | null;
    servedBy: ServedBy;
    episode: z.infer<typeof GroupEpisode>;
  }): Promise<Array<Record<string, unknown>>> {
    episodeModel(this.models, g.episode.model); // an unknown model is refused before any slot is taken
    this.sessions.ensureRoomFor(g.n * slotsOf(g.episode));
    // Every recorded member must be of the group's task, checked before any runs (no mixed group).
    for (let i = 0; i < g.n; i += 1) {
      const id = groupEpisodeId(g.groupId, i);
      const record = await this.recorded(id);
      if (record && record.task !== g.task) throw otherTask(id, String(record.task), g.task);
    }
    const { session_ids: sessionIds, ...shared } = g.episode;
    const settled = await Promise.allSettled(
      Array.from({ length: g.n }, (_, i) => {
        const reserved = this.sessions.borrow();
        try {
          return this.run(
            {
              ...shared,
              task: g.task,
              policy: g.policy ?? undefined,
              episode_id: groupEpisodeId(g.groupId, i),
              session_id: sessionIds?.[i],
            },
            g.servedBy,
            { group: g.groupId, reserved },
          );
        } catch (err) {
          reserved(); // refused before it ran: its slot is given back now
          return Promise.reject(err instanceof Error ? err : new Error(String(err)));
        }
      }),
    );
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return settled.map((r) => (r as PromiseFulfilledResult<Record<string, unknown>>).value);
  }

  private async recorded(id: string): Promise<Record<string, unknown> | null> {
    const file = path.join(childDir(this.outDir, id), RECORD);
    const text = await readTextIfThere(file);
    if (text === null) return null;
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new ServeError(
        'unavailable',
        `episode ${id}: its record ${file} cannot be read (${(err as Error).message})`,
      );
    }
  }

  /** The options of an episode's trials, graded as `run` grades one: the task's admission record, the timeout multiplier. */
  private async trialOptions(task: Task, agent: Agent, id: string, secrets: string[]) {
    const admission = await trialAdmission(this.grading.admission, task, agent.name);
    const multiplier = this.grading.timeoutMultiplier;
    const options: TrialOptions = {
      task,
      agent,
      provider: this.provider,
      outDir: this.outDir,
      trialId: id,
      secrets,
      ...admission.options,
      timeouts: { agentMultiplier: multiplier, verifierMultiplier: multiplier },
      grading: this.grading.grading,
    };
    return { options, keep: (r: TrialResult) => admission.keep(r) };
  }

  /** The episode's trial. */
  private async trial(task: Task, agent: Agent, id: string, secrets: string[]): Promise<TrialResult> {
    const { options, keep } = await this.trialOptions(task, agent, id, secrets);
    const result = await runTrial(options);
    await keep(result);
    return result;
  }

  /** A tree-shaped episode (req.branch): see tree-episode.ts. */
  private async tree(
    id: string,
    req: EpisodeRequest & { branch: NonNullable<EpisodeRequest['branch']> },
    served: ReturnType<SessionManager['task']>,
    model: ReturnType<typeof episodeModel>,
    how: { servedBy: ServedBy; group: string | null },
  ): Promise<Record<string, unknown>> {
    const agentFor = (sessionId: string | undefined) => createEpisodeAgent(req, model, sessionId);
    const { agent, secrets } = agentFor(req.session_id);
    const { options, keep } = await this.trialOptions(served.task, agent, id, secrets);
    return runTreeEpisode({
      id,
      options,
      keep,
      branch: req.branch,
      branchAgent: (j) => agentFor(req.session_id === undefined ? undefined : `${req.session_id}.b${j}`).agent,
      servedBy: how.servedBy,
      grade: (branchId, grade) => {
        if (grade.error_class) this.sessions.countError(grade.error_class);
        this.onGrade?.({
          kind: 'episode',
          id: branchId,
          task: served.task.name,
          policy: req.policy ?? null,
          grade,
          servedBy: how.servedBy,
          // A lone tree is its own group (its branch point); a group's trees count in the group.
          group: how.group ?? id,
        });
      },
    });
  }

  private async fresh(
    id: string,
    req: EpisodeRequest,
    served: ReturnType<SessionManager['task']>,
    model: ReturnType<typeof episodeModel>,
    servedBy: ServedBy,
    group: string | null,
    reserved: (() => void) | undefined,
  ): Promise<Record<string, unknown>> {
    const release = reserved ?? this.sessions.borrow();
    // A tree holds its prefix's sandbox and then its n branches' (the prefix's goes once forked).
    const more = this.borrowMore(slotsOf(req) - 1, release);
    this.counters.started += 1;
    try {
      if (req.branch) return await this.tree(id, { ...req, branch: req.branch }, served, model, { servedBy, group });
      const { agent, secrets } = createEpisodeAgent(req, model, req.session_id);
      const dir = childDir(this.outDir, id);
      const r = await this.trial(served.task, agent, id, secrets);
      const grade = gradeOf(r.reward, r.error?.class ?? null, r.tests, r);
      if (grade.error_class) this.sessions.countError(grade.error_class);
      this.onGrade?.({
        kind: 'episode',
        id,
        task: served.task.name,
        policy: req.policy ?? null,
        grade,
        servedBy,
        group,
      });
      const turns = await recordedTurns(dir);
      const answer = {
        episode_id: id,
        task: served.task.name,
        served_by: servedBy,
        ...grade,
        exit_reason: r.exitReason,
        messages: (await readJsonIfThere(path.join(dir, 'agent', 'messages.json'))) ?? [],
        turns,
        // The turns joined into one stream (observation tokens masked), or why they cannot be.
        ...tokenStreamOf(turns),
        usage: {
          turns: r.turns,
          prompt_tokens: r.tokens?.input ?? null,
          cached_tokens: r.tokens?.cached ?? null,
          completion_tokens: r.tokens?.output ?? null,
          cost_usd: r.costUsd,
        },
        timings: Object.fromEntries(Object.entries(r.phases).map(([k, v]) => [k, v ? v.durationMs / 1000 : null])),
      };
      const file = path.join(dir, RECORD);
      await writeFileAtomic(file, JSON.stringify(answer));
      return answer;
    } finally {
      more();
      release();
    }
  }

  /** Takes `k` more units of capacity (a tree's branches); refused (429) with `first` given back. Returns their release. */
  private borrowMore(k: number, first: () => void): () => void {
    const taken: Array<() => void> = [];
    try {
      this.sessions.ensureRoomFor(k);
      for (let i = 0; i < k; i += 1) taken.push(this.sessions.borrow());
    } catch (err) {
      for (const r of taken) r();
      first();
      throw err;
    }
    return () => taken.forEach((r) => r());
  }
}

/** Sandboxes an episode holds at most: 1, or a tree's prefix and its n branches. */
export const slotsOf = (req: { branch?: { n: number } }): number => (req.branch ? req.branch.n + 1 : 1);

/** The episode's agent against the served model, the trainer's session id on every call (header and body). */
function createEpisodeAgent(
  req: EpisodeRequest,
  model: ReturnType<typeof episodeModel>,
  sessionId: string | undefined,
): ReturnType<typeof createAgent> {
  const headers: Record<string, string> = sessionId ? { 'X-Session-Id': sessionId } : {};
  const extraBody = sessionId ? { ...model.extraBody, session_id: sessionId } : model.extraBody;
  return createAgent({ name: req.agent, model: { ...model, headers, extraBody }, maxTurns: req.max_turns });
}

const otherTask = (id: string, recorded: string, asked: string): ServeError =>
  new ServeError('conflict', `episode "${id}" is of task ${recorded}, not ${asked}: use a new id`);

/** `token_stream` (null without ids) and `token_stream_problem` for an episode's answer. */
function tokenStreamOf(turns: Parameters<typeof joinTurns>[0]): {
  token_stream: unknown;
  token_stream_problem: string | null;
} {
  if (turns.length === 0 || turns.every((t) => t.completion_token_ids === null))
    return { token_stream: null, token_stream_problem: null };
  const joined = joinTurns(turns);
  return { token_stream: joined.stream, token_stream_problem: joined.problem };
}
