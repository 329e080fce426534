import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import Docker from 'dockerode';
import { CheckReportSchema } from '../src/check/schema.js';
import { LABEL_OWNER } from '../src/sandbox/docker/labels.js';
import { BROKEN, CLI, EXAMPLES, runCli, tempDir, TEST_ADMISSION_DIR } from './helpers.js';

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    timeout: 15 * 60 * 1000,
    env: { ...process.env, TERMGRADE_ADMISSION_DIR: TEST_ADMISSION_DIR },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function parseReport(stdout: string) {
  const lines = stdout.trim().split('\n');
  assert.equal(lines.length, 1, 'exactly one JSON object on stdout');
  return CheckReportSchema.parse(JSON.parse(lines[0]!));
}

describe('termgrade check', () => {
  it('admits every bundled example, every probe included, with --json in the documented shape', async () => {
    // One oracle run each: the examples' stability on the default two runs is the README tour's check.
    const r = cli([
      'check',
      EXAMPLES,
      '--json',
      '--quiet',
      '--probes',
      'all',
      '-r',
      '1',
      '-c',
      '4',
      '-o',
      await tempDir(),
    ]);
    const report = parseReport(r.stdout);
    for (const t of report.tasks) {
      assert.equal(t.verdict, 'admissible', `${t.name}: ${t.reasons.join(', ')} ${t.details.join(' | ')}`);
      assert.deepEqual(t.reasons, []);
      assert.ok(t.tests.length >= 3, `${t.name} has several named tests`);
      assert.equal(typeof t.path, 'string');
    }
    assert.ok(report.summary.total >= 8);
    assert.equal(report.summary.admissible, report.summary.total);
    assert.equal(r.status, 0);
  });

  it('rejects each broken fixture with exactly its reason code', async () => {
    // The coin-flip fixture gets 12 oracle runs, so it disagrees with itself with probability
    // 1 - 2^-11; the others are judged on the default two (a failing oracle would fail all 12 the
    // same way, so 10 more runs each would only cost time). Both checks at once.
    const others = readdirSync(BROKEN)
      .filter((name) => name !== 'flaky')
      .map((name) => path.join(BROKEN, name));
    const [r, flaky] = await Promise.all([
      runCli(['check', ...others, '--json', '--quiet', '--concurrency', '3', '-o', await tempDir()]),
      runCli(['check', path.join(BROKEN, 'flaky'), '--json', '--quiet', '--repeat', '12', '-o', await tempDir()]),
    ]);
    const report = parseReport(r.stdout);
    const flakyReport = parseReport(flaky.stdout);
    assert.equal(r.status, 1);
    assert.equal(flaky.status, 1);
    report.tasks.push(...flakyReport.tasks);
    const byFolder = Object.fromEntries(report.tasks.map((t) => [path.basename(t.path), t]));
    for (const code of [
      'invalid_task',
      'build_failed',
      'oracle_failed',
      'nop_passed',
      'flaky',
      'verifier_error',
      'timeout',
    ]) {
      const t = byFolder[code];
      assert.ok(t, `fixture ${code} was checked`);
      assert.equal(t.verdict, 'rejected');
      assert.deepEqual(t.reasons, [code], `${code}: ${t.details.join(' | ')}`);
    }
    assert.equal(report.summary.rejected, 6);
    assert.deepEqual(report.summary.reasons, {
      invalid_task: 1,
      build_failed: 1,
      oracle_failed: 1,
      nop_passed: 1,
      verifier_error: 1,
      timeout: 1,
    });
    assert.deepEqual(flakyReport.summary.reasons, { flaky: 1 });
    assert.match(byFolder.invalid_task!.details[0]!, /invalid_task: task\.toml: not valid TOML at line 3/);
  });

  it('prints a readable summary with yield and reasons', async () => {
    const r = cli([
      'check',
      path.join(BROKEN, 'invalid_task'),
      path.join(BROKEN, 'nop_passed'),
      '-q',
      '-o',
      await tempDir(),
    ]);
    assert.equal(r.status, 1);
    assert.match(r.stdout, /0 of 2 admissible \(yield 0\.0%\)/);
    assert.match(r.stdout, /rejections: (invalid_task 1, nop_passed 1|nop_passed 1, invalid_task 1)/);
  });

  it('has --help on every subcommand and exit code 2 for bad usage', () => {
    for (const sub of ['check', 'run-trial', 'cleanup']) {
      const r = cli([sub, '--help']);
      assert.equal(r.status, 0);
      assert.match(r.stdout, /Usage: termgrade/);
    }
    assert.equal(cli(['check', '--repeat', 'zero', EXAMPLES]).status, 2);
    assert.equal(cli(['check', '/no/such/folder']).status, 2);
    assert.equal(cli(['frobnicate']).status, 2);
  });

  it('runs one trial and reports its reward', async () => {
    const r = cli([
      'run-trial',
      path.join(EXAMPLES, 'log-errors'),
      '--agent',
      'oracle',
      '--json',
      '-o',
      await tempDir(),
    ]);
    assert.equal(r.status, 0, r.stderr);
    const result = JSON.parse(r.stdout);
    assert.equal(result.reward, 1);
    assert.equal(result.testsSource, 'junit');
  });
});

