import path from 'node:path';
import type { z } from 'zod';
import { createAgent } from '../agent/registry.js';
import { readJsonIfThere } from '../util/files.js';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import { runTrial } from '../trial/run.js';
import type { EpisodeBody, Grade } from './contract.js';
import { gradeOf } from './grade.js';
import type { SessionManager } from './sessions.js';

type EpisodeRequest = z.infer<typeof EpisodeBody>;

interface AtifStep {
  source: string;
  metrics?: { prompt_tokens?: number; completion_tokens?: number; prompt_token_ids?: number[] | null; completion_token_ids?: number[] | null; logprobs?: number[] | null };
}

/**
 * Episodes for trainers that hand the environment an OpenAI-compatible endpoint: termgrade runs a
 * whole trial with one of its scaffolds against that endpoint and returns the grade, the messages
 * and, per model call, the token ids and logprobs the server returned (never re-tokenised). The
 * trainer's session id rides on every model call, as header `X-Session-Id` and body `session_id`.
 * Idempotent by episode_id: the same id (running or done) gives the same episode.
 */
export class EpisodeRunner {
  private readonly episodes = new Map<string, Promise<Record<string, unknown>>>();
  readonly counters = { started: 0 };

  constructor(
    private readonly provider: SandboxProvider,
    private readonly sessions: SessionManager,
    private readonly dataDir: string,
    private readonly onGrade?: (g: { kind: 'episode'; id: string; task: string; policy: string | null; grade: Grade }) => void,
  ) {}

  run(req: EpisodeRequest): Promise<Record<string, unknown>> {
    const served = this.sessions.task(req.task);
    const id = req.episode_id ?? `ep-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const known = this.episodes.get(id);
    if (known) return known;
    const release = this.sessions.borrow();
    this.counters.started += 1;
    const work = (async () => {
      try {
        const m = req.model;
        const headers: Record<string, string> = req.session_id ? { 'X-Session-Id': req.session_id } : {};
        const session = { headers, extraBody: req.session_id ? { ...(m.extra_body ?? {}), session_id: req.session_id } : (m.extra_body ?? {}) };
        const { agent, secrets } = createAgent({
          name: req.agent,
          model: { baseUrl: m.base_url, model: m.model, apiKeyEnv: m.api_key_env ?? 'OPENAI_API_KEY', temperature: m.temperature, topP: m.top_p, maxTokens: m.max_tokens, ...session },
          maxTurns: req.max_turns,
        });
        const outDir = path.join(this.dataDir, 'episodes');
        const r = await runTrial({ task: served.task, agent, provider: this.provider, outDir, trialId: safeId(id), secrets });
        const grade = gradeOf(r.reward, r.error?.class ?? null, r.tests);
        if (grade.error_class) this.sessions.countError(grade.error_class);
        this.onGrade?.({ kind: 'episode', id, task: served.task.name, policy: req.policy ?? null, grade });
        const dir = path.join(outDir, safeId(id));
        const trajectory = (await readJsonIfThere(path.join(dir, 'agent', 'trajectory.json'))) as { steps?: AtifStep[] } | null;
        const turns = (trajectory?.steps ?? [])
          .filter((s) => s.source === 'agent')
          .map((s) => ({
            prompt_tokens: s.metrics?.prompt_tokens ?? null,
            completion_tokens: s.metrics?.completion_tokens ?? null,
            prompt_token_ids: s.metrics?.prompt_token_ids ?? null,
            completion_token_ids: s.metrics?.completion_token_ids ?? null,
            logprobs: s.metrics?.logprobs ?? null,
          }));
        return {
          episode_id: id,
          task: served.task.name,
          ...grade,
          exit_reason: r.exitReason,
          messages: (await readJsonIfThere(path.join(dir, 'agent', 'messages.json'))) ?? [],
          turns,
          usage: { turns: r.turns, prompt_tokens: r.tokens?.input ?? null, cached_tokens: r.tokens?.cached ?? null, completion_tokens: r.tokens?.output ?? null, cost_usd: r.costUsd },
          timings: Object.fromEntries(Object.entries(r.phases).map(([k, v]) => [k, v ? v.durationMs / 1000 : null])),
        };
      } finally {
        release();
      }
    })();
    this.episodes.set(id, work);
    // A failed run (a bug, not a grade) may be retried with the same id.
    work.catch(() => this.episodes.delete(id));
    return work;
  }
}

const safeId = (id: string): string => id.replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 120);
