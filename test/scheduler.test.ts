import assert from 'node:assert/strict';
import { renameSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Agent } from '../src/agent/agent.js';
import { oracleAgent } from '../src/agent/oracle.js';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob } from '../src/job/run-job.js';
import type { JobSpecInput } from '../src/job/spec.js';
import { configStats } from '../src/report/aggregate.js';
import { toStatsRecord } from '../src/records/record.js';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';
import { tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';

/** Scheduler behaviour on the fake provider (a test double): fast, exact counts. */
async function job(name: string, tasks: string[], extra: Partial<JobSpecInput> = {}) {
  const jobsDir = await tempDir();
  const spec = parseSpec(
    { name, tasks: { paths: tasks }, agents: [{ agent: 'oracle' }], k: 3, concurrency: 4, ...extra },
    'test',
  );
  return { spec, jobsDir };
}

const taskDirs = async (n: number): Promise<string[]> =>
  Promise.all(Array.from({ length: n }, (_, i) => trivialTask({ 'task.toml': `[task]\nname = "t${i}"\n` })));

describe('scheduler accounting (fake provider)', () => {
  it('retries an infrastructure failure within the budget; a slot that keeps failing is recorded as infra (never 0) and a resume runs it again', async () => {
    const { spec, jobsDir } = await job('infra', await taskDirs(3), { infraRetries: 2 });
    const broken = new FakeProvider({ startFails: (t) => t.name === 't1' });
    let opened = await openJob(spec, jobsDir);
    try {
      await runJob({ spec, tasks: opened.tasks, store: opened.store, provider: broken, jobDir: opened.jobDir });
      const rows = [...opened.store.listTrials()];
      assert.equal(rows.length, 9);
      const t1 = rows.filter((r) => r.task === 't1');
      assert.deepEqual(
        t1.map((r) => [r.status, r.reward, r.error_class, r.infra_attempts]),
        Array(3).fill(['error', null, 'environment_error', 3]),
      );
      const [s] = configStats(rows.map(toStatsRecord));
      assert.equal(s!.pass1.mean, 1, 'the failing task is not counted as 0');
      assert.deepEqual(s!.unmeasuredTasks, ['t1']);
      assert.equal(s!.coverage.infra, 3);
    } finally {
      await opened.close();
    }
    // Resume on a healthy engine: only the three infra slots run again.
    const healthy = new FakeProvider();
    opened = await openJob(spec, jobsDir);
    try {
      const summary = await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider: healthy,
        jobDir: opened.jobDir,
      });
      assert.equal(summary.completed, 3);
      assert.equal(summary.skipped, 6);
      assert.equal(healthy.starts, 3);
      assert.ok([...opened.store.listTrials()].every((r) => r.status === 'completed' && r.reward === 1));
    } finally {
      await opened.close();
    }
  });

  it('a model endpoint that fails is retried as infrastructure and never graded 0', async () => {
    const { spec, jobsDir } = await job('endpoint', await taskDirs(2), { infraRetries: 1 });
    // Every first try of a slot meets an overloaded endpoint (after the client's own retries).
    const flaky: Agent = {
      name: 'flaky',
      model: 'm',
      setup: async () => {},
      run: async ({ sessionId }) =>
        !sessionId.includes('__retry')
          ? { exitReason: 'model_error', message: 'overloaded: 503', modelErrorKind: 'overloaded' }
          : { exitReason: 'completed', message: null },
    };
    const provider = new FakeProvider({ grade: () => 0 });
    const opened = await openJob(spec, jobsDir);
    try {
      await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider,
        jobDir: opened.jobDir,
        agentFactory: () => ({ agent: flaky, secrets: [] }),
      });
      const rows = [...opened.store.listTrials()];
      assert.equal(rows.length, 6);
      assert.ok(
        rows.every((r) => r.status === 'completed' && r.reward === 0 && r.infra_attempts === 2),
        JSON.stringify(rows.map((r) => [r.status, r.error_class, r.infra_attempts])),
      );
      assert.ok(
        rows.every((r) => JSON.parse(r.retry_reasons_json)[0].class === 'model_unavailable'),
        'the discarded run keeps its class',
      );
    } finally {
      await opened.close();
    }
  });

  it("a verifier that gives no reward after the agent's turn is graded 0 and not retried", async () => {
    const { spec, jobsDir } = await job('noreward', await taskDirs(2));
    const provider = new FakeProvider({ grade: (t) => (t.name === 't0' ? 'no-reward' : 1) });
    const opened = await openJob(spec, jobsDir);
    try {
      await runJob({ spec, tasks: opened.tasks, store: opened.store, provider, jobDir: opened.jobDir });
      const rows = [...opened.store.listTrials()];
      assert.deepEqual(
        rows.filter((r) => r.task === 't0').map((r) => [r.error_class, r.infra_attempts]),
        Array(3).fill(['verifier_no_reward', 1]),
      );
      assert.deepEqual(
        rows.filter((r) => r.task === 't0').map((r) => r.reward),
        [0, 0, 0],
      );
      const [s] = configStats(rows.map(toStatsRecord));
      assert.equal(s!.coverage.ungraded, 0);
      assert.equal(s!.pass1.mean, 0.5, 't0 counts as 0, t1 as 1');
    } finally {
      await opened.close();
    }
  });

  it("grades every trial from a snapshot and keeps the agent's processes (Harbor's semantics)", async () => {
    const { spec, jobsDir } = await job('ends', await taskDirs(2));
    const provider = new FakeProvider();
    const opened = await openJob(spec, jobsDir);
    try {
      await runJob({ spec, tasks: opened.tasks, store: opened.store, provider, jobDir: opened.jobDir });
      assert.equal(provider.snapshots, 6);
    } finally {
      await opened.close();
    }
  });

  it('keeps the concurrency cap', async () => {
    const { spec, jobsDir } = await job('cap', await taskDirs(6), { concurrency: 3 });
    let running = 0;
    let most = 0;
    const slow: Agent = {
      ...oracleAgent,
      name: 'slow',
      setup: async () => {},
      run: async () => {
        running += 1;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 20));
        running -= 1;
        return { exitReason: 'completed', message: null };
      },
    };
    const opened = await openJob(spec, jobsDir);
    try {
      const summary = await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider: new FakeProvider(),
        jobDir: opened.jobDir,
        agentFactory: () => ({ agent: slow, secrets: [] }),
      });
      assert.equal(summary.completed, 18);
      assert.equal(most, 3);
    } finally {
      await opened.close();
    }
  });
});

