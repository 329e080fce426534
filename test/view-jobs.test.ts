import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob } from '../src/job/run-job.js';
import type { JobSpecInput } from '../src/job/spec.js';
import { startViewer, type RunningViewer } from '../src/view/server.js';
import { tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';
import { bash } from './support/scripts.js';

/**
 * The viewer a Harbor user expects, in chromium: the jobs page (jobs made after the viewer started
 * appear, per-configuration figures, slots of every configuration), the task x configuration grid
 * (filters apply, cells open their trials), trials in flight with their transcript so far, task
 * names on one line, and the report served beside the viewer linking to trials. Jobs run on the
 * fake provider: what is tested is the viewer over real job stores and trial folders.
 */
let browser: Browser;
const LONG = 'a-long-task-name-with-many-parts-a-narrow-column-would-break-not-short';
let tasks: string[] = [];

before(async () => {
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  tasks = await Promise.all(
    ['short', LONG].map((n) =>
      trivialTask({
        'task.toml': `[task]\nname = "${n}"\n\n[verifier]\ntimeout_sec = 30\n\n[agent]\ntimeout_sec = 60\n`,
      }),
    ),
  );
});
after(async () => {
  await browser?.close();
});

async function newPage(viewer: RunningViewer, width = 1280): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width, height: 860 } });
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(viewer.openUrl);
  return { page, errors };
}

/** A job in `jobsDir` run on the fake provider: oracle passes, nop fails (the fake grades by agent). */
async function runFake(
  jobsDir: string,
  input: Partial<JobSpecInput>,
  provider = new FakeProvider({ grade: () => 1 }),
): Promise<void> {
  const spec = parseSpec(
    { name: 'j', tasks: { paths: tasks }, agents: [{ agent: 'oracle' }], k: 2, concurrency: 2, ...input },
    'test',
  );
  const job = await openJob(spec, jobsDir);
  try {
    await runJob({ spec: job.spec, tasks: job.tasks, store: job.store, provider, jobDir: job.jobDir });
  } finally {
    await job.close();
  }
}

