import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { JobEventSchema } from '../src/job/events.js';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob, type JobEvent } from '../src/job/run-job.js';
import { LABEL_MANAGED, LABEL_OWNER, ownerId, ownerIsAlive } from '../src/sandbox/docker/labels.js';
import { EnginePool, LABEL_POOL, type PoolEvent } from '../src/sandbox/pool/provider.js';
import type { EngineSpec } from '../src/sandbox/pool/engine-spec.js';
import { loadTask } from '../src/task/load.js';
import type { TrialResult } from '../src/trial/schema.js';
import { makeTask, runCli, tempDir, trivialTask } from './helpers.js';
import { gradingAttacks } from './support/attack-suite.js';
import { multiStepBehaviour } from './support/multi-step.js';
import { sandboxBehaviour } from './support/sandbox-suite.js';
import { startEngines, startSshEngine, type TestEngine } from './support/engines.js';

/**
 * The engine pool against real Docker engines: three extra dockerd on this machine, each with its
 * own data root, exec root, socket and pid file, started by this file and removed after it.
 */
let engines: TestEngine[] = [];
const specOf = (e: TestEngine, capacity = 3): EngineSpec => ({ name: e.name, host: e.host, capacity, labels: {} });
let shared: EnginePool | null = null;

before(async () => {
  engines = await startEngines(3);
});
after(async () => {
  await shared?.closeAll();
  await Promise.all(engines.map((e) => e.destroy()));
});

// The same contract as every backend: the pool adds placement, copying and failover, nothing else.
const pool = (): EnginePool => (shared ??= new EnginePool([specOf(engines[0]!), specOf(engines[1]!)]));
// The pool routes each sandbox to the same Docker backend on its engine: the smoke subsets of the
// shared suites show the routing (the Docker backend runs them in full in sandbox.test.ts and
// grading.test.ts); what only a pool does is tested below.
sandboxBehaviour('engine pool', pool, 'smoke');
multiStepBehaviour('engine pool', pool, { scripted: true });
gradingAttacks('engine pool', pool, 'smoke');

/** A task whose oracle takes `seconds` (so trials are running when an engine is lost). */
function slowTask(name: string, seconds: number, stamp = `${process.pid}-${Date.now()}`): Promise<string> {
  return makeTask({
    'task.toml': `[task]\nname = "${name}"\n\n[verifier]\ntimeout_sec = 60\n\n[agent]\ntimeout_sec = 60\n`,
    'instruction.md': 'Write hello into /app/out.txt.\n',
    'environment/Dockerfile': `FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo ${stamp} > /stamp\n`,
    'solution/solve.sh': `#!/bin/bash\nsleep ${seconds}\necho hello > /app/out.txt\n`,
    'tests/test.sh':
      '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n',
  });
}

