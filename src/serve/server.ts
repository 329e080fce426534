import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { isLoopback } from '../util/net.js';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import { TermgradeError } from '../util/errors.js';
import { HostCheck } from '../util/host-check.js';
import { listenOn } from '../util/listen.js';
import { generateToken } from '../util/token.js';
import { createApp } from './app.js';
import { AUTO, ServeError } from './contract.js';
import type { ServeContext } from './context.js';
import { registerOpenEnvRoutes } from './routes/openenv.js';
import { registerOpsRoutes } from './routes/ops.js';
import { registerV1Routes } from './routes/v1.js';
import { readRecordedGrades } from './replay.js';
import {
  Curriculum,
  CurriculumConfigSchema,
  DEFAULT_CURRICULUM,
  type CurriculumConfig,
  type Split,
} from './curriculum.js';
import { GroupBook } from './groups.js';
import { seededUniform } from '../stats/random.js';
import { EpisodeRunner } from './episodes.js';
import type { ServedModel } from './models.js';
import { SessionManager, type GradeEvent, type ServedTask } from './sessions.js';
import { causeOf, log } from '../util/log.js';
import type { ProtectionStore } from '../verifier/protection-store.js';
import type { GradingPolicy } from '../verifier/evidence.js';

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
  /**
   * Started, never-used sandboxes kept ready in all (`--warm`), within maxSessions: the images of
   * the tasks they cover are prepared before the server listens. Default 0.
   */
  warm?: number;
  /** The live curriculum's settings (band, exploration, forgetting); see curriculum.ts. */
  curriculum?: Partial<CurriculumConfig>;
  /** Seed of the curriculum's draws (tests); default random. */
  seed?: number;
  /** Admission records by task content (admissionStore): every grade is given against its task's, as `run` gives it. */
  admission?: ProtectionStore;
  /** Multiplies every task's verifier timeout, and an episode's agent timeout (--timeout-multiplier); default 1. */
  timeoutMultiplier?: number;
  /** How rewards are held against the tests' own evidence (--grading), as `run` holds them; default `evidence`. */
  grading?: GradingPolicy;
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

/**
 * `termgrade serve`: the environments of a task set over HTTP for RL trainers. Step level
 * (sessions: create, exec, verify, delete) for trainers that own the loop; episode level for
 * trainers that hand over an OpenAI-compatible endpoint. Grades follow the accounting policy: an
 * infrastructure failure comes back with `reward: null` and its status, never 0. Every grade is
 * appended to `<dataDir>/grades.jsonl` in the job-listing shape, so `stats` reads it.
 */
export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  if (!isLoopback(host) && !options.token)
    throw new TermgradeError(
      'usage',
      `serving on ${host} (not loopback) needs a bearer token: give --token-env with a variable that holds one`,
    );
  // Never open: a web page the user visits must not be able to drive the server.
  checkWarm(options.warm ?? 0, options.maxSessions ?? DEFAULT_MAX_SESSIONS);
  const token = options.token || generateToken();
  const hostCheck = new HostCheck(host, options.allowedHosts);
  await mkdir(options.dataDir, { recursive: true });
  // Sandboxes left by an earlier server that was killed are removed before serving.
  await options.provider.cleanup();

  const ctx = await buildContext(options);
  try {
    await ctx.sessions.warm.fill();
  } catch (err) {
    await ctx.sessions.closeAll();
    throw err;
  }
  const app = createApp(hostCheck, token);
  registerOpsRoutes(app, ctx);
  registerV1Routes(app, ctx);
  registerOpenEnvRoutes(app, ctx);

  const address = await listenOn(app, host, options.port ?? 0, 'serve');
  hostCheck.port = Number(new URL(address).port);
  return {
    url: address,
    token,
    tokenGenerated: !options.token,
    app,
    sessions: ctx.sessions,
    curriculum: ctx.curriculum,
    // Sandboxes go first, not after the requests in flight (an episode may run for many
    // minutes): those requests then fail and are answered; a start under way is cancelled. The
    // last closeAll catches a sandbox a request made meanwhile.
    close: async () => {
      await Promise.all([app.close(), ctx.sessions.closeAll().then(() => options.provider.closeAll())]);
      await options.provider.closeAll();
    },
  };
}

const DEFAULT_MAX_SESSIONS = 32;

/** `warm` is a whole number of sandboxes that fits in the capacity it counts against. */
export function checkWarm(warm: number, maxSessions: number): void {
  if (!Number.isInteger(warm) || warm < 0)
    throw new TermgradeError('usage', `--warm ${warm}: give a whole number of sandboxes >= 0`);
  if (warm > maxSessions)
    throw new TermgradeError(
      'usage',
      `--warm ${warm}: more than --max-sessions ${maxSessions} (warm sandboxes count against it)`,
    );
}

