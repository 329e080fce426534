import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { isLoopback, tokenEquals } from '../util/net.js';
import { z } from 'zod';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import { TermgradeError } from '../util/errors.js';
import { HostCheck } from '../util/host-check.js';
import { listenOn } from '../util/listen.js';
import { generateToken } from '../util/token.js';
import { AUTO, CreateGroupBody, CreateSessionBody, CurriculumQuery, EpisodeBody, ERROR_STATUS, ExecBody, ServeError } from './contract.js';
import { Curriculum, CurriculumConfigSchema, DEFAULT_CURRICULUM, type CurriculumConfig, type Split } from './curriculum.js';
import { GroupBook } from './groups.js';
import { seededUniform } from '../stats/random.js';
import { EpisodeRunner } from './episodes.js';
import type { ServedModel } from './models.js';
import { SessionManager, type GradeEvent, type ServedTask } from './sessions.js';
import { causeOf, log } from '../util/log.js';

export interface ServeOptions {
  provider: SandboxProvider;
  tasks: ServedTask[];
  /** Verifier logs, episode folders and the grade record live here. */
  dataDir: string;
  host?: string;
  port?: number;
  /** Clients send `Authorization: Bearer <token>`; without one a token is generated (see RunningServer.token). */
  token?: string | null;
  /** Host names (besides the bound address) clients may reach the server by, e.g. behind a proxy. */
  allowedHosts?: string[];
  /** The models episodes may call (the operator's, never a client's); none: episodes are refused. */
  models?: ServedModel[];
  maxSessions?: number;
  idleTtlSec?: number;
  /** The live curriculum's settings (band, exploration, forgetting); see curriculum.ts. */
  curriculum?: Partial<CurriculumConfig>;
  /** Seed of the curriculum's draws (tests); default random. */
  seed?: number;
}

export interface RunningServer {
  url: string;
  /** The bearer token clients send: the one given, or the one generated. */
  token: string;
  /** Whether the token was generated here (so the operator must be told it). */
  tokenGenerated: boolean;
  app: FastifyInstance;
  sessions: SessionManager;
  curriculum: Curriculum;
  close(): Promise<void>;
}

function send(reply: FastifyReply, err: ServeError): FastifyReply {
  if (err.retryAfterSec !== undefined) reply.header('retry-after', String(err.retryAfterSec));
  return reply.code(ERROR_STATUS[err.code]).send({ error: { code: err.code, message: err.message } });
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body ?? {});
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ServeError('bad_request', `${i.path.join('.') || 'body'}: ${i.message}`);
  }
  return r.data;
}

function tokenMatches(header: string | undefined, token: string): boolean {
  return tokenEquals(/^Bearer (.+)$/.exec(header ?? '')?.[1] ?? '', token);
}

/**
 * `termgrade serve`: the environments of a task set over HTTP for RL trainers. Step level
 * (sessions: create, exec, verify, delete) for trainers that own the loop; episode level for
 * trainers that hand over an OpenAI-compatible endpoint. Grades follow the accounting policy: an
 * infrastructure failure comes back with `reward: null` and its status, never 0. Every grade is
 * appended to `<dataDir>/grades.jsonl` in the job-listing shape, so `stats` reads it.
 */
