import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { LABEL_MANAGED, LABEL_OWNER, ownerId } from '../src/sandbox/docker/labels.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import type { Sandbox } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import type { Task } from '../src/task/task.js';
import { CLI, docker, onEachDockerExecPath, ROOT, trivialTask } from './helpers.js';
import { multiStepBehaviour } from './support/multi-step.js';
import { sandboxBehaviour } from './support/sandbox-suite.js';

// The backend-neutral behaviour suite, on both of the Docker backend's command paths.
// In full on both paths: commands and the snapshot's reads are each path's own code.
onEachDockerExecPath('full', (label, provider, coverage) => {
  sandboxBehaviour(label, provider, coverage);
  multiStepBehaviour(label, provider, { scripted: true });
});

/** What only the Docker backend has: limits as the engine reports them, labels, image builds, cleanup. */
describe('docker backend specifics', () => {
  let task: Task;
  before(async () => {
    task = await loadTask(await trivialTask({ 'task.toml': '[environment]\npids_limit = 128\nmemory_mb = 256\n' }));
  });

  async function withSandbox<T>(fn: (s: Sandbox) => Promise<T>): Promise<T> {
    const provider = docker();
    const sandbox = await provider.start(task, await provider.prepare(task));
    try {
      return await fn(sandbox);
    } finally {
      await sandbox.close();
    }
  }

  it('holds a fork bomb at the process limit, and the sandbox still tears down', async () => {
    const provider = docker();
    const s = await provider.start(task, await provider.prepare(task));
    try {
      const r = await s.exec('bomb() { bomb | bomb & }; bomb; sleep 5', { timeoutSec: 4 });
      assert.equal(r.timedOut || r.exitCode !== null, true);
      const stats = (await provider.docker.getContainer(s.id).stats({ stream: false })) as {
        pids_stats?: { current?: number; limit?: number };
      };
      assert.ok((stats.pids_stats?.current ?? 0) <= 128, `pids ${stats.pids_stats?.current} over the limit`);
      assert.equal(stats.pids_stats?.limit, 128);
    } finally {
      await s.close();
    }
    await assert.rejects(provider.docker.getContainer(s.id).inspect(), /no such container/i);
  });

  it('applies the memory limit and labels the container', async () => {
    await withSandbox(async (s) => {
      const info = await docker().docker.getContainer(s.id).inspect();
      assert.equal(info.HostConfig.Memory, 256 * 1024 * 1024);
      assert.equal(info.HostConfig.NetworkMode, 'none');
      assert.equal(info.Config.Labels[LABEL_MANAGED], 'true');
      assert.equal(info.Config.Labels[LABEL_OWNER], ownerId());
    });
  });

  it('reports the disk a sandbox has written (the disk limit relies on it)', async () => {
    await withSandbox(async (s) => {
      await s.exec('head -c 5000000 /dev/zero > /app/blob');
      const used = await s.diskUsage();
      assert.equal(typeof used, 'number');
      assert.ok(used! >= 5_000_000, `${used}`);
    });
  });

  it('closes idempotently and removes the container', async () => {
    const provider = docker();
    const s = await provider.start(task, await provider.prepare(task));
    await Promise.all([s.close(), s.close()]);
    await s.close();
    await assert.rejects(provider.docker.getContainer(s.id).inspect(), /no such container/i);
  });

  it('builds an image once for concurrent requests and reuses it later', async () => {
    const fresh = await loadTask(
      await trivialTask({
        'environment/Dockerfile': `FROM debian:bookworm-slim\nRUN echo ${Date.now()}-${process.pid} > /stamp\n`,
      }),
    );
    const provider = docker();
    const [a, b] = await Promise.all([provider.prepare(fresh), provider.prepare(fresh)]);
    assert.deepEqual(a, b, 'one build shared by both callers (the same result, timing included)');
    assert.equal(a.cached, false);
    const again = await provider.prepare(fresh);
    assert.equal(again.cached, true);
    assert.equal(again.image, a.image);
    await provider.docker.getImage(a.image).remove({ force: true });
  });

  it('reports a failed build with its log', async () => {
    const bad = await loadTask(
      await trivialTask({ 'environment/Dockerfile': 'FROM debian:bookworm-slim\nRUN echo broken-step && exit 7\n' }),
    );
    await assert.rejects(docker().prepare(bad), (err: Error & { code?: string; log?: string }) => {
      assert.equal(err.code, 'build_failed');
      assert.match(err.message, /returned a non-zero code: 7|exit code: 7/);
      assert.match(err.log ?? '', /broken-step/);
      return true;
    });
  });

  it("reads changes from the overlay layer exactly as the engine's diff reports them", async () => {
    await withSandbox(async (s) => {
      await s.exec(
        'mkdir -p /app/new/deep; echo a > /app/new/deep/f; echo b >> /etc/issue; rm -f /etc/debian_version; rm -rf /usr/share/doc/apt',
      );
      const fast = (await s.changes()).map((c) => `${c.kind} ${c.path}`).sort();
      const container = new Docker().getContainer(s.id);
      const kinds = ['changed', 'added', 'deleted'];
      const engine = ((await container.changes()) as Array<{ Path: string; Kind: number }>)
        .map((c) => `${kinds[c.Kind]} ${c.Path}`)
        .sort();
      assert.deepEqual(fast, engine);
    });
  });

  it('a cleanup in another process leaves a running image build alone', async () => {
    const engine = new Docker();
    const stamp = `${Date.now()}-${process.pid}`;
    const base = await loadTask(
      await trivialTask({ 'environment/Dockerfile': `FROM debian:bookworm-slim\nRUN echo ${stamp} > /stamp\n` }),
    );
    // The legacy builder runs build steps in containers (BuildKit does not); the agent layer builds
    // FROM the task image, whose termgrade labels those containers inherit.
    const legacy = new DockerProvider({ docker: new Docker(), builder: 'legacy' });
    const building = legacy.prepare(base, { agentLayer: `RUN sleep 6 && echo layer-${stamp}` });
    building.catch(() => undefined);
    const deadline = Date.now() + 120_000;
    const buildContainers = async () =>
      (await engine.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } })).filter(
        (c) => !c.Labels[LABEL_OWNER] && c.State === 'running' && c.Command.includes(`layer-${stamp}`),
      );
    while ((await buildContainers()).length === 0) {
      assert.ok(Date.now() < deadline, 'no build container appeared');
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = spawnSync(process.execPath, [CLI, 'cleanup'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const prepared = await building;
    assert.match(prepared.image, /^termgrade-agent:/);
  });

  it('a cleanup that meets a removal already under way (another cleanup) returns only once the container is gone', async () => {
    const engine = new Docker();
    let observed = false;
    // A round counts only if the second cleanup started while the first was mid-removal.
    for (let round = 0; round < 10 && !observed; round++) {
      const dead = await engine.createContainer({
        Image: 'debian:bookworm-slim',
        Cmd: ['sleep', 'infinity'],
        Labels: { [LABEL_MANAGED]: 'true', [LABEL_OWNER]: `${ownerId().split(':')[0]}:999999:1` },
        HostConfig: { NetworkMode: 'none' },
      });
      await dead.start();
      try {
        const first = docker().cleanup();
        let removing = false;
        for (let i = 0; i < 200 && !removing; i++) {
          const status = await dead.inspect().then(
            (c) => c.State.Status,
            () => 'gone',
          );
          if (status === 'gone') break;
          removing = status === 'removing';
        }
        if (removing) {
          await docker().cleanup();
          await assert.rejects(
            dead.inspect(),
            /no such container/i,
            'the second cleanup returned while the container was still there',
          );
          observed = true;
        }
        await first;
      } finally {
        await dead.remove({ force: true }).catch(() => undefined);
      }
    }
    assert.ok(observed, 'never caught a removal under way in ten rounds');
  });

  it('a removal that never ends (an engine that cannot kill the container) holds cleanup only to its bound, and the process still exits', async () => {
    // A container that is never removed stands in for one the engine cannot kill: the wait for its
    // removal must end at the bound and leave no request open (an open one kept two runs alive).
    const engine = new Docker();
    const held = await engine.createContainer({
      Image: 'debian:bookworm-slim',
      Cmd: ['sleep', 'infinity'],
      HostConfig: { NetworkMode: 'none' },
    });
    await held.start();
    try {
      const script = [
        `import Docker from 'dockerode';`,
        `import { waitRemoved } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist/src/sandbox/docker/cleanup.js')).href)};`,
        `const t0 = Date.now();`,
        `await waitRemoved(new Docker().getContainer(${JSON.stringify(held.id)}), 1000);`,
        `console.log(Date.now() - t0);`,
      ].join('\n');
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 30_000,
      });
      assert.equal(r.signal, null, 'the process did not exit by itself within 30 s: a wait was left open');
      assert.equal(r.status, 0, r.stderr);
      const waited = Number(r.stdout.trim());
      assert.ok(waited >= 900 && waited < 10_000, `waited ${waited} ms for a bound of 1000`);
      assert.equal((await held.inspect()).State.Running, true, 'the bound removed nothing');
    } finally {
      await held.remove({ force: true });
    }
  });

  it("cleanup removes only dead owners' containers: never a live process's, never an ownerless one (an image build)", async () => {
    const engine = new Docker();
    const make = async (labels: Record<string, string>) => {
      const c = await engine.createContainer({
        Image: 'debian:bookworm-slim',
        Cmd: ['sleep', 'infinity'],
        Labels: { [LABEL_MANAGED]: 'true', ...labels },
        HostConfig: { NetworkMode: 'none' },
      });
      await c.start();
      return c;
    };
    const live = await make({ [LABEL_OWNER]: ownerId() });
    const ownerless = await make({});
    const made = [live, ownerless];
    try {
      // Other test files share the engine, and their `run` / `check` / `cleanup` also remove dead
      // owners' containers: a round where one of them got to ours first proves nothing about this
      // call, so it is run again (at most five rounds) until this call is the one that removes it.
      let removedByUs = false;
      for (let round = 0; round < 5 && !removedByUs; round++) {
        const dead = await make({ [LABEL_OWNER]: `${ownerId().split(':')[0]}:999999:1` });
        made.push(dead);
        const removed = await docker().cleanup();
        await assert.rejects(dead.inspect(), /no such container/i);
        removedByUs = removed >= 1;
      }
      assert.ok(removedByUs, "this process's cleanup removed the dead owner's container");
      assert.equal((await live.inspect()).State.Running, true);
      assert.equal((await ownerless.inspect()).State.Running, true);
    } finally {
      for (const c of made) await c.remove({ force: true }).catch(() => undefined);
    }
  });
});
