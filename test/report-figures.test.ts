import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { charts } from '../src/report/charts.js';
import type { SelectManifest } from '../src/report/outputs.js';
import { reportData } from '../src/report/page-data.js';
import { renderReport, type RenderOptions } from '../src/report/page.js';
import { toStatsRecord, type StatsRecord } from '../src/records/record.js';
import { tempDir } from './helpers.js';

/**
 * The report's figures drawn right, read from the page chromium shows (the SVG's own elements):
 * no strokes at zero, whole-number k, equal lines told apart, labels that never overprint, every
 * figure saying its band and minimum trials, reasons for every "-", and the heatmap.
 */
let browser: Browser;
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
});
after(async () => {
  await browser?.close();
});

/** Trials of one configuration: per task, its rewards in order. */
const trials = (config: string, byTask: Record<string, number[]>): StatsRecord[] =>
  Object.entries(byTask).flatMap(([task, rewards]) =>
    rewards.map((reward, attempt) =>
      toStatsRecord({
        trial_id: `${config}-${task}-${attempt}`,
        config,
        task,
        agent: config,
        reward,
        duration_ms: 60_000,
      }),
    ),
  );

// a and b did exactly the same (equal pass@k lines, one runtime point); c failed everything.
const SAME = { t0: [1, 1, 1, 1], t1: [1, 0, 1, 0], t2: [1, 0, 0, 0], t3: [0, 1, 1, 1] };
const RECORDS = [
  ...trials('a', SAME),
  ...trials('b', SAME),
  ...trials('c', { t0: [0, 0, 0, 0], t1: [0, 0, 0, 0], t2: [0, 0, 0, 0], t3: [0, 0, 0, 0] }),
];

const SELECTION: SelectManifest = {
  model: 'a',
  rule: { band: [0.2, 0.8], target: 0.5, n: null, minTrials: 4, excluded: 0 },
  training: [
    {
      task: 't1',
      trials: 4,
      successes: 2,
      rate: 0.5,
      interval: [0.15, 0.85],
      intervalMethod: 'jeffreys-95',
      bandProbability: 0.7,
    },
  ],
  skipped: { outOfBand: 2, tooFewTrials: 0, excluded: 0, beyondN: 0, unmeasured: 0 },
  unmeasured: [],
  validation: [],
};

async function open(
  records: StatsRecord[],
  options: RenderOptions = {},
  selection: SelectManifest | null = SELECTION,
): Promise<Page> {
  const d = reportData({ sources: ['x'], records, details: [], band: [0.25, 0.75], minTrials: 4, selection });
  const file = path.join(await tempDir(), 'index.html');
  await writeFile(file, renderReport(d, await charts(d), 'now', options));
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`file://${file}`);
  return page;
}