export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopback(host) && !options.token) throw new TermgradeError('usage', `serving on ${host} (not loopback) needs a bearer token: give --token-env with a variable that holds one`);
  // Never open: a web page the user visits must not be able to drive the server.
  const token = options.token || generateToken();
  const hostCheck = new HostCheck(host, options.allowedHosts);
  await mkdir(options.dataDir, { recursive: true });
  // Sandboxes left by an earlier server that was killed are removed before serving.
  await options.provider.cleanup();

  const gradesFile = path.join(options.dataDir, 'grades.jsonl');
  let recorded = 0;
  const config = CurriculumConfigSchema.parse({ ...DEFAULT_CURRICULUM, ...options.curriculum });
  const curriculum = new Curriculum(
    options.tasks.map((t) => ({ task: t.task.name, split: t.split, measured: t.measured })),
    config,
    seededUniform(options.seed ?? Math.floor(Math.random() * 2 ** 31)),
  );
  const policyOf = (label: string | null): string => label ?? 'unlabelled';
  const groups = new GroupBook((g) => curriculum.observeGroup(policyOf(g.policy), g.task, g.outcomes));
  // Every graded rollout updates the curriculum, whoever chose its task; the record keeps the
  // reward as earned (never filtered), with who chose the task.
  const record = (g: GradeEvent): void => {
    recorded += 1;
    if (g.grade.status === 'graded') curriculum.observe(policyOf(g.policy), g.task, g.grade.metrics.acc === 1);
    if (g.group) groups.graded(g);
    const line = { trial_id: `${g.kind}:${g.id}`, task: g.task, agent: `serve-${g.kind}`, model: g.policy, config: `serve/${policyOf(g.policy)}`, status: g.grade.status === 'graded' ? 'completed' : 'error', reward: g.grade.reward, error_class: g.grade.error_class, tests_passed: g.grade.metrics.tests_passed, tests_failed: g.grade.metrics.tests_total - g.grade.metrics.tests_passed, served_by: g.servedBy, group_id: g.group, finished_at: new Date().toISOString() };
    // Not awaited: the trainer's reply does not wait on the record; a line that cannot be written is logged.
    void appendFile(gradesFile, `${JSON.stringify(line)}\n`).catch((err: unknown) => {
      log.warn('a grade could not be written to grades.jsonl', { file: gradesFile, trial: line.trial_id, cause: causeOf(err) });
    });
  };
  // `auto` picks from the training split when a selection is served, else from every task.
  const defaultSplit: Split | undefined = options.tasks.some((t) => t.split === 'train') ? 'train' : undefined;
  const resolveTask = (task: string, split: 'train' | 'validation' | undefined, policy: string | null): { task: string; servedBy: 'auto' | 'named' } => {
    if (task !== AUTO) return { task, servedBy: 'named' };
    try {
      return { task: curriculum.pick(policyOf(policy), split ?? defaultSplit), servedBy: 'auto' };
    } catch (err) {
      throw new ServeError('not_found', `"task": "auto": ${(err as Error).message}`);
    }
  };
  const sessions = new SessionManager({ provider: options.provider, tasks: options.tasks, dataDir: options.dataDir, maxSessions: options.maxSessions ?? 32, idleTtlSec: options.idleTtlSec ?? 600, onGrade: record });
  const episodes = new EpisodeRunner(options.provider, sessions, options.dataDir, options.models ?? [], record);

  const app = Fastify({ logger: false, bodyLimit: 2 * 1024 * 1024 });
  // A JSON content type with no body (POST .../verify from many clients) is an empty request, not an error.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => (body === '' ? done(null, undefined) : json(req, body as string, done)));
  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof ServeError) return send(reply, err);
    const e = err as { statusCode?: number; code?: string; message: string };
    if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) return send(reply, new ServeError('bad_request', e.message));
    return send(reply, new ServeError('unavailable', `internal error: ${e.message}`, 5));
  });
  app.setNotFoundHandler((req, reply) => send(reply, new ServeError('not_found', `no route ${req.method} ${req.url}`)));
  app.addHook('onRequest', async (req, reply) => {
    const refused = hostCheck.refusal(req.headers.host, req.headers.origin);
    if (refused) return send(reply, new ServeError('forbidden', refused));
    if (req.url === '/healthz') return;
    if (!tokenMatches(req.headers.authorization, token)) return send(reply, new ServeError('unauthorized', 'missing or wrong bearer token'));
  });

  app.get('/healthz', async () => {
    const h = await options.provider.health();
    if (!h.ok) throw new ServeError('unavailable', `sandbox engine unavailable: ${h.detail}`, 10);
    return { ok: true, engine: h.detail, live: sessions.live() };
  });
  app.get('/metrics', async (_req, reply) => {
    const lines = [
      '# HELP termgrade_sandboxes_live Sandboxes alive now (sessions and episodes).',
      '# TYPE termgrade_sandboxes_live gauge',
      `termgrade_sandboxes_live ${sessions.live()}`,
      '# TYPE termgrade_sessions_created_total counter',
      `termgrade_sessions_created_total ${sessions.counters.created}`,
      '# TYPE termgrade_sessions_verified_total counter',
      `termgrade_sessions_verified_total ${sessions.counters.verified}`,
      '# TYPE termgrade_sessions_expired_total counter',
      `termgrade_sessions_expired_total ${sessions.counters.expired}`,
      '# TYPE termgrade_episodes_started_total counter',
      `termgrade_episodes_started_total ${episodes.counters.started}`,
      '# HELP termgrade_episodes_running Episodes running now (finished ones are answered from disk).',
      '# TYPE termgrade_episodes_running gauge',
      `termgrade_episodes_running ${episodes.inMemory()}`,
      '# TYPE termgrade_grades_recorded_total counter',
      `termgrade_grades_recorded_total ${recorded}`,
      '# TYPE termgrade_errors_total counter',
      ...[...sessions.counters.errors].map(([cls, n]) => `termgrade_errors_total{class="${cls}"} ${n}`),
    ];
    return reply.type('text/plain; version=0.0.4').send(`${lines.join('\n')}\n`);
  });

  app.get('/v1/tasks', async () => ({
    tasks: sessions.tasks().map((t) => ({ task: t.task.name, split: t.split, rate: t.rate, interval: t.interval, instruction: t.task.instruction })),
  }));
  app.post('/v1/sessions', async (req, reply) => {
    const body = parse(CreateSessionBody, req.body);
    const policy = body.policy ?? null;
    const chosen = resolveTask(body.task, body.split, policy);
    const created = await sessions.create(chosen.task, policy, { servedBy: chosen.servedBy, group: null });
    return reply.code(201).send({ ...created, served_by: chosen.servedBy });
  });
  app.post('/v1/groups', async (req, reply) => {
    const body = parse(CreateGroupBody, req.body);
    const policy = body.policy ?? null;
    sessions.ensureRoomFor(body.n);
    const chosen = resolveTask(body.task, body.split, policy);
    const id = groups.newId();
    const started = await Promise.allSettled(Array.from({ length: body.n }, () => sessions.create(chosen.task, policy, { servedBy: chosen.servedBy, group: id })));
    const ok = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      // A group is whole or not at all: the sessions that did start are removed.
      const removing = ok.map((s) =>
        sessions.delete(String(s.session_id)).catch((err: unknown) => {
          log.warn('a session of a failed group could not be removed', { session: String(s.session_id), cause: causeOf(err) });
        }),
      );
      await Promise.all(removing);
      throw failed.reason;
    }
    groups.add(id, chosen.task, policy, ok.map((s) => String(s.session_id)));
    return reply.code(201).send({ group_id: id, task: chosen.task, served_by: chosen.servedBy, instruction: ok[0]!.instruction, tools: ok[0]!.tools, sessions: ok });
  });
  app.get<{ Params: { id: string } }>('/v1/groups/:id', async (req) => groups.view(req.params.id));
  app.get('/v1/curriculum', async (req) => {
    const q = parse(CurriculumQuery, req.query);
    const policy = policyOf(q.policy ?? null);
    return { policy, band: [config.lo, config.hi], decided: config.decided, explore: config.explore, decay: config.decay, policies: curriculum.policyLabels(), tasks: curriculum.view(policy) };
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
    const chosen = resolveTask(body.task, body.split, body.policy ?? null);
    return episodes.run({ ...body, task: chosen.task }, chosen.servedBy);
  });

  const address = await listenOn(app, host, options.port ?? 0, 'serve');
  hostCheck.port = Number(new URL(address).port);
  return {
    url: address,
    token,
    tokenGenerated: !options.token,
    app,
    sessions,
    curriculum,
    // Sandboxes go first, not after the requests in flight (an episode may run for many
    // minutes): those requests then fail and are answered; a start under way is cancelled. The
    // last closeAll catches a sandbox a request made meanwhile.
    close: async () => {
      await Promise.all([app.close(), sessions.closeAll().then(() => options.provider.closeAll())]);
      await options.provider.closeAll();
    },
  };
}
