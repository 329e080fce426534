import { randomUUID } from 'node:crypto';
import { ServeError } from './contract.js';
import type { GradeEvent } from './sessions.js';

interface Group {
  id: string;
  task: string;
  policy: string | null;
  sessions: string[];
  /** Each session's grade event once verified. */
  grades: Map<string, GradeEvent>;
}

/**
 * GRPO groups: n sessions of one task started together. A group is complete when every session is
 * graded; its rewards are then answered together, and a group whose graded outcomes are all 0 or
 * all 1 (no advantage to learn from) is reported to `onComplete` so it is counted per task. A
 * group with an ungraded session (infrastructure, verifier) is complete but never counted as
 * all-0: a failure of the machinery is not the policy's.
 */
export class GroupBook {
  private readonly groups = new Map<string, Group>();
  private readonly bySession = new Map<string, string>();

  constructor(private readonly onComplete: (g: { task: string; policy: string | null; outcomes: boolean[] }) => void) {}

  newId(): string {
    return `grp-${randomUUID()}`;
  }

  add(id: string, task: string, policy: string | null, sessions: string[]): void {
    this.groups.set(id, { id, task, policy, sessions, grades: new Map() });
    for (const s of sessions) this.bySession.set(s, id);
  }

  /** A graded session: completes its group when it is the last one. */
  graded(e: GradeEvent): void {
    const gid = this.bySession.get(e.id);
    const g = gid === undefined ? undefined : this.groups.get(gid);
    if (!g || g.grades.has(e.id)) return;
    g.grades.set(e.id, e);
    if (g.grades.size < g.sessions.length) return;
    const all = [...g.grades.values()];
    if (all.every((x) => x.grade.status === 'graded'))
      this.onComplete({ task: g.task, policy: g.policy, outcomes: all.map((x) => x.grade.metrics.acc === 1) });
  }

  view(id: string): Record<string, unknown> {
    const g = this.groups.get(id);
    if (!g) throw new ServeError('not_found', `no group "${id.slice(0, 200)}"`);
    const rewards = g.sessions.map((s) => g.grades.get(s)?.grade.reward ?? null);
    const done = g.grades.size === g.sessions.length;
    return {
      group_id: g.id,
      task: g.task,
      policy: g.policy,
      sessions: g.sessions,
      done,
      rewards,
      statuses: g.sessions.map((s) => g.grades.get(s)?.grade.status ?? 'pending'),
    };
  }
}