describe('one writer per job', () => {
  it('refuses a second process on the same job, and takes over a lock whose owner died', async () => {
    const { spec, jobsDir } = await job('lock', await taskDirs(1));
    const first = await openJob(spec, jobsDir);
    await assert.rejects(openJob(spec, jobsDir), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'job_busy');
      assert.match(err.message, new RegExp(`pid ${process.pid}`));
      return true;
    });
    await first.close();
    const again = await openJob(spec, jobsDir);
    await again.close();
    // A lock left by a process that is gone (kill -9) does not block the job.
    await writeFile(path.join(jobsDir, 'lock', 'job.lock'), '999999');
    const afterCrash = await openJob(spec, jobsDir);
    await afterCrash.close();
  });
});

describe('re-running recorded trials', () => {
  it('--retry by class or "errors" runs those slots again and keeps what each replaced', async () => {
    const { spec, jobsDir } = await job('retry', await taskDirs(2), { k: 2 });
    // First run: every trial of t0 gets no reward from the verifier (graded 0: not retried by itself).
    let opened = await openJob(spec, jobsDir);
    try {
      await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider: new FakeProvider({ grade: (t) => (t.name === 't0' ? 'no-reward' : 1) }),
        jobDir: opened.jobDir,
      });
    } finally {
      await opened.close();
    }
    opened = await openJob(spec, jobsDir);
    try {
      const plain = await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider: new FakeProvider(),
        jobDir: opened.jobDir,
      });
      assert.equal(plain.completed + plain.errors, 0, 'a verifier failure is not re-run unasked');
      const provider = new FakeProvider({ grade: () => 0 });
      const again = await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider,
        jobDir: opened.jobDir,
        retry: { classes: ['verifier_no_reward'] },
      });
      assert.equal(again.completed, 2);
      assert.equal(provider.starts, 2, 'only the two t0 slots ran');
      const rows = [...opened.store.listTrials()].filter((r) => r.task === 't0');
      assert.deepEqual(
        rows.map((r) => [r.status, r.reward]),
        [
          ['completed', 0],
          ['completed', 0],
        ],
      );
      const history = opened.store.historyOf({ config: 'oracle', task: 't0', attempt: 0 });
      assert.equal(history.length, 1);
      assert.equal(history[0]!.error_class, 'verifier_no_reward');
      assert.equal(history[0]!.row.status, 'completed');
      assert.equal(history[0]!.row.reward, 0);
    } finally {
      await opened.close();
    }
  });
});

