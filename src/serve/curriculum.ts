import { z } from 'zod';
import { betaDraw, type Uniform } from '../stats/random.js';
import { betaCdf } from '../stats/stdlib.js';

/**
 * The live curriculum behind `"task": "auto"`: for each policy label, a Beta posterior of each
 * task's success rate, started from what the selection measured and updated by every graded
 * rollout served since (whatever asked for it: named or auto). Older rollouts weigh less, so the
 * posterior follows a policy that is being trained: each new outcome of a task multiplies its
 * earlier evidence by `decay`. Pure: no I/O; randomness comes from the Uniform given.
 *
 * Picking: with probability `explore`, the task of the split served longest ago for this policy
 * (every task, out of band ones included, so none starves and a task that moved into the band is
 * noticed); otherwise Thompson sampling among the tasks not decided out of the band: a rate is
 * drawn from each posterior and the draw nearest 1/2 wins, so a task is picked in proportion to
 * the chance that it is the most informative one, uncertainty counted.
 */

export const CurriculumConfigSchema = z.strictObject({
  lo: z.number().min(0).max(1),
  hi: z.number().min(0).max(1),
  /** Share of picks that go to the task served longest ago (exploration). */
  explore: z.number().min(0).max(1),
  /** Each new outcome of a task multiplies its earlier evidence by this (1: no forgetting). */
  decay: z.number().gt(0).max(1),
  /** The selection's measurement counts as at most this many trials. */
  priorTrials: z.number().positive(),
  /** In (out) when P(rate in band) is at least (at most 1 minus) this; else undecided. */
  decided: z.number().gt(0.5).lt(1),
});
export type CurriculumConfig = z.infer<typeof CurriculumConfigSchema>;

export const DEFAULT_CURRICULUM: CurriculumConfig = {
  lo: 0.25,
  hi: 0.75,
  explore: 0.1,
  decay: 0.95,
  priorTrials: 8,
  decided: 0.9,
};

export type Split = 'train' | 'validation' | null;

export interface CurriculumTask {
  task: string;
  split: Split;
  /** What the selection measured (absent: a vague prior). */
  measured: { n: number; c: number } | null;
}

export type BandStatus = 'in' | 'out' | 'undecided';

export interface TaskView {
  task: string;
  split: Split;
  /** Beta posterior (a, b) and its mean. */
  posterior: { a: number; b: number; mean: number };
  /** Graded rollouts of this policy on the task since the server started (unweighted). */
  trials: number;
  successes: number;
  p_in_band: number;
  status: BandStatus;
  /** Times picked by `auto` for this policy. */
  served: number;
  groups: { total: number; all_zero: number; all_one: number };
}

interface TaskState {
  a: number;
  b: number;
  trials: number;
  successes: number;
  served: number;
  lastServed: number;
  groups: { total: number; all_zero: number; all_one: number };
}

export class Curriculum {
  private readonly policies = new Map<string, Map<string, TaskState>>();
  private readonly tasks: CurriculumTask[];
  private clock = 0;

  constructor(
    tasks: CurriculumTask[],
    readonly config: CurriculumConfig,
    private readonly uniform: Uniform,
  ) {
    if (!(config.lo <= config.hi))
      throw new RangeError(`curriculum band ${config.lo}..${config.hi}: lo must not exceed hi`);
    this.tasks = tasks;
  }

  /** The prior of a task: the selection's counts scaled to at most priorTrials, plus Jeffreys' 1/2 each. */
  private fresh(t: CurriculumTask): TaskState {
    const m = t.measured;
    const scale = m && m.n > 0 ? Math.min(1, this.config.priorTrials / m.n) : 0;
    return {
      a: 0.5 + scale * (m?.c ?? 0),
      b: 0.5 + scale * ((m?.n ?? 0) - (m?.c ?? 0)),
      trials: 0,
      successes: 0,
      served: 0,
      lastServed: -1,
      groups: { total: 0, all_zero: 0, all_one: 0 },
    };
  }

