import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { syntheticRecords } from '../bench/synthetic-records.js';
import { pairedCompare } from '../src/stats/paired.js';
import { passAtK } from '../src/stats/pass-at-k.js';
import { CLI, tempDir } from './helpers.js';

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Successes per task for two configurations, 4 trials each; task t9 of `b` also has an infra error. */
const A = [4, 3, 2, 2, 1, 0, 4, 2, 3, 1];
const B = [3, 3, 1, 2, 0, 0, 2, 1, 2, 2];

function lines(config: string, successes: number[]): string[] {
  const [agent, model] = config.split('/');
  return successes.flatMap((c, t) =>
    Array.from({ length: 4 }, (_, i) =>
      JSON.stringify({
        trial_id: `${config}-${t}-${i}`,
        task: `t${t}`,
        agent,
        model,
        attempt: i,
        status: 'completed',
        reward: i < c ? 1 : 0,
        duration_ms: 1000 * (t + 1),
        output_tokens: 100,
        cost_usd: 0.01,
        tests_passed: i < c ? 9 : 8,
        tests_failed: i < c ? 0 : 1,
      }),
    ),
  );
}

describe('measurement commands', () => {
  let file: string;
  before(async () => {
    const dir = await tempDir();
    file = path.join(dir, 'trials.jsonl');
    const extra = JSON.stringify({
      trial_id: 'err-1',
      task: 't9',
      agent: 'bash-tool',
      model: 'b',
      attempt: 4,
      status: 'error',
      reward: null,
      error_class: 'environment_error',
    });
    await writeFile(file, [...lines('bash-tool/a', A), ...lines('bash-tool/b', B), extra].join('\n') + '\n');
  });

  it('stats: pass@1 as the macro mean, unbiased pass@k, errors apart from trials, near misses', () => {
    const r = cli(['stats', file, '--json', '--tasks']);
    assert.equal(r.status, 0, r.stderr);
    const { configs, tasks } = JSON.parse(r.stdout);
    const a = configs.find((c: { config: string }) => c.config === 'bash-tool/a');
    const b = configs.find((c: { config: string }) => c.config === 'bash-tool/b');
    assert.equal(a.trials, 40);
    assert.equal(b.trials, 40, 'the infrastructure error is not a trial');
    assert.deepEqual(b.errorsByClass, { environment_error: 1 });
    assert.ok(Math.abs(a.pass1.mean - A.reduce((x, y) => x + y) / 40) < 1e-12);
    const p2 = a.passAtK.find((p: { k: number }) => p.k === 2);
    assert.equal(p2.method, 'unbiased');
    assert.ok(Math.abs(p2.value - A.map((c) => passAtK(4, c, 2)).reduce((x, y) => x + y) / 10) < 1e-12);
    assert.deepEqual(
      a.passAtK.map((p: { k: number }) => p.k),
      [1, 2, 4],
    );
    assert.equal(a.efficiency.nearMisses, 40 - 22);
    assert.equal(tasks.length, 20);
    assert.ok(
      tasks.every(
        (t: { jeffreys: [number, number]; wilson: [number, number] }) =>
          t.jeffreys[0] <= t.jeffreys[1] && t.wilson[0] <= t.wilson[1],
      ),
    );
  });

  it('stats prints a readable table', () => {
    const r = cli(['stats', file]);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /bash-tool\/a\s+10\s+40\s+55\.0/);
    assert.match(r.stdout, /pass@4/);
  });

  it('compare: the paired sign-flip test over common tasks, in points', () => {
    const r = cli(['compare', 'bash-tool/a', 'bash-tool/b', file, '--json']);
    assert.equal(r.status, 0, r.stderr);
    const got = JSON.parse(r.stdout);
    const want = pairedCompare(A.map((c, i) => ({ task: `t${i}`, a: c / 4, b: B[i]! / 4 })));
    assert.equal(got.t, 10);
    assert.ok(Math.abs(got.meanDiff - want.meanDiff) < 1e-12);
    assert.ok(Math.abs(got.p - want.p) < 1e-12);
    const text = cli(['compare', 'bash-tool/a', 'bash-tool/b', file]).stdout;
    assert.match(text, /on 10 common tasks/);
    assert.match(text, /mean difference \+15\.0 points, 95% CI \[/);
  });

  it('select: band, nearest to the target with deterministic ties, exclusions, manifest, disjoint validation', async () => {
    const dir = await tempDir();
    const excl = path.join(dir, 'held-out.txt');
    await writeFile(excl, '# held out\nt3\n');
    const out = path.join(dir, 'sel');
    const r = cli([
      'select',
      file,
      '--model',
      'bash-tool/a',
      '--n',
      '3',
      '--exclude',
      excl,
      '--validation',
      '1',
      '-o',
      out,
    ]);
    assert.equal(r.status, 0, r.stderr);
    // a's rates: t2 t3 t7 = 0.5, t1 t8 = 0.75, t4 t9 = 0.25; t3 held out -> t2, t7, then t1 (0.75 ties t8, t4, t9 by name).
    assert.equal(await readFile(path.join(out, 'selected.txt'), 'utf8'), 't2\nt7\nt1\n');
    const manifest = JSON.parse(await readFile(path.join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.training[0].task, 't2');
    assert.equal(manifest.training[0].trials, 4);
    assert.equal(manifest.training[0].successes, 2);
    assert.equal(manifest.training[0].intervalMethod, 'jeffreys-95');
    assert.ok(manifest.training[0].bandProbability > 0.5);
    const validation = (await readFile(path.join(out, 'validation.txt'), 'utf8')).trim().split('\n');
    assert.deepEqual(validation, ['t4', 't8'], 'nearest 0.25 and nearest 0.75, none selected or held out');
  });

  it('overlap: Jaccard matrix with 1 on the diagonal and a ceiling per model', () => {
    const r = cli(['overlap', file, '--json']);
    assert.equal(r.status, 0, r.stderr);
    const o = JSON.parse(r.stdout);
    assert.deepEqual(o.models, ['bash-tool/a', 'bash-tool/b']);
    assert.equal(o.jaccard[0][0], 1);
    assert.equal(o.jaccard[0][1], o.jaccard[1][0]);
    assert.equal(o.sameModelCeiling.length, 2);
  });

  it('names the file and line of a bad record, and an unknown configuration', async () => {
    const bad = path.join(await tempDir(), 'bad.jsonl');
    await writeFile(bad, `${lines('x', [1])[0]}\n{"trial_id": 5}\nnot json\n`);
    const r = cli(['stats', bad]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /bad\.jsonl:2: not a trial record/);
    const u = cli(['select', file, '--model', 'nobody']);
    assert.equal(u.status, 2);
    assert.match(u.stderr, /no graded trials for configuration "nobody" \(known: bash-tool\/a, bash-tool\/b\)/);
  });

  it('reads trial folders (result.json) as well as JSONL', async () => {
    const dir = await tempDir();
    for (const r of syntheticRecords({ configs: ['oracle'], tasks: 3, k: 2, seed: 5 })) {
      await mkdir(path.join(dir, String(r.trialId)), { recursive: true });
      await writeFile(path.join(dir, String(r.trialId), 'result.json'), JSON.stringify(r));
    }
    const r = cli(['stats', dir, '--json']);
    assert.equal(r.status, 0, r.stderr);
    const { configs } = JSON.parse(r.stdout);
    assert.equal(configs[0].config, 'oracle');
    assert.equal(configs[0].tasks + 0 <= 3, true);
  });
});
