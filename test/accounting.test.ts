import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { importHarbor } from '../src/harbor/import-job.js';
import { errorClassOfException, exceptionTypeOf } from '../src/harbor/layout.js';
import { configStats, taskRates } from '../src/report/aggregate.js';
import { countByTask } from '../src/records/counts.js';
import type { StatsRecord } from '../src/records/record.js';
import { DEFAULT_ADAPTIVE_RULE, decide, GmsEstimator } from '../src/stats/adaptive.js';
import { pairedCompare } from '../src/stats/paired.js';
import { JobStore } from '../src/store/store.js';
import { accountingOf, OUTCOME_CLASSES } from '../src/trial/accounting.js';
import { statsJson } from '../src/util/json.js';
import { makeScrub, REDACTED } from '../src/util/scrub.js';
import { findTampering } from '../src/verifier/tampering.js';
import { tempDir } from './helpers.js';

const rec = (
  config: string,
  task: string,
  i: number,
  reward: number | null,
  errorClass: string | null = null,
): StatsRecord => ({
  trialId: `${config}-${task}-${i}`,
  task,
  config,
  reward,
  passed: reward !== null && reward >= 1,
  errorClass,
  durationMs: 1000,
  outputTokens: null,
  costUsd: null,
  testsPassed: 0,
  testsFailed: 0,
});

