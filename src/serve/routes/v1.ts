import type { FastifyInstance } from 'fastify';
import { parse } from '../app.js';
import type { z } from 'zod';
import {
  AUTO,
  CreateGroupBody,
  CreateSessionBody,
  CurriculumQuery,
  EpisodeBody,
  ExecBody,
  type GroupEpisode,
  ServeError,
} from '../contract.js';
import { groupEpisodeId } from '../episodes.js';
import type { ServedBy } from '../sessions.js';
import { causeOf, log } from '../../util/log.js';
import type { ServeContext } from '../context.js';

/** The step level (tasks, sessions, exec, verify), the episode level and the curriculum view. */
export function registerV1Routes(app: FastifyInstance, ctx: ServeContext): void {
  const { sessions } = ctx;
  app.get('/v1/tasks', async () => ({
    tasks: sessions.tasks().map((t) => ({
      task: t.task.name,
      split: t.split,
      rate: t.rate,
      interval: t.interval,
      instruction: t.task.instruction,
    })),
  }));
  app.post('/v1/sessions', async (req, reply) => {
    const body = parse(CreateSessionBody, req.body);
    const policy = body.policy ?? null;
    const chosen = ctx.resolveTask(body.task, body.split, policy);
    const created = await sessions.create(chosen.task, policy, { servedBy: chosen.servedBy, group: null });
    return reply.code(201).send({ ...created, served_by: chosen.servedBy });
  });
  app.post<{ Params: { id: string } }>('/v1/sessions/:id/exec', async (req) => {
    const body = parse(ExecBody, req.body);
    return sessions.exec(req.params.id, body.command, body.timeout_sec);
  });
  app.post<{ Params: { id: string } }>('/v1/sessions/:id/verify', async (req) => sessions.verify(req.params.id));
  app.delete<{ Params: { id: string } }>('/v1/sessions/:id', async (req, reply) => {
    await sessions.delete(req.params.id);
    return reply.code(204).send();
  });
  app.post('/v1/episodes', async (req) => {
    const body = parse(EpisodeBody, req.body);
    const chosen = ctx.resolveTask(body.task, body.split, body.policy ?? null);
    return ctx.episodes.run({ ...body, task: chosen.task }, chosen.servedBy);
  });
  app.get('/v1/curriculum', async (req) => {
    const q = parse(CurriculumQuery, req.query);
    const policy = ctx.policyOf(q.policy ?? null);
    const { config, curriculum } = ctx;
    return {
      policy,
      band: [config.lo, config.hi],
      decided: config.decided,
      explore: config.explore,
      decay: config.decay,
      policies: curriculum.policyLabels(),
      tasks: curriculum.view(policy),
    };
  });
  registerGroupRoutes(app, ctx);
}

/** GRPO groups: n sessions of one task started whole or not at all, their rewards answered together. */
function registerGroupRoutes(app: FastifyInstance, ctx: ServeContext): void {
  const { sessions, groups } = ctx;
  app.post('/v1/groups', async (req, reply) => {
    const body = parse(CreateGroupBody, req.body);
    const policy = body.policy ?? null;
    sessions.ensureRoomFor(body.n);
    if (body.episode) {
      const known =
        body.group_id === undefined
          ? null
          : (groups.chosen(body.group_id) ?? (await ctx.episodes.recordedGroup(body.group_id, body.n)));
      // A repeated call keeps the group's task (an "auto" pick may differ now); naming another is 409.
      if (known && body.task !== AUTO && body.task !== known.task)
        throw new ServeError('conflict', `group "${body.group_id}" is of task ${known.task}, not ${body.task}`);
      const chosen = known ?? ctx.resolveTask(body.task, body.split, policy);
      return runEpisodeGroup(ctx, { ...body, episode: body.episode }, chosen);
    }
    const chosen = ctx.resolveTask(body.task, body.split, policy);
    const id = groups.newId();
    const how = { servedBy: chosen.servedBy, group: id, size: body.n };
    const started = await Promise.allSettled(
      Array.from({ length: body.n }, () => sessions.create(chosen.task, policy, how)),
    );
    const ok = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      // A group is whole or not at all: the sessions that did start are removed (their own failure
      // to close is the engine's, and the first start failure is the one the client needs).
      const removing = ok.map((s) =>
        sessions.delete(String(s.session_id)).catch((err: unknown) => {
          log.warn('a session of a failed group could not be removed', {
            session: String(s.session_id),
            cause: causeOf(err),
          });
        }),
      );
      await Promise.all(removing);
      throw failed.reason;
    }
    const members = ok.map((s) => String(s.session_id));
    groups.add({ id, kind: 'sessions', task: chosen.task, servedBy: chosen.servedBy, policy, sessions: members });
    const first = ok[0]!;
    return reply.code(201).send({
      group_id: id,
      task: chosen.task,
      served_by: chosen.servedBy,
      instruction: first.instruction,
      tools: first.tools,
      sessions: ok,
    });
  });
  app.get<{ Params: { id: string } }>('/v1/groups/:id', async (req) => groups.view(req.params.id));
}

/**
 * A group of episodes the server runs (same task, same agent and model): answered when all are
 * graded, with each episode's answer and the rewards in order. Repeating the call with its
 * group_id answers finished episodes from their records and runs only the missing ones.
 */
async function runEpisodeGroup(
  ctx: ServeContext,
  body: z.infer<typeof CreateGroupBody> & { episode: z.infer<typeof GroupEpisode> },
  chosen: { task: string; servedBy: ServedBy },
): Promise<Record<string, unknown>> {
  const id = body.group_id ?? ctx.groups.newId();
  const policy = body.policy ?? null;
  const ids = Array.from({ length: body.n }, (_, i) => groupEpisodeId(id, i));
  const added = ctx.groups.chosen(id) === null;
  ctx.groups.add({ id, kind: 'episodes', task: chosen.task, servedBy: chosen.servedBy, policy, sessions: ids });
  const episodes = await ctx.episodes
    .runGroup({ groupId: id, task: chosen.task, n: body.n, policy, servedBy: chosen.servedBy, episode: body.episode })
    .catch((err: unknown) => {
      // Refused before any ran (a member recorded with another task, no room): never served.
      if (added && err instanceof ServeError && err.code !== 'unavailable') ctx.groups.forget(id);
      throw err;
    });
  return {
    group_id: id,
    kind: 'episodes',
    task: chosen.task,
    served_by: chosen.servedBy,
    rewards: episodes.map((e) => e.reward ?? null),
    statuses: episodes.map((e) => e.status),
    episodes,
  };
}
