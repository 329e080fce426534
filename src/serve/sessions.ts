import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { truncateMiddle } from '../agent/truncate.js';
import { ForkError, type Sandbox, type SandboxProvider } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { errorMessage } from '../util/errors.js';
import type { ProtectionStore } from '../verifier/protection-store.js';
import type { GradingPolicy } from '../verifier/evidence.js';
import {
  admissionRefOf,
  gradeAgentSandbox,
  gradingFailureClass,
  type GradingDirs,
} from '../trial/phases/verification.js';
import { ServeError, SESSION_TOOLS, type Grade, type SessionAnswer } from './contract.js';
import { gradeOf, UNPROTECTED } from './grade.js';
import { childDir, ID_RULE, isSafeId } from './ids.js';
import { acquireSandbox } from '../sandbox/lease.js';
import { causeOf, log } from '../util/log.js';
import type { WarmStart } from '../job/warm-pool.js';
import { ServeWarm } from './warm.js';

/** On every container a server starts (warm or for a session): its id, so its containers can be found. */
export const LABEL_SERVER = 'io.termgrade.server';
/** On a container started warm (before any session claimed it). */
export const LABEL_WARM = 'io.termgrade.warm';

/** A task the server offers, with what the selection measured of it (when served from one). */
export interface ServedTask {
  task: Task;
  split: 'train' | 'validation' | null;
  rate: number | null;
  interval: [number, number] | null;
  /** The selection's counts (trials, successes), the live curriculum's prior; null without one. */
  measured: { n: number; c: number } | null;
}

/** Who chose a rollout's task: the client by name, or the live curriculum (`"task": "auto"`). */
export type ServedBy = 'named' | 'auto';

/** What a grade is recorded with. */
export interface GradeEvent {
  kind: 'session' | 'episode';
  id: string;
  task: string;
  policy: string | null;
  grade: Grade;
  servedBy: ServedBy;
  group: string | null;
}

type SessionState = 'starting' | 'live' | 'verifying' | 'verified' | 'deleted' | 'expired';

interface Session {
  id: string;
  task: ServedTask;
  policy: string | null;
  servedBy: ServedBy;
  group: string | null;
  state: SessionState;
  sandbox: Sandbox | null;
  lastUsed: number;
  grade: Grade | null;
  endedAt: number | null;
  /** The session it was forked from, if it was. */
  forkedFrom: string | null;
}

export interface SessionOptions {
  provider: SandboxProvider;
  tasks: ServedTask[];
  /** Folder for verifier logs of graded sessions. */
  dataDir: string;
  /** Sandboxes alive at once (sessions and episodes together). */
  maxSessions: number;
  /** A session unused this long is closed and its sandbox removed. */
  idleTtlSec: number;
  /** Started, never-used sandboxes kept ready in all (counted against maxSessions); default 0. */
  warm?: number;
  /** Called with every grade given (recording, drift). */
  onGrade?: (g: GradeEvent) => void;
  /** Admission records by task content (admissionStore): a session is graded against its task's, as `run` grades. */
  admission?: ProtectionStore;
  /** Multiplies every task's verifier timeout (--timeout-multiplier); default 1. */
  timeoutMultiplier?: number;
  /** How rewards are held against the tests' own evidence, as `run` holds them; default `evidence`. */
  grading?: GradingPolicy;
}

/** How long an ended session is remembered, so late calls get 410 rather than 404. */
const TOMBSTONE_MS = 3600_000;

/**
 * Sessions for trainers that own the loop: a sandbox per session, commands run in it, one grade
 * at the end (the same verifier and accounting as `run`), then the sandbox is removed. Idle
 * sessions expire; capacity is bounded; every sandbox is closed on shutdown.
 */
export class SessionManager {
  private readonly sessions = new Map<string, Session>();
  private readonly byName: Map<string, ServedTask>;
  private readonly reaper: NodeJS.Timeout;
  /** Aborted when the server stops: sessions still building or starting give up. */
  private readonly stopping = new AbortController();
  /** Slots taken by episodes (run elsewhere) against the same capacity. */
  private borrowed = 0;
  /** This server's id, on every container it starts (LABEL_SERVER). */
  readonly serverId = randomUUID();
  private readonly labels: Record<string, string>;
  readonly warm: ServeWarm;
  readonly counters = { created: 0, verified: 0, expired: 0, errors: new Map<string, number>() };

  constructor(private readonly options: SessionOptions) {
    this.byName = new Map(options.tasks.map((t) => [t.task.name, t]));
    this.labels = { [LABEL_SERVER]: this.serverId };
    this.warm = new ServeWarm({
      provider: options.provider,
      size: options.warm ?? 0,
      tasks: options.tasks.map((t) => t.task),
      signal: this.stopping.signal,
      labels: { ...this.labels, [LABEL_WARM]: 'true' },
      room: () => this.capacity() - this.live(),
    });
    this.reaper = setInterval(() => void this.reap(), Math.min(5000, Math.max(250, (options.idleTtlSec * 1000) / 4)));
    this.reaper.unref();
  }