describe('longest first (fake provider)', () => {
  it('with a prior, each round starts the tasks that took longest before first', async () => {
    const dirs = await taskDirs(3);
    // Apart by far more than a busy machine's noise in the harness's own time per trial.
    const took: Record<string, number> = { t0: 5, t1: 700, t2: 350 };
    const slow: Agent = {
      name: 'oracle',
      model: null,
      async setup() {},
      async run({ task }) {
        await new Promise((r) => setTimeout(r, took[task.name]));
        return { exitReason: 'completed', message: null };
      },
    };
    const agentFactory = () => ({ agent: slow, secrets: [] });
    const jobsDir = await tempDir();
    const runOne = async (input: Partial<JobSpecInput> & { name: string }) => {
      const spec = parseSpec(
        { tasks: { paths: dirs }, agents: [{ agent: 'oracle' }], k: 1, concurrency: 1, ...input },
        'test',
      );
      const opened = await openJob(spec, jobsDir);
      const order: string[] = [];
      try {
        await runJob({
          spec,
          tasks: opened.tasks,
          store: opened.store,
          provider: new FakeProvider(),
          jobDir: opened.jobDir,
          agentFactory,
          onEvent: (e) => e.type === 'trial-start' && order.push(e.slot.task),
        });
      } finally {
        await opened.close();
      }
      return order;
    };
    assert.deepEqual(await runOne({ name: 'before' }), ['t0', 't1', 't2'], 'without a prior: by name');
    const order = await runOne({ name: 'after', k: 2, adaptive: { prior: { source: path.join(jobsDir, 'before') } } });
    assert.deepEqual(order.slice(0, 3), ['t1', 't2', 't0'], 'the slowest task of the prior first');
  });
});

describe('a model-first agent starts while its sandbox is starting (fake provider)', () => {
  /** An agent whose first step is a 300 ms "model call", then one command. */
  const thinker = (seen: { idAtStart: string; idAfter: string }): Agent => ({
    name: 'thinker',
    model: null,
    modelFirst: true,
    async setup() {},
    async run({ sandbox }) {
      seen.idAtStart = sandbox.id;
      await new Promise((r) => setTimeout(r, 300));
      await sandbox.exec(['true']);
      seen.idAfter = sandbox.id;
      return { exitReason: 'completed', message: null };
    },
  });

  it('the start hides behind the first model call, and the setup phase still says how long it took', async () => {
    const task = await loadTask(await trivialTask());
    const seen = { idAtStart: '', idAfter: '' };
    const r = await runTrial({
      task,
      agent: thinker(seen),
      provider: new FakeProvider({ startMs: 250 }),
      outDir: await tempDir(),
    });
    assert.equal(r.reward, 1);
    assert.equal(seen.idAtStart, 'starting', 'the agent began while its sandbox was still starting');
    assert.match(seen.idAfter, /^fake-\d+$/, 'and its command ran in the started sandbox');
    assert.ok(
      r.phases.environment_setup!.durationMs >= 240,
      `setup phase ${r.phases.environment_setup!.durationMs} ms: the real start time`,
    );
    assert.ok(r.phases.environment_setup!.finishedAt > r.phases.agent_run!.startedAt, 'the phases overlap');
  });

  it("a start that fails is the environment failure (infrastructure), not the agent's, and nothing is graded", async () => {
    const task = await loadTask(await trivialTask());
    const provider = new FakeProvider({ startMs: 50, startFails: () => true });
    const r = await runTrial({
      task,
      agent: thinker({ idAtStart: '', idAfter: '' }),
      provider,
      outDir: await tempDir(),
    });
    assert.equal(r.reward, null);
    assert.equal(r.error?.class, 'environment_error');
    assert.equal(r.phases.verification, undefined);
    assert.equal(provider.open, 0);
  });
});