async function ourContainers(engine: TestEngine): Promise<number> {
  return (await engine.docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER}=${ownerId()}`] } }))
    .length;
}

/** Sandboxes on the engine in which the oracle's solution is running (its `sleep 3`). */
async function agentsRunningOn(engine: TestEngine): Promise<number> {
  let n = 0;
  for (const c of await engine.docker.listContainers({ filters: { label: [`${LABEL_OWNER}=${ownerId()}`] } })) {
    const top = (await engine.docker
      .getContainer(c.Id)
      .top()
      .catch(() => null)) as { Processes?: string[][] } | null;
    if ((top?.Processes ?? []).some((row) => row.some((col) => / sleep 3$|^sleep 3$/.test(col)))) n += 1;
  }
  return n;
}

/**
 * A job event handler that runs `act` once, as soon as at least `min` agents run in sandboxes on
 * `engine` (looked at on each agent_run phase, one look at a time).
 */
function onceAgentsRunOn(
  engine: TestEngine,
  min: number,
  act: () => void,
): { onEvent: (e: JobEvent) => void; fired: () => boolean } {
  let fired = false;
  let looking = false;
  return {
    fired: () => fired,
    onEvent: (e) => {
      if (fired || looking || e.type !== 'phase' || e.phase !== 'agent_run') return;
      looking = true;
      void agentsRunningOn(engine).then((n) => {
        looking = false;
        if (fired || n < min) return;
        fired = true;
        act();
      });
    },
  };
}

async function runPoolJob(
  name: string,
  pool: EnginePool,
  taskDirs: string[],
  k: number,
  onEvent: (e: JobEvent) => void = () => {},
) {
  const spec = parseSpec(
    { name, tasks: { paths: taskDirs }, agents: [{ agent: 'oracle' }], k, infraRetries: 3 },
    'test',
  );
  const job = await openJob(spec, await tempDir());
  const summary = await runJob({
    spec: job.spec,
    tasks: job.tasks,
    store: job.store,
    provider: pool,
    jobDir: job.jobDir,
    onEvent,
  });
  const rows = [...job.store.listTrials()];
  const results = await Promise.all(
    rows.map(async (r) => JSON.parse(await readFile(path.join(r.trial_dir!, 'result.json'), 'utf8')) as TrialResult),
  );
  await job.close();
  return { summary, rows, results };
}

describe('engine pool: one job across engines', () => {
  it('runs a job across three engines: every slot recorded once, images built once and copied with the same id', async () => {
    const events: PoolEvent[] = [];
    const p = new EnginePool(
      engines.map((e) => specOf(e, 2)),
      { onEvent: (e) => events.push(e) },
    );
    try {
      const tasks = await Promise.all(['alpha', 'beta'].map((n) => slowTask(n, 1)));
      const builds: string[] = [];
      const { summary, rows, results } = await runPoolJob('three', p, tasks, 6, (e) => {
        if (e.type === 'build-start') builds.push(e.task);
      });
      assert.equal(p.capacity, 6);
      assert.equal(summary.completed, 12, JSON.stringify(summary));
      assert.equal(rows.length, 12);
      assert.equal(new Set(rows.map((r) => `${r.task}/${r.attempt}`)).size, 12, 'a slot recorded twice');
      assert.ok(rows.every((r) => r.reward === 1));
      assert.deepEqual(builds.sort(), ['alpha', 'beta'], 'each image built once for the job');
      // Every engine ran trials, and every trial of a task ran on the same image id.
      assert.deepEqual(new Set(results.map((r) => r.engine)), new Set(['e1', 'e2', 'e3']));
      for (const task of ['alpha', 'beta'])
        assert.equal(new Set(results.filter((r) => r.task.name === task).map((r) => r.imageId)).size, 1);
      // Built on the first engine only; the others got copies, never a build.
      assert.ok(events.some((e) => e.type === 'image-shipped' && e.from === 'e1'));
      for (const e of engines.slice(1)) {
        for (const r of results.filter((x) => x.engine === e.name))
          assert.equal((await e.docker.getImage(r.imageId!).inspect()).Id, r.imageId);
        const built = (await e.docker.listImages()).filter((i) =>
          (i.RepoTags ?? []).some((t) => t.startsWith('termgrade-env:')),
        );
        for (const img of built)
          assert.ok(
            results.some((r) => r.imageId === img.Id),
            `engine ${e.name} holds an image no trial ran on (a rebuild?)`,
          );
      }
      for (const e of engines) assert.equal(await ourContainers(e), 0, `containers left on ${e.name}`);
    } finally {
      await p.closeAll();
    }
  });

  it('copies an image built on one engine to another and runs it there with the same id', async () => {
    const events: PoolEvent[] = [];
    const p = new EnginePool([specOf(engines[0]!, 1), specOf(engines[2]!, 1)], { onEvent: (e) => events.push(e) });
    try {
      const task = await loadTask(
        await trivialTask({
          'environment/Dockerfile': `FROM debian:bookworm-slim\nRUN echo ship-${process.pid}-${Date.now()} > /stamp\n`,
        }),
      );
      const prepared = await p.prepare(task);
      assert.ok(prepared.imageId);
      assert.equal(
        await engines[2]!.docker
          .getImage(prepared.imageId)
          .inspect()
          .then(
            () => true,
            () => false,
          ),
        false,
        'the second engine had the image before any trial',
      );
      const first = await p.start(task, prepared);
      const second = await p.start(task, prepared); // the first engine's only slot is taken
      try {
        assert.equal(first.engine, 'e1');
        assert.equal(second.engine, 'e3');
        const ran = await engines[2]!.docker.getContainer(second.id).inspect();
        assert.equal(ran.Image, prepared.imageId);
        assert.equal((await second.exec('cat /stamp')).stdout.text, (await first.exec('cat /stamp')).stdout.text);
        assert.deepEqual(
          events.filter((e) => e.type === 'image-shipped').map((e) => [e.from, e.engine]),
          [['e1', 'e3']],
        );
      } finally {
        await Promise.all([first.close(), second.close()]);
      }
    } finally {
      await p.closeAll();
    }
  });

  it('drains an engine whose daemon is killed mid-run, re-runs its trials elsewhere, and re-admits it once restarted', async () => {
    const events: PoolEvent[] = [];
    const victim = engines[1]!;
    const p = new EnginePool(
      engines.map((e) => specOf(e, 2)),
      { onEvent: (e) => events.push(e), probeIntervalMs: 500 },
    );
    try {
      const tasks = await Promise.all(['gamma', 'delta'].map((n) => slowTask(n, 3)));
      // Another pool of this same process has a container there: taking the engine back must leave it.
      const bystander = await victim.docker.createContainer({
        Image: 'debian:bookworm-slim',
        Cmd: ['sleep', 'infinity'],
        Labels: { [LABEL_MANAGED]: 'true', [LABEL_OWNER]: ownerId(), [LABEL_POOL]: 'another-pool' },
        HostConfig: { NetworkMode: 'none' },
      });
      // Once agents run in sandboxes on the victim, kill its daemon; restart it a little later.
      const trigger = onceAgentsRunOn(victim, 2, () => {
        victim.kill();
        setTimeout(() => void victim.start(), 1500);
      });
      const { summary, rows, results } = await runPoolJob('failover', p, tasks, 8, trigger.onEvent);
      assert.ok(trigger.fired(), 'the victim never had trials running');
      assert.equal(summary.completed, 16, JSON.stringify(summary));
      assert.equal(rows.length, 16);
      assert.equal(new Set(rows.map((r) => `${r.task}/${r.attempt}`)).size, 16, 'a slot recorded twice');
      assert.ok(
        rows.every((r) => r.reward === 1),
        'a trial on the lost engine was graded',
      );
      // The trials that were on the victim became infrastructure failures and ran again elsewhere.
      const retried = rows.filter((r) => r.infra_attempts > 1);
      assert.ok(
        retried.length >= 1,
        `no trial re-run: ${JSON.stringify(results.map((r) => [r.engine, r.startedAt, r.finishedAt, r.errors]))} ${JSON.stringify(events)}`,
      );
      assert.ok(
        retried.every((r) => /engine e2 was lost/.test(r.retry_reasons_json)),
        rows.map((r) => r.retry_reasons_json).join('\n'),
      );
      assert.ok(events.some((e) => e.type === 'engine-down' && e.engine === 'e2'));
      assert.ok(results.every((r) => r.engine !== null));
      // Re-admitted once it answers: its old containers removed, and it takes sandboxes again.
      const deadline = Date.now() + 90_000;
      while (!p.status().find((s) => s.name === 'e2')!.up && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 250));
      assert.ok(
        events.some((e) => e.type === 'engine-up' && e.engine === 'e2'),
        'e2 never re-admitted',
      );
      assert.equal(
        (await victim.docker.listContainers({ all: true, filters: { label: [`${LABEL_POOL}=${p.id}`] } })).length,
        0,
        'containers of the killed run left on the restarted engine',
      );
      assert.equal((await bystander.inspect()).Id, bystander.id, "another pool's container was removed");
      await bystander.remove({ force: true });
      const task = await loadTask(tasks[0]!);
      const prepared = await p.prepare(task);
      const boxes = await Promise.all(Array.from({ length: 6 }, () => p.start(task, prepared)));
      try {
        assert.ok(
          boxes.some((b) => b.engine === 'e2'),
          'the restarted engine takes no sandboxes',
        );
        for (const b of boxes) assert.equal((await b.exec('cat /stamp')).exitCode, 0);
      } finally {
        await Promise.all(boxes.map((b) => b.close()));
      }
    } finally {
      await p.closeAll();
    }
  });
});

describe('engine pool: an engine that hangs', () => {
  it('drains an engine whose daemon stops answering (SIGSTOP) without waiting on it, and takes it back after SIGCONT', async () => {
    const events: PoolEvent[] = [];
    const victim = engines[2]!;
    const p = new EnginePool([specOf(engines[0]!, 2), specOf(victim, 2)], {
      onEvent: (e) => events.push(e),
      probeIntervalMs: 200,
      pingTimeoutMs: 1000,
    });
    let stopped = false;
    try {
      const tasks = [await slowTask('omega', 3)];
      const trigger = onceAgentsRunOn(victim, 1, () => {
        stopped = true;
        process.kill(victim.pid!, 'SIGSTOP');
      });
      const { summary, rows } = await runPoolJob('hang', p, tasks, 6, trigger.onEvent);
      assert.ok(stopped, 'the victim never had an agent running');
      assert.equal(summary.completed, 6, JSON.stringify(summary));
      assert.equal(new Set(rows.map((r) => r.attempt)).size, 6);
      assert.ok(
        rows.every((r) => r.reward === 1),
        'a trial on the hung engine was graded',
      );
      const retried = rows.filter((r) => r.infra_attempts > 1);
      assert.ok(
        retried.length >= 1 && retried.every((r) => /engine e3 was lost/.test(r.retry_reasons_json)),
        rows.map((r) => r.retry_reasons_json).join('\n'),
      );
      assert.ok(
        events.some((e) => e.type === 'engine-down' && e.engine === 'e3' && /no answer/.test(e.reason)),
        JSON.stringify(events),
      );
    } finally {
      if (stopped) process.kill(victim.pid!, 'SIGCONT');
    }
    try {
      const deadline = Date.now() + 60_000;
      while (!p.status().find((s) => s.name === 'e3')!.up && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 200));
      assert.ok(
        events.some((e) => e.type === 'engine-up' && e.engine === 'e3'),
        'e3 never taken back',
      );
      assert.equal(await ourContainers(victim), 0, 'containers left on the engine that hung');
    } finally {
      await p.closeAll();
    }
  });
});

describe('engine pool: an engine over ssh', () => {
  it('runs a job on a local engine and one reached over ssh, the image copied over ssh with its id', async () => {
    const sshd = await startSshEngine(engines[2]!.socket);
    const events: PoolEvent[] = [];
    const p = new EnginePool(
      [specOf(engines[0]!, 1), { name: 'remote', host: sshd.host, sshKey: sshd.keyFile, capacity: 1, labels: {} }],
      { onEvent: (e) => events.push(e) },
    );
    try {
      const { summary, results } = await runPoolJob('over-ssh', p, [await slowTask('sigma', 1)], 4);
      assert.equal(summary.completed, 4, JSON.stringify(summary));
      assert.ok(results.every((r) => r.reward === 1));
      assert.deepEqual(new Set(results.map((r) => r.engine)), new Set(['e1', 'remote']));
      assert.ok(events.some((e) => e.type === 'image-shipped' && e.engine === 'remote'));
      // What the remote ran is on the engine behind the ssh account, with the same id.
      assert.equal((await engines[2]!.docker.getImage(results[0]!.imageId!).inspect()).Id, results[0]!.imageId);
    } finally {
      await p.closeAll();
      sshd.stop();
    }
  });
});

describe('engine pool: the CLI', () => {
  it("cleanup removes a killed run's containers on every engine; engines reports them", async () => {
    const task = await slowTask('kappa', 60);
    const flags = engines.flatMap((e) => ['--engine', `${e.host},capacity=2,name=${e.name}`]);
    // Killed (SIGKILL) once six trials run: two on each engine (placement fills the least loaded).
    let running = 0;
    const done = await runCli(
      ['run', '--tasks', task, '--agent', 'oracle', '-k', '6', '--jobs-dir', await tempDir(), ...flags, '--jsonl'],
      {
        killOn: (e) => e.type === 'phase' && e.phase === 'agent_run' && ++running === 6,
      },
    );
    assert.equal(done.killed, true, done.stderr);
    // The pool's events are job events: in the --jsonl stream, in the published contract.
    const printed = done.stdout
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JobEventSchema.parse(JSON.parse(l)));
    assert.deepEqual(
      printed
        .filter((e) => e.type === 'image-shipped')
        .map((e) => e.type === 'image-shipped' && e.engine)
        .sort(),
      ['e2', 'e3'],
    );
    const owned = async (e: TestEngine): Promise<number> =>
      (await e.docker.listContainers({ all: true })).filter(
        (c) => c.Labels[LABEL_OWNER] !== undefined && !ownerIsAlive(c.Labels[LABEL_OWNER]),
      ).length;
    const before = await Promise.all(engines.map(owned));
    assert.ok(
      before.every((n) => n > 0),
      `${before}`,
    );

    const report = await runCli(['engines', '--json', ...flags]);
    assert.equal(report.status, 0, report.stderr);
    const listed = (
      JSON.parse(report.stdout) as {
        engines: Array<{ name: string; ok: boolean; leftovers: number; capacity: number; images: number }>;
      }
    ).engines;
    assert.deepEqual(
      listed.map((r) => [r.name, r.ok, r.capacity]),
      [
        ['e1', true, 2],
        ['e2', true, 2],
        ['e3', true, 2],
      ],
    );
    for (const [i, r] of listed.entries()) {
      assert.ok(r.leftovers >= before[i]!, `${r.name}: ${r.leftovers} leftovers listed, ${before[i]} there`);
      assert.ok(r.images >= 1);
    }

    const cleaned = await runCli(['cleanup', ...flags]);
    assert.equal(cleaned.status, 0, cleaned.stderr);
    const removed = Number(/removed (\d+)/.exec(cleaned.stdout)?.[1]);
    assert.ok(removed >= before.reduce((a, b) => a + b, 0), cleaned.stdout);
    assert.deepEqual(await Promise.all(engines.map(owned)), [0, 0, 0]);
  });

  it('refuses bad engine flags with the problem named, and says when no engine answers', async () => {
    const bad = await runCli(['engines', '--engine', 'unix:///nowhere.sock,capacity=lots']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--engine unix:\/\/\/nowhere\.sock,capacity=lots: capacity/);
    const remote = await runCli(['cleanup', '--engine', 'tcp://203.0.113.9:2375']);
    assert.equal(remote.status, 2);
    assert.match(remote.stderr, /needs TLS client certificates/);
    const none = await runCli(['engines', '--engine', 'unix:///nowhere.sock']);
    assert.equal(none.status, 3);
    assert.match(none.stdout, /nowhere/);
  });
});
