import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { chromium, type Browser } from 'playwright-core';
import { accountingOf, isPassingReward } from '../src/trial/accounting.js';
import type { TrialErrorClass, TrialResult } from '../src/trial/schema.js';
import { JobStore, trialStatusOf } from '../src/store/store.js';
import type { ReportData } from '../src/report/page-data.js';
import type { CompareOutput, SelectManifest, StatsOutput } from '../src/report/outputs.js';
import type { TrialListRow } from '../src/view/catalog.js';
import type { grid, GridCell, JobConfigFigures } from '../src/view/figures.js';
import { CLI, runCli, tempDir, trialResultFixture } from './helpers.js';

/**
 * Figures that respect the evidence, the same everywhere, on a job whose answers are worked out by
 * hand: three configurations imported from a Harbor job folder through the real binary, each on
 * the same three tasks with 4, 2 and 1 graded trials (fewer than k for k = 2 and 4):
 *
 *   never   t1 0/4 (+1 environment failure: infra, not counted), t2 0/2, t3 0/1
 *   always  t1 4/4, t2 2/2, t3 1/1
 *   mixed   t1 2/4, t2 0/2 (one of them an agent timeout, graded 0), t3 1/1
 *
 * pass@k (k = 1, 2, 4), by hand:
 *   never: 0, 0, 0 (it never succeeded: nothing may be above 0).   always: 1, 1, 1.
 *   mixed: pass@1 = (1/2 + 0 + 1)/3 = 1/2.
 *          pass@2 = (1 - C(2,2)/C(4,2) + 0 + 1)/3 = (5/6 + 1)/3 = 11/18  (t3 has 1 trial, a success: 1).
 *          pass@4 = (1 + x + 1)/3 with t1 = 1 (only 2 failures, fewer than 4), t3 = 1, and t2 (0 of 2)
 *          its two failures plus 2 predicted: x = 1 - E[(1-p)^2 | prior + 0 of 2]. The beta-binomial
 *          likelihood of (4,2), (2,0), (1,1) grows without bound in the prior's concentration (the
 *          counts are as alike as one common rate makes them), so the prior is a point at the pooled
 *          rate 3/7: x = 1 - (4/7)^2 = 33/49, pass@4 = 131/147.
 * Paired comparisons, every pair on 3 common tasks: with 3 tasks the exact sign-flip test has 8
 * sign patterns, so the smallest p is 2/8 = 0.25 (always vs never: every difference is +1); none is
 * significant, and the interval is the whole range [-1, 1] (3 tasks cannot give a 95% interval).
 */

const AGENT = 'terminus-2';
const CONFIGS = { always: `${AGENT}/always`, mixed: `${AGENT}/mixed`, never: `${AGENT}/never` };
const OUTCOMES: Record<string, Record<string, Array<number | 'env'>>> = {
  never: { t1: [0, 0, 0, 0, 'env'], t2: [0, 0], t3: [0] },
  always: { t1: [1, 1, 1, 1], t2: [1, 1], t3: [1] },
  mixed: { t1: [1, 0, 0, 1], t2: [0, 0], t3: [1] },
};
const TIMED_OUT = 't2__mixed__1';

async function harborTrial(root: string, name: string, result: Record<string, unknown>, ctrf?: unknown): Promise<void> {
  await mkdir(path.join(root, 'job-1', name, 'verifier'), { recursive: true });
  await writeFile(path.join(root, 'job-1', name, 'result.json'), JSON.stringify(result));
  if (ctrf) await writeFile(path.join(root, 'job-1', name, 'verifier', 'ctrf.json'), JSON.stringify(ctrf));
}

