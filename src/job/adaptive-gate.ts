import { decide, type AdaptiveRule } from '../stats/adaptive.js';
import { baseRuleOf, taskRuleOf, type Priors } from '../records/sampling.js';
import type { Slot } from '../store/store.js';
import type { JobSpec } from './spec.js';

// The job's runner names the stored priors' type here.
export type { Priors } from '../records/sampling.js';

interface TaskProgress {
  n: number;
  c: number;
  recorded: Set<number>;
  settled: boolean;
  rule: AdaptiveRule;
}

/**
 * Adaptive sampling inside a job: per (configuration, task), attempts go out `step` at a time; a
 * step may start only when every earlier attempt is recorded and the rule has not settled the task
 * yet. Outcomes are fed in as trials are recorded (and, on resume, from the store), and the
 * decision is taken once a whole step is in. Each task has its own rule when the job has priors.
 */
export class AdaptiveGate {
  private readonly tasks = new Map<string, TaskProgress>();

  constructor(private readonly ruleFor: (config: string, task: string) => AdaptiveRule) {}

  static fromSpec(spec: JobSpec, priors: Priors | null = null): AdaptiveGate | null {
    const adaptive = spec.adaptive;
    if (!adaptive) return null;
    const base = baseRuleOf(adaptive, spec.k);
    return new AdaptiveGate((config, task) => taskRuleOf(base, adaptive, priors, config, task));
  }

  private progress(slot: Slot): TaskProgress {
    const key = `${slot.config}\u0000${slot.task}`;
    let p = this.tasks.get(key);
    if (!p)
      this.tasks.set(
        key,
        (p = { n: 0, c: 0, recorded: new Set(), settled: false, rule: this.ruleFor(slot.config, slot.task) }),
      );
    return p;
  }

  /** A recorded trial: graded ones (reward not null) count as outcomes; errors only fill the slot. */
  record(slot: Slot, reward: number | null, passed: boolean): void {
    const p = this.progress(slot);
    if (p.recorded.has(slot.attempt)) return;
    p.recorded.add(slot.attempt);
    if (reward !== null) {
      p.n += 1;
      if (passed) p.c += 1;
    }
    const step = p.rule.step;
    const stepEnd = slot.attempt - (slot.attempt % step) + step;
    for (let a = 0; a < stepEnd; a++) if (!p.recorded.has(a)) return;
    if (p.n > 0 && p.n % step === 0 && decide(p.n, p.c, p.rule).stop) p.settled = true;
  }

  settled(slot: Slot): boolean {
    return this.progress(slot).settled;
  }

  /** May this slot start now? Only if its task is unsettled and all earlier steps are recorded. */
  eligible(slot: Slot): boolean {
    const p = this.progress(slot);
    if (p.settled) return false;
    const stepStart = slot.attempt - (slot.attempt % p.rule.step);
    for (let a = 0; a < stepStart; a++) if (!p.recorded.has(a)) return false;
    return true;
  }
}
