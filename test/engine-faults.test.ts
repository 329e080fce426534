import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type Docker from 'dockerode';
import { loadTask } from '../src/task/load.js';
import type { Sandbox } from '../src/sandbox/sandbox.js';
import type { DockerSandbox } from '../src/sandbox/docker/sandbox.js';
import { watchDisk } from '../src/trial/disk-watch.js';
import { docker, trivialTask } from './helpers.js';

/** What the process writes to stderr while `fn` runs (the logger's human lines go there). */
async function stderrOf(fn: () => Promise<void>): Promise<string> {
  const write = process.stderr.write.bind(process.stderr);
  let seen = '';
  process.stderr.write = ((chunk: string | Uint8Array) => ((seen += String(chunk)), true)) as typeof process.stderr.write;
  try {
    await fn();
  } finally {
    process.stderr.write = write;
  }
  return seen;
}

describe('a passing engine fault is not remembered as an answer', () => {
  it("a failed inspect leaves the sandbox's layers unknown (asked again), logged with its cause", async () => {
    const provider = docker();
    const task = await loadTask(await trivialTask());
    const s = (await provider.start(task, await provider.prepare(task))) as DockerSandbox;
    try {
      const container = (s as unknown as { container: Docker.Container }).container;
      const inspect = container.inspect.bind(container);
      let failOnce = true;
      container.inspect = ((...args: unknown[]) => {
        if (failOnce) {
          failOnce = false;
          return Promise.reject(new Error('engine hiccup: connection reset'));
        }
        return (inspect as (...a: unknown[]) => Promise<unknown>)(...args);
      }) as typeof container.inspect;
      let first: unknown;
      const said = await stderrOf(async () => {
        first = await s.upperLayers();
      });
      assert.equal(first, null, 'while the engine fails, the slower engine paths serve');
      assert.match(said, /could not read a sandbox's layers from the engine .*cause="engine hiccup: connection reset"/);
      const second = await s.upperLayers();
      assert.ok(second && second.upper.length > 0, 'once the engine answers, the layers are read from here again');
    } finally {
      await s.close();
    }
  });

  it("a disk-use reading that fails is logged with its cause, not dropped; the watch never aborts for it", async () => {
    let calls = 0;
    const box = {
      diskUsage: async () => {
        calls++;
        throw new Error('inspect size timed out');
      },
    } as unknown as Sandbox;
    let watch: ReturnType<typeof watchDisk> | null = null;
    const said = await stderrOf(async () => {
      watch = watchDisk(box, 1, 5);
      while (calls < 3) await new Promise((r) => setTimeout(r, 5));
      watch.stop();
    });
    assert.match(said, /could not read a sandbox's disk use.*failures=1 cause="inspect size timed out"/);
    assert.equal(said.match(/could not read a sandbox's disk use/g)?.length, 1, 'a run of failures is said once, then every twelfth');
    assert.equal(watch!.over(), false);
  });
});