describe('one accounting policy', () => {
  it('classifies: a reward is graded whatever went wrong; no reward is infra or ungraded, never 0', () => {
    assert.equal(accountingOf(0, 'agent_timeout'), 'graded');
    assert.equal(accountingOf(0, 'tampering'), 'graded');
    assert.equal(accountingOf(null, 'model_unavailable'), 'infra');
    assert.equal(accountingOf(null, 'environment_error'), 'infra');
    assert.equal(accountingOf(null, 'build_failed'), 'infra');
    assert.equal(accountingOf(null, 'verifier_no_reward'), 'ungraded');
    assert.equal(accountingOf(null, 'cancelled'), 'not_run');
  });

  it('stats shows coverage and lists tasks with no graded trial instead of dropping them', () => {
    const records: StatsRecord[] = [];
    for (let t = 0; t < 12; t++) {
      for (let i = 0; i < 4; i++) {
        if (t < 3) records.push(rec('m', `t${t}`, i, null, i % 2 ? 'environment_error' : 'verifier_no_reward'));
        else records.push(rec('m', `t${t}`, i, i < 2 ? 1 : 0));
      }
    }
    const [s] = configStats(records);
    assert.equal(s!.tasks, 9);
    assert.deepEqual(s!.unmeasuredTasks, ['t0', 't1', 't2']);
    assert.deepEqual(s!.coverage, { attempted: 48, graded: 36, infra: 6, ungraded: 6, fraction: 0.75 });
    assert.equal(s!.pass1.mean, 0.5);
  });

  it('keeps the pass@1 interval inside [0, 1]', () => {
    const records = [rec('m', 'a', 0, 1), rec('m', 'b', 0, 1), rec('m', 'c', 0, 0)];
    const [s] = configStats(records);
    assert.ok(s!.pass1.mean - 4.3 * s!.pass1.se < 0, 'the raw t interval (df 2) would leave [0, 1] here');
    assert.equal(s!.pass1.ciLo, 0);
    assert.equal(s!.pass1.ciHi, 1);
    const [one] = configStats([rec('m', 'a', 0, 1)]);
    assert.equal(one!.pass1.ciLo, null, 'one task: no interval, said as null');
  });

  it('writes an infinite statistic as "Infinity" in JSON, not null', () => {
    const r = pairedCompare([
      { task: 'a', a: 1, b: 0 },
      { task: 'b', a: 1, b: 0 },
    ]);
    assert.equal(r.tStat, Number.POSITIVE_INFINITY);
    const json = JSON.parse(statsJson(r));
    assert.equal(json.tStat, 'Infinity');
    assert.equal(json.tTestP, null, 'no variance: no t-test p, never 0');
    assert.equal(json.p, 0.5, 'the exact sign-flip p of two equal differences');
  });

  it('keeps tiny p-values exact (df 1 has a closed form: p = 2/pi * atan(1/|t|))', () => {
    const a = 0.5;
    const b = 0.5 + 2 ** -50;
    const r = pairedCompare([
      { task: 'x', a, b: 0 },
      { task: 'y', a: b, b: 0 },
    ]);
    const exact = (2 / Math.PI) * Math.atan(1 / Math.abs(r.tStat));
    assert.ok(exact < 1e-15, `a p below double precision's 1 - x resolution: ${exact}`);
    assert.ok(r.tTestP! > 0);
    assert.ok(Math.abs(r.tTestP! - exact) / exact < 1e-6, `${r.tTestP} vs ${exact}`);
  });

  it('adaptive: the estimate of a task cut off between stopping points is exactly unbiased', () => {
    // One trial at a time: a cut cannot pick among trials running at once (inside a step it can,
    // and no rate is given there: test/adaptive-drift.test.ts).
    const rule = { ...DEFAULT_ADAPTIVE_RULE, step: 1 };
    const gms = new GmsEstimator(rule);
    for (const cut of [1, 3, 5, 7]) {
      for (const p of [0.1, 0.3, 0.5, 0.8]) {
        // Every outcome sequence, followed under the rule or cut at `cut` trials (a budget).
        let expectation = 0;
        let fallbackOld = 0;
        for (let mask = 0; mask < 2 ** cut; mask++) {
          let c = 0;
          let n: number;
          for (n = 1; n <= cut; n++) {
            if (mask & (1 << (n - 1))) c += 1;
            if (decide(n, c, rule).stop) break;
          }
          n = Math.min(n, cut);
          // Probability of this path: only its first n trials matter; the rest of the mask sums out.
          if (n < cut && mask >> n !== 0) continue;
          const prob = p ** c * (1 - p) ** (n - c);
          expectation += prob * gms.estimateAnywhere(n, c);
          fallbackOld += prob * (Math.min(c, 2) / Math.min(n, 2));
        }
        assert.ok(Math.abs(expectation - p) < 1e-12, `cut ${cut}, p ${p}: E = ${expectation}`);
        if (cut === 3 && p === 0.1) assert.ok(fallbackOld > p + 0.01, 'the old first-pair fallback was biased upward');
      }
    }
  });

  it('adaptive: a cut-off task of 1 success in 12 trials reads near 1/12, not 50%', () => {
    const rule = { ...DEFAULT_ADAPTIVE_RULE, risk: 0.0001 };
    const counts = countByTask(
      Array.from({ length: 12 }, (_, i) => ({ ...rec('m', 't', i, i === 0 ? 1 : 0), adaptive: rule })),
    );
    const [rate] = taskRates(counts);
    assert.ok(rate!.rate < 0.15, `rate ${rate!.rate} (${rate!.rateMethod})`);
    assert.equal(rate!.wilson, null, "Wilson's fixed-n interval is not given for adaptive trials");
  });
});

describe('secrets', () => {
  it('scrubs a key in its raw, JSON-escaped (once and twice), URL-encoded and base64 forms', () => {
    const key = 'sk-"quoted"\\back/slash+plus';
    const scrub = makeScrub([key]);
    const forms = [
      key,
      JSON.stringify(key),
      JSON.stringify(JSON.stringify(key)),
      encodeURIComponent(key),
      Buffer.from(key).toString('base64'),
    ];
    for (const f of forms) assert.equal(scrub(`<${f}>`).includes(REDACTED), true, `form ${f} scrubbed`);
    assert.ok(!scrub(JSON.stringify({ error: `bad key ${key}` })).includes('quoted'));
  });
});