describe('viewer: jobs page and grid', () => {
  it("shows jobs made after it started, each configuration's figures, and the slots of every configuration a job ran", async () => {
    const jobsDir = await tempDir();
    const viewer = await startViewer({ sources: [jobsDir], port: 0, refreshMs: 150 });
    const { page, errors } = await newPage(viewer);
    try {
      await page.goto(`${viewer.url}/#/jobs`);
      await page.waitForSelector('text=no jobs yet');
      await page.evaluate(() => ((window as unknown as { marker: number }).marker = 7));
      await runFake(jobsDir, { name: 'first' });
      // The viewer may have drawn the job mid-run: wait for its finished state before reading figures.
      await page.waitForFunction(
        () => document.querySelector('.jobcard[data-job=first] .slots')?.textContent === '4 recorded of 4 slots',
        undefined,
        { timeout: 20_000 },
      );
      await page.waitForSelector('.jobcard[data-job=first] tr[data-config=oracle]', { timeout: 20_000 });
      const row = page.locator('.jobcard[data-job=first] tr[data-config=oracle]');
      assert.equal(await row.locator('td.graded').textContent(), '4');
      assert.equal(await row.locator('td.pass1').textContent(), '100.0% [100.0%, 100.0%]');
      assert.equal(await row.locator('td.coverage').textContent(), '100.0% (4 of 4)');
      assert.equal(await row.locator('td.cost').textContent(), '-');
      assert.match((await page.textContent('.jobcard[data-job=first] .slots'))!, /^4 recorded of 4 slots$/);

      // The same job again with another configuration: its slots are both configurations'.
      const spec = parseSpec({ name: 'first', tasks: { paths: tasks }, agents: [{ agent: 'nop' }], k: 2 }, 'test');
      const job = await openJob(spec, jobsDir);
      try {
        await page.waitForFunction(
          () => document.querySelector('.jobcard[data-job=first] .slots')?.textContent === '4 recorded of 8 slots',
          undefined,
          { timeout: 20_000 },
        );
        await runJob({
          spec: job.spec,
          tasks: job.tasks,
          store: job.store,
          provider: new FakeProvider({ grade: () => 0 }),
          jobDir: job.jobDir,
        });
      } finally {
        await job.close();
      }
      await page.waitForFunction(
        () => document.querySelector('.jobcard[data-job=first] .slots')?.textContent === '8 recorded of 8 slots',
        undefined,
        { timeout: 20_000 },
      );
      assert.equal(
        await page.locator('.jobcard[data-job=first] tr[data-config=nop] td.pass1').textContent(),
        '0.0% [0.0%, 0.0%]',
      );
      // A second job appears beside it, still without a reload.
      await runFake(jobsDir, { name: 'second' });
      await page.waitForSelector('.jobcard[data-job=second]', { timeout: 20_000 });
      assert.equal(
        await page.evaluate(() => (window as unknown as { marker?: number }).marker),
        7,
        'the page was reloaded',
      );
      assert.deepEqual(errors, []);
    } finally {
      await page.close();
      await viewer.close();
    }
  });

  it('grids tasks x configurations (filters apply), a cell opens exactly its trials, task names stay on one line', async () => {
    const jobsDir = await tempDir();
    await runFake(
      jobsDir,
      { name: 'g', agents: [{ agent: 'oracle' }, { agent: 'nop' }] },
      new FakeProvider({ grade: (_t, n) => (n % 2 === 0 ? 1 : 0) }),
    );
    const viewer = await startViewer({ sources: [jobsDir], port: 0 });
    const { page, errors } = await newPage(viewer, 700);
    try {
      await page.goto(`${viewer.url}/#/grid`);
      await page.waitForSelector('#grid tbody tr');
      assert.deepEqual(await page.locator('#grid tbody th').allTextContents(), [LONG, 'short']);
      assert.deepEqual(await page.locator('#grid thead th[data-config]').allTextContents(), ['nop', 'oracle']);
      const cells = await page.locator('#grid tbody td').allTextContents();
      assert.equal(cells.length, 4);
      for (const c of cells) assert.match(c, /^\d\.\d\d \(\d\/2\)$/);
      // Filters apply: failed trials only leaves a rate of 0 in every cell.
      await page.selectOption('select[name=reward]', 'fail');
      await page.waitForFunction(
        () =>
          new URLSearchParams(location.hash.split('?')[1]).get('reward') === 'fail' &&
          document.querySelectorAll('#grid tbody td[data-rate]').length > 0 &&
          [...document.querySelectorAll('#grid tbody td[data-rate]')].every(
            (td) => td.getAttribute('data-rate') === '0',
          ),
      );
      await page.selectOption('select[name=reward]', '');
      await page.waitForFunction(
        () =>
          ![...document.querySelectorAll('#grid tbody td[data-rate]')].every(
            (td) => td.getAttribute('data-rate') === '0',
          ),
      );
      // A cell: exactly that task and configuration ("short" is not a part of the long name's match).
      await page.click(`#grid tbody tr[data-task=short] td[data-config=oracle] a`);
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.includes('(2 trials)'));
      assert.deepEqual(new Set(await page.locator('#trials tbody td.task').allTextContents()), new Set(['short']));
      assert.deepEqual(
        new Set(await page.locator('#trials tbody tr td:nth-child(3)').allTextContents()),
        new Set(['oracle']),
      );
      // The task column never wraps, however narrow the page.
      await page.goto(`${viewer.url}/#/?task=${LONG}`);
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.includes('(4 trials)'));
      const cell = page.locator('#trials tbody td.task').first();
      assert.equal(await cell.evaluate((e) => getComputedStyle(e).whiteSpace), 'nowrap');
      const lineHeight = await page
        .locator('#trials tbody td:nth-child(3)')
        .first()
        .evaluate((e) => e.getBoundingClientRect().height);
      assert.equal(await cell.evaluate((e) => e.getBoundingClientRect().height), lineHeight, 'the task name wrapped');
      assert.deepEqual(errors, []);
    } finally {
      await page.close();
      await viewer.close();
    }
  });

  it("serves the report beside the viewer: each task row links to that task's trials", async () => {
    const jobsDir = await tempDir();
    await runFake(jobsDir, { name: 'r', agents: [{ agent: 'oracle' }, { agent: 'nop' }] });
    const viewer = await startViewer({ sources: [jobsDir], port: 0 });
    const { page, errors } = await newPage(viewer);
    try {
      await page.goto(`${viewer.url}/report`);
      const links = page.locator('#task-rates tbody a');
      assert.equal(await links.count(), 4);
      await page.click(`#task-rates tbody tr:has(td:text-is("nop")) a:text-is("short")`);
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.includes('(2 trials)'));
      assert.match(page.url(), /config=nop&task=short&exact=1/);
      assert.deepEqual(new Set(await page.locator('#trials tbody td.task').allTextContents()), new Set(['short']));
      assert.deepEqual(errors, []);
    } finally {
      await page.close();
      await viewer.close();
    }
  });
});