  private stateOf(policy: string): Map<string, TaskState> {
    let p = this.policies.get(policy);
    if (!p) {
      p = new Map(this.tasks.map((t) => [t.task, this.fresh(t)]));
      this.policies.set(policy, p);
    }
    return p;
  }

  private known(policy: string, task: string): TaskState {
    const s = this.stateOf(policy).get(task);
    if (!s) throw new RangeError(`task "${task}" is not in the curriculum`);
    return s;
  }

  /** A graded rollout of `policy` on `task` (success: it solved it). Ungraded ones are never observed. */
  observe(policy: string, task: string, success: boolean): void {
    const s = this.known(policy, task);
    // Earlier evidence (the prior included) fades; the Jeffreys half-counts do not.
    const d = this.config.decay;
    s.a = 0.5 + d * (s.a - 0.5) + (success ? 1 : 0);
    s.b = 0.5 + d * (s.b - 0.5) + (success ? 0 : 1);
    s.trials += 1;
    if (success) s.successes += 1;
  }

  /** A finished group of rollouts of one task: counted when all failed or all succeeded (no GRPO signal). */
  observeGroup(policy: string, task: string, outcomes: boolean[]): void {
    const s = this.known(policy, task);
    s.groups.total += 1;
    if (outcomes.length && outcomes.every((o) => !o)) s.groups.all_zero += 1;
    if (outcomes.length && outcomes.every((o) => o)) s.groups.all_one += 1;
  }

  private pInBand(s: TaskState): number {
    return betaCdf(this.config.hi, s.a, s.b) - betaCdf(this.config.lo, s.a, s.b);
  }

  private statusOf(p: number): BandStatus {
    return p >= this.config.decided ? 'in' : p <= 1 - this.config.decided ? 'out' : 'undecided';
  }

  /** Picks the task to serve next to `policy` (from `split` when given); throws when the split has none. */
  pick(policy: string, split?: Split): string {
    const state = this.stateOf(policy);
    const candidates = this.tasks.filter((t) => split === undefined || t.split === split);
    if (!candidates.length)
      throw new RangeError(split === undefined ? 'no tasks to pick from' : `no task in split "${split}"`);
    let chosen: string;
    if (this.uniform() < this.config.explore) {
      chosen = candidates.reduce((best, t) =>
        state.get(t.task)!.lastServed < state.get(best.task)!.lastServed ? t : best,
      ).task;
    } else {
      const live = candidates.filter((t) => this.statusOf(this.pInBand(state.get(t.task)!)) !== 'out');
      // Every task decided out: the one most likely back in (the band keeps being looked for).
      const pool = live.length ? live : candidates;
      let best = { task: pool[0]!.task, score: Infinity };
      for (const t of pool) {
        const s = state.get(t.task)!;
        const score = live.length ? Math.abs(betaDraw(s.a, s.b, this.uniform) - 0.5) : -this.pInBand(s);
        if (score < best.score) best = { task: t.task, score };
      }
      chosen = best.task;
    }
    const s = state.get(chosen)!;
    s.served += 1;
    s.lastServed = this.clock++;
    return chosen;
  }

  /** Each task's state for `policy` (a policy never seen shows its priors, and is not kept). */
  view(policy: string): TaskView[] {
    const known = this.policies.get(policy);
    return this.tasks.map((t) => {
      const s = known?.get(t.task) ?? this.fresh(t);
      const p = this.pInBand(s);
      return {
        task: t.task,
        split: t.split,
        posterior: { a: s.a, b: s.b, mean: s.a / (s.a + s.b) },
        trials: s.trials,
        successes: s.successes,
        p_in_band: p,
        status: this.statusOf(p),
        served: s.served,
        groups: { ...s.groups },
      };
    });
  }

  /** Policy labels seen so far. */
  policyLabels(): string[] {
    return [...this.policies.keys()].sort();
  }
}
