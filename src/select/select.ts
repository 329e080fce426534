import { inBand } from '../stats/band.js';

/**
 * What the selection rules read of a task's measured rate: its name, graded trials and rate. The
 * report's per-task rates (report/aggregate.ts's TaskRate) are one; the rules stay pure logic over
 * whatever carries these, below the report, and hand back the caller's own records.
 */
export interface RatedTask {
  task: string;
  n: number;
  rate: number;
}

export interface SelectOptions {
  band: [number, number];
  target: number;
  /** Keep at most this many (the closest to target); all in band when absent. */
  n?: number;
  minTrials: number;
  exclude: ReadonlySet<string>;
}

export interface Selection<T extends RatedTask = RatedTask> {
  selected: T[];
  /** Why the other tasks were left out, by reason. */
  skipped: { tooFewTrials: number; excluded: number; outOfBand: number; beyondN: number };
}

/**
 * Closest to the target first; ties broken by more trials (firmer evidence), then by task name,
 * so the same records always give the same list.
 */
export function byDistance(target: number) {
  return (a: RatedTask, b: RatedTask): number =>
    Math.abs(a.rate - target) - Math.abs(b.rate - target) ||
    b.n - a.n ||
    (a.task < b.task ? -1 : a.task > b.task ? 1 : 0);
}

/** The training rule: in band, enough trials, not held out; then the N closest to the target. */
export function selectTraining<T extends RatedTask>(rates: T[], o: SelectOptions): Selection<T> {
  const skipped = { tooFewTrials: 0, excluded: 0, outOfBand: 0, beyondN: 0 };
  const eligible = rates.filter((t) => {
    if (o.exclude.has(t.task)) return ((skipped.excluded += 1), false);
    if (t.n < o.minTrials) return ((skipped.tooFewTrials += 1), false);
    if (!inBand(t.rate, o.band[0], o.band[1])) return ((skipped.outOfBand += 1), false);
    return true;
  });
  eligible.sort(byDistance(o.target));
  const selected = o.n === undefined ? eligible : eligible.slice(0, o.n);
  skipped.beyondN = eligible.length - selected.length;
  return { selected, skipped };
}

/**
 * The report's validation recipe: equal numbers of tasks nearest each target rate (e.g. 0.25 and
 * 0.75, a bimodal set), never a task in `exclude` (the training selection and held-out lists),
 * and no task twice. Targets take turns picking, so neither gets all the contested tasks.
 */
export function selectValidation<T extends RatedTask>(
  rates: T[],
  o: { targets: number[]; perTarget: number; minTrials: number; exclude: ReadonlySet<string> },
): Array<T & { target: number }> {
  const pool = rates.filter((t) => !o.exclude.has(t.task) && t.n >= o.minTrials);
  const queues = o.targets.map((target) => [...pool].sort(byDistance(target)));
  const taken = new Set<string>();
  const out: Array<T & { target: number }> = [];
  const cursors = o.targets.map(() => 0);
  for (let round = 0; round < o.perTarget; round++) {
    const picks: Array<T & { target: number }> = [];
    for (const [i, target] of o.targets.entries()) {
      const q = queues[i]!;
      while (
        cursors[i]! < q.length &&
        (taken.has(q[cursors[i]!]!.task) || picks.some((p) => p.task === q[cursors[i]!]!.task))
      )
        cursors[i]! += 1;
      const next = q[cursors[i]!];
      if (!next) return out; // a target ran dry: stop with equal numbers per target
      picks.push({ ...next, target });
    }
    for (const p of picks) taken.add(p.task);
    out.push(...picks);
  }
  return out;
}