  tasks(): ServedTask[] {
    return [...this.byName.values()];
  }

  task(name: string): ServedTask {
    const t = this.byName.get(name);
    if (!t) throw new ServeError('not_found', `no task "${name}" is served here`);
    return t;
  }

  live(): number {
    return (
      [...this.sessions.values()].filter((s) => s.state === 'starting' || s.state === 'live' || s.state === 'verifying')
        .length + this.borrowed
    );
  }

  /** Sandboxes alive at once: maxSessions, or the engines' own capacity when it is lower. */
  capacity(): number {
    return Math.min(this.options.maxSessions, this.options.provider.capacity ?? Infinity);
  }

  /** Takes one unit of capacity for work run elsewhere (an episode); returns its release. */
  borrow(): () => void {
    this.ensureRoom();
    this.borrowed += 1;
    // Warm sandboxes give up the room the episode takes, and take it back once it is released.
    this.warm.plan();
    let released = false;
    return () => {
      if (!released) this.borrowed -= 1;
      released = true;
      this.warm.schedule();
    };
  }

  private ensureRoom(): void {
    this.ensureRoomFor(1);
  }

  /**
   * Refuses (429) unless n more sandboxes fit now: a group starts whole or not at all. Warm
   * sandboxes are not counted: they are given up for a session that needs their room.
   */
  ensureRoomFor(n: number): void {
    // The engines' capacity too: past it a start would wait for a slot (then 503) instead of a 429 now.
    const capacity = this.capacity();
    // Capacity is the reason, as for a group that does not fit now (429 with Retry-After, as documented);
    // the message says it never fits on this server, so a client asks for fewer instead of waiting.
    if (n > capacity)
      throw new ServeError(
        'over_capacity',
        `${n} sandboxes at once: more than this server's capacity (${capacity}: --max-sessions or the engines'), so it never fits here; ask for at most ${capacity}`,
        5,
      );
    if (this.live() + n > capacity)
      throw new ServeError(
        'over_capacity',
        `${n === 1 ? `all ${capacity} sandboxes are in use` : `${n} sandboxes do not fit: ${this.live()} of ${capacity} are in use`}; try again shortly`,
        5,
      );
  }

  countError(cls: string): void {
    this.counters.errors.set(cls, (this.counters.errors.get(cls) ?? 0) + 1);
  }

  async create(
    taskName: string,
    policy: string | null,
    how: { servedBy: ServedBy; group: string | null; size?: number } = { servedBy: 'named', group: null },
  ): Promise<SessionAnswer> {
    const served = this.task(taskName);
    this.ensureRoom();
    // Claimed before anything is awaited: the sessions of a group, created in one go, each take one.
    const warm = this.warm.claim(taskName);
    // The request took its group's size (or 1): the next one like it is warm too.
    this.warm.demand(taskName, how.size ?? 1);
    const s: Session = {
      id: randomUUID(),
      task: served,
      policy,
      servedBy: how.servedBy,
      group: how.group,
      state: 'starting',
      sandbox: null,
      lastUsed: Date.now(),
      grade: null,
      endedAt: null,
      forkedFrom: null,
    };
    this.sessions.set(s.id, s);
    try {
      s.sandbox = await this.startFor(s, warm);
    } catch (err) {
      // Whatever was started for it is closed already (acquireSandbox, startSandbox).
      this.sessions.delete(s.id);
      this.warm.schedule();
      this.countError('environment_error');
      throw new ServeError('unavailable', `the sandbox for ${taskName} could not be started: ${errorMessage(err)}`, 10);
    }
    // Deleted while starting: do not leave the sandbox behind.
    if (s.state !== 'starting') {
      await s.sandbox.close();
      throw new ServeError('gone', `session ${s.id} was deleted while it started`);
    }
    s.state = 'live';
    s.lastUsed = Date.now();
    this.counters.created += 1;
    return this.answer(s);
  }

  /** A live session's task, who chose it and its policy (a group of its forks takes them). */
  describe(id: string): { task: string; servedBy: ServedBy; policy: string | null } {
    const s = this.usable(id);
    return { task: s.task.task.name, servedBy: s.servedBy, policy: s.policy };
  }

  /** What a session's creation answers: the same fields for every session (SessionAnswerSchema). */
  private answer(s: Session): SessionAnswer {
    return {
      session_id: s.id,
      task: s.task.task.name,
      instruction: s.task.task.instruction,
      tools: SESSION_TOOLS,
      expires_at: new Date(s.lastUsed + this.options.idleTtlSec * 1000).toISOString(),
      served_by: s.servedBy,
      forked_from: s.forkedFrom,
    };
  }

