import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { type TrialRowOut } from '../src/export/trials.js';
import { JobStore } from '../src/store/store.js';
import { type TrialResult as TermgradeTrialResult } from '../src/trial/schema.js';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { CLI, EXAMPLES, ROOT, runCli, tempDir } from './helpers.js';
import { readHarborJobFolder, TrialResult } from './support/harbor-models.js';
import { assertSameHarborFolders, assertSameTrials, pythonHarborView, readJson } from './support/harbor-roundtrip.js';

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'harbor', 'job-folder');
/** A Harbor jobs folder with one job of five trials: passed, failed, timed out, cancelled, pending. */
const FIVE_JOBS = path.join(ROOT, 'test', 'fixtures', 'harbor', 'jobs-five');
const FIVE_NAME = '2026-12-01__09-00-00';
const FIVE_JOB = path.join(FIVE_JOBS, FIVE_NAME);

/** export trials --jsonl of a job, as rows (one per trial). */
async function jsonlRows(cwd: string, job: string): Promise<TrialRowOut[]> {
  const out = path.join(cwd, `ds-${path.basename(job)}`);
  const r = await runCli(['export', 'trials', job, '--jsonl', '--out', out], { cwd });
  assert.equal(r.status, 0, r.stderr);
  return (await readFile(path.join(out, 'data', 'trials.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as TrialRowOut);
}

describe('Harbor both ways, through the real binary', () => {
  it("a termgrade job kept as Harbor's job folder (run --format harbor) opens in Harbor's models and imports back to the same trials", async () => {
    const cwd = await tempDir();
    await symlink(EXAMPLES, path.join(cwd, 'tasks'));
    // Four tasks, one per way a verifier reports its tests: pytest's -rA summary (csv-summary),
    // JUnit only (log-errors), CTRF (sqlite-report), reward.json with two keys (kv-service).
    const tasks = ['csv-summary', 'log-errors', 'sqlite-report', 'kv-service'];
    const run = await runCli(
      ['run', '--name', 'rt', '--tasks', 'tasks', '--format', 'harbor', '--harbor-jobs-dir', 'hjobs', '-k', '1'].concat(
        ['--agent', 'oracle', 'nop', '--task', ...tasks],
      ),
      { cwd },
    );
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /harbor job folder: .*hjobs\/rt \(8 trials; harbor view /);
    const jobDir = path.join(cwd, '.termgrade', 'jobs', 'rt');

    // Harbor's models (a reader written from them alone) open the folder the run wrote.
    const h = await readHarborJobFolder(path.join(cwd, 'hjobs', 'rt'));
    assert.equal(h.trials.length, 8);
    // And so does the second, independent double (Python, as pydantic reads the models).
    const py = pythonHarborView(path.join(cwd, 'hjobs', 'rt'));
    assert.deepEqual(py.trials.map((t) => t.trial_name).sort(), h.trials.map((t) => t.result.trial_name).sort());
    assert.equal(h.config.job_name, 'rt');
    const store = JobStore.open(path.join(jobDir, 'job.db'), { readonly: true });
    const rows = [...store.listTrials()];
    store.close();
    assert.ok(
      rows.every((r) => r.tests_total >= 3),
      'every trial has its per-test results (the round trip must keep them)',
    );
    for (const r of rows) {
      const t = h.trials.find((x) => x.result.trial_name === r.trial_id)!;
      assert.equal(t.result.task_checksum, r.task_checksum, 'the task checksum');
      assert.deepEqual(
        t.result.verifier_result?.rewards,
        r.task === 'kv-service' ? JSON.parse(r.rewards_json) : { reward: r.reward },
      );
    }
    assert.deepEqual(
      Object.keys(h.trials.find((x) => x.result.task_name === 'kv-service')!.result.verifier_result!.rewards!).sort(),
      ['fraction_passed', 'reward'],
    );

    // Imported back: the same trials, field by field (store columns, per-test rows, result.json, logs).
    const back = await runCli(['import', path.join('hjobs', 'rt'), '--job', 'back'], { cwd });
    assert.equal(back.status, 0, back.stderr);
    assert.equal(await assertSameTrials(jobDir, path.join(cwd, '.termgrade', 'jobs', 'back')), 8);

    // Every export format reads the import as it reads the job (only the job's identity differs).
    const [a, b] = [await jsonlRows(cwd, jobDir), await jsonlRows(cwd, path.join(cwd, '.termgrade', 'jobs', 'back'))];
    const strip = (r: TrialRowOut) => ({ ...r, id: null, job_id: null, job: null });
    assert.deepEqual(b.map(strip), a.map(strip));
    const parquet = await runCli(['export', 'trials', path.join('.termgrade', 'jobs', 'back'), '--out', 'pq'], { cwd });
    assert.equal(parquet.status, 0, parquet.stderr);
    assert.match(parquet.stdout, /exported 8 trials/);

    // And the import, exported as Harbor's folder again, is the folder the run wrote.
    const again = await runCli(
      ['export', 'trials', path.join('.termgrade', 'jobs', 'back'), '--format', 'harbor-job', '--out', 'again'],
      { cwd },
    );
    assert.equal(again.status, 0, again.stderr);
    await readHarborJobFolder(path.join(cwd, 'again', 'back'));
    assert.deepEqual(
      pythonHarborView(path.join(cwd, 'again', 'back')).trials,
      py.trials,
      "Harbor's view of each trial",
    );
    await assertSameHarborFolders(path.join(cwd, 'hjobs', 'rt'), path.join(cwd, 'again', 'back'), 'exact');

    // A second run of the job rewrites its own Harbor folder; a folder that is not this job's is refused.
    const resume = await runCli(['run', '--job', 'rt', '-q'], { cwd });
    assert.equal(resume.status, 0, resume.stderr);
    assert.equal((await readHarborJobFolder(path.join(cwd, 'hjobs', 'rt'))).trials.length, 8);
    await mkdir(path.join(cwd, 'other', 'rt'), { recursive: true });
    await writeFile(path.join(cwd, 'other', 'rt', 'notes.txt'), 'mine\n');
    const clash = await runCli(['run', '--job', 'rt', '--harbor-jobs-dir', 'other', '-q'], { cwd });
    assert.equal(clash.status, 2, clash.stderr);
    assert.match(clash.stderr, /other\/rt already exists and is not this job's Harbor folder/);
    assert.equal(await readFile(path.join(cwd, 'other', 'rt', 'notes.txt'), 'utf8'), 'mine\n', 'left as it was');
  });

  it('a job Harbor wrote imports with ids, checksums, per-test results (pytest summary or CTRF), phases and token ids, exports in every format, and exports back to the same folder', async () => {
    const cwd = await tempDir();
    // The fixture is what Harbor's models describe (the same reader opens it).
    const original = await readHarborJobFolder(FIXTURE);
    assert.equal(original.trials.length, 3);

    const imp = await runCli(['import', FIXTURE, '--job', 'pub'], { cwd });
    assert.equal(imp.status, 0, imp.stderr);
    const jobDir = path.join(cwd, '.termgrade', 'jobs', 'pub');
    const store = JobStore.open(path.join(jobDir, 'job.db'), { readonly: true });
    const rows = [...store.listTrials()];
    const testsOf = (id: string) => store.testsOf(id);
    try {
      const by = (name: string) => {
        const t = original.trials.find((x) => x.result.trial_name === name)!.result;
        return { t, row: rows.find((r) => r.trial_id === `harbor:${t.id}`)! };
      };
      // Solved; its tests are only in pytest's summary in test-stdout.txt (no CTRF, no JUnit).
      const solved = by('fix-wordcount__Xq7PmRa');
      assert.ok(solved.row, "an imported trial's id is harbor:<Harbor's trial id>");
      assert.deepEqual([solved.row.reward, solved.row.tests_total, solved.row.tests_passed], [1, 4, 4]);
      assert.equal(testsOf(solved.row.trial_id).length, 4);
      assert.equal(solved.row.task_checksum, solved.t.task_checksum, "Harbor's task checksum is kept");
      assert.deepEqual(
        [solved.row.input_tokens, solved.row.cached_tokens, solved.row.output_tokens, solved.row.cost_usd],
        [1834, 512, 221, 0.0123],
      );
      const rec = await readJson<TermgradeTrialResult>(path.join(solved.row.trial_dir!, 'result.json'));
      assert.equal(rec.testsSource, 'pytest-rA');
      assert.deepEqual(Object.keys(rec.phases), ['environment_setup', 'agent_setup', 'agent_run', 'verification']);
      assert.equal(rec.phases.agent_run!.durationMs, 1770, "Harbor's agent_execution timing");
      assert.ok(solved.row.trial_dir!.startsWith(jobDir), "the trial's logs are copied into the job");
      // Timed out: graded 0 under Harbor's accounting, its tests from CTRF.
      const timedOut = by('fix-wordcount__Bn3KwLs');
      assert.deepEqual(
        [timedOut.row.reward, timedOut.row.error_class, timedOut.row.tests_total, timedOut.row.tests_failed],
        [0, 'agent_timeout', 4, 2],
      );
      // Never built: infrastructure, no reward.
      const unbuilt = by('csv-summary__Tz9QeVb');
      assert.deepEqual([unbuilt.row.reward, unbuilt.row.error_class], [null, 'build_failed']);
    } finally {
      store.close();
    }

    // Every export format: JSONL and Parquet datasets name each trial, and Harbor's folder again.
    const ds = await jsonlRows(cwd, jobDir);
    assert.deepEqual(ds.map((r) => [r.trial_id.startsWith('harbor:'), r.task, r.reward, r.tests.length]).sort(), [
      [true, 'csv-summary', null, 0],
      [true, 'fix-wordcount', 0, 4],
      [true, 'fix-wordcount', 1, 4],
    ]);
    assert.ok(ds.every((r) => !String(r.id).includes('undefined') && r.id.endsWith(r.trial_id)));
    const solvedRow = ds.find((r) => r.reward === 1)!;
    assert.match(solvedRow.trajectory!, /completion_token_ids/, 'the trajectory travels with the trial');
    const parquet = await runCli(['export', 'trials', jobDir, '--out', 'pq'], { cwd });
    assert.equal(parquet.status, 0, parquet.stderr);
    assert.match(parquet.stdout, /exported 3 trials/);

    const again = await runCli(['export', 'trials', jobDir, '--format', 'harbor-job', '--out', 'again'], { cwd });
    assert.equal(again.status, 0, again.stderr);
    const h = await readHarborJobFolder(path.join(cwd, 'again', 'pub'));
    assert.deepEqual(
      h.trials.find((t) => t.result.trial_name === 'fix-wordcount__Xq7PmRa')!.result.agent_result?.rollout_details,
      original.trials.find((t) => t.result.trial_name === 'fix-wordcount__Xq7PmRa')!.result.agent_result
        ?.rollout_details,
    );
    await assertSameHarborFolders(FIXTURE, path.join(cwd, 'again', 'pub'), 'harbor-stats');
  });

  for (const form of ['jobs folder', 'job folder'] as const)
    it(`a Harbor ${form} with a passed, a failed, a timed-out, a cancelled and a pending trial: import -> export -> import keeps every trial, field and file`, async () => {
      const cwd = await tempDir();
      const original = await readHarborJobFolder(FIVE_JOB);
      assert.deepEqual(
        [original.trials.length, original.pending.length],
        [4, 1],
        "the fixture opens in Harbor's models",
      );
      const imp = await runCli(['import', form === 'jobs folder' ? FIVE_JOBS : FIVE_JOB, '--job', FIVE_NAME], { cwd });
      assert.equal(imp.status, 0, imp.stderr);
      const jobA = path.join(cwd, '.termgrade', 'jobs', FIVE_NAME);
      const store = JobStore.open(path.join(jobA, 'job.db'), { readonly: true });
      const rows = [...store.listTrials()];
      store.close();
      const byName = (name: string) =>
        rows.find((r) => r.trial_dir?.includes(name.replace(/[^A-Za-z0-9._-]/g, '_')) || r.trial_id.endsWith(name))!;
      assert.equal(rows.length, 5, 'every trial, the cancelled and the pending one too');
      const cancelled = rows.find((r) => r.trial_id === 'harbor:41111111-2222-4333-8444-555555555555')!;
      assert.deepEqual([cancelled.status, cancelled.error_class, cancelled.reward], ['not_run', 'cancelled', null]);
      const pending = byName('fix-wordcount__Pend1ng');
      assert.deepEqual(
        [pending.status, pending.trial_id, pending.source],
        ['not_run', `harbor:${original.result.id}/fix-wordcount__Pend1ng`, 'harbor'],
      );
      assert.ok(pending.trial_dir, "the pending trial's folder is kept");
      const timedOut = rows.find((r) => r.trial_id === 'harbor:31111111-2222-4333-8444-555555555555')!;
      assert.deepEqual([timedOut.reward, timedOut.error_class], [0, 'agent_timeout']);
      // Attempts: per configuration x task, in the folders' order, the pending one included.
      assert.deepEqual(rows.map((r) => [r.task, r.attempt]).sort(), [
        ['csv-summary', 0],
        ['csv-summary', 1],
        ['fix-wordcount', 0],
        ['fix-wordcount', 1],
        ['fix-wordcount', 2],
      ]);
      const cancelledRecord = await readJson<TermgradeTrialResult>(path.join(cancelled.trial_dir!, 'result.json'));
      assert.equal(cancelledRecord.exitReason, 'not_run', 'a cancelled trial did not end as completed');

      // Exported: the job's own files and every trial folder as Harbor wrote them.
      const outA = await runCli(['export', 'trials', jobA, '--format', 'harbor-job', '--out', 'outA'], { cwd });
      assert.equal(outA.status, 0, outA.stderr);
      const exported = path.join(cwd, 'outA', FIVE_NAME);
      const h = await readHarborJobFolder(exported);
      assert.deepEqual([h.trials.length, h.pending.length], [4, 1]);
      assert.deepEqual(
        [h.result.n_total_trials, h.result.stats.n_pending_trials, h.result.stats.n_cancelled_trials],
        [5, 1, 1],
      );
      for (const key of ['id', 'started_at', 'finished_at'] as const)
        assert.equal(h.result[key], original.result[key], `job ${key} is Harbor's own`);
      assert.deepEqual(
        { ...h.config, jobs_dir: null },
        { ...original.config, jobs_dir: null },
        'job config.json, field by field',
      );
      assert.equal(h.config.agents?.[0]?.model_name, 'hosted_vllm/qwen3-8b');
      await assertSameHarborFolders(FIVE_JOB, exported, 'harbor-stats');

      // Imported again: the same rows (attempts, statuses, every column), records and files; exported again: the same folder.
      const back = await runCli(['import', exported, '--job', 'back'], { cwd });
      assert.equal(back.status, 0, back.stderr);
      const jobB = path.join(cwd, '.termgrade', 'jobs', 'back');
      assert.equal(await assertSameTrials(jobA, jobB, true), 5);
      const outB = await runCli(['export', 'trials', jobB, '--format', 'harbor-job', '--out', 'outB'], { cwd });
      assert.equal(outB.status, 0, outB.stderr);
      await assertSameHarborFolders(exported, path.join(cwd, 'outB', 'back'), 'exact');
      const [ca, cb] = [
        await readJson(path.join(exported, 'config.json')),
        await readJson(path.join(cwd, 'outB', 'back', 'config.json')),
      ];
      assert.deepEqual({ ...cb, job_name: null, jobs_dir: null }, { ...ca, job_name: null, jobs_dir: null });
    });

  it("writes each trial's Harbor folder as the trial is recorded, before the run ends; a new job refuses a Harbor folder that is not its own", async () => {
    const cwd = await tempDir();
    await symlink(EXAMPLES, path.join(cwd, 'tasks'));
    await mkdir(path.join(cwd, 'taken', 'inc'), { recursive: true });
    await writeFile(path.join(cwd, 'taken', 'inc', 'notes.txt'), 'mine\n');
    const args = ['run', '--name', 'inc', '--tasks', 'tasks', '--agent', 'oracle', '-k', '3', '-c', '1'];
    const refused = await runCli([...args, '--harbor-jobs-dir', 'taken', '--task', 'csv-summary'], { cwd });
    assert.equal(refused.status, 2, refused.stderr);
    assert.match(refused.stderr, /taken\/inc already exists and is not this job's Harbor folder/);
    assert.equal(existsSync(path.join(cwd, '.termgrade', 'jobs', 'inc')), false, 'no job left behind');

    // One trial at a time: when the first trial is recorded, its Harbor folder is there while the rest run.
    const child = spawn(process.execPath, [CLI, ...args, '--format', 'harbor', '--jsonl', '--task', 'csv-summary'], {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const done: string[] = [];
    let seenMidRun: string[] | null = null;
    for await (const line of createInterface({ input: child.stdout })) {
      const e = JSON.parse(line) as { type: string; trialId?: string };
      if (e.type !== 'trial-done') continue;
      done.push(e.trialId!);
      if (done.length === 2 && !seenMidRun) {
        // The second trial is recorded: the first one's folder was written before it (one writer, in order).
        const folder = path.join(cwd, 'jobs', 'inc', done[0]!);
        TrialResult.parse(await readJson(path.join(folder, 'result.json')));
        seenMidRun = [done[0]!];
      }
    }
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0);
    assert.deepEqual(seenMidRun, [done[0]]);
    assert.equal((await readHarborJobFolder(path.join(cwd, 'jobs', 'inc'))).trials.length, 3);
  });
});
