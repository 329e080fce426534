import assert from 'node:assert/strict';
import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import { JobStore } from '../src/store/store.js';
import { ROOT, runCli, startViewCli, tempDir } from './helpers.js';
import { type JobResult } from './support/harbor-models.js';
import { pythonHarborView, readWithPython } from './support/harbor-roundtrip.js';

/**
 * A job Harbor wrote (test/fixtures/harbor/job-folder), imported through the binary once and read
 * by the second, independent double of Harbor's models (test/support/harbor_reader.py, Python,
 * standard library only) and by the viewer in chromium. No Docker: everything here is the import,
 * the export and the page.
 */
const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'harbor', 'job-folder');
const TIMED_OUT = 'c3b2a190-8f7e-4d6c-9b5a-4a3b2c1d0e9f'; // fix-wordcount__Bn3KwLs: AgentTimeoutError, CTRF 2/4
const SOLVED = '6a1f0c52-9d3e-4b7a-8c21-0e5f4d3c2b1a'; // fix-wordcount__Xq7PmRa: pytest -rA summary 4/4, token ids

let cwd: string;
let jobDir: string;
let browser: Browser | undefined;

before(async () => {
  cwd = await tempDir();
  const imp = await runCli(['import', FIXTURE, '--job', 'pub'], { cwd });
  assert.equal(imp.status, 0, imp.stderr);
  jobDir = path.join(cwd, '.termgrade', 'jobs', 'pub');
});
after(async () => {
  await browser?.close();
});

