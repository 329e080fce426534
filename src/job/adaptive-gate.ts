import { decide, DEFAULT_ADAPTIVE_RULE, type AdaptiveRule } from '../stats/adaptive.js';
import type { Slot } from '../store/store.js';
import type { JobSpec } from './spec.js';

interface TaskProgress {
  n: number;
  c: number;
  recorded: Set<number>;
  settled: boolean;
}

/**
 * Adaptive sampling inside a job: per (configuration, task), attempts go out in pairs; a pair may
 * start only when every earlier attempt is recorded and the rule has not settled the task yet.
 * Outcomes are fed in as trials are recorded (and, on resume, from the store), and the decision is
 * taken once a whole pair is in.
 */
export class AdaptiveGate {
  private readonly tasks = new Map<string, TaskProgress>();

  constructor(readonly rule: AdaptiveRule) {}

  static fromSpec(spec: JobSpec): AdaptiveGate | null {
    if (!spec.adaptive) return null;
    return new AdaptiveGate({ ...DEFAULT_ADAPTIVE_RULE, lo: spec.adaptive.lo, hi: spec.adaptive.hi, risk: spec.adaptive.risk, kMax: spec.k });
  }

  private progress(slot: Slot): TaskProgress {
    const key = `${slot.config}\u0000${slot.task}`;
    let p = this.tasks.get(key);
    if (!p) this.tasks.set(key, (p = { n: 0, c: 0, recorded: new Set(), settled: false }));
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
    const step = this.rule.step;
    const pairEnd = slot.attempt - (slot.attempt % step) + step;
    for (let a = 0; a < pairEnd; a++) if (!p.recorded.has(a)) return;
    if (p.n > 0 && p.n % step === 0 && decide(p.n, p.c, this.rule).stop) p.settled = true;
  }

  settled(slot: Slot): boolean {
    return this.progress(slot).settled;
  }

  /** May this slot start now? Only if its task is unsettled and all earlier pairs are recorded. */
  eligible(slot: Slot): boolean {
    const p = this.progress(slot);
    if (p.settled) return false;
    const pairStart = slot.attempt - (slot.attempt % this.rule.step);
    for (let a = 0; a < pairStart; a++) if (!p.recorded.has(a)) return false;
    return true;
  }
}