/** The Harbor job folder above, as Harbor writes one (a trial folder per trial, result.json, CTRF). */
async function harborJob(): Promise<string> {
  const root = await tempDir('termgrade-figures-');
  await mkdir(path.join(root, 'job-1'), { recursive: true });
  await writeFile(path.join(root, 'job-1', 'result.json'), JSON.stringify({ n_total_trials: 21 }));
  for (const [model, tasks] of Object.entries(OUTCOMES))
    for (const [task, rewards] of Object.entries(tasks))
      for (const [i, reward] of rewards.entries()) {
        const name = `${task}__${model}__${i}`;
        const base = {
          task_name: task,
          trial_name: name,
          agent_info: { name: AGENT, model_info: { name: model } },
          started_at: '2026-01-01T00:00:00Z',
          finished_at: '2026-01-01T00:02:00Z',
        };
        if (reward === 'env')
          await harborTrial(root, name, {
            ...base,
            verifier_result: null,
            exception_info: { exception_type: 'EnvironmentStartError', exception_message: 'docker said no' },
          });
        else if (name === TIMED_OUT)
          await harborTrial(
            root,
            name,
            {
              ...base,
              verifier_result: { rewards: { reward } },
              agent_result: { n_input_tokens: 1200, n_cache_tokens: 100, n_output_tokens: 800, cost_usd: 0.0123 },
              exception_info: { exception_type: 'AgentTimeoutError', exception_message: 'agent timed out after 600 s' },
            },
            {
              results: {
                tests: [
                  { name: 'test_outputs.py::test_exists', status: 'passed', duration: 12 },
                  { name: 'test_outputs.py::test_content', status: 'failed', duration: 30, message: 'assert 1 == 2' },
                ],
              },
            },
          );
        else await harborTrial(root, name, { ...base, verifier_result: { rewards: { reward } } });
      }
  return root;
}

/** The last line of a command's output, parsed (a test says which --json output it is). */
const json = (text: string): unknown => JSON.parse(text.trim().split('\n').at(-1)!);

/** The viewer's JSON answers the tests read (src/view/server.ts's routes). */
interface ViewerAnswers {
  '/api/report': ReportData;
  '/api/jobs': { jobs: Array<{ job: string; configs: JobConfigFigures[] }> };
  '/api/grid': ReturnType<typeof grid>;
  '/api/trials': { total: number; rows: TrialListRow[] };
}

async function cliOk(args: string[]): Promise<string> {
  const r = await runCli(args);
  assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** `termgrade view` through the binary: its address (with token) once it listens. */
async function startView(sources: string[]): Promise<{ child: ChildProcess; base: string; token: string }> {
  const child = spawn(process.execPath, [CLI, 'view', ...sources, '--port', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.on('exit', (code) => reject(new Error(`view exited ${code}`)));
  });
  const { url, open } = JSON.parse(line) as { url: string; open: string };
  return { child, base: url, token: new URL(open).searchParams.get('token')! };
}

let root: string;
let jobsDir: string;
let jobDir: string;
let browser: Browser;
let stats: StatsOutput;
const compares = new Map<string, CompareOutput>();
let report: ReportData;
let reportDir: string;

before(async () => {
  root = await harborJob();
  jobsDir = path.join(root, 'jobs');
  await cliOk(['import', root, '--job', 'figs', '--jobs-dir', jobsDir]);
  jobDir = path.join(jobsDir, 'figs');
  stats = json(await cliOk(['stats', jobDir, '--json'])) as StatsOutput;
  for (const [a, b] of [
    [CONFIGS.always, CONFIGS.mixed],
    [CONFIGS.always, CONFIGS.never],
    [CONFIGS.mixed, CONFIGS.never],
  ] as const)
    compares.set(`${a} ${b}`, json(await cliOk(['compare', a, b, jobDir, '--json'])) as CompareOutput);
  reportDir = path.join(root, 'report');
  await cliOk(['report', jobDir, '-o', reportDir]);
  report = JSON.parse(await readFile(path.join(reportDir, 'report.json'), 'utf8')) as ReportData;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
  });
});
after(async () => {
  await browser?.close();
});

const curve = (s: StatsOutput, config: string): Array<[number, number, string]> =>
  s.configs.find((c) => c.config === config)!.passAtK.map((p) => [p.k, p.value, p.method]);
