import type { FastifyInstance } from 'fastify';
import { parse } from '../app.js';
import { CreateGroupBody, CreateSessionBody, CurriculumQuery, EpisodeBody, ExecBody } from '../contract.js';
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
    const chosen = ctx.resolveTask(body.task, body.split, policy);
    const id = groups.newId();
    const how = { servedBy: chosen.servedBy, group: id };
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
    groups.add(
      id,
      chosen.task,
      policy,
      ok.map((s) => String(s.session_id)),
    );
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