  /**
   * n new sessions branched from a live one (Sandbox.fork): each its own id, deadline and grading,
   * starting from the parent's files at one moment with its services running; the parent runs on
   * untouched. Whole or not at all: 409 when the parent's state cannot be carried (nothing made),
   * 501 when the backend cannot fork, 429 when n more do not fit now.
   */
  async fork(id: string, n: number, group: string | null = null): Promise<Record<string, unknown>> {
    const parent = this.usable(id);
    const fork = parent.sandbox.fork?.bind(parent.sandbox);
    if (!this.options.provider.capabilities.fork || !fork)
      throw new ServeError(
        'not_implemented',
        `this server's sandbox backend (${this.options.provider.name}) cannot fork a session`,
      );
    this.ensureRoomFor(n);
    parent.lastUsed = Date.now();
    // Counted as starting (capacity) before anything is awaited, as a group's sessions are.
    const children: Session[] = Array.from({ length: n }, () => ({
      ...parent,
      id: randomUUID(),
      group,
      state: 'starting' as const,
      sandbox: null,
      grade: null,
      endedAt: null,
      forkedFrom: parent.id,
    }));
    for (const c of children) this.sessions.set(c.id, c);
    this.warm.plan();
    let made;
    try {
      made = await fork(n, {
        labels: (i) => ({ ...this.labels, 'io.termgrade.session': children[i]!.id }),
        signal: this.stopping.signal,
      });
    } catch (err) {
      for (const c of children) this.sessions.delete(c.id);
      this.warm.schedule();
      if (err instanceof ForkError) throw new ServeError('conflict', `session ${id} cannot be forked: ${err.message}`);
      this.countError('environment_error');
      throw new ServeError('unavailable', `session ${id} could not be forked: ${errorMessage(err)}`, 10);
    } finally {
      parent.lastUsed = Date.now();
    }
    const now = Date.now();
    children.forEach((c, i) => {
      c.sandbox = made.children[i]!;
      c.lastUsed = now;
    });
    // A child deleted while the fork ran (its id was not yet given out, but the server may be stopping).
    await Promise.all(
      children.filter((c) => c.state !== 'starting').map((c) => made.children[children.indexOf(c)]!.close()),
    );
    for (const c of children) if (c.state === 'starting') c.state = 'live';
    this.counters.created += n;
    return {
      forked_from: parent.id,
      sessions: children.map((c) => this.answer(c)),
      carried: {
        services: made.services.map((s) => ({
          command: s.command,
          cwd: s.cwd,
          user: s.user,
          ports: s.ports,
          sockets: s.sockets,
        })),
        not_carried: made.notCarried,
      },
      frozen_ms: made.frozenMs ?? null,
    };
  }

  /**
   * The session's sandbox: its claimed warm one (awaited within the normal start deadline), or
   * one started now when none was held or the warm one failed: a warm failure alone is never the
   * client's error. A server stopping cancels either (the start's owner then removes what it made).
   */
  private async startFor(s: Session, warm: WarmStart | null): Promise<Sandbox> {
    const task = s.task.task;
    if (warm) {
      try {
        const box = await this.warm.take(warm, this.stopping.signal);
        this.warm.counters.warm += 1;
        return box;
      } catch (err) {
        if (this.stopping.signal.aborted) throw err;
        this.warm.counters.warmFailed += 1;
        log.warn('a warm sandbox failed: the session starts a cold one', {
          session: s.id,
          task: task.name,
          cause: causeOf(err),
        });
      }
    }
    const lease = await acquireSandbox({
      provider: this.options.provider,
      task,
      signal: this.stopping.signal,
      labels: { ...this.labels, 'io.termgrade.session': s.id },
    });
    this.warm.counters.cold += 1;
    return lease.sandbox;
  }

  /** A session's own folder (verifier logs), the only one its deletion removes. */
  private dirOf(id: string): string {
    return childDir(path.join(this.options.dataDir, 'sessions'), id);
  }

  private get(id: string): Session {
    if (!isSafeId(id)) throw new ServeError('bad_request', `session id "${id.slice(0, 200)}": must be ${ID_RULE}`);
    const s = this.sessions.get(id);
    if (!s) throw new ServeError('not_found', `no session "${id}"`);
    return s;
  }

  private usable(id: string): Session & { sandbox: Sandbox } {
    const s = this.get(id);
    if (s.state === 'verifying') throw new ServeError('conflict', `session ${id} is being verified`);
    if (s.state !== 'live' || !s.sandbox)
      throw new ServeError('gone', `session ${id} is ${s.state === 'starting' ? 'still starting' : s.state}`);
    return s as Session & { sandbox: Sandbox };
  }