describe('containers kept ready for the trials next in line (fake provider)', () => {
  it('starts one ahead for each trial in line, each serves a trial, and no more than one per lane wait', async () => {
    const { spec, jobsDir } = await job('warm', await taskDirs(6), { k: 4, concurrency: 3 });
    const provider = new FakeProvider({ startMs: 5, commandMs: 2 });
    const opened = await openJob(spec, jobsDir);
    try {
      const summary = await runJob({ spec, tasks: opened.tasks, store: opened.store, provider, jobDir: opened.jobDir });
      assert.equal(summary.completed, 24);
      // Every container started served a trial: none was started for an image nobody came for.
      assert.equal(provider.unused, 0, `${provider.unused} of ${provider.starts} containers were never used`);
      assert.equal(provider.starts, 24);
      // Those started ahead: all but the first trial of each image (its image was not ready before
      // it) at most, and most of them (the look-ahead worked).
      assert.ok(
        provider.backgroundStarts >= 12 && provider.backgroundStarts <= 24 - 3,
        `${provider.backgroundStarts} started ahead`,
      );
      // Three running and at most three ready: not one spare per image (six images).
      assert.ok(provider.maxOpen <= 6, `${provider.maxOpen} open at once`);
      assert.equal(provider.open, 0);
    } finally {
      await opened.close();
    }
  });

  it('a job whose trial folders can no longer be written leaves no container behind, not even one claimed for a trial that never started', async () => {
    const { spec, jobsDir } = await job('warm-disk', await taskDirs(4), { k: 6, concurrency: 3 });
    const provider = new FakeProvider({ startMs: 5, commandMs: 2 });
    let done = 0;
    const opened = await openJob(spec, jobsDir);
    try {
      const trials = path.join(opened.jobDir, 'trials');
      await assert.rejects(
        runJob({
          spec,
          tasks: opened.tasks,
          store: opened.store,
          provider,
          jobDir: opened.jobDir,
          onEvent: (e) => {
            // The trials folder becomes a file: every later trial fails before its sandbox is taken.
            if (e.type === 'trial-done' && ++done === 5) {
              renameSync(trials, `${trials}.moved`);
              writeFileSync(trials, 'not a folder\n');
            }
          },
        }),
      );
      assert.ok(provider.backgroundStarts > 0, 'containers had been started ahead');
      assert.equal(provider.open, 0, `${provider.open} containers left open`);
    } finally {
      await opened.close();
    }
  });

  it('a job stopped midway leaves no container behind, ready or claimed', async () => {
    const { spec, jobsDir } = await job('warm-stop', await taskDirs(4), { k: 6, concurrency: 3 });
    const provider = new FakeProvider({ startMs: 5, commandMs: 2 });
    const stop = new AbortController();
    let done = 0;
    const opened = await openJob(spec, jobsDir);
    try {
      const summary = await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider,
        jobDir: opened.jobDir,
        signal: stop.signal,
        onEvent: (e) => {
          if (e.type === 'trial-done' && ++done === 7) stop.abort();
        },
      });
      assert.ok(summary.notRun > 0, 'the job was stopped before its end');
      assert.ok(provider.backgroundStarts > 0, 'containers had been started ahead');
      assert.equal(provider.open, 0, `${provider.open} containers left open`);
    } finally {
      await opened.close();
    }
  });
});
