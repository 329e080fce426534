import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { LABEL_SERVER, LABEL_WARM } from '../src/serve/sessions.js';
import { ServeWarm } from '../src/serve/warm.js';
import { loadTask } from '../src/task/load.js';
import { FakeProvider } from './support/fake-provider.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { TermgradeError } from '../src/util/errors.js';
import { runCli, tempDir, trivialTask, until } from './helpers.js';
import { serveCall, type ServeCall } from './support/serve-call.js';

const engine = new Docker();

/** A JSON call to `server` with its token (test/support/serve-call.ts). */
const call = (server: RunningServer, method: string, url: string, body?: unknown): ReturnType<ServeCall> =>
  serveCall(() => server)(method, url, body);

/** The server's warm figures as /healthz reports them. */
async function health(
  server: RunningServer,
): Promise<{ live: number; warm: { held: number; started_warm: number; started_cold: number; warm_failed: number } }> {
  return (await call(server, 'GET', '/healthz')).json;
}

/** Containers on the engine carrying this server's label (running or not), warm ones only with `warm`. */
async function containersOf(server: RunningServer, warm = false): Promise<Docker.ContainerInfo[]> {
  const label = [`${LABEL_SERVER}=${server.sessions.serverId}`, ...(warm ? [`${LABEL_WARM}=true`] : [])];
  return engine.listContainers({ all: true, filters: { label } });
}

/** Polls `check` until it holds (or fails the test after `ms`, naming what was last seen). */
async function serve(
  tasks: string[],
  warm: number,
  maxSessions: number,
  provider = new DockerProvider(),
): Promise<RunningServer> {
  return startServer({
    provider,
    tasks: await loadServedTasks(tasks),
    dataDir: await tempDir(),
    maxSessions,
    idleTtlSec: 600,
    warm,
  });
}

