import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { reportData, type TrialDetail } from '../src/report/page-data.js';
import { renderReport } from '../src/report/page.js';
import { toStatsRecord } from '../src/records/record.js';
import { summarizeTrajectory } from '../src/report/trajectory.js';

/** The report's pure parts: trajectory measures, and figures from records. */
const agent = (extra: Record<string, unknown> = {}, calls: string[] = [], tokens = 10) => ({
  source: 'agent',
  tool_calls: calls.map((command) => ({ function_name: 'bash', arguments: { command } })),
  metrics: { completion_tokens: tokens },
  ...(Object.keys(extra).length ? { extra } : {}),
});

describe('trajectory measures', () => {
  it('bash-tool: commands, turns without a tool call, quitting early', () => {
    const worked = summarizeTrajectory({
      steps: [
        { source: 'system' },
        { source: 'user' },
        agent({}, ['ls']),
        agent({}, [], 300),
        agent({}, ['echo TERMGRADE_TASK_COMPLETE']),
      ],
    })!;
    assert.deepEqual(worked, {
      turns: 3,
      noActionTurns: 1,
      noActionTokens: [300],
      commands: 1,
      declaredComplete: true,
      quitEarly: false,
    });
    const quit = summarizeTrajectory({ steps: [agent({}, [], 40), agent({}, ['echo TERMGRADE_TASK_COMPLETE'])] })!;
    assert.equal(quit.quitEarly, true);
    const late = summarizeTrajectory({
      steps: [agent({}, [], 5), agent({}, [], 5), agent({}, ['echo TERMGRADE_TASK_COMPLETE'])],
    })!;
    assert.equal(late.quitEarly, false, 'completion on turn 3 is not within two turns');
  });

  it('terminus: parse errors are turns without a valid action; a summary turn is not a turn', () => {
    const t = summarizeTrajectory({
      steps: [
        agent({ parse_error: 'not JSON' }, [], 900),
        agent({ commands: 2 }),
        agent({ summary: true }),
        agent({ commands: 0, task_complete: true }),
        agent({ commands: 0, task_complete: true }),
      ],
    })!;
    assert.deepEqual(t, {
      turns: 4,
      noActionTurns: 1,
      noActionTokens: [900],
      commands: 2,
      declaredComplete: true,
      quitEarly: false,
    });
    assert.equal(
      summarizeTrajectory({
        steps: [agent({ commands: 0, task_complete: true }), agent({ commands: 0, task_complete: true })],
      })!.quitEarly,
      true,
    );
    assert.equal(summarizeTrajectory({ nope: true }), null);
  });
});

describe('report figures', () => {
  const records = ['a', 'b'].flatMap((config) =>
    Array.from({ length: 6 }, (_, t) =>
      [0, 1, 2, 3].map((attempt) =>
        toStatsRecord({
          trial_id: `${config}-${t}-${attempt}`,
          config,
          task: `t${t}`,
          agent: config,
          reward: config === 'a' ? (attempt < t % 4 ? 1 : 0) : attempt === 0 ? 1 : 0,
          duration_ms: 1000,
        }),
      ),
    ).flat(),
  );
  const details: TrialDetail[] = records.map((r) => ({
    trialId: r.trialId,
    config: r.config,
    task: r.task,
    passed: r.passed,
    graded: true,
    errorClass: null,
    inputTokens: 900,
    outputTokens: 100,
    failedTests: r.passed ? [] : ['test_x'],
    testsPassed: r.passed ? 9 : 8,
    testsFailed: r.passed ? 0 : 1,
    findings: [],
    reward: r.reward,
    trajectory: null,
  }));

  it('counts tasks in and out of the band, compares configurations, finds near misses and failing tests', () => {
    const d = reportData({ sources: ['x'], records, details, band: [0.25, 0.75], minTrials: 4 });
    // a: rates 0, .25, .5, .75, 0, .25 per task; b: .25 everywhere.
    const a = d.histogram.find((h) => h.config === 'a')!;
    assert.deepEqual([a.inBand, a.outOfBand], [4, 2]);
    assert.equal(
      a.bins.reduce((n, b) => n + b.count, 0),
      6,
    );
    assert.equal(d.paired.length, 1);
    assert.equal(d.paired[0]!.tasks, 6);
    assert.ok(Math.abs(d.paired[0]!.meanDiff - (1.75 / 6 - 0.25)) < 1e-12);
    assert.equal(d.paired[0]!.significant, false);
    assert.equal(d.nearMisses.length, details.filter((x) => !x.passed).length);
    assert.deepEqual(
      d.failingTests.map((f) => f.failures).reduce((x, y) => x + y, 0),
      details.filter((x) => !x.passed).length,
    );
    assert.equal(d.behaviour.find((b) => b.config === 'b')!.inputOutputRatio, 9);
    assert.ok(Math.abs(d.runtime.find((r) => r.config === 'a')!.hours - 24 / 3600) < 1e-12);
  });

  it('renders trial text as text, never as markup', () => {
    const evil = records.map((r) => ({ ...r, task: `<img src=x onerror=alert(1)>${r.task}` }));
    const html = renderReport(
      reportData({ sources: ['<b>'], records: evil, details: [], band: [0.25, 0.75], minTrials: 4 }),
      {},
      'now',
    );
    assert.ok(!html.includes('<img src=x'));
    assert.ok(html.includes('&#60;img src=x onerror=alert(1)&#62;'));
  });
});
