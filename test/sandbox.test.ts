import assert from 'node:assert/strict';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LABEL_MANAGED, LABEL_OWNER, ownerId } from '../src/sandbox/docker/labels.js';
import type { Sandbox } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import type { Task } from '../src/task/task.js';
import { docker, tempDir, trivialTask } from './helpers.js';

/**
 * The Sandbox contract, run against the Docker backend with real containers. A new backend
 * runs this same suite.
 */
for (const via of ['helper shell', 'engine exec'] as const) describe(`docker sandbox (commands via ${via})`, () => {
  let task: Task;
  before(() => {
    if (via === 'engine exec') process.env.TERMGRADE_EXEC_VIA = 'engine';
  });
  after(() => {
    delete process.env.TERMGRADE_EXEC_VIA;
  });
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

  it('runs commands with exit code, stdout, stderr, env and cwd', async () => {
    await withSandbox(async (s) => {
      const r = await s.exec('echo out; echo err >&2; echo "$GREETING from $(pwd)"; exit 3', { env: { GREETING: 'hi' }, cwd: '/tmp' });
      assert.equal(r.exitCode, 3);
      assert.equal(r.stdout.text, 'out\nhi from /tmp\n');
      assert.equal(r.stderr.text, 'err\n');
      assert.equal(r.timedOut, false);
      const argv = await s.exec(['printf', '%s|', 'a b', '$HOME']);
      assert.equal(argv.stdout.text, 'a b|$HOME|');
    });
  });

  it('returns 50 MB of output bounded: head and tail kept, the rest counted', async () => {
    await withSandbox(async (s) => {
      const r = await s.exec('head -c 52428800 /dev/zero | tr "\\0" x; echo END', { maxOutputBytes: 65536 });
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout.totalBytes, 52428800 + 4);
      assert.equal(r.stdout.truncatedBytes, 52428804 - 65536);
      assert.ok(r.stdout.text.startsWith('xxxx'));
      assert.ok(r.stdout.text.endsWith('xxEND\n'));
      assert.match(r.stdout.text, /\[\.\.\. 52363268 bytes omitted \.\.\.\]/);
      assert.ok(r.stdout.text.length < 70000);
    });
  });

  it('returns when the command exits although a background child keeps its stdout, and the child lives on', async () => {
    await withSandbox(async (s) => {
      const r = await s.exec('(while true; do echo tick; sleep 0.2; done) & echo $! > /tmp/ticker.pid; echo started', { timeoutSec: 20 });
      assert.equal(r.exitCode, 0);
      assert.equal(r.timedOut, false);
      assert.ok(r.durationMs < 15000, `took ${r.durationMs} ms`);
      assert.match(r.stdout.text, /started/);
      await new Promise((res) => setTimeout(res, 3000));
      const alive = await s.exec('kill -0 "$(cat /tmp/ticker.pid)" && echo alive');
      assert.equal(alive.stdout.text, 'alive\n', 'the background process must survive the exec');
    });
  });

  it('kills the whole process group on timeout and still returns the output so far', async () => {
    await withSandbox(async (s) => {
      const r = await s.exec('echo before; sleep 300 & sleep 300; echo never', { timeoutSec: 1 });
      assert.equal(r.timedOut, true);
      assert.equal(r.exitCode, null);
      assert.equal(r.stdout.text, 'before\n');
      const left = await s.exec('ls /proc | grep -E "^[0-9]+$" | while read p; do cat /proc/$p/cmdline 2>/dev/null | tr "\\0" " "; echo; done | grep -c "^sleep 300" || true');
      assert.equal(left.stdout.text.trim(), '0', 'no sleep survives the timeout');
    });
  });

  it('holds a fork bomb at the process limit, and the sandbox still tears down', async () => {
    const provider = docker();
    const s = await provider.start(task, await provider.prepare(task));
    try {
      const r = await s.exec('bomb() { bomb | bomb & }; bomb; sleep 5', { timeoutSec: 4 });
      assert.equal(r.timedOut || r.exitCode !== null, true);
      const stats = (await provider.docker.getContainer(s.id).stats({ stream: false })) as { pids_stats?: { current?: number; limit?: number } };
      assert.ok((stats.pids_stats?.current ?? 0) <= 128, `pids ${stats.pids_stats?.current} over the limit`);
      assert.equal(stats.pids_stats?.limit, 128);
    } finally {
      await s.close();
    }
    await assert.rejects(provider.docker.getContainer(s.id).inspect(), /no such container/i);
  });

  it('has no network but loopback', async () => {
    await withSandbox(async (s) => {
      const r = await s.exec('cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "');
      assert.deepEqual(r.stdout.text.trim().split('\n'), ['lo']);
    });
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

  it('copies folders in and out, and refuses nothing but stays inside the host folder', async () => {
    await withSandbox(async (s) => {
      const src = await tempDir();
      await mkdir(path.join(src, 'sub'), { recursive: true });
      await writeFile(path.join(src, 'a.txt'), 'alpha');
      await writeFile(path.join(src, 'sub', 'b.sh'), '#!/bin/sh\necho b\n', { mode: 0o755 });
      await s.copyIn(src, '/data/in');
      const r = await s.exec('cat /data/in/a.txt; /data/in/sub/b.sh');
      assert.equal(r.stdout.text, 'alphab\n');
      await s.putFiles([{ path: '/data/out/x.txt', content: 'x' }, { path: '/data/out/deep/y.txt', content: 'y' }]);
      await s.exec('ln -s /etc/passwd /data/out/link');
      const dest = await tempDir();
      await s.copyOut('/data/out', dest);
      assert.equal(await readFile(path.join(dest, 'x.txt'), 'utf8'), 'x');
      assert.equal(await readFile(path.join(dest, 'deep', 'y.txt'), 'utf8'), 'y');
      await assert.rejects(readFile(path.join(dest, 'link'), 'utf8'), 'links are not extracted');
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
    const fresh = await loadTask(await trivialTask({ 'environment/Dockerfile': `FROM debian:bookworm-slim\nRUN echo ${Date.now()}-${process.pid} > /stamp\n` }));
    const provider = docker();
    const [a, b] = await Promise.all([provider.prepare(fresh), provider.prepare(fresh)]);
    assert.equal(a, b, 'one build shared by both callers');
    assert.equal(a.cached, false);
    const again = await provider.prepare(fresh);
    assert.equal(again.cached, true);
    assert.equal(again.image, a.image);
    await provider.docker.getImage(a.image).remove({ force: true });
  });

  it('reports a failed build with its log', async () => {
    const bad = await loadTask(await trivialTask({ 'environment/Dockerfile': 'FROM debian:bookworm-slim\nRUN echo broken-step && exit 7\n' }));
    await assert.rejects(docker().prepare(bad), (err: Error & { code?: string; log?: string }) => {
      assert.equal(err.code, 'build_failed');
      assert.match(err.message, /returned a non-zero code: 7/);
      assert.match(err.log ?? '', /broken-step/);
      return true;
    });
  });
});
