import { Curriculum, DEFAULT_CURRICULUM, type CurriculumConfig } from '../../src/serve/curriculum.js';
import { inBand } from '../../src/stats/band.js';
import { binomial, seededUniform } from '../../src/stats/random.js';

/**
 * A simulated training run: a scripted policy whose success rate on task i at step t is
 * expit(skill(t) - difficulty_i), skill rising linearly over the run, so tasks move through the
 * band from the hard side as the policy gets better. Each step serves one group of rollouts of
 * one task and feeds its outcomes back. Compared: the live curriculum (`"task": "auto"`) against a
 * fixed selection made once before training (the tasks measured in the band at step 0, 16 trials
 * each, served in turn), on the same policy and the same task pool.
 */
export interface SimOptions {
  tasks: number;
  steps: number;
  group: number;
  /** Skill at the start and end of the run (log-odds). */
  skill: [number, number];
  seed: number;
  curriculum?: Partial<CurriculumConfig>;
}

export interface SimResult {
  /** Share of served rollouts whose task was truly in the band when served. */
  inBand: number;
  /** Share of groups with no learning signal (all 0 or all 1). */
  flatGroups: number;
  /** Tasks served at least once. */
  tasksServed: number;
}

const expit = (x: number): number => 1 / (1 + Math.exp(-x));
const BAND: [number, number] = [0.25, 0.75];

export function simulate(mode: 'live' | 'fixed', o: SimOptions): SimResult {
  const u = seededUniform(o.seed);
  // Difficulties spread so the band sweeps through the pool as skill rises.
  const difficulty = Array.from({ length: o.tasks }, () => o.skill[0] - 3 + u() * (o.skill[1] - o.skill[0] + 6));
  const rate = (i: number, step: number): number =>
    expit(o.skill[0] + ((o.skill[1] - o.skill[0]) * step) / o.steps - difficulty[i]!);
  // The selection both modes start from: 16 trials of each task at step 0.
  const measured = difficulty.map((_, i) => ({ n: 16, c: binomial(16, rate(i, 0), u) }));
  const names = difficulty.map((_, i) => `t${i}`);
  const curriculum = new Curriculum(
    names.map((task, i) => ({ task, split: 'train', measured: measured[i]! })),
    { ...DEFAULT_CURRICULUM, ...o.curriculum },
    seededUniform(o.seed + 1),
  );
  const fixedSet = names.map((_, i) => i).filter((i) => inBand(measured[i]!.c / 16, BAND[0], BAND[1]));
  if (mode === 'fixed' && !fixedSet.length) throw new RangeError('the fixed selection is empty: widen the pool');
  let inside = 0;
  let flat = 0;
  const served = new Set<number>();
  for (let step = 0; step < o.steps; step++) {
    const i = mode === 'live' ? Number(curriculum.pick('policy', 'train').slice(1)) : fixedSet[step % fixedSet.length]!;
    served.add(i);
    const p = rate(i, step);
    if (inBand(p, BAND[0], BAND[1])) inside += 1;
    const outcomes = Array.from({ length: o.group }, () => u() < p);
    for (const x of outcomes) curriculum.observe('policy', names[i]!, x);
    if (outcomes.every((x) => x) || outcomes.every((x) => !x)) flat += 1;
  }
  return { inBand: inside / o.steps, flatGroups: flat / o.steps, tasksServed: served.size };
}