describe('tamper rules', () => {
  it('flags the verifier machinery and leaves ordinary work alone', () => {
    const flagged = findTampering([
      { path: '/usr/bin/python3.11', kind: 'changed' },
      { path: '/usr/local/bin/pytest', kind: 'added' },
      { path: '/etc/ld.so.preload', kind: 'added' },
      { path: '/usr/lib/x86_64-linux-gnu/libc.so.6', kind: 'changed' },
      { path: '/usr/local/lib/python3.13/site-packages/sitecustomize.py', kind: 'added' },
      { path: '/usr/local/lib/python3.13/site-packages/_pytest/main.py', kind: 'changed' },
      { path: '/conftest.py', kind: 'added' },
      { path: '/app/pytest.py', kind: 'added' },
      { path: '/usr/lib/python3/dist-packages/evil.pth', kind: 'added' },
      { path: '/usr/lib/python3.11/json/__init__.py', kind: 'changed' },
      { path: '/usr/lib/python3.11/unittest/mock.py', kind: 'added' },
      { path: '/usr/local/lib/libc.so.6', kind: 'added' },
      { path: '/usr/local/lib/python3.13/site-packages/pluggy/_hooks.py', kind: 'changed' },
    ]).map((t) => t.path);
    assert.equal(flagged.length, 13, flagged.join(' '));
    const clean = findTampering(
      [
        { path: '/usr/bin', kind: 'changed' },
        { path: '/app/solution.py', kind: 'added' },
        { path: '/usr/local/lib/libfoo.so', kind: 'added' },
        { path: '/usr/local/bin/deploy', kind: 'changed' },
        { path: '/usr/local/lib/python3.13/site-packages/requests/api.py', kind: 'added' },
        { path: '/usr/lib/python3/dist-packages/mypkg.pth', kind: 'added' },
        { path: '/root/.bashrc', kind: 'changed' },
        { path: '/usr/lib/python3.11/json', kind: 'changed' },
        { path: '/usr/lib/python3.11/json/__pycache__', kind: 'added' },
        { path: '/usr/lib/python3.11/json/__pycache__/decoder.cpython-311.pyc', kind: 'added' },
        { path: '/usr/local/lib/libfoo.so.1', kind: 'added' },
      ],
      { content: new Map([['/usr/lib/python3/dist-packages/mypkg.pth', Buffer.from('/app/src\n')]]) },
    );
    assert.deepEqual(clean, []);
  });
});