const close = (a: number, b: number, tol: number, what: string): void =>
  assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} != ${b}`);

describe('figures worked out by hand, through the binary', () => {
  it('pass@k: never 0, always 1, mixed 1/2, 11/18, 131/147; monotone; the method named', () => {
    assert.deepEqual(curve(stats, CONFIGS.never), [
      [1, 0, 'unbiased'],
      [2, 0, 'unbiased+eb'],
      [4, 0, 'unbiased+eb'],
    ]);
    assert.deepEqual(curve(stats, CONFIGS.always), [
      [1, 1, 'unbiased'],
      [2, 1, 'unbiased+eb'],
      [4, 1, 'unbiased+eb'],
    ]);
    const mixed = curve(stats, CONFIGS.mixed);
    assert.deepEqual(
      mixed.map(([k, , m]) => [k, m]),
      [
        [1, 'unbiased'],
        [2, 'unbiased+eb'],
        [4, 'unbiased+eb'],
      ],
    );
    close(mixed[0]![1], 1 / 2, 1e-12, 'pass@1');
    close(mixed[1]![1], 11 / 18, 1e-12, 'pass@2');
    // The prior's concentration stops at its search bound (10^4): a point at 3/7 to within 1e-3.
    close(mixed[2]![1], 131 / 147, 1e-3, 'pass@4');
    const never = stats.configs.find((c) => c.config === CONFIGS.never)!;
    assert.deepEqual(never.coverage, { attempted: 8, graded: 7, infra: 1, ungraded: 0, fraction: 7 / 8 });
    assert.equal(never.passAtKPrior.a, 0, "never: the prior's mass is at 0");
    const extended = stats.configs.find((c) => c.config === CONFIGS.mixed)!.passAtK.map((p) => p.extended);
    assert.deepEqual(extended, [0, 1, 2], 'tasks short of k: t3 at k = 2; t2 and t3 at k = 4');
  });

  it("stats' text names the method beside the figures", async () => {
    const text = await cliOk(['stats', jobDir]);
    assert.match(text, /terminus-2\/mixed: pass@1 50\.0%, pass@2 61\.1% \(eb\), pass@4 89\.1% \(eb\)/);
    assert.match(
      text,
      /terminus-2\/never: pass@1 0\.0%, pass@2 0\.0% \(eb\), pass@4 0\.0% \(eb\)\n {2}\(eb\): .*all at rate 0.*it never succeeded.*pass@2: 1 of 3, pass@4: 2 of 3/,
    );
  });

  it("select's rates and intervals are stats --tasks'", async () => {
    const tasks = (json(await cliOk(['stats', jobDir, '--tasks', '--band', '0:1', '--json'])) as StatsOutput).tasks!;
    const sel = json(
      await cliOk(['select', jobDir, '--model', CONFIGS.mixed, '--band', '0:1', '--min-trials', '1', '--json']),
    ) as SelectManifest;
    assert.equal(sel.training.length, 3);
    for (const row of sel.training) {
      const t = tasks.find((x) => x.config === CONFIGS.mixed && x.task === row.task)!;
      assert.deepEqual(
        [row.trials, row.successes, row.rate, row.interval, row.bandProbability],
        [t.n, t.c, t.rate, t.jeffreys, t.bandProbability],
      );
    }
  });

  it("paired: 3 tasks differing by the same amount give the exact sign-flip p 0.25, not 0; the t-test's p is none", () => {
    const c = compares.get(`${CONFIGS.always} ${CONFIGS.never}`)!;
    assert.equal(c.t, 3);
    assert.equal(c.meanDiff, 1);
    assert.equal(c.p, 0.25);
    assert.equal(c.pMethod, 'sign-flip-exact');
    assert.equal(c.significant, false);
    assert.deepEqual([c.ciLo, c.ciHi], [-1, 1]);
    assert.equal(c.tStat, 'Infinity');
    assert.equal(c.tTestP, null);
    assert.match(c.method, /exact sign-flip test over all 8 sign patterns.*cannot reach p < 0.05/);
    // mixed - never: differences 0.5, 0, 1: |sum| 1.5 is reached by 4 of 8 patterns.
    const m = compares.get(`${CONFIGS.mixed} ${CONFIGS.never}`)!;
    assert.equal(m.p, 0.5);
    close(m.meanDiff, 0.5, 1e-12, 'mixed - never');
  });

  it('each figure is the same in stats --json, compare --json, report.json and the viewer API', async () => {
    assert.deepEqual(report.configs, stats.configs, "report.json's configurations are stats --json's");
    assert.equal(report.paired.length, 3);
    for (const p of report.paired) {
      const c = compares.get(`${p.a} ${p.b}`);
      assert.ok(c, `compare ${p.a} ${p.b}`);
      assert.deepEqual(
        [p.tasks, p.meanDiff, p.ciLo, p.ciHi, p.p, p.pMethod, p.significant, p.method],
        [c.t, c.meanDiff, c.ciLo, c.ciHi, c.p, c.pMethod, c.significant, c.method],
        `${p.a} vs ${p.b}`,
      );
    }
    const view = await startView([jobDir]);
    try {
      const get = async <P extends keyof ViewerAnswers>(p: P, query = ''): Promise<ViewerAnswers[P]> => {
        const r = await fetch(`${view.base}${p}${query}`, { headers: { authorization: `Bearer ${view.token}` } });
        assert.equal(r.status, 200, `${p}${query}`);
        return (await r.json()) as ViewerAnswers[P];
      };
      const api = await get('/api/report');
      assert.deepEqual(api.configs, report.configs, "the viewer's /api/report is report.json's");
      assert.deepEqual(api.paired, report.paired);
      const jobs = await get('/api/jobs');
      const job = jobs.jobs.find((j) => j.job === 'figs')!;
      for (const c of stats.configs) {
        const v = job.configs.find((x) => x.config === c.config)!;
        assert.deepEqual(v.passAtK, c.passAtK, `${c.config}: /api/jobs pass@k`);
        assert.deepEqual(v.pass1, { mean: c.pass1.mean, ciLo: c.pass1.ciLo, ciHi: c.pass1.ciHi });
      }
    } finally {
      view.child.kill('SIGTERM');
    }
  });

  it('the report page, drawn in chromium, shows those figures with their methods', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`file://${path.join(reportDir, 'index.html')}`);
      const row = async (config: string): Promise<string[]> =>
        page.$$eval(
          `table#configs tr`,
          (trs, c) => {
            const tr = trs.find((t) => t.querySelector('td')?.textContent === c);
            return tr ? [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '') : [];
          },
          config,
        );
      const never = await row(CONFIGS.never);
      const mixed = await row(CONFIGS.mixed);
      assert.ok(never.length, await page.content().then((h) => h.slice(0, 2000)));
      assert.ok(
        never.includes('0.0 (eb)') && !never.some((t) => /^[1-9]/.test(t) && t.includes('(eb)')),
        never.join('|'),
      );
      assert.ok(mixed.includes('61.1 (eb)'), mixed.join('|'));
      assert.ok(mixed.includes('89.1 (eb)'), mixed.join('|'));
      const note = await page.textContent('#k-gt-n');
      assert.match(
        note!,
        /terminus-2\/mixed, pass@4: unbiased estimator; 2 of 3 task\(s\) with fewer than k trials count their own trials plus k - n predicted by an empirical-Bayes prior/,
      );
      const paired = await page.$$eval('table#paired tbody tr', (trs) =>
        trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')),
      );
      const an = paired.find((r) => r[0] === CONFIGS.always && r[1] === CONFIGS.never)!;
      assert.deepEqual(an.slice(2, 7), ['3', '+100.0', '[-100.0, 100.0]', '0.250', 'not significant']);
      assert.match(an[7]!, /exact sign-flip/);
    } finally {
      await page.close();
    }
  });
});