describe('serve --warm (real HTTP, real sandboxes)', () => {
  it('a warm session answers its first exec, grades, and is fresh: nothing of an earlier session of the task is in it', async () => {
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const server = await serve([hello], 2, 4);
    try {
      await until('2 warm containers running', async () => (await containersOf(server, true)).length === 2);
      const a = await call(server, 'POST', '/v1/sessions', { task: 'hello' });
      assert.equal(a.status, 201, JSON.stringify(a.json));
      const first = await call(server, 'POST', `/v1/sessions/${a.json.session_id}/exec`, {
        command: 'echo hello > /app/out.txt; echo secret > /app/mark; cat /etc/hostname',
      });
      assert.equal(first.json.exit_code, 0, JSON.stringify(first.json));
      const hostA = String(first.json.output).trim();
      const graded = await call(server, 'POST', `/v1/sessions/${a.json.session_id}/verify`);
      assert.equal(graded.json.reward, 1, JSON.stringify(graded.json));
      const b = await call(server, 'POST', '/v1/sessions', { task: 'hello' });
      assert.equal(b.status, 201, JSON.stringify(b.json));
      const seen = await call(server, 'POST', `/v1/sessions/${b.json.session_id}/exec`, {
        command:
          'test -e /app/mark && echo present || echo absent; test -e /app/out.txt && echo out || echo no-out; cat /etc/hostname',
      });
      const [mark, out, hostB] = String(seen.json.output).trim().split('\n');
      assert.equal(mark, 'absent', 'a file the earlier session wrote is not in the new one');
      assert.equal(out, 'no-out');
      assert.notEqual(hostB, hostA, 'another container');
      const h = await health(server);
      assert.equal(h.warm.started_warm, 2, `both sessions were served warm: ${JSON.stringify(h.warm)}`);
      assert.equal(h.warm.started_cold, 0);
    } finally {
      await server.close();
    }
  });

  it('the warm count refills after claims; a group of n claims n warm sandboxes', async () => {
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const server = await serve([hello], 3, 8);
    try {
      await until('3 warm running', async () => (await containersOf(server, true)).length === 3);
      const g = await call(server, 'POST', '/v1/groups', { task: 'hello', n: 3 });
      assert.equal(g.status, 201, JSON.stringify(g.json));
      let h = await health(server);
      assert.equal(h.warm.started_warm, 3, JSON.stringify(h.warm));
      await until('3 warm held again beside 3 live', async () => {
        h = await health(server);
        return h.warm.held === 3 && h.live === 3 && (await containersOf(server, true)).length === 6;
      });
      // The 6 warm-labelled containers are the group's 3 (claimed) and 3 fresh ones kept ready.
      for (const s of g.json.sessions as Array<{ session_id: string }>)
        assert.equal((await call(server, 'DELETE', `/v1/sessions/${s.session_id}`)).status, 204);
      await until('only the 3 ready ones are left', async () => (await containersOf(server)).length === 3);
    } finally {
      await server.close();
    }
  });

  it('warm sandboxes give up their room: a session that needs it is served, not refused (429)', async () => {
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const other = await trivialTask({ 'task.toml': '[task]\nname = "other"\n' });
    const server = await serve([hello, other], 2, 2);
    try {
      await until('2 warm running (one per task)', async () => (await containersOf(server, true)).length === 2);
      const a = await call(server, 'POST', '/v1/sessions', { task: 'hello' });
      assert.equal(a.status, 201, JSON.stringify(a.json));
      let h = await health(server);
      assert.ok(h.live + h.warm.held <= 2, `live + warm within capacity: ${JSON.stringify(h)}`);
      const b = await call(server, 'POST', '/v1/sessions', { task: 'hello' });
      assert.equal(b.status, 201, `the second session is served: ${JSON.stringify(b.json)}`);
      h = await health(server);
      assert.equal(h.live, 2);
      assert.equal(h.warm.held, 0, 'every warm sandbox was given up for the live ones');
      const c = await call(server, 'POST', '/v1/sessions', { task: 'other' });
      assert.equal(c.status, 429, 'with every slot live, the server is full');
      await until('the engine holds the 2 live containers only', async () => (await containersOf(server)).length === 2);
    } finally {
      await server.close();
    }
  });

  it('a warm start that failed: the session starts cold, the client sees no error, the pool holds no dead entry', async () => {
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const provider = new DockerProvider();
    const start = provider.start.bind(provider);
    // Warm starts fail after a while, so the session below claims one still starting.
    provider.start = (task, prepared, options) =>
      options?.labels?.[LABEL_WARM]
        ? new Promise((_, reject) =>
            setTimeout(() => reject(new TermgradeError('environment_error', 'warm start refused (test)')), 4000),
          )
        : start(task, prepared, options);
    const server = await serve([hello], 1, 2, provider);
    try {
      await until('a warm start held', async () => (await health(server)).warm.held === 1);
      const s = await call(server, 'POST', '/v1/sessions', { task: 'hello' });
      assert.equal(s.status, 201, JSON.stringify(s.json));
      const ex = await call(server, 'POST', `/v1/sessions/${s.json.session_id}/exec`, { command: 'echo ok' });
      assert.equal(ex.json.output, 'ok\n');
      const h = await health(server);
      assert.deepEqual(
        [h.warm.warm_failed, h.warm.started_cold, h.warm.started_warm],
        [1, 1, 0],
        JSON.stringify(h.warm),
      );
      // The refill after that claim fails too: it leaves the pool instead of holding a warm slot.
      await until('failed warm starts leave the pool', async () => (await health(server)).warm.held === 0);
    } finally {
      await server.close();
    }
  });

  it('a server stopped while its warm sandboxes start leaves no container of its own', async () => {
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const other = await trivialTask({ 'task.toml': '[task]\nname = "other"\n' });
    // The provider's own sweep on stop (closeAll) turned off: the server's bookkeeping alone must remove everything.
    const provider = new DockerProvider();
    const sweep = provider.closeAll.bind(provider);
    provider.closeAll = async () => undefined;
    try {
      const server = await serve([hello, other], 6, 8, provider);
      // Stopped at once: the warm starts are under way (some containers not yet made by the engine).
      await server.close();
      assert.deepEqual((await containersOf(server)).length, 0, 'stopped while filling');
      // And once more with warm ones ready, claimed by a group, and refills under way.
      const again = await serve([hello, other], 4, 8, provider);
      await until('4 warm running', async () => (await containersOf(again, true)).length === 4);
      assert.equal((await call(again, 'POST', '/v1/groups', { task: 'other', n: 3 })).status, 201);
      await again.close();
      assert.deepEqual((await containersOf(again)).length, 0, 'stopped with sessions live and refills starting');
    } finally {
      await sweep();
    }
  });

  it('the CLI refuses a bad --warm (exit 2, naming the flag)', async () => {
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    for (const [args, msg] of [
      [['--warm', '-1'], /--warm.*whole number/],
      [['--warm', 'two'], /--warm.*whole number/],
      [['--warm', '40', '--max-sessions', '32'], /--warm 40: more than --max-sessions 32/],
    ] as const) {
      const r = await runCli(['serve', '-t', hello, '--port', '0', ...args]);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, msg);
    }
  });
});

describe('serve --warm: which tasks hold warm sandboxes (the plan, on the fake provider)', () => {
  it('a request raises its task to what it took; the least recently asked give theirs up first; room caps the total', async () => {
    const tasks = await Promise.all(
      ['a', 'b', 'c', 'd'].map(async (n) => loadTask(await trivialTask({ 'task.toml': `[task]\nname = "${n}"\n` }))),
    );
    const provider = new FakeProvider();
    const stop = new AbortController();
    let room = 10;
    const warm = new ServeWarm({ provider, size: 4, tasks, signal: stop.signal, labels: {}, room: () => room });
    const held = (): number[] => tasks.map((t) => warm.heldFor(t.name));
    await warm.fill();
    assert.deepEqual(held(), [1, 1, 1, 1], 'the first fill goes round the tasks');
    warm.demand('a', 3);
    warm.plan();
    assert.deepEqual(held(), [3, 0, 0, 1], 'a group of 3 of a: b and c, asked for least recently, give theirs up');
    warm.demand('c', 1);
    warm.plan();
    assert.deepEqual(held(), [3, 0, 1, 0], 'then c: d gives its one up');
    room = 2;
    warm.plan();
    assert.deepEqual(held(), [1, 0, 1, 0], 'room for 2: the most recently asked keep theirs');
    room = 10;
    warm.plan();
    assert.deepEqual(held(), [3, 0, 1, 0], 'room again: refilled');
    warm.demand('b', 9);
    warm.plan();
    assert.deepEqual(held(), [0, 4, 0, 0], 'a demand above the total takes it all, no more');
    stop.abort();
    await warm.closeAll();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(provider.open, 0, 'every warm sandbox removed');
  });
});