describe('Harbor import accounting', () => {
  async function harborJob(
    root: string,
    trials: Array<{ name: string; reward?: number; exception?: string }>,
  ): Promise<void> {
    for (const t of trials) {
      const dir = path.join(root, t.name);
      await mkdir(dir, { recursive: true });
      await writeFile(
        path.join(dir, 'result.json'),
        JSON.stringify({
          task_name: 'task-a',
          trial_name: t.name,
          agent_info: { name: 'terminus-2', model_info: { name: 'm1' } },
          verifier_result: t.reward === undefined ? null : { rewards: { reward: t.reward } },
          exception_info: t.exception ? { exception_type: t.exception, exception_message: 'x' } : null,
        }),
      );
    }
  }

  it("counts agent exceptions without a reward as 0 (Harbor's accounting) and appends a second import", async () => {
    const dir = await tempDir();
    const store = JobStore.open(path.join(dir, 'job.db'));
    try {
      const first = path.join(dir, 'h1');
      await harborJob(first, [
        { name: 'a1', reward: 1 },
        { name: 'a2', exception: 'AgentTimeoutError' },
        { name: 'a3', exception: 'NonZeroAgentExitCodeError' },
        { name: 'a4', reward: 0 },
      ]);
      assert.equal((await importHarbor(first, store)).imported, 4);
      const second = path.join(dir, 'h2');
      await harborJob(second, [
        { name: 'b1', reward: 1 },
        { name: 'b2', exception: 'EnvironmentStartTimeoutError' },
      ]);
      assert.equal((await importHarbor(second, store)).imported, 2);
      assert.equal((await importHarbor(first, store)).imported, 0, 'a folder imported again adds nothing');
      const rows = [...store.listTrials()];
      assert.deepEqual(
        rows.map((r) => r.attempt),
        [0, 1, 2, 3, 4, 5],
      );
      assert.deepEqual(
        rows.map((r) => r.reward),
        [1, 0, 0, 0, 1, null],
      );
      const [s] = configStats(
        rows.map((r) => ({ ...rec(r.config, r.task, r.attempt, r.reward, r.error_class), trialId: r.trial_id })),
      );
      assert.equal(s!.trials, 5);
      assert.equal(s!.coverage.infra, 1);
    } finally {
      store.close();
    }
  });
  it("reads each of Harbor's own exception types by what it means, and each name termgrade exports back as its class", async () => {
    const dir = await tempDir();
    const store = JobStore.open(path.join(dir, 'job.db'));
    try {
      // Harbor's names (trial.py, verifier.py, asyncio), with the class and reward each must give.
      const harbor: Array<[string, string, number | null]> = [
        ['AgentSetupTimeoutError', 'agent_setup_error', null],
        ['AddTestsDirError', 'verifier_crash', null],
        ['DownloadVerifierDirError', 'verifier_crash', null],
        ['CancelledError', 'cancelled', null],
        ['EnvironmentBuildTimeoutError', 'build_failed', null],
        ['EnvironmentStartTimeoutError', 'environment_error', null],
        ['RewardFileEmptyError', 'verifier_no_reward', 0],
        ['VerifierTimeoutError', 'verifier_timeout', 0],
        ['AgentTimeoutError', 'agent_timeout', 0],
        ['SomethingTheAgentRaisedError', 'agent_error', 0],
      ];
      const root = path.join(dir, 'h');
      await harborJob(
        root,
        harbor.map(([exception], i) => ({ name: `t${String(i)}`, exception })),
      );
      assert.equal((await importHarbor(root, store)).imported, harbor.length);
      const rows = new Map([...store.listTrials()].map((r) => [r.trial_id, r]));
      for (const [i, [exception, cls, reward]] of harbor.entries()) {
        const row = rows.get(`harbor:t${String(i)}`)!;
        assert.deepEqual([row.error_class, row.reward], [cls, reward], exception);
      }
      // Every class termgrade's export names reads back as itself.
      for (const cls of Object.keys(OUTCOME_CLASSES)) assert.equal(errorClassOfException(exceptionTypeOf(cls)), cls);
      const [s] = configStats(
        [...rows.values()].map((r) => ({
          ...rec(r.config, r.task, r.attempt, r.reward, r.error_class),
          trialId: r.trial_id,
        })),
      );
      assert.equal(s!.trials, 4, 'graded: the four the agent or the verifier ended');
      assert.equal(s!.coverage.infra, 5);
      assert.equal(s!.coverage.attempted, 9, 'the cancelled trial was never attempted to the end');
    } finally {
      store.close();
    }
  });
});

describe('drift while training', () => {
  it('flags selected tasks that left the band over their recent rollouts, by policy, infra grades not counted', async () => {
    const { driftReport } = await import('../src/report/drift.js');
    const g = (task: string, policy: string, reward: number | null, i: number) => ({
      task,
      policy,
      reward,
      at: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString(),
    });
    const grades = [
      // t1: solved half the time at step-1, always by step-2 (its last 8)
      ...Array.from({ length: 8 }, (_, i) => g('t1', 'step-1', i % 2, i)),
      ...Array.from({ length: 8 }, (_, i) => g('t1', 'step-2', 1, 100 + i)),
      ...Array.from({ length: 8 }, (_, i) => g('t2', 'step-2', 0, 100 + i)),
      ...Array.from({ length: 3 }, (_, i) => g('t3', 'step-2', null, 100 + i)),
      // t4: old failures, recent successes: only the recent 8 count
      ...Array.from({ length: 20 }, (_, i) => g('t4', 'step-2', 0, i)),
      ...Array.from({ length: 8 }, (_, i) => g('t4', 'step-2', i < 4 ? 1 : 0, 200 + i)),
    ];
    const rows = driftReport(grades, {
      band: [0.25, 0.75],
      recent: 8,
      minTrials: 4,
      selected: new Set(['t1', 't2', 't4']),
    });
    const v = Object.fromEntries(rows.map((r) => [`${r.policy}/${r.task}`, [r.n, r.c, r.verdict]]));
    assert.deepEqual(v, {
      'step-1/t1': [8, 4, 'in_band'],
      'step-2/t1': [8, 8, 'always_solved'],
      'step-2/t2': [8, 0, 'never_solved'],
      'step-2/t4': [8, 4, 'in_band'],
    });
  });
});
