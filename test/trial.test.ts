import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Agent } from '../src/agent/agent.js';
import { nopAgent, oracleAgent } from '../src/agent/oracle.js';
import type { SandboxProvider } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import { TermgradeError } from '../src/util/errors.js';
import { runTrial } from '../src/trial/run.js';
import { DEFAULT_INFRA_RETRIES } from '../src/trial/accounting.js';
import { TrialResultSchema } from '../src/trial/schema.js';
import { docker, EXAMPLES, tempDir, trivialTask } from './helpers.js';

describe('trial', () => {
  it('runs the oracle on an example: reward 1, named tests, phases timed, result.json and logs written', async () => {
    const task = await loadTask(path.join(EXAMPLES, 'csv-summary'));
    const out = await tempDir();
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: out });
    assert.equal(r.reward, 1);
    assert.equal(r.passed, true);
    assert.equal(r.error, null);
    assert.equal(r.exitReason, 'completed');
    assert.deepEqual(
      r.tests.map((t) => [t.name, t.status]),
      [
        ['test_outputs.py::test_summary_exists', 'passed'],
        ['test_outputs.py::test_regions_sorted', 'passed'],
        ['test_outputs.py::test_units_skip_bad_rows', 'passed'],
        ['test_outputs.py::test_revenue_rounded', 'passed'],
      ],
    );
    for (const phase of ['environment_setup', 'agent_setup', 'agent_run', 'verification', 'teardown'] as const) {
      assert.ok(r.phases[phase], `phase ${phase} timed`);
      assert.ok(r.phases[phase]!.durationMs >= 0);
    }
    const stored = TrialResultSchema.parse(
      JSON.parse(await readFile(path.join(out, r.trialId, 'result.json'), 'utf8')),
    );
    assert.deepEqual(stored, r);
    assert.match(await readFile(path.join(out, r.trialId, 'verifier', 'test-stdout.txt'), 'utf8'), /4 passed/);
    assert.equal((await readFile(path.join(out, r.trialId, 'verifier', 'reward.txt'), 'utf8')).trim(), '1');
  });

  it('grades the nop agent 0 with the failing tests named', async () => {
    const task = await loadTask(path.join(EXAMPLES, 'csv-summary'));
    const r = await runTrial({ task, agent: nopAgent, provider: docker(), outDir: await tempDir() });
    assert.equal(r.reward, 0);
    assert.equal(r.passed, false);
    assert.equal(r.error, null, 'a wrong answer is a result, not an error');
    assert.equal(r.testsSummary.failed, 4);
  });

  it('records an agent timeout and still verifies the partial work', async () => {
    const task = await loadTask(
      await trivialTask({
        'task.toml': '[agent]\ntimeout_sec = 1\n[verifier]\ntimeout_sec = 30\n',
        'solution/solve.sh': '#!/bin/bash\necho hello > /app/out.txt\nsleep 300\n',
      }),
    );
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: await tempDir() });
    assert.equal(r.exitReason, 'agent_timeout');
    assert.equal(r.error?.class, 'agent_timeout');
    assert.equal(r.reward, 1, 'the work done before the timeout is graded');
    assert.ok(r.phases.verification);
  });

  it('records an agent that crashes and still verifies', async () => {
    const crashing: Agent = {
      name: 'crasher',
      model: null,
      setup: async () => {},
      run: async () => {
        throw new Error('model endpoint exploded');
      },
    };
    const task = await loadTask(await trivialTask());
    const r = await runTrial({ task, agent: crashing, provider: docker(), outDir: await tempDir() });
    assert.equal(r.exitReason, 'agent_error');
    assert.equal(r.error?.class, 'agent_error');
    assert.match(r.error?.message ?? '', /exploded/);
    assert.equal(r.reward, 0);
  });

  it('calls a verifier that hangs past its timeout a verifier timeout, with no reward', async () => {
    const task = await loadTask(
      await trivialTask({
        'task.toml': '[verifier]\ntimeout_sec = 2\n',
        'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\nsleep 300\n',
      }),
    );
    const started = Date.now();
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: await tempDir() });
    assert.equal(r.error?.class, 'verifier_timeout');
    assert.equal(r.reward, 0, 'graded 0: a reward written before the hang does not count');
    assert.ok(Date.now() - started < 30000);
  });

  it('grades a missing reward file 0, naming it (verifier_no_reward), as Harbor counts it', async () => {
    const task = await loadTask(
      await trivialTask({ 'tests/test.sh': '#!/bin/bash\necho "PASSED t.py::test_x"\nexit 1\n' }),
    );
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: await tempDir() });
    assert.equal(r.error?.class, 'verifier_no_reward');
    assert.equal(r.reward, 0);
    assert.equal(r.passed, false);
    assert.deepEqual(
      r.tests.map((t) => t.name),
      ['t.py::test_x'],
    );
  });

  it('records a build failure without starting anything', async () => {
    const task = await loadTask(
      await trivialTask({ 'environment/Dockerfile': 'FROM debian:bookworm-slim\nRUN exit 9\n' }),
    );
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: await tempDir() });
    assert.equal(r.error?.class, 'build_failed');
    assert.equal(r.exitReason, 'not_run');
    assert.equal(r.phases.agent_run, undefined);
  });

  it('keeps the background service solve.sh leaves running, for the verifier to test', async () => {
    const task = await loadTask(path.join(EXAMPLES, 'kv-service'));
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: await tempDir() });
    assert.equal(r.reward, 1);
    assert.deepEqual(r.rewards, { reward: 1, fraction_passed: 1 });
    assert.ok(r.phases.agent_run!.durationMs < 20000);
  });
});

