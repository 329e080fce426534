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
  ForkBody,
  type GroupEpisode,
  ServeError,
} from '../contract.js';
import { gradedIdsOf, groupEpisodeId, newEpisodeId } from '../episodes.js';
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
    return reply.code(201).send(await sessions.create(chosen.task, policy, { servedBy: chosen.servedBy, group: null }));
  });
  app.post<{ Params: { id: string } }>('/v1/sessions/:id/exec', async (req) => {
    const body = parse(ExecBody, req.body);
    return sessions.exec(req.params.id, body.command, body.timeout_sec);
  });
  app.post<{ Params: { id: string } }>('/v1/sessions/:id/fork', async (req, reply) => {
    const body = parse(ForkBody, req.body);
    return reply.code(201).send(await sessions.fork(req.params.id, body.n));
  });
  app.post<{ Params: { id: string } }>('/v1/sessions/:id/verify', async (req) => sessions.verify(req.params.id));
  app.delete<{ Params: { id: string } }>('/v1/sessions/:id', async (req, reply) => {
    await sessions.delete(req.params.id);
    return reply.code(204).send();
  });
  app.post('/v1/episodes', async (req) => {
    const body = parse(EpisodeBody, req.body);
    const chosen = ctx.resolveTask(body.task, body.split, body.policy ?? null);
    if (!body.branch) return ctx.episodes.run({ ...body, task: chosen.task }, chosen.servedBy);
    // A tree is a group of its branches (its branch point): their grades are counted together.
    const id = body.episode_id ?? newEpisodeId();
    const { task, servedBy } = chosen;
    const added = ctx.groups.chosen(id) === null;
    ctx.groups.add({
      id,
      kind: 'episodes',
      task,
      servedBy,
      policy: body.policy ?? null,
      sessions: gradedIdsOf(id, body),
    });
    return ctx.episodes.run({ ...body, task, episode_id: id }, servedBy).catch((err: unknown) => {
      // Refused before it ran (an agent that cannot branch, no room): never served.
      if (added && err instanceof ServeError && err.code !== 'unavailable') ctx.groups.forget(id);
      throw err;
    });
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
  /** Member groups being started, by group_id: the calls that arrive meanwhile wait on the same start. */
  const starting = new Map<string, Promise<void>>();
  app.post('/v1/groups', async (req, reply) => {
    const body = parse(CreateGroupBody, req.body);
    const policy = body.policy ?? null;
    if (body.member) return reply.code(201).send(await claimMember(ctx, body, starting));
    if (body.from_session) return reply.code(201).send(await forkGroup(ctx, body, body.from_session));
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
    const ok = await startSessionGroup(ctx, { id, chosen, n: body.n, policy, member: false });
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
 * A group of n forks of one live session (tree-shaped rollouts: the members share the parent's
 * prefix): made whole or not at all, then filed as a group whose rewards are answered together.
 */
async function forkGroup(
  ctx: ServeContext,
  body: z.infer<typeof CreateGroupBody>,
  parent: string,
): Promise<Record<string, unknown>> {
  const of = ctx.sessions.describe(parent);
  if (body.task !== AUTO && body.task !== of.task)
    throw new ServeError('conflict', `session ${parent} is of task ${of.task}, not ${body.task}`);
  const id = ctx.groups.newId();
  const forked = await ctx.sessions.fork(parent, body.n, id);
  const members = (forked.sessions as Array<{ session_id: string }>).map((s) => s.session_id);
  ctx.groups.add({ id, kind: 'sessions', task: of.task, servedBy: of.servedBy, policy: of.policy, sessions: members });
  return { group_id: id, task: of.task, served_by: of.servedBy, ...forked };
}

/** n sessions of one task, started whole or not at all (those that did start are removed), then filed as a group. */
async function startSessionGroup(
  ctx: ServeContext,
  g: { id: string; chosen: { task: string; servedBy: ServedBy }; n: number; policy: string | null; member: boolean },
): Promise<Record<string, unknown>[]> {
  const { sessions } = ctx;
  sessions.ensureRoomFor(g.n);
  const how = { servedBy: g.chosen.servedBy, group: g.id, size: g.n };
  const started = await Promise.allSettled(
    Array.from({ length: g.n }, () => sessions.create(g.chosen.task, g.policy, how)),
  );
  const ok = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    // The first start failure is the one the client needs; the others' removal failures are the engine's.
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
  ctx.groups.add({
    id: g.id,
    kind: 'sessions',
    task: g.chosen.task,
    servedBy: g.chosen.servedBy,
    policy: g.policy,
    sessions: members,
    ...(g.member ? { answers: ok } : {}),
  });
  return ok;
}

/**
 * One member session of the member group `group_id`: the first call starts all n sessions (whole
 * or not at all: a 429 or 503 reaches every call waiting on that start, and each may ask again),
 * each call then takes the next member. All members share the task the first call got.
 */
async function claimMember(
  ctx: ServeContext,
  body: z.infer<typeof CreateGroupBody>,
  starting: Map<string, Promise<void>>,
): Promise<Record<string, unknown>> {
  const id = body.group_id!;
  const policy = body.policy ?? null;
  if (!ctx.groups.chosen(id)) {
    let start = starting.get(id);
    if (!start) {
      const chosen = ctx.resolveTask(body.task, body.split, policy);
      start = startSessionGroup(ctx, { id, chosen, n: body.n, policy, member: true })
        .then(() => undefined)
        .finally(() => starting.delete(id));
      starting.set(id, start);
    }
    await start;
  }
  const known = ctx.groups.chosen(id)!;
  if (body.task !== AUTO && body.task !== known.task)
    throw new ServeError('conflict', `group "${id}" is of task ${known.task}, not ${body.task}`);
  const size = ctx.groups.members(id);
  if (size !== body.n) throw new ServeError('conflict', `group "${id}" has ${size} members, not ${body.n}`);
  const claimed = ctx.groups.claim(id);
  if (!claimed) throw new ServeError('conflict', `every member of group "${id}" was handed out already`);
  return { ...claimed.answer, group_id: id, served_by: known.servedBy, member: claimed.member };
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
  // A group of trees counts all its branches together (each tree's own branch point is in its answer).
  const ids = Array.from({ length: body.n }, (_, i) => gradedIdsOf(groupEpisodeId(id, i), body.episode)).flat();
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
    // Per episode; a tree's are its branches' (an array per tree).
    rewards: episodes.map((e) => (e.kind === 'tree' ? e.rewards : (e.reward ?? null))),
    statuses: episodes.map((e) => (e.kind === 'tree' ? e.statuses : e.status)),
    episodes,
  };
}