/**
 * The one pass rule and the one accounting rule against every SQL path, on a job written through
 * the store's own API with the edge rewards (config edge/a; result.json's own `passed` deliberately
 * wrong on two of them, so a store that trusted it would fail):
 *
 *   tA  0.999 (fails: below 1), 1 (passes), 1.5 (passes), 0 with agent_timeout (graded 0),
 *       -1 (graded, fails), none + verifier_crash (infra), none + environment_error (infra),
 *       none + verifier_no_reward (ungraded: an older record), 1 + cancelled (not run)
 *   tB  1, 1
 *   tC  none + verifier_crash (infra: no graded trial, unmeasured)
 *
 * By hand: tA n = 5 graded (0.999, 1, 1.5, 0, -1), c = 2 (1, 1.5); tB n = 2, c = 2; tC n = 0.
 * pass@1 = (2/5 + 2/2)/2 = 0.7 over the 2 measured tasks. Coverage: attempted 12 - 1 not run = 11,
 * graded 7, infra 3 (two in tA, one in tC), ungraded 1, fraction 7/11. A passing reward (whatever
 * the accounting): 1, 1.5, the cancelled 1, and tB's two = 5 trials; a reward that does not pass:
 * 0.999, 0, -1 = 3; no reward: 4.
 */
const EDGES: Array<[string, number | null, string | null, boolean?]> = [
  ['tA', 0.999, null, true],
  ['tA', 1, null],
  ['tA', 1.5, null],
  ['tA', 0, 'agent_timeout'],
  ['tA', -1, null],
  ['tA', null, 'verifier_crash'],
  ['tA', null, 'environment_error', true],
  ['tA', null, 'verifier_no_reward'],
  ['tA', 1, 'cancelled'],
  ['tB', 1, null],
  ['tB', 1, null],
  ['tC', null, 'verifier_crash'],
];

