import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import Docker from 'dockerode';
import { oracleAgent } from '../src/agent/oracle.js';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob } from '../src/job/run-job.js';
import { LABEL_OWNER, ownerId } from '../src/sandbox/docker/labels.js';
import { EnginePool } from '../src/sandbox/pool/provider.js';
import type { Sandbox, SandboxProvider } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';
import { sleep } from '../src/util/time.js';
import { tempDir, trivialTask, until } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';

/**
 * A sandbox start that passes its deadline is given up and cleaned up: the trial fails at the
 * deadline as the environment's failure, the sandbox that arrives after all is closed as it
 * arrives, and an engine pool's slot is free at once, not when the late start ends.
 */

/** Waits until `cond` holds (polling), or fails after `ms` naming what was awaited. */
describe('a start past its deadline, on the fake provider', () => {
  it('fails the trial at the deadline and closes the sandbox that starts late', async () => {
    const provider = new FakeProvider({ startMs: 1500 });
    const task = await loadTask(await trivialTask());
    const r = await runTrial({
      task,
      agent: oracleAgent,
      provider,
      outDir: await tempDir(),
      timeouts: { environmentSec: 0.3 },
    });
    assert.equal(r.error?.class, 'environment_error');
    assert.match(r.error!.message, /container did not start within 0\.3 s/);
    assert.equal(provider.starts, 0, 'the trial ended at its deadline, before the start did');
    await until('the late start to finish', () => provider.starts === 1);
    assert.equal(provider.open, 0, 'the late sandbox was closed as it arrived');
  });

  it('in a job (warm starts claimed by trials): every late sandbox is closed', async () => {
    const provider = new FakeProvider({ startMs: 1000 });
    const tasks = await Promise.all(['w1', 'w2'].map((n) => trivialTask({ 'task.toml': `[task]\nname = "${n}"\n` })));
    const spec = parseSpec(
      {
        name: 'late',
        tasks: { paths: tasks },
        agents: [{ agent: 'oracle' }],
        k: 2,
        concurrency: 2,
        infraRetries: 0,
        timeouts: { environmentSec: 0.2 },
      },
      'test',
    );
    const job = await openJob(spec, await tempDir());
    try {
      const summary = await runJob({
        spec: job.spec,
        tasks: job.tasks,
        store: job.store,
        provider,
        jobDir: job.jobDir,
      });
      assert.equal(summary.stoppedBy, 'done');
      const rows = [...job.store.listTrials()];
      assert.equal(rows.length, 4);
      assert.ok(
        rows.every((x) => x.error_class === 'environment_error' && /did not start within/.test(x.error_message ?? '')),
        JSON.stringify(rows.map((x) => x.error_message)),
      );
    } finally {
      await job.close();
    }
    await sleep(1500); // every start under way has ended by now
    assert.ok(provider.starts >= 4);
    assert.equal(provider.open, 0, `${provider.open} late sandbox(es) left open`);
  });
});

describe('a start past its deadline, on a Docker engine pool', () => {
  const engine = new Docker();
  const pools: EnginePool[] = [];
  after(async () => {
    for (const p of pools) await p.closeAll();
  });

  it('frees the pool slot at once and removes the container the late start made', async () => {
    const pool = new EnginePool([{ name: 'local', host: 'unix:///var/run/docker.sock', capacity: 1, labels: {} }]);
    pools.push(pool);
    // The engine's own start succeeds, but is handed back 4 s late (an engine that answers slowly).
    const inner = (pool as unknown as { engines: Array<{ provider: SandboxProvider }> }).engines[0]!.provider;
    const realStart = inner.start.bind(inner);
    let lateDone = false;
    inner.start = async (task, prepared, options = {}): Promise<Sandbox> => {
      const sandbox = await realStart(task, prepared, { ...options, signal: undefined });
      await sleep(4000);
      lateDone = true;
      return sandbox;
    };
    const task = await loadTask(await trivialTask({ 'task.toml': '[task]\nname = "late-start"\n' }));
    const trialId = `late-start-${process.pid}-${Date.now()}`;
    const mine = async (): Promise<number> =>
      (
        await engine.listContainers({
          all: true,
          filters: { label: [`${LABEL_OWNER}=${ownerId()}`, `io.termgrade.trial=${trialId}`] },
        })
      ).length;

    const r = await runTrial({
      task,
      agent: oracleAgent,
      provider: pool,
      outDir: await tempDir(),
      trialId,
      timeouts: { environmentSec: 1.5 },
    });
    assert.equal(r.error?.class, 'environment_error');
    assert.match(r.error!.message, /container did not start within 1\.5 s/);
    assert.equal(lateDone, false, 'the trial ended at its deadline, before the late start');
    assert.equal(pool.status()[0]!.inUse, 0, 'the slot is free at once');
    assert.equal(await mine(), 1, 'the late start has made its container (the case this test is about)');
    await until('the late start to end', () => lateDone);
    await until('the late container to be removed', async () => (await mine()) === 0);
    assert.equal(pool.status()[0]!.inUse, 0);
  });
});
