import assert from 'node:assert/strict';
import { mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob } from '../src/job/run-job.js';
import { Catalog } from '../src/view/catalog.js';
import { startViewer, type RunningViewer } from '../src/view/server.js';
import { docker, ROOT, runCli, tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';
import { rawRequest } from './support/raw-http.js';
import { bash } from './support/scripts.js';

/**
 * `termgrade report` and `termgrade view` in a real browser (Debian's chromium driven by
 * playwright-core): pages load, filters, sorting and links work, no console errors, no request
 * leaves the machine, and the screenshots in README are the ones taken here.
 */
const SCREENSHOTS = path.join(ROOT, 'docs', 'screenshots');
let browser: Browser;
let jobDir = '';
let jobsDir = '';
const model = new ScriptedModelServer({
  // Each trial: a long listing (its whole output must be viewable), the work, then done.
  m: (_i, body) => {
    const turns = body.messages.filter((m) => m.role === 'assistant').length;
    return [bash('seq 1 1500'), bash('echo hello > /app/out.txt'), bash('echo TERMGRADE_TASK_COMPLETE')][
      Math.min(turns, 2)
    ]!;
  },
});

/**
 * A fresh browser page (its own cookies); given a viewer, it first opens the address the viewer
 * prints (with its token), as a user would, so the page is let in.
 */
async function newPage(viewer?: RunningViewer): Promise<{ page: Page; errors: string[]; outside: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  const errors: string[] = [];
  const outside: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  // Nothing may be fetched but the page's own server (or its own file).
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file://') || url.startsWith('http://127.0.0.1')) return route.continue();
    outside.push(url);
    return route.abort();
  });
  if (viewer) {
    await page.goto(viewer.openUrl);
    assert.equal(page.url(), `${viewer.url}/`, 'the token left the address bar');
  }
  return { page, errors, outside };
}

/** A screenshot that is not blank: several times the bytes of a blank page's at the same size. */
async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, name);
  await page.evaluate(() => window.scrollTo(0, 0));
  const shot = await page.screenshot({ path: file });
  const blank = await browser.newPage({ viewport: page.viewportSize()! });
  const empty = await blank.screenshot();
  await blank.close();
  assert.ok(shot.length > 5 * empty.length, `${name} looks blank (${shot.length} bytes, a blank page ${empty.length})`);
}

before(async () => {
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const baseUrl = await model.start();
  const tasks = await Promise.all(
    ['alpha', 'beta'].map((n) =>
      trivialTask({
        'task.toml': `[task]\nname = "${n}"\n\n[verifier]\ntimeout_sec = 30\n\n[agent]\ntimeout_sec = 60\n`,
      }),
    ),
  );
  jobsDir = await tempDir();
  const spec = parseSpec(
    {
      name: 'shown',
      tasks: { paths: tasks },
      agents: [{ agent: 'oracle' }, { agent: 'nop' }, { agent: 'bash-tool', model: { baseUrl, model: 'm' } }],
      k: 2,
      concurrency: 4,
    },
    'test',
  );
  const job = await openJob(spec, jobsDir);
  jobDir = job.jobDir;
  const summary = await runJob({ spec: job.spec, tasks: job.tasks, store: job.store, provider: docker(), jobDir });
  await job.close();
  assert.equal(summary.completed, 12, JSON.stringify(summary));
});
after(async () => {
  await browser?.close();
  await model.close();
});