/** The grade record's line for a graded (or ungraded) rollout, in the job listing's shape so `stats` reads it. */
function gradeLine(g: GradeEvent, config: string): Record<string, unknown> {
  const ok = g.grade.status === 'graded';
  const m = g.grade.metrics;
  return {
    trial_id: `${g.kind}:${g.id}`,
    task: g.task,
    agent: `serve-${g.kind}`,
    model: g.policy,
    config,
    status: ok ? 'completed' : 'error',
    reward: g.grade.reward,
    error_class: g.grade.error_class,
    tests_passed: m.tests_passed,
    tests_failed: m.tests_total - m.tests_passed,
    served_by: g.servedBy,
    group_id: g.group,
    protection: g.grade.protection,
    admission_file: g.grade.admission?.file ?? null,
    finished_at: new Date().toISOString(),
  };
}

/** The server's parts: curriculum, grade record, sessions, episodes and groups, wired together. */
async function buildContext(options: ServeOptions): Promise<ServeContext> {
  const gradesFile = path.join(options.dataDir, 'grades.jsonl');
  let recorded = 0;
  const config = CurriculumConfigSchema.parse({ ...DEFAULT_CURRICULUM, ...options.curriculum });
  const curriculum = new Curriculum(
    options.tasks.map((t) => ({ task: t.task.name, split: t.split, measured: t.measured })),
    config,
    seededUniform(options.seed ?? Math.floor(Math.random() * 2 ** 31)),
  );
  const policyOf = (label: string | null): string => label ?? 'unlabelled';
  // A restart keeps the curriculum: the recorded grades are taken in again, in order (tasks no
  // longer served are skipped; group counts and serving order start again).
  const servedNames = new Set(options.tasks.map((t) => t.task.name));
  for (const g of await readRecordedGrades(gradesFile))
    if (servedNames.has(g.task)) curriculum.observe(policyOf(g.policy), g.task, g.success);
  const groups = new GroupBook((g) => curriculum.observeGroup(policyOf(g.policy), g.task, g.outcomes));
  // Every graded rollout updates the curriculum, whoever chose its task; the record keeps the
  // reward as earned (never filtered), with who chose the task.
  const record = (g: GradeEvent): void => {
    recorded += 1;
    if (g.grade.status === 'graded') curriculum.observe(policyOf(g.policy), g.task, g.grade.metrics.acc === 1);
    if (g.group) groups.graded(g);
    const line = gradeLine(g, `serve/${policyOf(g.policy)}`);
    // Not awaited: the trainer's reply does not wait on the record; a line that cannot be written is logged.
    void appendFile(gradesFile, `${JSON.stringify(line)}\n`).catch((err: unknown) => {
      log.warn('a grade could not be written to grades.jsonl', {
        file: gradesFile,
        trial: String(line.trial_id),
        cause: causeOf(err),
      });
    });
  };
  // `auto` picks from the training split when a selection is served, else from every task.
  const defaultSplit: Split | undefined = options.tasks.some((t) => t.split === 'train') ? 'train' : undefined;
  const resolveTask: ServeContext['resolveTask'] = (task, split, policy) => {
    if (task !== AUTO) return { task, servedBy: 'named' };
    try {
      return { task: curriculum.pick(policyOf(policy), split ?? defaultSplit), servedBy: 'auto' };
    } catch (err) {
      throw new ServeError('not_found', `"task": "auto": ${(err as Error).message}`);
    }
  };
  const sessions = new SessionManager({
    provider: options.provider,
    tasks: options.tasks,
    dataDir: options.dataDir,
    maxSessions: options.maxSessions ?? DEFAULT_MAX_SESSIONS,
    idleTtlSec: options.idleTtlSec ?? 600,
    warm: options.warm ?? 0,
    onGrade: record,
    admission: options.admission,
    timeoutMultiplier: options.timeoutMultiplier,
    grading: options.grading,
  });
  const grading = {
    admission: options.admission,
    timeoutMultiplier: options.timeoutMultiplier,
    grading: options.grading,
  };
  const episodes = new EpisodeRunner(
    options.provider,
    sessions,
    options.dataDir,
    options.models ?? [],
    record,
    grading,
  );
  return {
    provider: options.provider,
    sessions,
    episodes,
    groups,
    curriculum,
    config,
    recorded: () => recorded,
    policyOf,
    resolveTask,
  };
}
