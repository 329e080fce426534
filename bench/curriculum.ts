/**
 * A simulated training run (test/support/training-sim.ts): a scripted policy whose per-task
 * success rates rise; the live curriculum (`"task": "auto"`) against a fixed selection made once
 * before training. Reported: the share of served rollouts from tasks truly in the band (0.25..0.75)
 * when served, the share of groups of 8 with no learning signal (all 0 or all 1), tasks served.
 * Pure simulation: no Docker.
 *
 *   node dist/bench/curriculum.js [seeds]
 *
 * Target: the live curriculum serves a larger in-band share than the fixed selection on every seed.
 */
import { simulate, type SimResult } from '../test/support/training-sim.js';

const SEEDS = Number(process.argv[2] ?? 10);
const runs = [
  { name: 'slow drift (skill -2 -> 1)', skill: [-2, 1] as [number, number] },
  { name: 'training run (skill -2 -> 4)', skill: [-2, 4] as [number, number] },
  { name: 'fast drift (skill -2 -> 8)', skill: [-2, 8] as [number, number] },
];
const pad = (s: string, n = 12): string => s.padStart(n);
console.log(
  `${SEEDS} seeds; 120 tasks, 2000 steps, groups of 8; band 0.25..0.75; curriculum defaults (explore 0.1, decay 0.95, prior <= 8 trials)`,
);
console.log(
  `${'run'.padEnd(30)}${'selection'.padEnd(8)}${pad('in band %')}${pad('worst seed')}${pad('flat grp %')}${pad('tasks')}`,
);
let met = true;
for (const r of runs) {
  const res: Record<'live' | 'fixed', SimResult[]> = { live: [], fixed: [] };
  for (let s = 1; s <= SEEDS; s++) {
    for (const mode of ['live', 'fixed'] as const)
      res[mode].push(simulate(mode, { tasks: 120, steps: 2000, group: 8, skill: r.skill, seed: s * 101 }));
  }
  for (let s = 0; s < SEEDS; s++) if (res.live[s]!.inBand <= res.fixed[s]!.inBand) met = false;
  for (const mode of ['live', 'fixed'] as const) {
    const xs = res[mode];
    const mean = (f: (x: SimResult) => number): number => xs.reduce((a, x) => a + f(x), 0) / xs.length;
    console.log(
      `${r.name.padEnd(30)}${mode.padEnd(8)}${pad((100 * mean((x) => x.inBand)).toFixed(1))}${pad((100 * Math.min(...xs.map((x) => x.inBand))).toFixed(1))}${pad((100 * mean((x) => x.flatGroups)).toFixed(1))}${pad(mean((x) => x.tasksServed).toFixed(0))}`,
    );
  }
}
console.log(`live > fixed in-band share on every seed of every run: ${met ? 'met' : 'NOT met'}`);