describe('check details', () => {
  it('a reference solution that exits non-zero: the details name its exit, the reward and the failing test', async () => {
    const { checkTasks } = await import('../src/check/check.js');
    const dir = await trivialTask({ 'solution/solve.sh': '#!/bin/bash\necho goodbye > /app/out.txt\nexit 3\n' });
    const report = await checkTasks([dir], { provider: docker(), outDir: await tempDir(), repeat: 1 });
    const details = report.tasks[0]!.details.join(' | ');
    assert.deepEqual(report.tasks[0]!.reasons, ['oracle_failed']);
    assert.match(details, /solve\.sh exited with code 3/);
    assert.match(details, /reward 0, failed: t\.py::test_hello \(no\)/);
  });

  /** The real Docker backend, except that its first `failures` sandbox starts fail as an engine would. */
  function failingStarts(failures: number): { provider: SandboxProvider; starts: () => number } {
    const real = docker();
    let starts = 0;
    const provider = new Proxy(real, {
      get(target, key, receiver) {
        if (key === 'start')
          return (...args: Parameters<SandboxProvider['start']>) => {
            starts += 1;
            if (starts <= failures)
              return Promise.reject(new TermgradeError('environment_error', 'the engine did not start the container'));
            return target.start(...args);
          };
        const value: unknown = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    return { provider, starts: () => starts };
  }

  it('a run whose infrastructure failed says nothing of the task: it is run again, and a sound task is admitted', async () => {
    const { checkTasks } = await import('../src/check/check.js');
    const { provider, starts } = failingStarts(1);
    const report = await checkTasks([await trivialTask()], { provider, outDir: await tempDir(), repeat: 1 });
    const t = report.tasks[0]!;
    assert.equal(t.verdict, 'admissible', t.details.join(' | '));
    assert.equal(starts() >= 3, true, `the failed start was run again (${starts()} starts)`);
    assert.match(
      t.details.join(' | '),
      /oracle run 1: the infrastructure failed \(environment_error: the engine did not start the container; trial .*\), run again/,
    );
  });

  it('an infrastructure failure that persists still rejects (fail closed), after the runs again', async () => {
    const { checkTasks } = await import('../src/check/check.js');
    const { provider, starts } = failingStarts(1000);
    const report = await checkTasks([await trivialTask()], { provider, outDir: await tempDir(), repeat: 1 });
    const t = report.tasks[0]!;
    assert.equal(t.verdict, 'rejected');
    assert.deepEqual(t.reasons, ['infra_error'], t.details.join(' | '));
    const again = t.details.filter((d) => /the infrastructure failed/.test(d));
    assert.equal(again.length, 2 * DEFAULT_INFRA_RETRIES, t.details.join(' | ')); // the oracle's and the nop's
    assert.equal(starts(), 2 * (DEFAULT_INFRA_RETRIES + 1), 'each run and its runs again, no more');
  });
});