describe('interrupting a check', () => {
  const docker = new Docker();
  // The owner label is host:pid:start-time; the start time is not ours to know here.
  const owned = async (pid: number) =>
    (await docker.listContainers({ all: true, filters: { label: [LABEL_OWNER] } })).filter((c) =>
      c.Labels[LABEL_OWNER]!.startsWith(`${hostname()}:${pid}:`),
    );

  /** Starts a check and resolves once it has a container running. */
  async function startCheck(): Promise<{ child: ReturnType<typeof spawn>; exited: Promise<number | null> }> {
    const out = await tempDir();
    const child = spawn(process.execPath, [CLI, 'check', EXAMPLES, '--quiet', '--repeat', '3', '-o', out], {
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const deadline = Date.now() + 120_000;
    while ((await owned(child.pid!)).length === 0) {
      assert.ok(Date.now() < deadline, 'the check started no container within 2 minutes');
      await new Promise((r) => setTimeout(r, 100));
    }
    return { child, exited };
  }

  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`${signal} mid-run exits ${code} and leaves no container`, async () => {
      const { child, exited } = await startCheck();
      child.kill(signal);
      assert.equal(await exited, code);
      assert.deepEqual(await owned(child.pid!), []);
    });
  }

  it('containers of a SIGKILLed run are found by label and removed by `cleanup`', async () => {
    // Other test files' `run` / `check` / `cleanup` also remove dead owners' containers; a round
    // where one of them got there first is run again (at most five) so the leftover is seen.
    let pid = 0;
    for (let round = 0; round < 5; round++) {
      const { child, exited } = await startCheck();
      child.kill('SIGKILL');
      await exited;
      pid = child.pid!;
      if ((await owned(pid)).length > 0) break;
    }
    assert.ok((await owned(pid)).length > 0, 'a killed run leaves its container');
    const r = cli(['cleanup']);
    assert.equal(r.status, 0);
    assert.deepEqual(await owned(pid), []);
  });
});

describe('termgrade run-trial with a model', () => {
  it('runs bash-tool against a scripted endpoint and prints the graded result', async () => {
    const { ScriptedModelServer } = await import('./support/scripted-model-server.js');
    const { BASH_SOLVES } = await import('./support/scripts.js');
    const server = new ScriptedModelServer({ 'scripted-m': BASH_SOLVES['log-errors']! });
    const baseUrl = await server.start();
    try {
      const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(
          process.execPath,
          [
            CLI,
            'run-trial',
            path.join(EXAMPLES, 'log-errors'),
            '--agent',
            'bash-tool',
            '--model',
            'scripted-m',
            '--base-url',
            baseUrl,
            '--json',
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        );
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d) => (stdout += d));
        child.stderr.on('data', (d) => (stderr += d));
        child.on('exit', (status) => resolve({ status, stdout, stderr }));
      });
      assert.equal(r.status, 0, r.stderr);
      const result = JSON.parse(r.stdout);
      assert.equal(result.reward, 1);
      assert.equal(result.agent.name, 'bash-tool');
      assert.equal(result.agent.model, 'scripted-m');
      assert.equal(result.exitReason, 'completed');
      assert.equal(result.turns, 3);
    } finally {
      await server.close();
    }
  });

  it('refuses a model agent without a model, with exit code 2', () => {
    const r = cli(['run-trial', path.join(EXAMPLES, 'log-errors'), '--agent', 'terminus']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /needs a model: give --model and --base-url/);
  });
});