function edgeResult(i: number, task: string, reward: number | null, cls: string | null, claims?: boolean): TrialResult {
  return trialResultFixture({
    trialId: `edge-${i}`,
    task: { name: task, path: `/tasks/${task}`, checksum: 'c' },
    agent: { name: 'edge', model: 'a' },
    attempt: i,
    reward,
    // What a result carried: right except where `claims` says otherwise (the store must not trust it).
    ...(claims === undefined ? {} : { passed: claims }),
    errors: cls ? [{ class: cls as TrialErrorClass, message: cls, phase: 'verification' as const }] : [],
  });
}

describe('one rule for passing and for outcome classes, in code and in every SQL path', () => {
  let edgeDir: string;
  let edgeJobs: string;
  before(async () => {
    edgeJobs = path.join(await tempDir('termgrade-edges-'), 'jobs');
    edgeDir = path.join(edgeJobs, 'edges');
    await mkdir(edgeDir, { recursive: true });
    const store = JobStore.open(path.join(edgeDir, 'job.db'));
    try {
      for (const [i, [task, reward, cls, claims]] of EDGES.entries())
        store.recordTrial(edgeResult(i, task, reward, cls, claims), {
          slot: { config: 'edge/a', task, attempt: i },
          trialDir: path.join(edgeDir, 'trials', `edge-${i}`),
          infraAttempts: 1,
          retryReasons: [],
        });
    } finally {
      store.close();
    }
  });

  it("the store's columns and SQL counts equal the functions applied trial by trial", () => {
    for (const file of [path.join(edgeDir, 'job.db'), path.join(jobDir, 'job.db')]) {
      const db = new Database(file, { readonly: true });
      try {
        const rows = db.prepare('SELECT reward, error_class, passed, status FROM trials').all() as Array<{
          reward: number | null;
          error_class: string | null;
          passed: number;
          status: string;
        }>;
        for (const r of rows) {
          assert.equal(r.passed, isPassingReward(r.reward) ? 1 : 0, `${file}: passed of reward ${r.reward}`);
          assert.equal(r.status, trialStatusOf(r.reward, r.error_class), `${file}: status of ${r.reward}`);
        }
        const count = (where: string): number =>
          (db.prepare(`SELECT COUNT(*) n FROM trials WHERE ${where}`).get() as { n: number }).n;
        assert.equal(count('passed = 1'), rows.filter((r) => isPassingReward(r.reward)).length);
        assert.equal(
          count("status = 'not_run'"),
          rows.filter((r) => accountingOf(r.reward, r.error_class) === 'not_run').length,
        );
      } finally {
        db.close();
      }
    }
    // And the hand-counted figures above.
    const db = new Database(path.join(edgeDir, 'job.db'), { readonly: true });
    try {
      assert.equal((db.prepare('SELECT COUNT(*) n FROM trials WHERE passed = 1').get() as { n: number }).n, 5);
    } finally {
      db.close();
    }
  });

  it('stats, the viewer (filters, grid, job figures) and export count the edge job as worked out by hand', async () => {
    const s = json(await cliOk(['stats', edgeDir, '--tasks', '--band', '0:1', '--json'])) as StatsOutput;
    const cfg = s.configs.find((c) => c.config === 'edge/a')!;
    assert.deepEqual(cfg.coverage, { attempted: 11, graded: 7, infra: 3, ungraded: 1, fraction: 7 / 11 });
    close(cfg.pass1.mean, 0.7, 1e-12, 'pass@1');
    assert.deepEqual(
      s.tasks!.map((t) => [t.task, t.n, t.c]),
      [
        ['tA', 5, 2],
        ['tB', 2, 2],
      ],
    );
    const listing = (await cliOk(['trials', '--job', 'edges', '--jobs-dir', edgeJobs, '--json']))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { reward: number | null; error_class: string | null; status: string });
    assert.equal(listing.length, EDGES.length);
    const out = path.join(path.dirname(edgeJobs), 'export');
    const said = await cliOk(['export', 'trials', edgeDir, '-o', out, '--jsonl']);
    const exported = (await readFile(/ to (\S+) \(dataset card/.exec(said)![1]!, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { reward: number | null; error_class: string | null; status: string });
    for (const r of exported)
      assert.equal(r.status, accountingOf(r.reward, r.error_class), `export status of ${r.reward}`);
    const view = await startView([edgeDir]);
    try {
      const get = async <P extends keyof ViewerAnswers>(p: P, query = ''): Promise<ViewerAnswers[P]> => {
        const r = await fetch(`${view.base}${p}${query}`, { headers: { authorization: `Bearer ${view.token}` } });
        assert.equal(r.status, 200, `${p}${query}`);
        return (await r.json()) as ViewerAnswers[P];
      };
      for (const [filter, want, byHand] of [
        ['pass', listing.filter((r) => isPassingReward(r.reward)).length, 5],
        ['fail', listing.filter((r) => r.reward !== null && !isPassingReward(r.reward)).length, 3],
        ['none', listing.filter((r) => r.reward === null).length, 4],
      ] as const) {
        const page = await get('/api/trials', `?reward=${filter}&limit=500`);
        assert.equal(page.total, want, filter);
        assert.equal(page.total, byHand, `${filter} by hand`);
      }
      const all = await get('/api/trials', '?limit=500');
      for (const r of all.rows) assert.equal(r.passed, isPassingReward(r.reward) ? 1 : 0, `row passed of ${r.reward}`);
      const g = await get('/api/grid');
      const cell = (task: string): GridCell => g.cells.find((c) => c.task === task)!;
      assert.deepEqual([cell('tA').n, cell('tA').c, cell('tB').n, cell('tB').c], [5, 2, 2, 2]);
      const job = (await get('/api/jobs')).jobs.find((j) => j.job === 'edges')!;
      const v = job.configs.find((x) => x.config === 'edge/a')!;
      assert.deepEqual(v.passAtK, cfg.passAtK, '/api/jobs pass@k is stats --json');
      assert.deepEqual(v.pass1, { mean: cfg.pass1.mean, ciLo: cfg.pass1.ciLo, ciHi: cfg.pass1.ciHi });
    } finally {
      view.child.kill('SIGTERM');
    }
  });
});

describe('the viewer shows every stored field of an imported trial', () => {
  it('timeout and error class, tokens, cost, duration, per-test results', async () => {
    const view = await startView([jobDir]);
    const page = await browser.newPage();
    try {
      const listing = (await cliOk(['trials', '--job', 'figs', '--jobs-dir', jobsDir, '--json']))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { trial_id: string; error_class: string | null });
      const id = listing.find((r) => r.error_class === 'agent_timeout')!.trial_id;
      await page.goto(`${view.base}/?token=${view.token}#/trial/${encodeURIComponent(`figs/${id}`)}`);
      await page.waitForSelector('#error');
      assert.match((await page.textContent('#error'))!, /agent_timeout \(agent_run\): agent timed out after 600 s/);
      assert.match((await page.textContent('#error'))!, /agent ended: agent_timeout/);
      assert.equal(await page.textContent('#tokens'), 'tokens 1200 in (100 cached) / 800 out');
      assert.equal(await page.textContent('#cost'), 'cost $0.0123');
      assert.match((await page.textContent('#origin'))!, /imported from harbor/);
      // The import keeps Harbor's own record under harbor/ (termgrade's record is the page itself).
      assert.equal(
        await page.locator('details[data-file="harbor/result.json"]').count(),
        1,
        "Harbor's own result.json is listed",
      );
      const tests = await page.$$eval('table.tests tbody tr', (trs) =>
        trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')),
      );
      assert.deepEqual(tests, [
        ['test_outputs.py::test_exists', 'passed', '0.0 s', ''],
        ['test_outputs.py::test_content', 'failed', '0.0 s', 'assert 1 == 2'],
      ]);
      assert.match(
        (await page.textContent('#no-phases'))!,
        /2026-01-01T00:00:00Z to 2026-01-01T00:02:00Z \(120\.0 s\)/,
      );
    } finally {
      await page.close();
      view.child.kill('SIGTERM');
    }
  });
});

