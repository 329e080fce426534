import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Docker from 'dockerode';
import { cgroupFreezer, filesOf } from '../src/sandbox/docker/freezer.js';
import { loadTask } from '../src/task/load.js';
import { docker, trivialTask } from './helpers.js';

const ID = 'a'.repeat(64);

describe('cgroup freezer', () => {
  it('finds cgroup v1 freezer and v2 unified files of the container named, and nothing for another', () => {
    assert.equal(
      filesOf(`12:freezer:/docker/${ID}\n1:name=systemd:/docker/${ID}\n`, ID)?.control,
      `/sys/fs/cgroup/freezer/docker/${ID}/freezer.state`,
    );
    assert.equal(
      filesOf(`0::/system.slice/docker-${ID}.scope\n`, ID)?.control,
      `/sys/fs/cgroup/system.slice/docker-${ID}.scope/cgroup.freeze`,
    );
    assert.equal(
      filesOf(`12:freezer:/docker/${'b'.repeat(64)}\n`, ID),
      null,
      "another container's cgroup is never touched",
    );
    assert.equal(filesOf('0::/\n', ID), null);
  });

  it('stops every process of a real container while frozen, and lets them run on when thawed', async () => {
    const provider = docker();
    const task = await loadTask(await trivialTask());
    const s = await provider.start(task, await provider.prepare(task));
    try {
      await s.exec('(while :; do date +%s%N > /tmp/tick; sleep 0.02; done) >/dev/null 2>&1 &');
      const container = (provider.docker as Docker).getContainer(s.id);
      const freezer = await cgroupFreezer((await container.inspect()).State.Pid, s.id);
      assert.ok(freezer, 'this machine lets the harness freeze its containers (root, local engine)');
      const tick = async (): Promise<string | undefined> => (await s.readFile('/tmp/tick', 100))?.toString();
      const until = async (ok: () => Promise<boolean>): Promise<boolean> => {
        for (let i = 0; i < 200; i++) {
          if (await ok()) return true;
          await new Promise((r) => setTimeout(r, 50));
        }
        return false;
      };
      assert.ok(await until(async () => Boolean(await tick())), 'the loop writes');
      await freezer.freeze();
      const a = await tick();
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await tick(), a, 'no process ran while frozen');
      await freezer.thaw();
      assert.ok(await until(async () => (await tick()) !== a), 'they run on once thawed');
    } finally {
      await s.close();
    }
  });
});
