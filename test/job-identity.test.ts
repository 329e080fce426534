import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob } from '../src/job/run-job.js';
import { startViewer } from '../src/view/server.js';
import { runCli, tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';

/**
 * One trial identity across jobs: two jobs of the same tasks and configuration (hence the same
 * trial ids, `task__config__attempt`) are two sets of trials in every tool that combines jobs,
 * and such a tool says that it combines them.
 */
const TOKEN = 'identity-test-token-1';

/** Two jobs, both named "same" (in two folders), 3 tasks x oracle x k 3: 9 trials each; job A passes all, job B none. */
async function twoAlikeJobs(): Promise<{ a: string; b: string }> {
  const tasks = await Promise.all(
    ['t1', 't2', 't3'].map((n) => trivialTask({ 'task.toml': `[task]\nname = "${n}"\n` })),
  );
  const dirs: string[] = [];
  for (const reward of [1, 0]) {
    const spec = parseSpec(
      { name: 'same', tasks: { paths: tasks }, agents: [{ agent: 'oracle' }], k: 3, concurrency: 3 },
      'test',
    );
    const job = await openJob(spec, await tempDir());
    try {
      await runJob({
        spec: job.spec,
        tasks: job.tasks,
        store: job.store,
        provider: new FakeProvider({ grade: () => reward }),
        jobDir: job.jobDir,
      });
    } finally {
      await job.close();
    }
    dirs.push(job.jobDir);
  }
  return { a: dirs[0]!, b: dirs[1]! };
}

const lines = (text: string): Array<Record<string, unknown>> =>
  text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('trials of two jobs with the same tasks and configuration', () => {
  it('each carry their job: trials --json names it, and the trial ids alone are the same', async () => {
    const { a, b } = await twoAlikeJobs();
    const list = async (dir: string) => {
      const r = await runCli(['trials', '--job', path.basename(dir), '--jobs-dir', path.dirname(dir), '--json']);
      assert.equal(r.status, 0, r.stderr);
      return r.stdout;
    };
    const [ta, tb] = [await list(a), await list(b)];
    const [ra, rb] = [lines(ta), lines(tb)];
    assert.equal(ra.length, 9);
    assert.deepEqual(
      ra.map((r) => r.trial_id).sort(),
      rb.map((r) => r.trial_id).sort(),
      'the premise: equal trial ids',
    );
    assert.equal(new Set(ra.map((r) => r.job_id)).size, 1);
    assert.notEqual(ra[0]!.job_id, rb[0]!.job_id);
    // Both listings in one JSONL file: stats counts all 18, and the same listing twice 9.
    const file = path.join(await tempDir(), 'both.jsonl');
    await writeFile(file, ta + tb + ta);
    const stats = JSON.parse((await runCli(['stats', file, '--json'])).stdout) as {
      configs: Array<{ trials: number }>;
      jobs: Array<{ trials: number }>;
    };
    assert.equal(stats.configs[0]!.trials, 18);
    assert.deepEqual(
      stats.jobs.map((j) => j.trials),
      [9, 9],
    );
  });

  it('are all counted by stats and report, which say they combine two jobs', async () => {
    const { a, b } = await twoAlikeJobs();
    const json = await runCli(['stats', a, b, '--json']);
    assert.equal(json.status, 0, json.stderr);
    const stats = JSON.parse(json.stdout) as {
      jobs: Array<{ name: string; trials: number }>;
      configs: Array<{ trials: number; pass1: { mean: number } }>;
    };
    assert.equal(stats.configs[0]!.trials, 18);
    assert.equal(stats.configs[0]!.pass1.mean, 0.5);
    assert.deepEqual(
      stats.jobs.map((j) => j.trials),
      [9, 9],
    );
    assert.equal(
      new Set(stats.jobs.map((j) => j.name)).size,
      1,
      'both folders are named "same": the ids tell them apart',
    );

    const text = await runCli(['stats', a, b]);
    assert.match(text.stdout, /^combining 2 jobs: same \(9 trials\), same \(9 trials\)$/m);
    // One job given twice (and with its own trials folder) is one job: its trials counted once.
    const again = JSON.parse((await runCli(['stats', a, a, path.join(a, 'trials'), '--json'])).stdout) as typeof stats;
    assert.equal(again.configs[0]!.trials, 9);
    assert.equal(again.jobs.length, 1);
    assert.doesNotMatch((await runCli(['stats', a])).stdout, /combining/);

    const out = await tempDir();
    const report = await runCli(['report', a, b, '-o', out]);
    assert.equal(report.status, 0, report.stderr);
    assert.match(report.stdout, /combining 2 jobs/);
    const data = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as {
      trials: number;
      configs: Array<{ trials: number }>;
      jobs: Array<{ trials: number }>;
    };
    assert.equal(data.trials, 18);
    assert.equal(data.configs[0]!.trials, 18);
    assert.deepEqual(
      data.jobs.map((j) => j.trials),
      [9, 9],
    );
    assert.match(await readFile(path.join(out, 'index.html'), 'utf8'), /combining 2 jobs/);
  });

  it('are all listed by view, and its per-job filter gives each job its own', async () => {
    const { a, b } = await twoAlikeJobs();
    const viewer = await startViewer({ sources: [a, b], port: 0, token: TOKEN });
    const get = async (url: string) => {
      const res = await fetch(`${viewer.url}${url}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(res.status, 200, url);
      return (await res.json()) as unknown;
    };
    try {
      const all = (await get('/api/trials?limit=500')) as {
        total: number;
        rows: Array<{ id: string; job: string; reward: number }>;
      };
      assert.equal(all.total, 18);
      assert.equal(new Set(all.rows.map((r) => r.id)).size, 18);
      const summary = (await get('/api/summary')) as {
        jobs: Array<{ job: string; counts: Record<string, number> }>;
        facets: { job: string[] };
      };
      assert.equal(summary.jobs.length, 2);
      assert.equal(
        new Set(summary.facets.job).size,
        2,
        `two job names in the filter: ${summary.facets.job.join(', ')}`,
      );
      for (const [i, job] of summary.facets.job.entries()) {
        const mine = (await get(`/api/trials?limit=500&job=${encodeURIComponent(job)}`)) as typeof all;
        assert.equal(mine.total, 9, `job ${job}`);
        assert.ok(mine.rows.every((r) => r.job === job));
        // Each row opens its own trial: its own folder, with its own job's reward.
        const one = (await get(`/api/trial?id=${encodeURIComponent(mine.rows[0]!.id)}`)) as {
          row: { reward: number };
          result: { reward: number } | null;
        };
        assert.equal(one.result?.reward, one.row.reward);
        assert.equal(new Set(mine.rows.map((r) => r.reward)).size, 1, `job ${i}: one job's rewards only`);
      }
      const byJob = summary.jobs.map((j) => j.counts.completed);
      assert.deepEqual(byJob, [9, 9]);
    } finally {
      await viewer.close();
    }
  });

  it('are all exported, with distinct ids naming their job', async () => {
    const { a, b } = await twoAlikeJobs();
    const out = await tempDir();
    const r = await runCli(['export', 'trials', a, b, '-o', out, '--jsonl']);
    assert.equal(r.status, 0, r.stderr);
    const rows = lines(await readFile(path.join(out, 'data', 'trials.jsonl'), 'utf8'));
    assert.equal(rows.length, 18);
    assert.equal(new Set(rows.map((x) => x.id)).size, 18);
    assert.equal(new Set(rows.map((x) => x.job_id)).size, 2);
    assert.equal(new Set(rows.map((x) => x.trial_id)).size, 9, 'the premise: trial ids alone repeat');
    assert.deepEqual(rows.map((x) => x.reward).sort(), [...Array(9).fill(0), ...Array(9).fill(1)]);
    assert.match(await readFile(path.join(out, 'README.md'), 'utf8'), /Combining 2 jobs/);
  });
});