describe('report figures', () => {
  it('the per-task histogram draws no bar (no stroke at zero) for an empty bin', async () => {
    const page = await open(RECORDS);
    try {
      const bars = await page
        .locator('figure[data-figure=histogram] path[aria-roledescription=bar]')
        .evaluateAll((els) => els.map((e) => e.getAttribute('aria-label') ?? ''));
      // a and b: rates 1, .5, .25, .75 -> 4 non-empty bins each; c: all 0 -> 1.
      assert.equal(bars.length, 9, bars.join(' | '));
      assert.ok(
        bars.every((b) => !/tasks: 0(;|$)/.test(b)),
        bars.join(' | '),
      );
    } finally {
      await page.close();
    }
  });

  it('pass@k: ticks only at whole k, equal lines told apart by dash and named as coinciding', async () => {
    const page = await open(RECORDS);
    try {
      const fig = page.locator('figure[data-figure=passAtK]');
      const ticks = await fig.locator('[aria-label^="X-axis"] .role-axis-label text').allTextContents();
      assert.deepEqual(ticks, ['1', '2', '4']);
      const lines = await fig
        .locator('path[aria-roledescription="line mark"]')
        .evaluateAll((els) =>
          els.map(
            (e) => `${e.getAttribute('stroke')}|${e.getAttribute('stroke-dasharray') ?? ''}|${e.getAttribute('d')}`,
          ),
        );
      assert.equal(lines.length, 3);
      const [la, lb] = lines.map((l) => l.split('|'));
      assert.equal(la![2], lb![2], 'a and b have the same values');
      assert.notEqual(la![1], lb![1], 'equal lines have the same dash: one hides the other');
      assert.match((await fig.textContent())!, /a = b \(same values, drawn over each other\)/);
    } finally {
      await page.close();
    }
  });

  it('labels of coinciding runtime points are one label, never printed over each other', async () => {
    const page = await open(RECORDS);
    try {
      const labels = await page
        .locator('figure[data-figure=runtime] g.role-mark text')
        .evaluateAll((els) => els.map((e) => ({ text: e.textContent, at: e.getAttribute('transform') })));
      assert.deepEqual(labels.map((l) => l.text).sort(), ['a, b', 'c']);
      assert.equal(new Set(labels.map((l) => l.at)).size, labels.length);
    } finally {
      await page.close();
    }
  });

  it('every figure says its band and its minimum trials; the heatmap has a cell per task and configuration', async () => {
    const page = await open(RECORDS);
    try {
      const figures = await page
        .locator('figure.chart')
        .evaluateAll((els) =>
          els.map((e) => [e.getAttribute('data-figure'), e.querySelector('figcaption')?.textContent ?? '']),
        );
      assert.deepEqual(
        figures.map(([id]) => id),
        ['pass1', 'passAtK', 'histogram', 'heatmap', 'runtime', 'errors'].filter((id) => id !== 'errors'),
      );
      for (const [id, caption] of figures)
        assert.match(caption!, /^Band: .+\. Minimum trials: .+\.$/, `${id}: ${caption}`);
      assert.match(figures.find(([id]) => id === 'histogram')![1]!, /Band: 0\.25-0\.75/);
      const cells = await page.locator('figure[data-figure=heatmap] path[aria-roledescription="rect mark"]').count();
      assert.equal(cells, 12);
      assert.equal(await page.locator('figure[data-figure=heatmap] g.role-mark text').count(), 12);
    } finally {
      await page.close();
    }
  });

  it('the selection table and "every task" each say which band they use; no "-" without its reason', async () => {
    const page = await open(RECORDS);
    try {
      assert.match(
        (await page.textContent('#selection-band'))!,
        /selection's own band, 0\.2-0\.8 .*not the report's 0\.25-0\.75/,
      );
      assert.match(
        (await page.textContent('#tasks-band'))!,
        /report's band, 0\.25-0\.75.*selection above used its own band, 0\.2-0\.8/,
      );
      assert.match((await page.textContent('#selected thead'))!, /P\(band 0\.2-0\.8\)/);
      assert.match((await page.textContent('#task-rates thead'))!, /P\(band 0\.25-0\.75\)/);
      const jaccard = await page.locator('#jaccard td').allTextContents();
      assert.ok(!jaccard.includes('-'), `a bare "-": ${jaccard.join(' | ')}`);
      assert.ok(jaccard.includes('- (both band sets empty)'), jaccard.join(' | '));
      assert.ok(jaccard.includes('- (no task of it lands in the band when re-measured)'), jaccard.join(' | '));
    } finally {
      await page.close();
    }
  });

  it('the (eb) note shows only when some task has fewer trials than a k shown, naming the method', async () => {
    const even = await open(RECORDS);
    try {
      assert.equal(await even.locator('#k-gt-n').count(), 0);
      assert.ok(!(await even.textContent('#configs'))!.includes('(eb)'));
    } finally {
      await even.close();
    }
    // t9 has 2 trials of a's 4: pass@4 extends it by the configuration's prior there.
    const short = await open([...RECORDS, ...trials('a', { t9: [1, 0] })]);
    try {
      assert.equal(await short.locator('#k-gt-n').count(), 1);
      assert.match((await short.textContent('#configs'))!, /\(eb\)/);
      assert.match(
        (await short.textContent('#k-gt-n'))!,
        /a, pass@4: unbiased estimator; 1 of 5 task\(s\) with fewer than k trials/,
      );
    } finally {
      await short.close();
    }
  });

  it('rows link to their trials when a viewer address is given, and not otherwise', async () => {
    const plain = await open(RECORDS);
    try {
      assert.equal(await plain.locator('#task-rates a').count(), 0);
    } finally {
      await plain.close();
    }
    const page = await open(RECORDS, {
      trialsLink: (f) =>
        `/#/?config=${encodeURIComponent(f.config)}${f.task ? `&task=${encodeURIComponent(f.task)}&exact=1` : ''}`,
    });
    try {
      const hrefs = await page
        .locator('#task-rates tbody a')
        .evaluateAll((els) => els.map((e) => e.getAttribute('href')));
      assert.equal(hrefs.length, 12);
      assert.ok(hrefs.includes('/#/?config=b&task=t2&exact=1'), hrefs.join(' '));
      assert.equal(await page.locator('#configs tbody a').count(), 3);
    } finally {
      await page.close();
    }
  });
});