describe('termgrade report', () => {
  it('has the figures stats --json gives, opens from file:// with nothing fetched, sorts, and shows check and selection', async () => {
    const out = await tempDir();
    const check = await runCli([
      'check',
      await trivialTask(),
      '--json',
      '--quiet',
      '--probes',
      'none',
      '-o',
      path.join(out, 'check'),
    ]);
    assert.equal(check.status, 0, check.stderr);
    const select = await runCli([
      'select',
      jobDir,
      '--model',
      'bash-tool/m',
      '--min-trials',
      '1',
      '--band',
      '0:1',
      '-o',
      path.join(out, 'sel'),
    ]);
    assert.equal(select.status, 0, select.stderr);
    const made = await runCli([
      'report',
      jobDir,
      '-o',
      path.join(out, 'report'),
      '--check',
      path.join(out, 'check', 'check.json'),
      '--select',
      path.join(out, 'sel'),
    ]);
    assert.equal(made.status, 0, made.stderr);

    const stats = JSON.parse((await runCli(['stats', jobDir, '--json'])).stdout) as { configs: unknown[] };
    const data = JSON.parse(await readFile(path.join(out, 'report', 'report.json'), 'utf8')) as {
      configs: unknown[];
      check: { total: number; admissible: number };
      selection: { training: unknown[] };
      behaviour: Array<{
        config: string;
        withTrajectory: number;
        quitEarly: number;
        turns: number;
        inputOutputRatio: number | null;
      }>;
    };
    assert.deepEqual(data.configs, stats.configs, 'report figures differ from stats --json');
    assert.deepEqual([data.check.total, data.check.admissible], [1, 1]);
    assert.equal(data.selection.training.length, 2);
    const bt = data.behaviour.find((b) => b.config === 'bash-tool/m')!;
    assert.deepEqual([bt.withTrajectory, bt.quitEarly, bt.turns], [4, 0, 12]);
    assert.ok(bt.inputOutputRatio !== null && bt.inputOutputRatio > 0);

    const { page, errors, outside } = await newPage();
    await page.goto(`file://${path.join(out, 'report', 'index.html')}`);
    assert.ok((await page.locator('svg').count()) >= 4, 'the charts are missing');
    assert.match((await page.textContent('#configs'))!, /bash-tool\/m/);
    assert.match((await page.textContent('body'))!, /1 of 1 candidate tasks admitted/);
    // Sorting: the per-task table by rate, both ways.
    const rates = async (): Promise<number[]> =>
      (await page.locator('#task-rates tbody tr td:nth-child(5)').allTextContents()).map(Number);
    await page.click('#task-rates th:nth-child(5)');
    const up = await rates();
    assert.deepEqual(
      up,
      [...up].sort((a, b) => a - b),
    );
    await page.click('#task-rates th:nth-child(5)');
    const down = await rates();
    assert.deepEqual(
      down,
      [...up].sort((a, b) => b - a),
    );
    assert.notDeepEqual(up, down);
    await screenshot(page, 'report.png');
    assert.deepEqual(errors, []);
    assert.deepEqual(outside, []);
    await page.close();
  });
});

