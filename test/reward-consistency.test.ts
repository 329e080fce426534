import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { chromium, type Browser } from 'playwright-core';
import { configStats } from '../src/report/aggregate.js';
import { toStatsRecord } from '../src/records/record.js';
import { JobStore } from '../src/store/store.js';
import { MIGRATIONS } from '../src/store/schema.js';
import { TrialResultSchema } from '../src/trial/schema.js';
import { rewardFindings, rewardFindingsOf } from '../src/verifier/consistency.js';
import { parseEachRewardFile } from '../src/verifier/reward.js';
import type { TestResult } from '../src/verifier/schema.js';
import { startViewer } from '../src/view/server.js';
import { makeTask, runCli, tempDir } from './helpers.js';

const test = (name: string, status: TestResult['status']): TestResult => ({
  name,
  status,
  durationMs: null,
  message: null,
});
const codes = (json: string | null, txt: string | null, tests: TestResult[] = []): string[] =>
  rewardFindingsOf(json, txt, tests).map((f) => f.code);

describe('reward consistency (pure)', () => {
  it('flags a full reward next to failed or errored tests, naming them', () => {
    const f = rewardFindingsOf(null, '1', [
      test('t.py::ok', 'passed'),
      test('t.py::bad', 'failed'),
      test('t.py::boom', 'error'),
    ]);
    assert.deepEqual(
      f.map((x) => x.code),
      ['reward_with_failed_tests'],
    );
    assert.match(
      f[0]!.message,
      /reward 1 from reward\.txt, but 2 of 3 tests failed or errored: t\.py::bad, t\.py::boom/,
    );
    assert.deepEqual(
      codes('{"reward": 1.5}', null, [test('a', 'failed')]),
      ['reward_with_failed_tests'],
      'any reward >= 1',
    );
  });

  it('says nothing of a reward below 1, of skipped tests, or of a trial without a reward', () => {
    assert.deepEqual(codes(null, '0', [test('a', 'failed')]), []);
    assert.deepEqual(codes(null, '0.99', [test('a', 'failed')]), []);
    assert.deepEqual(codes(null, '1', [test('a', 'passed'), test('b', 'skipped'), test('c', 'other')]), []);
    assert.deepEqual(codes(null, '1', []), [], 'no per-test report: nothing to compare');
    assert.deepEqual(codes(null, null, [test('a', 'failed')]), []);
    assert.deepEqual(
      codes('not json', '1', [test('a', 'failed')]),
      [],
      'an unreadable reward.json wins: no reward, so nothing to flag',
    );
  });

  it('flags reward.json and reward.txt whose primary values differ, or one of them unreadable', () => {
    const f = rewardFindingsOf('{"reward": 1, "style": 0}', '0', []);
    assert.deepEqual(
      f.map((x) => x.code),
      ['reward_files_disagree'],
    );
    assert.match(f[0]!.message, /reward\.json gives 1 and reward\.txt gives 0/);
    assert.deepEqual(
      codes('{"a": 0.5, "b": 1}', '0.75'),
      [],
      'the mean of a map without `reward` is its primary value',
    );
    assert.deepEqual(codes('{"reward": 1}', ' 1.0\n'), [], 'one value in two spellings agrees');
    assert.deepEqual(codes('0.1', String(0.1 + 1e-12)), [], 'float noise is not a disagreement');
    assert.deepEqual(codes('{"reward": 1}', 'yes'), ['reward_files_disagree']);
    assert.deepEqual(codes('{"reward": 1}', null), [], 'one file alone cannot disagree');
  });

  it('reports both findings at once, and takes the files parsed one by one', () => {
    const f = rewardFindings({ files: parseEachRewardFile('{"reward": 1}', '0'), tests: [test('a', 'failed')] });
    assert.deepEqual(
      f.map((x) => x.code),
      ['reward_with_failed_tests', 'reward_files_disagree'],
    );
  });

  it('old trial records (no findings) still parse, with none', () => {
    const old = {
      schemaVersion: 1,
      trialId: 't',
      task: { name: 'x', path: '/x', checksum: 'c' },
      agent: { name: 'oracle', model: null },
      attempt: 0,
      reward: 1,
      rewards: { reward: 1 },
      passed: true,
      tests: [],
      testsSource: 'none',
      testsSummary: { total: 0, passed: 0, failed: 0, skipped: 0, other: 0 },
      error: null,
      errors: [],
      exitReason: 'completed',
      turns: 0,
      tokens: null,
      costUsd: null,
      image: null,
      imageCached: null,
      phases: {},
      startedAt: '',
      finishedAt: '',
      durationMs: 0,
    };
    assert.deepEqual(TrialResultSchema.parse(old).findings, []);
  });

  it('stats counts inconsistent trials per configuration, by code, and keeps their reward', () => {
    const rec = (id: string, config: string, findings: string[]) =>
      toStatsRecord({
        trial_id: id,
        config,
        task: 't',
        agent: config,
        reward: 1,
        findings_json: JSON.stringify(findings.map((code) => ({ code, message: 'm' }))),
      });
    const [a, b] = configStats([
      rec('1', 'a', ['reward_with_failed_tests', 'reward_files_disagree']),
      rec('2', 'a', []),
      rec('3', 'a', ['reward_files_disagree']),
      rec('4', 'b', []),
    ]);
    assert.deepEqual(a!.findings, {
      inconsistentTrials: 2,
      byCode: { reward_with_failed_tests: 1, reward_files_disagree: 2 },
    });
    assert.equal(a!.pass1.mean, 1, 'a finding does not change the reward');
    assert.deepEqual(b!.findings, { inconsistentTrials: 0, byCode: {} });
  });

  it('a store recorded before findings existed is read as having none', async () => {
    const file = path.join(await tempDir(), 'job.db');
    const db = new Database(file);
    for (const m of MIGRATIONS.slice(0, 4)) db.exec(m);
    db.pragma('user_version = 4');
    db.prepare(
      "INSERT INTO trials (trial_id, config, task, attempt, agent, status, reward) VALUES ('x', 'c', 't', 0, 'oracle', 'completed', 1)",
    ).run();
    db.close();
    const store = JobStore.open(file, { readonly: true });
    try {
      assert.equal([...store.listTrials()][0]!.findings_json, '[]');
    } finally {
      store.close();
    }
  });
});

