import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Docker from 'dockerode';
import { holdNonServices, thawLeftHold } from '../src/sandbox/docker/hold.js';
import type { Sandbox } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import { docker, trivialTask, until } from './helpers.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The attack suite's image (python3 for a service; a shared build cache). */
const IMAGE =
  'FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest git procps make gcc libc6-dev sqlite3 && rm -rf /var/lib/apt/lists/*\nWORKDIR /app\n';

/** A sandbox running a ticker (no socket) and a service on 127.0.0.1:8123. */
async function withTickerAndService(): Promise<{ s: Sandbox; pid: number; tick: () => Promise<string> }> {
  const provider = docker();
  const task = await loadTask(await trivialTask({ 'environment/Dockerfile': IMAGE }));
  const s = await provider.start(task, await provider.prepare(task));
  await s.exec(
    "nohup sh -c 'while :; do date +%s%N > /tmp/tick.new; mv /tmp/tick.new /tmp/tick; sleep 0.02; done' >/dev/null 2>&1 & nohup python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 1.5",
  );
  const pid = (await (provider.docker as Docker).getContainer(s.id).inspect()).State.Pid;
  // Written whole by a rename, so a read never sees the file between its truncation and its write
  // (the ticker can be frozen there): an empty tick would make "did not change" prove nothing.
  const raw = async (): Promise<string> => (await s.readFile('/tmp/tick', 100))?.toString() ?? '';
  await until('the ticker has started', async () => (await raw()) !== '', 30_000);
  const tick = async (): Promise<string> => {
    const t = await raw();
    assert.match(t, /^\d+\n$/, 'the ticker has written a time');
    return t;
  };
  return { s, pid, tick };
}

const answers = async (s: Sandbox): Promise<boolean> =>
  (
    await s.exec(
      ['python3', '-c', "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8123/', timeout=5)"],
      // A new engine exec: the helper shell is a process of the container, held like the rest.
      { timeoutSec: 20, user: 'root' },
    )
  ).exitCode === 0;

describe('holding the agent processes that are not services', () => {
  it('freezes what holds no listening socket, lets the service answer, names squatted ports, and thaws on release', async () => {
    const { s, pid, tick } = await withTickerAndService();
    try {
      const hold = await holdNonServices(pid, s.id, [8123, 9999]);
      assert.ok(hold, 'this machine lets the harness hold its containers (root, local engine)');
      assert.equal(hold.services.length, 1, 'the http server is the one service');
      assert.ok(hold.held.length >= 2, `the ticker's shell and its sleep are held: ${hold.held.join(',')}`);
      assert.deepEqual(hold.squatted, [8123]);
      const a = await tick();
      await sleep(300);
      assert.equal(await tick(), a, 'the ticker did not run while held');
      assert.ok(await answers(s), 'the service answers while the rest is held');
      await hold.release();
      // On a loaded machine the thawed shell may take a while to be scheduled: wait for it, bounded.
      await until('the ticker runs again once released', async () => (await tick()) !== a, 15_000);
    } finally {
      await s.close();
    }
  });

  it("a hold left by a process that died is thawed by cleanup's step (the engine could not stop the container else)", async () => {
    const { s, pid, tick } = await withTickerAndService();
    try {
      assert.ok(await holdNonServices(pid, s.id, []));
      const a = await tick();
      await sleep(300);
      assert.equal(await tick(), a, 'held');
      await thawLeftHold(pid, s.id);
      await until('the ticker runs again', async () => (await tick()) !== a, 15_000);
    } finally {
      await s.close();
    }
  });

  it('a container with processes held can still be closed (cgroup v1 cannot kill a frozen process)', async () => {
    const { s, pid } = await withTickerAndService();
    const hold = await holdNonServices(pid, s.id, []);
    assert.ok(hold && hold.held.length > 0);
    const began = performance.now();
    await s.close();
    const gone = await (docker().docker as Docker)
      .getContainer(s.id)
      .inspect()
      .then(
        () => false,
        (err: { statusCode?: number }) => err.statusCode === 404,
      );
    assert.ok(gone, 'the container was removed');
    assert.ok(performance.now() - began < 8000, 'without waiting for the engine to give up on the kill');
  });
});