describe('viewer: trials in flight', () => {
  // Turn 2 is held back until the test has seen the running trial with its first turn on the page
  // (a fixed delay lost that race on a loaded machine), then let go; released in any case at the end.
  let release = (): void => undefined;
  const turnTwo = new Promise<void>((resolve) => (release = resolve));
  const model = new ScriptedModelServer({
    // Turn 1 at once; turn 2 once released (the fake sandbox prints nothing, so the agent stops at
    // its cap of 2 turns).
    m: (_i, body) => {
      const turns = body.messages.filter((m) => m.role === 'assistant').length;
      return turns === 0 ? bash('echo first-turn-output') : { ...bash('echo TERMGRADE_TASK_COMPLETE'), after: turnTwo };
    },
  });
  after(() => {
    release();
    return model.close();
  });

  it('shows a running trial as running, with its transcript so far, then its record', async () => {
    const baseUrl = await model.start();
    const jobsDir = await tempDir();
    const viewer = await startViewer({ sources: [jobsDir], port: 0, refreshMs: 150 });
    const { page, errors } = await newPage(viewer);
    try {
      const spec = parseSpec(
        {
          name: 'live',
          tasks: { paths: [tasks[0]!] },
          agents: [{ agent: 'bash-tool', model: { baseUrl, model: 'm' }, maxTurns: 2 }],
          k: 1,
        },
        'test',
      );
      const job = await openJob(spec, jobsDir);
      const running = runJob({
        spec: job.spec,
        tasks: job.tasks,
        store: job.store,
        provider: new FakeProvider({ grade: () => 1 }),
        jobDir: job.jobDir,
      }).finally(() => job.close());
      await page.goto(`${viewer.url}/#/`);
      await page.waitForSelector('#trials tbody tr.running', { timeout: 20_000 });
      const row = page.locator('#trials tbody tr.running');
      assert.equal(await row.locator('td:nth-child(5)').textContent(), 'running');
      assert.deepEqual(
        [await row.locator('td.task').textContent(), await row.locator('td:nth-child(3)').textContent()],
        ['short', 'bash-tool/m'],
      );
      await row.locator('td.task a').click();
      await page.waitForSelector('.running-note');
      // While it still runs (turn 2 is held back): the first turn is on the page.
      await page.waitForFunction(
        () =>
          document.querySelector('.running-note') &&
          document.querySelectorAll('.transcript .step.agent').length === 1 &&
          document.querySelector('.transcript')?.textContent?.includes('first-turn-output'),
        undefined,
        { timeout: 20_000 },
      );
      // Once recorded, the same page shows the record: graded, no longer running.
      release();
      await running;
      await page.waitForFunction(
        () => !document.querySelector('.running-note') && document.querySelector('#reward')?.textContent === '1',
        undefined,
        { timeout: 20_000 },
      );
      assert.match((await page.textContent('.transcript'))!, /TERMGRADE_TASK_COMPLETE/);
      assert.deepEqual(errors, []);
    } finally {
      release();
      await page.close();
      await viewer.close();
    }
  });
});