describe("Harbor's folder read by a second double of Harbor's models (Python)", () => {
  it('opens the folder Harbor wrote and the export of its import, and both say the same of every trial', async () => {
    const original = pythonHarborView(FIXTURE);
    assert.equal(original.trials.length, 3);
    const out = await runCli(['export', 'trials', jobDir, '--format', 'harbor-job', '--out', 'again'], { cwd });
    assert.equal(out.status, 0, out.stderr);
    const again = pythonHarborView(path.join(cwd, 'again', 'pub'));
    // Every trial field Harbor's models give (ids, checksums, rewards, exception, tokens, cost,
    // token-id turns, times of each phase, as Python reads them), equal; the job but for its name.
    assert.deepEqual(again.trials, original.trials);
    assert.deepEqual({ ...again.job, job_name: null }, { ...original.job, job_name: null });
    assert.equal(again.job.job_name, 'pub');

    // And the store holds the same facts under termgrade's names (ids documented as harbor:<id>).
    const store = JobStore.open(path.join(jobDir, 'job.db'), { readonly: true });
    try {
      for (const t of original.trials) {
        const row = [...store.listTrials({ trialId: `harbor:${t.id}` })][0];
        assert.ok(row, `trial ${t.trial_name} is harbor:${t.id}`);
        assert.equal(row.task_checksum, t.task_checksum, `${t.trial_name}: checksum`);
        assert.deepEqual(
          [row.input_tokens, row.cached_tokens, row.output_tokens, row.cost_usd],
          [t.n_input_tokens, t.n_cache_tokens, t.n_output_tokens, t.cost_usd],
          `${t.trial_name}: tokens and cost`,
        );
      }
    } finally {
      store.close();
    }
    assert.equal(original.trials.find((t) => t.id === SOLVED)!.rollout_turns, 2, 'the token ids travel');
    // The dataset export names the task content each trial ran, as Harbor's task_checksum says.
    const ds = await runCli(['export', 'trials', jobDir, '--jsonl', '--out', 'ds'], { cwd });
    assert.equal(ds.status, 0, ds.stderr);
    const rows = (await readFile(path.join(cwd, 'ds', 'data', 'trials.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { trial_id: string; task_checksum: string | null });
    assert.deepEqual(
      rows.map((r) => [r.trial_id, r.task_checksum]).sort(),
      original.trials.map((t) => [`harbor:${t.id}`, t.task_checksum]).sort(),
    );
    // The collected artifacts travel byte for byte (import copies them; export writes them back).
    const rel = path.join('fix-wordcount__Xq7PmRa', 'artifacts', 'app', 'wordcount.py');
    assert.equal(
      await readFile(path.join(cwd, 'again', 'pub', rel), 'utf8'),
      await readFile(path.join(FIXTURE, rel), 'utf8'),
    );
  });

  it("refuses what Harbor's models refuse, naming the file and the field", async () => {
    const dir = path.join(await tempDir(), 'job');
    await cp(FIXTURE, dir, { recursive: true });
    const file = path.join(dir, 'fix-wordcount__Bn3KwLs', 'result.json');
    const good = await readFile(file, 'utf8');
    // The fixture's result.json, as far as the cases below change it (each breaks one rule of Harbor's models).
    interface Mutable {
      task_checksum?: string;
      agent_result: { n_input_tokens: number };
      started_at: string;
      verifier_result: Record<string, unknown>;
      config: { job_id: string };
    }
    const cases: Array<[(r: Mutable) => void, RegExp]> = [
      [(r) => delete r.task_checksum, /task_checksum: missing/],
      [(r) => (r.agent_result.n_input_tokens = 1.5), /agent_result\.n_input_tokens: expected an integer/],
      [(r) => (r.started_at = 'yesterday'), /started_at: not a datetime/],
      [(r) => (r.verifier_result = { reward: 1 }), /verifier_result: reward: not a field of Harbor's VerifierResult/],
      [(r) => (r.config.job_id = 'job-1'), /config\.job_id: not a UUID/],
    ];
    for (const [mutate, problem] of cases) {
      const r = JSON.parse(good) as Mutable;
      mutate(r);
      await writeFile(file, JSON.stringify(r));
      const read = readWithPython(dir);
      assert.equal(read.ok, false, `refused: ${String(problem)}`);
      assert.ok(!read.ok && read.stderr.includes('fix-wordcount__Bn3KwLs'), read.ok ? '' : read.stderr);
      assert.match(read.ok ? '' : read.stderr, problem);
    }
    await writeFile(file, good);
    const stats = path.join(dir, 'result.json');
    const job = JSON.parse(await readFile(stats, 'utf8')) as JobResult;
    const evals = Object.values(job.stats.evals!)[0]!;
    evals.reward_stats!.reward = { passed: ['fix-wordcount__Xq7PmRa'] };
    await writeFile(stats, JSON.stringify(job));
    const read = readWithPython(dir);
    assert.ok(!read.ok && /reward_stats\.reward key 'passed': a key that is not a number/.test(read.stderr));
  });
});

describe('the viewer shows every field the store holds for an imported trial', () => {
  it('timeout and error class, tokens, cost, phase timings, per-test results (CTRF or pytest summary), checksum, artifacts', async () => {
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
    });
    const view = await startViewCli([jobDir]);
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const open = async (id: string) => {
      const u = new URL(view.open);
      u.hash = `#/trial/${encodeURIComponent(`pub/harbor:${id}`)}`;
      await page.goto(u.toString());
      await page.waitForSelector(`.trial[data-trial="pub/harbor:${id}"] #record`);
    };
    const field = (name: string) => page.textContent(`#record dd[data-field=${name}]`);
    try {
      await open(TIMED_OUT);
      assert.match(
        (await page.textContent('#error'))!,
        /^error agent_timeout \(agent_run\): Agent execution timed out after 600\.0 seconds/,
      );
      assert.equal(await page.textContent('#tokens'), 'tokens 40211 in (12000 cached) / 800 out');
      assert.equal(await page.textContent('#cost'), 'cost $0.0441');
      assert.deepEqual(await page.locator('.timeline div').allTextContents(), [
        'environment_setup',
        'agent_setup',
        'agent_run',
        'verification',
      ]);
      assert.match(
        (await page.locator('.timeline + .muted').textContent())!,
        /^environment_setup 1\.5 s · agent_setup 0\.5 s · agent_run 600\.0 s · verification 6\.\d s$/,
      );
      const tests = await page.$$eval('table.tests tbody tr', (trs) =>
        trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 2).map((td) => td.textContent ?? '')),
      );
      assert.deepEqual(tests.sort(), [
        ['test_outputs.py::test_counts_lines', 'passed'],
        ['test_outputs.py::test_counts_words', 'failed'],
        ['test_outputs.py::test_empty_file', 'failed'],
        ['test_outputs.py::test_unicode', 'passed'],
      ]);
      assert.equal(await field('task-checksum'), '5d41402abc4b2a76b9719d911017c592');
      assert.equal(await field('tests-source'), 'ctrf');
      assert.equal(await field('task-path'), 'datasets/demo/fix-wordcount');

      await open(SOLVED);
      assert.equal(await page.locator('#error').count(), 0);
      assert.equal(await page.textContent('#tokens'), 'tokens 1834 in (512 cached) / 221 out');
      assert.equal(await page.textContent('#cost'), 'cost $0.0123');
      assert.equal(await page.locator('table.tests tbody tr').count(), 4);
      assert.equal(await field('tests-source'), 'pytest-rA');
      assert.equal(await page.locator('.timeline div').count(), 4);
      assert.equal(
        await page.locator('details[data-file="artifacts/app/wordcount.py"]').count(),
        1,
        'artifacts listed',
      );
      assert.deepEqual(errors, []);
    } finally {
      await page.close();
      view.child.kill('SIGTERM');
    }
  });
});

