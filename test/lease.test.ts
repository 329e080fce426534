import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import Docker from 'dockerode';
import { LABEL_OWNER, ownerId } from '../src/sandbox/docker/labels.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { acquireSandbox } from '../src/sandbox/lease.js';
import type { Sandbox, SandboxProvider } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import { CancelledError, TermgradeError } from '../src/util/errors.js';
import { sleep } from '../src/util/time.js';
import { trivialTask, until } from './helpers.js';

/**
 * acquireSandbox, the one owner of a sandbox's start, on the real Docker engine: a start abandoned
 * at its deadline or by a cancel while the engine is starting leaves no container, and a lease
 * closes once however often it is closed.
 */

const engine = new Docker();
const provider = new DockerProvider();
after(() => provider.closeAll());

/** This test's containers, by the label each acquire gives its own. */
const containers = async (mark: string): Promise<number> =>
  (
    await engine.listContainers({
      all: true,
      filters: { label: [`${LABEL_OWNER}=${ownerId()}`, `io.termgrade.lease-test=${mark}`] },
    })
  ).length;

/** The real provider, but the engine's answer to a start arrives `lateMs` after the container runs, whatever the signal. */
function slowToAnswer(lateMs: number): SandboxProvider & { answered: () => boolean } {
  let answered = false;
  const slow = Object.create(provider) as SandboxProvider & { answered: () => boolean };
  slow.start = async (task, prepared, options = {}): Promise<Sandbox> => {
    const box = await provider.start(task, prepared, { ...options, signal: undefined });
    await sleep(lateMs);
    answered = true;
    return box;
  };
  slow.answered = () => answered;
  return slow;
}

describe('acquireSandbox on Docker', () => {
  const mark = (what: string): string => `${what}-${process.pid}-${Date.now()}`;

  it("a start past its deadline fails as the environment's, and the container that arrives late is removed", async () => {
    const task = await loadTask(await trivialTask());
    const label = mark('deadline');
    const slow = slowToAnswer(3000);
    await assert.rejects(
      acquireSandbox({ provider: slow, task, deadlineMs: 800, labels: { 'io.termgrade.lease-test': label } }),
      (err: unknown) =>
        err instanceof TermgradeError &&
        err.code === 'environment_error' &&
        /did not start within 0\.8 s/.test(err.message),
    );
    assert.equal(slow.answered(), false, 'abandoned at the deadline, before the engine answered');
    await until(
      'the engine to make the container (the case this test is about)',
      async () => (await containers(label)) === 1,
    );
    await until('the late answer', () => slow.answered());
    await until('the late container to be removed', async () => (await containers(label)) === 0);
  });

  it('a cancel while the engine is starting rejects at once and leaves no container', async () => {
    const task = await loadTask(await trivialTask());
    const label = mark('cancel');
    const slow = slowToAnswer(3000);
    const stop = new AbortController();
    const acquiring = acquireSandbox({
      provider: slow,
      task,
      signal: stop.signal,
      labels: { 'io.termgrade.lease-test': label },
    });
    await until('the engine to make the container', async () => (await containers(label)) === 1);
    stop.abort();
    await assert.rejects(acquiring, CancelledError);
    assert.equal(slow.answered(), false);
    await until('the late answer', () => slow.answered());
    await until('the container to be removed', async () => (await containers(label)) === 0);
  });

  it('a cancel handed to the engine itself (no slow answer) leaves no container either', async () => {
    const task = await loadTask(await trivialTask());
    const label = mark('engine-cancel');
    await provider.prepare(task); // the build is not what is timed
    for (const afterMs of [0, 30, 150]) {
      const stop = new AbortController();
      const acquiring = acquireSandbox({
        provider,
        task,
        signal: stop.signal,
        labels: { 'io.termgrade.lease-test': label },
      });
      setTimeout(() => stop.abort(), afterMs);
      await acquiring.then(
        (lease) => lease.close(),
        (err: unknown) => assert.ok(err instanceof CancelledError, String(err)),
      );
    }
    await until('every container to be removed', async () => (await containers(label)) === 0);
  });

  it('a lease closes once: twice, at once and again, is harmless, and the container is gone', async () => {
    const task = await loadTask(await trivialTask());
    const label = mark('close');
    const lease = await acquireSandbox({ provider, task, labels: { 'io.termgrade.lease-test': label } });
    assert.equal((await lease.sandbox.exec('ls -d /logs/agent /logs/verifier')).exitCode, 0, 'handed over ready');
    assert.equal(await containers(label), 1);
    await Promise.all([lease.close(), lease.close()]);
    await lease.close();
    assert.equal(await containers(label), 0);
    await assert.rejects(lease.sandbox.exec('true'));
  });
});
