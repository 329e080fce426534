/**
 * The live curriculum's selection logic (pure, seeded): prior from the selection's counts, every
 * graded rollout since, Thompson picks near the band's middle, exploration so no task starves,
 * tasks leaving and entering the band; GRPO groups counted when all 0 or all 1.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Curriculum, DEFAULT_CURRICULUM, type CurriculumTask } from '../src/serve/curriculum.js';
import { seededUniform } from '../src/stats/random.js';
import { simulate } from './support/training-sim.js';

const tasks: CurriculumTask[] = [
  { task: 'mid', split: 'train', measured: { n: 16, c: 8 } },
  { task: 'never', split: 'train', measured: { n: 16, c: 0 } },
  { task: 'always', split: 'train', measured: { n: 16, c: 16 } },
  { task: 'held-out', split: 'validation', measured: { n: 16, c: 8 } },
];

function picks(
  c: Curriculum,
  policy: string,
  times: number,
  split: 'train' | 'validation' | undefined = 'train',
): Map<string, number> {
  const out = new Map<string, number>();
  for (let i = 0; i < times; i++) {
    const t = c.pick(policy, split);
    out.set(t, (out.get(t) ?? 0) + 1);
  }
  return out;
}

describe('live curriculum', () => {
  it('starts from the selection counts, discounted to priorTrials, and says in / out', () => {
    const c = new Curriculum(tasks, DEFAULT_CURRICULUM, seededUniform(1));
    const view = Object.fromEntries(c.view('p').map((v) => [v.task, v]));
    assert.deepEqual(view.mid!.posterior, { a: 4.5, b: 4.5, mean: 0.5 }, '8 of 16 counted as 4 of 8, plus Jeffreys');
    assert.equal(view.never!.status, 'out');
    assert.equal(view.always!.status, 'out');
    assert.equal(view.mid!.status, 'undecided');
    assert.deepEqual(c.policyLabels(), [], 'viewing keeps no state for a policy never served');
  });

  it('serves mostly the task near 1/2, never only it: every task of the split is served', () => {
    const c = new Curriculum(tasks, DEFAULT_CURRICULUM, seededUniform(2));
    const n = picks(c, 'p', 1000);
    assert.ok(n.get('mid')! > 850, `mid ${n.get('mid')}`);
    assert.ok(
      n.get('never')! >= 20 && n.get('always')! >= 20,
      `exploration: never ${n.get('never')}, always ${n.get('always')}`,
    );
    assert.equal(n.get('held-out'), undefined, 'validation tasks are not served for training');
    assert.deepEqual([...picks(c, 'p', 10, 'validation').keys()], ['held-out']);
    assert.throws(
      () =>
        new Curriculum(
          tasks.filter((t) => t.split === 'validation'),
          DEFAULT_CURRICULUM,
          seededUniform(1),
        ).pick('p', 'train'),
      /no task in split "train"/,
    );
  });

  it('every graded rollout moves the posterior, older ones weigh less', () => {
    const c = new Curriculum(tasks, { ...DEFAULT_CURRICULUM, decay: 0.5 }, seededUniform(3));
    c.observe('p', 'mid', true);
    const v = c.view('p').find((t) => t.task === 'mid')!;
    assert.deepEqual([v.posterior.a, v.posterior.b, v.trials, v.successes], [0.5 + 0.5 * 4 + 1, 0.5 + 0.5 * 4, 1, 1]);
    assert.equal(c.view('other').find((t) => t.task === 'mid')!.trials, 0, 'per policy label');
    assert.throws(() => c.observe('p', 'nope', true), /not in the curriculum/);
  });

  it('a task that leaves the band stops being served, one that enters starts, with no restart', () => {
    const c = new Curriculum(tasks, DEFAULT_CURRICULUM, seededUniform(4));
    // The policy improves: `mid` is now always solved, `never` half the time.
    const outcome = seededUniform(40);
    const rate: Record<string, number> = { mid: 1, never: 0.5, always: 1 };
    for (let round = 0; round < 400; round++) {
      const t = c.pick('p', 'train');
      c.observe('p', t, outcome() < rate[t]!);
    }
    const view = Object.fromEntries(c.view('p').map((v) => [v.task, v]));
    assert.equal(view.mid!.status, 'out', `mid: ${JSON.stringify(view.mid)}`);
    assert.notEqual(view.never!.status, 'out', `never: ${JSON.stringify(view.never)}`);
    const after = picks(c, 'p', 500);
    assert.ok((after.get('never') ?? 0) > 400, `the task now in the band is served: ${JSON.stringify([...after])}`);
    assert.ok((after.get('mid') ?? 0) < 60, 'the task that left is served only to explore');
  });

  it('counts groups that are all 0 or all 1 per task', () => {
    const c = new Curriculum(tasks, DEFAULT_CURRICULUM, seededUniform(5));
    c.observeGroup('p', 'mid', [false, false, false]);
    c.observeGroup('p', 'mid', [true, true]);
    c.observeGroup('p', 'mid', [true, false]);
    assert.deepEqual(c.view('p').find((t) => t.task === 'mid')!.groups, { total: 3, all_zero: 1, all_one: 1 });
  });
});

describe('a simulated training run (scripted policy whose success rates rise)', () => {
  it('the live curriculum keeps serving tasks truly in the band; a fixed selection drifts out of it', () => {
    const options = { tasks: 120, steps: 2000, group: 8, skill: [-2, 4] as [number, number], seed: 3 };
    const live = simulate('live', options);
    const fixed = simulate('fixed', options);
    assert.ok(live.inBand > 0.75, `live: ${JSON.stringify(live)}`);
    assert.ok(live.inBand > fixed.inBand + 0.25, `live ${live.inBand} against fixed ${fixed.inBand}`);
    assert.ok(
      live.flatGroups < fixed.flatGroups,
      `groups without signal: live ${live.flatGroups}, fixed ${fixed.flatGroups}`,
    );
  });
});