  async exec(id: string, command: string, timeoutSec: number): Promise<Record<string, unknown>> {
    const s = this.usable(id);
    s.lastUsed = Date.now();
    try {
      const r = await s.sandbox.exec(['bash', '-lc', command], { timeoutSec });
      const raw = `${r.stdout.text}${r.stderr.text}`;
      const output = truncateMiddle(raw);
      return {
        output,
        exit_code: r.exitCode,
        timed_out: r.timedOut,
        truncated: output !== raw || r.stdout.truncatedBytes + r.stderr.truncatedBytes > 0,
      };
    } catch (err) {
      this.countError('environment_error');
      throw new ServeError('unavailable', `the sandbox of session ${id} failed: ${errorMessage(err)}`, 5);
    } finally {
      s.lastUsed = Date.now();
    }
  }

  /** Grades the session (the agent phase is over), removes its sandbox; a second call returns the same grade. */
  async verify(id: string): Promise<Grade> {
    const existing = this.get(id);
    if (existing.state === 'verified' && existing.grade) return existing.grade;
    const s = this.usable(id);
    s.state = 'verifying';
    const dir = this.dirOf(s.id);
    const dirs = { logs: path.join(dir, 'verifier'), artifacts: path.join(dir, 'artifacts') };
    let grade: Grade;
    try {
      await mkdir(dirs.logs, { recursive: true });
      grade = await this.grade(s, dirs);
    } catch (err) {
      // The sandbox or engine failed under the verifier: no grade at all, never a 0; the cause is logged.
      const cls = gradingFailureClass(err);
      log.warn('grading failed: the session gets no grade', {
        session: s.id,
        task: s.task.task.name,
        class: cls,
        cause: causeOf(err),
      });
      grade = gradeOf(null, cls, [], UNPROTECTED);
      this.countError(cls);
    }
    await s.sandbox.close();
    this.warm.schedule();
    s.state = 'verified';
    s.grade = grade;
    s.endedAt = Date.now();
    this.counters.verified += 1;
    if (grade.error_class) this.countError(grade.error_class);
    this.options.onGrade?.({
      kind: 'session',
      id: s.id,
      task: s.task.task.name,
      policy: s.policy,
      grade,
      servedBy: s.servedBy,
      group: s.group,
    });
    return grade;
  }

  /**
   * The session's sandbox graded as `run` grades a trial (gradeAgentSandbox): against the task's
   * admission record, with the verifier's timeout multiplier. The verifier phase's network needs no
   * switch: sessions start with none (acquireSandbox), which is every phase's network for a server
   * that has no user network to give (networkFor).
   */
  private async grade(s: Session & { sandbox: Sandbox }, dirs: GradingDirs): Promise<Grade> {
    const task = s.task.task;
    const admission = (await this.options.admission?.find(task)) ?? null;
    const v = await gradeAgentSandbox(s.sandbox, task, dirs, undefined, task.config.verifier.timeout_sec, {
      provider: this.options.provider,
      protection: admission?.record ?? null,
      verifierMultiplier: this.options.timeoutMultiplier,
      signal: this.stopping.signal,
      grading: this.options.grading,
    });
    return gradeOf(v.reward, v.error?.class ?? null, v.tests, {
      protection: v.protection,
      admission: v.protection === 'admission' ? admissionRefOf(admission?.record, admission?.file) : null,
    });
  }

  /** Ends the session (whatever its state) and removes its folder; a second delete is 410. */
  async delete(id: string): Promise<void> {
    const s = this.get(id);
    if (s.state === 'verifying') throw new ServeError('conflict', `session ${id} is being verified`);
    if (s.state === 'deleted') throw new ServeError('gone', `session ${id} was already deleted`);
    const box = s.sandbox;
    s.sandbox = null;
    s.state = 'deleted';
    s.endedAt ??= Date.now();
    await box?.close();
    this.warm.schedule();
    await rm(this.dirOf(s.id), { recursive: true, force: true });
  }

  private async reap(): Promise<void> {
    const now = Date.now();
    for (const s of this.sessions.values()) {
      if (s.state === 'live' && now - s.lastUsed > this.options.idleTtlSec * 1000) {
        s.state = 'expired';
        s.endedAt = now;
        this.counters.expired += 1;
        const box = s.sandbox;
        s.sandbox = null;
        await box?.close();
        this.warm.schedule();
      } else if (s.endedAt !== null && now - s.endedAt > TOMBSTONE_MS) {
        this.sessions.delete(s.id);
      }
    }
  }

  async closeAll(): Promise<void> {
    this.stopping.abort();
    clearInterval(this.reaper);
    await Promise.all([
      this.warm.closeAll(),
      ...[...this.sessions.values()].map(async (s) => {
        const box = s.sandbox;
        s.sandbox = null;
        if (s.state === 'live' || s.state === 'starting') s.state = 'deleted';
        await box?.close();
      }),
    ]);
  }
}