describe('termgrade view', () => {
  it('lists trials with filters, sorting and paging, opens a trial whole, compares two, and deep links', async () => {
    const viewer = await startViewer({ sources: [jobDir], port: 0 });
    const { page, errors, outside } = await newPage(viewer);
    try {
      await page.goto(`${viewer.url}/#/`);
      await page.waitForSelector('#trials tbody tr');
      assert.equal(await page.locator('#trials tbody tr').count(), 12);
      await page.selectOption('select[name=config]', 'nop');
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.includes('(4 trials)'));
      assert.deepEqual(
        new Set(await page.locator('#trials tbody tr td:nth-child(3)').allTextContents()),
        new Set(['nop']),
      );
      // Each change re-renders the page: wait for it before the next, so no control is stale.
      const showing = (n: number) =>
        page.waitForFunction(
          (text) => document.querySelector('#page-info')?.textContent?.includes(text),
          `(${n} trials)`,
        );
      await page.selectOption('select[name=config]', '');
      await showing(12);
      await page.selectOption('select[name=reward]', 'pass');
      await showing(8);
      await page.selectOption('select[name=reward]', '');
      await showing(12);
      await page.fill('input[name=test]', 'test_hello');
      await page.press('input[name=test]', 'Enter');
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.includes('(4 trials)'));
      assert.match(page.url(), /test=test_hello/);
      await page.goto(`${viewer.url}/#/?sort=reward&dir=desc`);
      await page.waitForFunction(() => document.querySelectorAll('#trials tbody tr').length === 12);
      const rewards = (await page.locator('#trials tbody tr td:nth-child(6)').allTextContents()).map(Number);
      assert.deepEqual(
        rewards,
        [...rewards].sort((a, b) => b - a),
      );
      await screenshot(page, 'view.png');

      // A bash-tool trial: the whole tool output, per-test results, phases, logs.
      await page.goto(`${viewer.url}/#/?config=bash-tool%2Fm`);
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.includes('(4 trials)'));
      await page.click('#trials tbody tr:first-child a');
      await page.waitForSelector('.trial .transcript');
      const outputs = await page.locator('pre.observation').allTextContents();
      const listing = outputs.find((o) => o.includes('\n1500')); // 'exit code: 0' and 1..1500, 6,406 characters
      assert.ok(
        listing && listing.length === 6406,
        `the long tool output is cut: ${outputs.map((o) => `${o.length}:${o.slice(0, 40)}`).join(' | ')}`,
      );
      assert.match((await page.textContent('table.tests'))!, /test_hello/);
      assert.ok((await page.locator('.timeline div').count()) >= 3);
      // A native trial's page shows its whole record too: tokens, the task content it ran, where its tests came from.
      assert.match((await page.textContent('#tokens'))!, /^tokens \d+ in \(\d+ cached\) \/ \d+ out$/);
      assert.match((await page.textContent('#record dd[data-field=task-checksum]'))!, /^[0-9a-f]{16,}$/);
      assert.notEqual(await page.textContent('#record dd[data-field=tests-source]'), '-');
      const log = page.locator('details[data-file="verifier/test-stdout.txt"]');
      await log.locator('summary').click();
      await page.waitForFunction(() =>
        document
          .querySelector('details[data-file="verifier/test-stdout.txt"] pre')
          ?.textContent?.includes('test_hello'),
      );
      await screenshot(page, 'view-trial.png');
      const deep = page.url();

      // The deep link opens the same trial in a fresh page (one that was let in once).
      const { page: again } = await newPage(viewer);
      await again.goto(deep);
      await again.waitForSelector('.trial .transcript');
      assert.equal(await again.getAttribute('.trial', 'data-trial'), await page.getAttribute('.trial', 'data-trial'));
      await again.close();

      // Two trials of one task side by side.
      await page.goto(`${viewer.url}/#/?task=alpha&config=bash-tool%2Fm`);
      await page.waitForFunction(() => document.querySelectorAll('#trials tbody tr').length === 2);
      await page.locator('#trials tbody tr input[type=checkbox]').nth(0).check();
      await page.locator('#trials tbody tr input[type=checkbox]').nth(1).check();
      await page.click('text=compare 2 selected');
      await page.waitForSelector('.cols .trial + .trial');
      assert.equal(await page.locator('.cols .trial').count(), 2);
      assert.deepEqual(errors, []);
      assert.deepEqual(outside, []);
    } finally {
      await page.close();
      await viewer.close();
    }
  });

  it("shows a running job's new trials without reloading the page", async () => {
    const tasks = await Promise.all(
      Array.from({ length: 3 }, (_, i) => trivialTask({ 'task.toml': `[task]\nname = "live${i}"\n` })),
    );
    const spec = parseSpec(
      { name: 'live', tasks: { paths: tasks }, agents: [{ agent: 'oracle' }], k: 4, concurrency: 2 },
      'test',
    );
    const job = await openJob(spec, await tempDir());
    const viewer = await startViewer({ sources: [job.jobDir], port: 0, refreshMs: 200 });
    const { page, errors } = await newPage(viewer);
    try {
      await page.goto(`${viewer.url}/#/`);
      await page.waitForSelector('#page-info');
      assert.match((await page.textContent('#page-info'))!, /\(0 trials\)/);
      await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
      const running = runJob({
        spec: job.spec,
        tasks: job.tasks,
        store: job.store,
        provider: new FakeProvider({ commandMs: 40 }),
        jobDir: job.jobDir,
      });
      await page.waitForFunction(
        () => /\((\d+) trials\)/.exec(document.querySelector('#page-info')?.textContent ?? '')?.[1] !== '0',
        undefined,
        { timeout: 30_000 },
      );
      await running;
      await page.waitForFunction(
        () => document.querySelector('#page-info')?.textContent?.includes('(12 trials)'),
        undefined,
        { timeout: 30_000 },
      );
      assert.equal(
        await page.evaluate(() => (window as unknown as { marker?: number }).marker),
        42,
        'the page was reloaded',
      );
      assert.match((await page.textContent('.job'))!, /of 12 slots/);
      assert.deepEqual(errors, []);
    } finally {
      await page.close();
      await viewer.close();
      await job.close();
    }
  });

  it('shows a check output (its trial folders) beside a job', async () => {
    const out = path.join(await tempDir(), 'check-out');
    const check = await runCli(['check', await trivialTask(), '--json', '--quiet', '--probes', 'none', '-o', out]);
    assert.equal(check.status, 0, check.stderr);
    const ran = (JSON.parse(check.stdout) as { tasks: Array<{ trials: string[] }> }).tasks[0]!.trials.length;
    const viewer = await startViewer({ sources: [jobDir, out], port: 0 });
    const fetch = (url: string) => globalThis.fetch(url, { headers: { authorization: `Bearer ${viewer.token}` } });
    try {
      const page = (await (await fetch(`${viewer.url}/api/trials?job=check-out&limit=500`)).json()) as {
        total: number;
        rows: Array<{ id: string; config: string }>;
      };
      assert.equal(page.total, ran);
      assert.deepEqual(new Set(page.rows.map((r) => r.config)), new Set(['oracle', 'nop']));
      const one = (await (
        await fetch(`${viewer.url}/api/trial?id=${encodeURIComponent(page.rows[0]!.id)}`)
      ).json()) as { result: { trialId: string } | null; files: Array<{ path: string }> };
      assert.ok(one.result && one.files.some((f) => f.path.startsWith('verifier/')));
      const jobs = (await (await fetch(`${viewer.url}/api/summary`)).json()) as { jobs: Array<{ job: string }> };
      assert.deepEqual(jobs.jobs.map((j) => j.job).sort(), ['check-out', path.basename(jobDir)].sort());
    } finally {
      await viewer.close();
    }
  });

  it('follows a job whose records are replaced (a resume with --retry), leaving no stale row', async () => {
    const tasks = await Promise.all(
      Array.from({ length: 3 }, (_, i) => trivialTask({ 'task.toml': `[task]\nname = "again${i}"\n` })),
    );
    const spec = parseSpec(
      { name: 'again', tasks: { paths: tasks }, agents: [{ agent: 'oracle' }], k: 1, concurrency: 3, infraRetries: 0 },
      'test',
    );
    const job = await openJob(spec, await tempDir());
    try {
      await runJob({
        spec: job.spec,
        tasks: job.tasks,
        store: job.store,
        provider: new FakeProvider({ grade: () => 'no-reward' }),
        jobDir: job.jobDir,
      });
      const catalog = await Catalog.open([job.jobDir]);
      try {
        // No reward after the agent's turn is graded 0 (verifier_no_reward); --retry by that class replaces them.
        assert.deepEqual(
          catalog.query({}).rows.map((r) => [r.status, r.reward]),
          [
            ['completed', 0],
            ['completed', 0],
            ['completed', 0],
          ],
        );
        await runJob({
          spec: job.spec,
          tasks: job.tasks,
          store: job.store,
          provider: new FakeProvider({ grade: () => 1 }),
          jobDir: job.jobDir,
          retry: { classes: ['verifier_no_reward'] },
        });
        assert.equal(catalog.refresh(), true);
        const rows = catalog.query({}).rows;
        assert.deepEqual(
          rows.map((r) => [r.task, r.status, r.reward]),
          [
            ['again0', 'completed', 1],
            ['again1', 'completed', 1],
            ['again2', 'completed', 1],
          ],
        );
        assert.equal(catalog.refresh(), false, 'nothing changed since');
      } finally {
        catalog.close();
      }
    } finally {
      await job.close();
    }
  });

  it('needs a token on any bind but loopback, and checks it', async () => {
    await assert.rejects(startViewer({ sources: [jobDir], host: '0.0.0.0', port: 0 }), /needs a token/);
    const viewer = await startViewer({ sources: [jobDir], port: 0, token: 'open-sesame-123' });
    try {
      assert.equal(viewer.tokenGenerated, false);
      assert.equal((await fetch(`${viewer.url}/api/summary`)).status, 401);
      assert.equal(
        (await fetch(`${viewer.url}/api/summary`, { headers: { authorization: 'Bearer wrong-token-1234' } })).status,
        401,
      );
      assert.equal(
        (await fetch(`${viewer.url}/api/summary`, { headers: { authorization: 'Bearer open-sesame-123' } })).status,
        200,
      );
      // The token in the address becomes a cookie (named for this viewer's port) and leaves the address.
      const first = await fetch(viewer.openUrl, { redirect: 'manual' });
      assert.equal(first.status, 303);
      assert.equal(first.headers.get('location'), '/');
      const cookie = first.headers.get('set-cookie')!.split(';')[0]!;
      assert.equal(cookie.split('=')[0], `tg_token_${new URL(viewer.url).port}`);
      assert.equal((await fetch(`${viewer.url}/api/trials`, { headers: { cookie } })).status, 200);
      assert.equal(
        (await fetch(`${viewer.url}/api/trials`, { headers: { cookie: 'tg_token_1=open-sesame-123' } })).status,
        401,
        "another port's cookie",
      );
      // A file outside the trial's folder is never served.
      const id = (
        (await (await fetch(`${viewer.url}/api/trials?limit=1`, { headers: { cookie } })).json()) as {
          rows: Array<{ id: string }>;
        }
      ).rows[0]!.id;
      assert.equal(
        (await fetch(`${viewer.url}/api/file?id=${encodeURIComponent(id)}&path=../../job.db`, { headers: { cookie } }))
          .status,
        404,
      );
      assert.equal(
        (await fetch(`${viewer.url}/api/file?id=${encodeURIComponent(id)}&path=result.json`, { headers: { cookie } }))
          .status,
        200,
      );
    } finally {
      await viewer.close();
    }
    assert.ok((await stat(jobDir)).isDirectory());
  });

  it('on loopback without a token, one is generated: a page is let in only through the printed address', async () => {
    const viewer = await startViewer({ sources: [jobDir], port: 0 });
    try {
      assert.equal(viewer.tokenGenerated, true);
      assert.ok(viewer.token.length >= 32);
      assert.equal((await fetch(`${viewer.url}/api/summary`)).status, 401);
      assert.equal((await fetch(`${viewer.url}/`)).status, 401);
      // A browser that never got the address is shut out; one that opened it works.
      const { page: stranger } = await newPage();
      const shut = await stranger.goto(`${viewer.url}/#/`);
      assert.equal(shut?.status(), 401);
      await stranger.close();
      const { page, errors } = await newPage(viewer);
      await page.goto(`${viewer.url}/#/?config=nop`);
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.includes('(4 trials)'));
      assert.deepEqual(errors, []);
      await page.close();
    } finally {
      await viewer.close();
    }
  });

  it('refuses a foreign Host (DNS rebinding) or Origin with 403, even with the token; allowedHosts adds names', async () => {
    const viewer = await startViewer({ sources: [jobDir], port: 0, allowedHosts: ['view.example'] });
    try {
      const port = new URL(viewer.url).port;
      const auth = { authorization: `Bearer ${viewer.token}` };
      const cases: Array<[Record<string, string>, number]> = [
        [{ host: `127.0.0.1:${port}` }, 200],
        [{ host: `localhost:${port}` }, 200],
        [{ host: `view.example:${port}` }, 200],
        [{ host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}` }, 200],
        [{ host: `attacker.example:${port}` }, 403],
        [{ host: `127.0.0.1:${port}`, origin: 'http://attacker.example' }, 403],
        [{ host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${Number(port) + 1}` }, 403],
      ];
      for (const [headers, status] of cases) {
        for (const p of ['/api/summary', '/', `/?token=${viewer.token}`]) {
          const r = await rawRequest(viewer.url, 'GET', p, { ...auth, ...headers });
          const want = status === 200 && p.includes('token=') ? 303 : status;
          assert.equal(r.status, want, `${p} ${JSON.stringify(headers)}: ${JSON.stringify(r.json)}`);
          if (status === 403) assert.equal(r.json.error.code, 'forbidden');
        }
      }
    } finally {
      await viewer.close();
    }
  });
});