describe('a failed import leaves nothing behind', () => {
  it('a cancelled Harbor trial shows as cancelled, not as an agent that ended', async () => {
    const imp = await runCli(['import', path.join(ROOT, 'test', 'fixtures', 'harbor', 'jobs-five'), '--job', 'five'], {
      cwd,
    });
    assert.equal(imp.status, 0, imp.stderr);
    browser ??= await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
    });
    const view = await startViewCli([path.join(cwd, '.termgrade', 'jobs', 'five')]);
    const page = await browser.newPage();
    try {
      const id = 'five/harbor:41111111-2222-4333-8444-555555555555';
      const u = new URL(view.open);
      u.hash = `#/trial/${encodeURIComponent(id)}`;
      await page.goto(u.toString());
      await page.waitForSelector(`.trial[data-trial="${id}"] #record`);
      assert.match((await page.textContent('#error'))!, /^error cancelled \(agent_run\)/);
      assert.doesNotMatch((await page.textContent('#error'))!, /agent ended/);
      assert.equal(await page.textContent('#record dd[data-field=exit-reason]'), 'cancelled (not run to the end)');
    } finally {
      await page.close();
      view.child.kill('SIGTERM');
    }
  });

  it('exit 2 naming the folder or file and the problem; no job, no jobs folder, no crash file', async () => {
    const dir = await tempDir();
    await mkdir(path.join(dir, 'empty'));
    await mkdir(path.join(dir, 'cut', 't1'), { recursive: true });
    await writeFile(path.join(dir, 'cut', 't1', 'result.json'), '{"task_name": ');
    await writeFile(path.join(dir, 'a.json'), '{}');
    const listing = async (): Promise<string[]> => (await readdir(dir, { recursive: true })).map(String).sort();
    const crashes = async (): Promise<string[]> =>
      (await readdir(tmpdir())).filter((f) => f.startsWith('termgrade-crash-'));
    const [before, crashesBefore] = [await listing(), await crashes()];
    for (const [src, named, problem] of [
      ['absent', 'absent', /no such folder/],
      ['a.json', 'a.json', /not a folder/],
      ['empty', 'empty', /no Harbor trial results to import.*job j was not made/],
      ['cut', path.join(dir, 'cut', 't1', 'result.json'), /not JSON/],
    ] as const) {
      // The default jobs folder (.termgrade/jobs) does not exist yet: the import would make it.
      const r = await runCli(['import', src, '--job', 'j'], { cwd: dir });
      assert.equal(r.status, 2, r.stderr);
      assert.ok(r.stderr.includes(named), `${src}: names ${named}: ${r.stderr}`);
      assert.match(r.stderr, problem);
      assert.deepEqual(await listing(), before, `importing ${src} left the folder as it was`);
    }
    assert.deepEqual(await crashes(), crashesBefore, 'no crash file');
    // A jobs folder that holds another job keeps it, and only the new job's folder goes.
    await mkdir(path.join(dir, '.termgrade', 'jobs', 'other'), { recursive: true });
    const r = await runCli(['import', 'empty', '--job', 'j'], { cwd: dir });
    assert.equal(r.status, 2, r.stderr);
    assert.deepEqual(await readdir(path.join(dir, '.termgrade', 'jobs')), ['other']);
  });
});