describe('bad input: exit 2 naming the file and the problem, nothing left behind', () => {
  const crashFiles = async (): Promise<string[]> =>
    (await readdir(tmpdir())).filter((f) => f.startsWith('termgrade-crash-'));

  it('import of a missing path, a file, or a folder with no Harbor trials', async () => {
    const dir = await tempDir();
    const jobs = path.join(dir, 'jobs');
    const file = path.join(dir, 'a.jsonl');
    await writeFile(file, '{}\n');
    await mkdir(path.join(dir, 'empty'));
    const before = await crashFiles();
    for (const [src, problem] of [
      [path.join(dir, 'absent'), /no such folder/],
      [file, /not a folder/],
      [path.join(dir, 'empty'), /no Harbor trial results to import.*job j was not made/],
    ] as const) {
      const r = await runCli(['import', src, '--job', 'j', '--jobs-dir', jobs]);
      assert.equal(r.status, 2, r.stderr);
      assert.ok(r.stderr.includes(src), r.stderr);
      assert.match(r.stderr, problem);
      assert.ok(!existsSync(path.join(jobs, 'j')), `no empty job left by importing ${src}`);
    }
    assert.deepEqual(await crashFiles(), before, 'no crash file');
    // Importing again what a job holds is not an error, and changes nothing.
    const again = await runCli(['import', root, '--job', 'figs', '--jobs-dir', jobsDir]);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /nothing new/);
  });

  it('stats, compare, report, view and export of missing, empty, malformed and damaged inputs', async () => {
    const dir = await tempDir();
    const empty = path.join(dir, 'empty');
    await mkdir(empty);
    const badTrial = path.join(dir, 'trials', 't1');
    await mkdir(badTrial, { recursive: true });
    await writeFile(path.join(badTrial, 'result.json'), '{"trialId": ');
    const damaged = path.join(dir, 'damaged');
    await mkdir(damaged);
    await writeFile(path.join(damaged, 'job.db'), 'not a database '.repeat(40));
    const out = path.join(dir, 'out');
    const before = await crashFiles();
    const cases: Array<[string[], string, RegExp]> = [];
    for (const [src, file, problem] of [
      [path.join(dir, 'absent'), path.join(dir, 'absent'), /no such file or folder/],
      [empty, empty, /not a job folder \(no job\.db\) and no trial folders/],
      [path.join(dir, 'trials'), path.join(badTrial, 'result.json'), /not (JSON|a trial result)/],
      [damaged, path.join(damaged, 'job.db'), /damaged or not a termgrade store/],
    ] as const) {
      cases.push([['stats', src], file, problem]);
      cases.push([['compare', 'a', 'b', src], file, problem]);
      cases.push([['report', src, '-o', out], file, problem]);
      cases.push([['export', 'trials', src, '-o', out], file, problem]);
    }
    cases.push([['view', path.join(dir, 'absent'), '--port', '0'], path.join(dir, 'absent'), /no such file or folder/]);
    cases.push([['view', damaged, '--port', '0'], path.join(damaged, 'job.db'), /damaged/]);
    cases.push([['convert', path.join(dir, 'absent'), '-o', out], path.join(dir, 'absent'), /no such folder/]);
    for (const [args, file, problem] of cases) {
      const r = await runCli(args);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.ok(r.stderr.includes(file), `${args.join(' ')} names ${file}: ${r.stderr}`);
      assert.match(r.stderr, problem, args.join(' '));
      assert.ok(!existsSync(out), `${args.join(' ')} wrote nothing`);
    }
    assert.deepEqual(await crashFiles(), before, 'no crash file');
  });
});
