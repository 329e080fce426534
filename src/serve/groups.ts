import { randomUUID } from 'node:crypto';
import { ServeError } from './contract.js';
import type { GradeEvent, ServedBy } from './sessions.js';

/** Who runs a group's rollouts: the trainer (sessions) or the server (episodes). */
export type GroupKind = 'sessions' | 'episodes';

interface Group {
  id: string;
  kind: GroupKind;
  task: string;
  servedBy: ServedBy;
  policy: string | null;
  /** The ids of its sessions or episodes. */
  sessions: string[];
  /** Each member's grade once graded (what the group answers: not the per-test lists). */
  grades: Map<string, { reward: number | null; status: string; solved: boolean }>;
  createdAt: number;
  /** When its last member was graded; null while one is pending. */
  doneAt: number | null;
  /** A member group's session answers, handed out one per member call in order. */
  answers?: Record<string, unknown>[];
  /** How many of `answers` were handed out. */
  claimed: number;
}

/** A complete group is answered this long after its last grade, then forgotten (404). */
const KEEP_DONE_MS = 3600_000;
/** A group whose members never all come back (sessions deleted or expired unverified) is forgotten after this. */
const KEEP_PENDING_MS = 24 * 3600_000;

/**
 * GRPO groups: n sessions of one task started together. A group is complete when every session is
 * graded; its rewards are then answered together, and a group whose graded outcomes are all 0 or
 * all 1 (no advantage to learn from) is reported to `onComplete` so it is counted per task. A
 * group with an ungraded session (infrastructure, verifier) is complete but never counted as
 * all-0: a failure of the machinery is not the policy's. Groups live in memory only: a complete
 * one is forgotten an hour after its last grade, one that never completes after a day, and all on
 * a restart (the grades themselves are in grades.jsonl).
 */
export class GroupBook {
  private readonly groups = new Map<string, Group>();
  private readonly bySession = new Map<string, string>();
  private lastSweep = 0;

  constructor(
    private readonly onComplete: (g: { task: string; policy: string | null; outcomes: boolean[] }) => void,
    /** The clock (a test's own). */
    private readonly now: () => number = Date.now,
  ) {}

  newId(): string {
    return `grp-${randomUUID()}`;
  }

  add(g: Omit<Group, 'grades' | 'createdAt' | 'doneAt' | 'claimed'>): void {
    const known = this.groups.get(g.id);
    if (known) {
      // A repeated call (an episode group's group_id): the same group, or a conflict.
      if (known.kind === g.kind && known.task === g.task && known.sessions.join() === g.sessions.join()) return;
      throw new ServeError('conflict', `group "${g.id}" exists with another task or size`);
    }
    this.sweep(this.now());
    this.groups.set(g.id, { ...g, grades: new Map(), createdAt: this.now(), doneAt: null, claimed: 0 });
    for (const s of g.sessions) this.bySession.set(s, g.id);
  }

  /** Forgets a group now (one refused after it was added: a repeat must not find it). */
  forget(id: string): void {
    const g = this.groups.get(id);
    if (!g) return;
    this.groups.delete(id);
    for (const s of g.sessions) this.bySession.delete(s);
  }

  /** Forgets groups past their keeping time (at most once a minute: adds stay O(1) on average). */
  private sweep(now: number): void {
    if (now - this.lastSweep < 60_000) return;
    this.lastSweep = now;
    for (const g of this.groups.values()) {
      const expired = g.doneAt === null ? now - g.createdAt > KEEP_PENDING_MS : now - g.doneAt > KEEP_DONE_MS;
      if (!expired) continue;
      this.groups.delete(g.id);
      for (const s of g.sessions) this.bySession.delete(s);
    }
  }

  /** Groups held in memory now. */
  size(): number {
    return this.groups.size;
  }

  /** The task a known group was served (a repeated call keeps it, whatever the curriculum picks now). */
  chosen(id: string): { task: string; servedBy: ServedBy } | null {
    const g = this.groups.get(id);
    return g ? { task: g.task, servedBy: g.servedBy } : null;
  }

  /**
   * The next member session of a member group (its answer and index), or null when all n were
   * handed out; a group that is not a member group is a conflict.
   */
  claim(id: string): { member: number; answer: Record<string, unknown> } | null {
    const g = this.groups.get(id);
    if (!g) throw new ServeError('not_found', `no group "${id.slice(0, 200)}"`);
    if (!g.answers) throw new ServeError('conflict', `group "${id.slice(0, 200)}" was not made by member calls`);
    if (g.claimed >= g.answers.length) return null;
    const member = g.claimed++;
    return { member, answer: g.answers[member]! };
  }

  /** A graded session: completes its group when it is the last one. */
  graded(e: GradeEvent): void {
    const gid = this.bySession.get(e.id);
    const g = gid === undefined ? undefined : this.groups.get(gid);
    if (!g || g.grades.has(e.id)) return;
    g.grades.set(e.id, { reward: e.grade.reward, status: e.grade.status, solved: e.grade.metrics.acc === 1 });
    if (g.grades.size < g.sessions.length) return;
    g.doneAt = this.now();
    const all = [...g.grades.values()];
    if (all.every((x) => x.status === 'graded'))
      this.onComplete({ task: g.task, policy: g.policy, outcomes: all.map((x) => x.solved) });
  }

  /** How many members the group has. */
  members(id: string): number {
    const g = this.groups.get(id);
    if (!g) throw new ServeError('not_found', `no group "${id.slice(0, 200)}"`);
    return g.sessions.length;
  }

  view(id: string): Record<string, unknown> {
    const g = this.groups.get(id);
    if (!g) throw new ServeError('not_found', `no group "${id.slice(0, 200)}"`);
    const rewards = g.sessions.map((s) => g.grades.get(s)?.reward ?? null);
    const done = g.grades.size === g.sessions.length;
    // Each member as POST /v1/groups answers it (an object with its id), with its grade so far.
    const idKey = g.kind === 'episodes' ? 'episode_id' : 'session_id';
    return {
      group_id: g.id,
      kind: g.kind,
      task: g.task,
      policy: g.policy,
      [g.kind]: g.sessions.map((s) => ({
        [idKey]: s,
        status: g.grades.get(s)?.status ?? 'pending',
        reward: g.grades.get(s)?.reward ?? null,
      })),
      done,
      rewards,
      statuses: g.sessions.map((s) => g.grades.get(s)?.status ?? 'pending'),
    };
  }
}