/**
 * A real job on the Docker engine: one task whose test.sh writes reward 1 with a CTRF report that
 * has a failed test, one whose reward.json and reward.txt disagree, one that is consistent. Run
 * with `--grading harbor` (Harbor's plain semantics, an explicit choice): the reward stands and the
 * findings flag it. Under the default policy such rewards are graded 0 (test/evidence-grading.test.ts).
 */
describe('reward consistency end to end (Docker)', () => {
  let jobDir = '';
  let browser: Browser | null = null;
  const ctrf = JSON.stringify({
    results: {
      tool: { name: 'pytest' },
      tests: [
        { name: 'test_outputs.py::test_exists', status: 'passed', duration: 1 },
        { name: 'test_outputs.py::test_content', status: 'failed', duration: 2, message: 'assert 1 == 2' },
      ],
    },
  });
  const task = (name: string, testSh: string) =>
    makeTask({
      'task.toml': `[task]\nname = "${name}"\n\n[verifier]\ntimeout_sec = 60\n\n[agent]\ntimeout_sec = 60\n`,
      'instruction.md': 'Nothing to do.\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
      'solution/solve.sh': '#!/bin/bash\ntrue\n',
      'tests/test.sh': `#!/bin/bash\n${testSh}\n`,
    });

  before(async () => {
    const tasks = [
      await task('lenient', `cat > /logs/verifier/ctrf.json <<'EOF'\n${ctrf}\nEOF\necho 1 > /logs/verifier/reward.txt`),
      await task('two-files', `echo '{"reward": 1}' > /logs/verifier/reward.json\necho 0 > /logs/verifier/reward.txt`),
      await task('sound', `echo 'PASSED test_outputs.py::test_ok'\necho 1 > /logs/verifier/reward.txt`),
    ];
    const jobsDir = await tempDir();
    const r = await runCli([
      'run',
      '--name',
      'consistency',
      '--agent',
      'oracle',
      '-k',
      '1',
      '-c',
      '2',
      '--jobs-dir',
      jobsDir,
      '--grading',
      'harbor',
      '-q',
      '--tasks',
      ...tasks,
    ]);
    assert.equal(r.status, 0, r.stderr + r.stdout);
    jobDir = path.join(jobsDir, 'consistency');
  });
  after(() => browser?.close());

  it('records the finding in result.json and the store, keeping the reward', async () => {
    const store = JobStore.open(path.join(jobDir, 'job.db'), { readonly: true });
    const rows = [...store.listTrials()];
    store.close();
    const byTask = new Map(rows.map((r) => [r.task, r]));
    assert.deepEqual([...byTask.keys()].sort(), ['lenient', 'sound', 'two-files']);
    const lenient = byTask.get('lenient')!;
    assert.equal(lenient.reward, 1, 'the verifier’s reward stands');
    assert.equal(lenient.status, 'completed');
    assert.deepEqual(
      JSON.parse(lenient.findings_json).map((f: { code: string }) => f.code),
      ['reward_with_failed_tests'],
    );
    assert.deepEqual(
      JSON.parse(byTask.get('two-files')!.findings_json).map((f: { code: string }) => f.code),
      ['reward_files_disagree'],
    );
    assert.equal(byTask.get('two-files')!.reward, 1, 'reward.json wins, as before');
    assert.equal(byTask.get('sound')!.findings_json, '[]');

    const result = TrialResultSchema.parse(
      JSON.parse(await readFile(path.join(lenient.trial_dir!, 'result.json'), 'utf8')),
    );
    assert.deepEqual(
      result.findings.map((f) => f.code),
      ['reward_with_failed_tests'],
    );
    assert.match(result.findings[0]!.message, /test_outputs\.py::test_content/);
    assert.equal(result.testsSource, 'ctrf');
    assert.equal(result.evidence?.policy, 'harbor', 'the policy is recorded on the trial');
    assert.equal(result.evidence?.verdict, 'not_checked');
  });

  it('stats counts them (table and --json), and the report lists them with the same figures', async () => {
    const json = await runCli(['stats', jobDir, '--json']);
    assert.equal(json.status, 0, json.stderr);
    const stats = JSON.parse(json.stdout) as {
      configs: Array<{
        config: string;
        trials: number;
        findings: { inconsistentTrials: number; byCode: Record<string, number> };
      }>;
    };
    assert.equal(stats.configs.length, 1);
    assert.equal(stats.configs[0]!.trials, 3, 'inconsistent trials stay graded');
    assert.deepEqual(stats.configs[0]!.findings, {
      inconsistentTrials: 2,
      byCode: { reward_with_failed_tests: 1, reward_files_disagree: 1 },
    });

    const text = await runCli(['stats', jobDir]);
    assert.match(text.stdout, /\binconsistent\b/);
    assert.match(
      text.stdout,
      /inconsistent rewards \(kept as graded, flagged\): 2 trial\(s\): reward_with_failed_tests 1, reward_files_disagree 1/,
    );

    const out = path.join(await tempDir(), 'report');
    const made = await runCli(['report', jobDir, '-o', out]);
    assert.equal(made.status, 0, made.stderr);
    const data = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8')) as {
      configs: unknown[];
      inconsistent: Array<{ task: string; reward: number; findings: Array<{ code: string }> }>;
    };
    assert.deepEqual(data.configs, stats.configs, 'report figures differ from stats --json');
    assert.deepEqual(
      data.inconsistent.map((t) => [t.task, t.reward, t.findings.map((f) => f.code)]),
      [
        ['lenient', 1, ['reward_with_failed_tests']],
        ['two-files', 1, ['reward_files_disagree']],
      ],
    );
    const html = await readFile(path.join(out, 'index.html'), 'utf8');
    assert.match(
      html,
      /<table class="sortable" id="inconsistent">.*reward_with_failed_tests.*test_outputs\.py::test_content/s,
    );
  });

  it('view marks them in the trial list, filters them, and lists the findings on the trial page', async () => {
    const viewer = await startViewer({ sources: [jobDir], port: 0 });
    try {
      const api = (await (
        await fetch(`${viewer.url}/api/trials?consistency=inconsistent`, {
          headers: { authorization: `Bearer ${viewer.token}` },
        })
      ).json()) as { total: number; rows: Array<{ task: string; findings: string }> };
      assert.deepEqual(api.rows.map((r) => r.task).sort(), ['lenient', 'two-files']);
      browser = await chromium.launch({
        executablePath: '/usr/bin/chromium',
        args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
      });
      const page = await browser.newPage();
      // As a user opens it: the address the viewer printed, with its token.
      await page.goto(viewer.openUrl);
      await page.waitForSelector('#trials tbody tr');
      const marked = await page
        .locator('#trials tbody tr', { has: page.locator('span.finding') })
        .locator('td:nth-child(2)')
        .allTextContents();
      assert.deepEqual(marked.sort(), ['lenient', 'two-files']);
      await page.click('#trials tbody tr >> text=lenient');
      await page.waitForSelector('.findings li.finding');
      const items = await page.locator('.findings li.finding').allTextContents();
      assert.equal(items.length, 1);
      assert.match(items[0]!, /^reward_with_failed_tests: reward 1 from reward\.txt, but 1 of 2 tests failed/);
    } finally {
      await viewer.close();
    }
  });
});
