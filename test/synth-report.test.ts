import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import type { CheckReport } from '../src/check/schema.js';
import { reportData } from '../src/report/page-data.js';
import { renderReport } from '../src/report/page.js';
import { funnel } from '../src/synth/funnel.js';
import type { CandidateState, StageName, SynthReport } from '../src/synth/schema.js';
import { SynthStore } from '../src/synth/store.js';
import { runCli, tempDir } from './helpers.js';

/** A candidate's state as the store keeps it (only what the funnel reads differs between them). */
function state(
  id: string,
  status: CandidateState['status'],
  repairs: CandidateState['repairs'],
  tests: string[],
  rejected: string[] = [],
): CandidateState {
  return {
    id,
    seedId: id,
    seed: { id },
    status,
    plan: [],
    round: repairs.length,
    parts: {},
    hashes: {},
    image: null,
    environmentState: null,
    solutionState: null,
    failure: null,
    repairs,
    tokens: { prompt: 0, completion: 0 },
    costUsd: null,
    rejected,
    tests,
    admittedPath: status === 'admitted' ? `/out/${id}` : null,
    waiting: null,
  };
}

const GEN: StageName[] = [
  'scenario',
  'environment',
  'lint',
  'build',
  'observe',
  'instruction',
  'solution',
  'execute',
  'tests',
  'check',
  'write',
];

/**
 * A real synth store with three candidates: one admitted on the first pass, one admitted after its
 * tests were repaired (check failed, weak tests), one rejected after its environment never built.
 */
async function synthJob(): Promise<string> {
  const out = await tempDir('termgrade-synth-report-');
  await mkdir(path.join(out, '.synth'));
  const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
  const good = state('good', 'admitted', [], ['t1', 't2', 't3']);
  const weak = state('weak', 'admitted', [{ round: 1, part: 'tests', reasons: ['weak_tests'] }], ['t1', 't2']);
  const broken = state(
    'broken',
    'rejected',
    [{ round: 1, part: 'environment', reasons: ['build_failed'] }],
    [],
    ['rounds_exhausted', 'build_failed'],
  );
  store.addCandidates([good, weak, broken]);
  const rec = (c: CandidateState, round: number, stage: StageName, outcome: 'passed' | 'failed', ms: number) =>
    store.recordStage(
      {
        candidateId: c.id,
        round,
        stage,
        outcome,
        startedAt: new Date().toISOString(),
        durationMs: ms,
        calls: 0,
        malformed: 0,
        promptTokens: 0,
        completionTokens: 0,
        costUsd: null,
        detail: {},
      },
      c,
    );
  for (const s of GEN) rec(good, 0, s, 'passed', s === 'check' ? 8000 : 100);
  for (const s of GEN.slice(0, 10)) rec(weak, 0, s, s === 'check' ? 'failed' : 'passed', s === 'check' ? 8000 : 100);
  for (const s of ['tests', 'check', 'write'] as const) rec(weak, 1, s, 'passed', s === 'check' ? 8000 : 100);
  for (const round of [0, 1])
    for (const s of GEN.slice(round, 4)) rec(broken, round, s, s === 'build' ? 'failed' : 'passed', 100);
  store.close();
  return out;
}

describe('report --synth: the funnel beside the check yield', () => {
  let browser: Browser;
  before(async () => {
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
  });
  after(() => browser?.close());

  it('shows candidates and yield per stage, end to end, and repairs by part (text, report.json, page)', async () => {
    const out = await synthJob();
    const empty = await tempDir();
    const rep = path.join(await tempDir(), 'rep');
    const made = await runCli(['report', empty, '-o', rep, '--synth', out]);
    assert.equal(made.status, 0, made.stderr);
    assert.match(
      made.stdout,
      /^synth: 2 of 3 candidates admitted \(66\.7%\); scenario 3\/3, .*build 2\/3, .*check 2\/2, write 2\/2$/m,
    );

    const data = JSON.parse(await readFile(path.join(rep, 'report.json'), 'utf8')) as { synth: SynthReport };
    const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    const expected = funnel(store.candidates(), store.stages(), out);
    store.close();
    assert.deepEqual(
      data.synth,
      JSON.parse(JSON.stringify(expected)),
      'report.json holds the funnel synth --json gives',
    );
    const stage = (n: string) => data.synth.stages.find((s) => s.stage === n)!;
    assert.deepEqual([stage('build').candidates, stage('build').passed, stage('build').runs], [3, 2, 4]);
    assert.deepEqual([stage('check').candidates, stage('check').passed, stage('check').runs], [2, 2, 3]);
    assert.equal(data.synth.endToEndYield, 2 / 3);

    const page = await browser.newPage();
    try {
      await page.goto(pathToFileURL(path.join(rep, 'index.html')).href);
      const rows = async (id: string) =>
        page.$$eval(`#${id} tbody tr`, (trs) =>
          trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
        );
      const funnelRows = await rows('synth-funnel');
      assert.deepEqual(funnelRows.find((r) => r[0] === 'build')!.slice(0, 5), ['build', '3', '2', '66.7', '4']);
      assert.deepEqual(funnelRows.find((r) => r[0] === 'check')!.slice(0, 5), ['check', '2', '2', '100.0', '3']);
      assert.deepEqual(await rows('synth-yield'), [
        ['synth, end to end (candidates to admitted tasks)', '3', '2', '66.7'],
        ["synth's admission (its check stage)", '2', '2', '100.0'],
      ]);
      assert.deepEqual(await rows('synth-repairs'), [
        ['environment', '1', '1', '0'],
        ['instruction', '0', '0', '0'],
        ['solution', '0', '0', '0'],
        ['tests', '1', '1', '1'],
      ]);
      assert.deepEqual(await rows('synth-rejections'), [
        ['rounds_exhausted', '1'],
        ['build_failed', '1'],
      ]);
      assert.match((await page.textContent('body')) ?? '', /Tests per admitted task: mean 2\.5 \(min 2, max 3\)/);
    } finally {
      await page.close();
    }
  });

  it("puts check's own yield beside synth's when both are given", async () => {
    const out = await synthJob();
    const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    const synth = funnel(store.candidates(), store.stages(), out);
    store.close();
    // Only the summary is read from a check output here.
    const check = {
      summary: { total: 40, admissible: 10, rejected: 30, yield: 0.25, reasons: { no_oracle: 30 } },
    } as unknown as CheckReport;
    const html = renderReport(
      reportData({ sources: ['x'], records: [], details: [], band: [0.25, 0.75], minTrials: 4, check, synth }),
      {},
      'now',
    );
    assert.match(
      html,
      /<td data-v="check output \(--check\)">check output \(--check\)<\/td><td data-v="40">40<\/td><td data-v="10">10<\/td><td data-v="0.25">25.0<\/td>/,
    );
    const without = renderReport(
      reportData({ sources: ['x'], records: [], details: [], band: [0.25, 0.75], minTrials: 4, check }),
      {},
      'now',
    );
    assert.match(without, /No synth job given \(--synth DIR\)/);
  });

  it('refuses, exit 2, a folder with no synth job', async () => {
    const empty = await tempDir();
    const made = await runCli(['report', empty, '-o', path.join(empty, 'rep'), '--synth', empty]);
    assert.equal(made.status, 2, made.stderr);
    assert.match(made.stderr, /--synth .*: no synth job there \(looked for .*\.synth\/synth\.db/);
  });
});
