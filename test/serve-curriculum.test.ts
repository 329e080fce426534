/**
 * The live curriculum and GRPO groups over real HTTP on loopback, with real sandboxes: `"task":
 * "auto"` picks from the selection for the policy, every graded rollout updates
 * GET /v1/curriculum, grades record who chose the task; groups start whole, answer their rewards
 * together and are counted when all 0.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { type TaskView } from '../src/serve/curriculum.js';
import { type ServeReply } from './support/serve-call.js';
import { curriculumFlags } from '../src/cli/serve-command.js';
import { appendFile } from 'node:fs/promises';
import { runCli, tempDir, trivialTask } from './helpers.js';

async function call(
  server: RunningServer,
  method: string,
  url: string,
  body?: unknown,
): Promise<{ status: number; json: ServeReply }> {
  const res = await fetch(`${server.url}${url}`, {
    method,
    headers: {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      authorization: `Bearer ${server.token}`,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : null) as ServeReply };
}

describe('serve: live curriculum and groups (real HTTP, real sandboxes)', () => {
  let server: RunningServer;
  let dataDir: string;
  let served: Parameters<typeof startServer>[0]['tasks'];
  const docker = new Docker();
  before(async () => {
    const mid = await trivialTask({ 'task.toml': '[task]\nname = "mid"\n[verifier]\ntimeout_sec = 30\n' });
    const hard = await trivialTask({ 'task.toml': '[task]\nname = "hard"\n[verifier]\ntimeout_sec = 30\n' });
    const held = await trivialTask({ 'task.toml': '[task]\nname = "held"\n[verifier]\ntimeout_sec = 30\n' });
    const selection = await tempDir();
    await writeFile(
      path.join(selection, 'manifest.json'),
      JSON.stringify({
        training: [
          { task: 'mid', trials: 16, successes: 8, rate: 0.5 },
          { task: 'hard', trials: 16, successes: 0, rate: 0 },
        ],
        validation: [{ task: 'held', trials: 16, successes: 6, rate: 0.375 }],
      }),
    );
    dataDir = await tempDir();
    await mkdir(dataDir, { recursive: true });
    // No exploration: every `auto` pick is the curriculum's choice, so the test can say which.
    served = await loadServedTasks([mid, hard, held], selection);
    server = await startServer({
      provider: new DockerProvider(),
      tasks: served,
      dataDir,
      maxSessions: 3,
      idleTtlSec: 120,
      curriculum: { explore: 0 },
      seed: 7,
    });
  });
  after(() => server.close());

  /** A policy's curriculum, by task (the three tasks served here). */
  type ByTask = Record<'mid' | 'hard' | 'held', TaskView>;
  const byTask = (tasks: TaskView[]) => Object.fromEntries(tasks.map((t) => [t.task, t])) as ByTask;
  const view = async (policy: string): Promise<ByTask> =>
    byTask((await call(server, 'GET', `/v1/curriculum?policy=${policy}`)).json.tasks);

  it('shows each task of the selection with its prior posterior and band status', async () => {
    const r = await call(server, 'GET', '/v1/curriculum?policy=ckpt-1');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json.band, [0.25, 0.75]);
    const v = await view('ckpt-1');
    assert.deepEqual(v.mid.posterior, { a: 4.5, b: 4.5, mean: 0.5 });
    assert.equal(v.hard.status, 'out');
    assert.equal(v.mid.status, 'undecided');
    assert.equal(v.held.split, 'validation');
    assert.equal((await call(server, 'GET', '/v1/curriculum?policy=x&other=1')).status, 400);
  });

  it('"task": "auto" serves the task in the band; its graded rollout updates the curriculum and the record', async () => {
    const s = await call(server, 'POST', '/v1/sessions', { task: 'auto', policy: 'ckpt-1' });
    assert.equal(s.status, 201, JSON.stringify(s.json));
    assert.equal(s.json.task, 'mid', 'the out-of-band task is not served');
    assert.equal(s.json.served_by, 'auto');
    await call(server, 'POST', `/v1/sessions/${s.json.session_id}/exec`, { command: 'echo hello > /app/out.txt' });
    const g = await call(server, 'POST', `/v1/sessions/${s.json.session_id}/verify`);
    assert.equal(g.json.reward, 1);
    const v = await view('ckpt-1');
    assert.deepEqual([v.mid.trials, v.mid.successes, v.mid.served], [1, 1, 1]);
    assert.ok(v.mid.posterior.a > 4.5, 'the success moved the posterior');
    assert.equal((await view('ckpt-2')).mid.trials, 0, 'per policy label');
    // A rollout on a task named by the client counts too, and its grade says who chose the task.
    const named = await call(server, 'POST', '/v1/sessions', { task: 'hard', policy: 'ckpt-1' });
    assert.equal(named.json.served_by, 'named');
    await call(server, 'POST', `/v1/sessions/${named.json.session_id}/verify`);
    assert.deepEqual([(await view('ckpt-1')).hard.trials, (await view('ckpt-1')).hard.successes], [1, 0]);
    const lines = (await readFile(path.join(dataDir, 'grades.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.map((l) => [l.task, l.reward, l.served_by]),
      [
        ['mid', 1, 'auto'],
        ['hard', 0, 'named'],
      ],
      'the reward as earned, unfiltered',
    );
    const held = await call(server, 'POST', '/v1/sessions', { task: 'auto', split: 'validation', policy: 'ckpt-1' });
    assert.equal(held.json.task, 'held');
    await call(server, 'DELETE', `/v1/sessions/${held.json.session_id}`);
    assert.equal((await call(server, 'POST', '/v1/sessions', { task: 'auto', split: 'test' })).status, 400);
  });

  it('a group starts n sessions of one task, answers its rewards together and is counted when all 0', async () => {
    const r = await call(server, 'POST', '/v1/groups', { task: 'auto', n: 2, policy: 'grpo' });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    assert.equal(r.json.task, 'mid');
    assert.equal(r.json.sessions.length, 2);
    assert.ok(r.json.sessions.every((s: { task: string }) => s.task === 'mid'));
    const id = r.json.group_id;
    assert.equal((await call(server, 'GET', `/v1/groups/${id}`)).json.done, false);
    for (const s of r.json.sessions) await call(server, 'POST', `/v1/sessions/${s.session_id}/verify`);
    const done = await call(server, 'GET', `/v1/groups/${id}`);
    assert.deepEqual([done.json.done, done.json.rewards, done.json.statuses], [true, [0, 0], ['graded', 'graded']]);
    assert.deepEqual((await view('grpo')).mid.groups, { total: 1, all_zero: 1, all_one: 0 });
    assert.equal((await call(server, 'GET', '/v1/groups/grp-nope')).status, 404);
  });

  it('a group larger than the server is 429 (it never fits here); one that does not fit now is 429, leaving no sandbox behind', async () => {
    const big = await call(server, 'POST', '/v1/groups', { task: 'mid', n: 4 });
    assert.deepEqual([big.status, big.json.error.code], [429, 'over_capacity'], JSON.stringify(big.json));
    assert.match(big.json.error.message, /never fits here/);
    const one = await call(server, 'POST', '/v1/sessions', { task: 'mid' });
    const full = await call(server, 'POST', '/v1/groups', { task: 'mid', n: 3 });
    assert.deepEqual([full.status, full.json.error.code], [429, 'over_capacity']);
    assert.equal(server.sessions.live(), 1);
    await call(server, 'DELETE', `/v1/sessions/${one.json.session_id}`);
    assert.equal(server.sessions.live(), 0);
    assert.equal(
      (await docker.listContainers({ all: true, filters: { label: [`io.termgrade.session=${one.json.session_id}`] } }))
        .length,
      0,
    );
  });

  it("a restart on the same data folder rebuilds each policy's curriculum from grades.jsonl; an unreadable line stops the start", async () => {
    const before = { ckpt: await view('ckpt-1'), grpo: await view('grpo') };
    const keep = (v: ByTask) =>
      Object.fromEntries(Object.entries(v).map(([k, t]) => [k, [t.posterior, t.trials, t.successes, t.status]]));
    const next = await startServer({
      provider: new DockerProvider(),
      tasks: served,
      dataDir,
      curriculum: { explore: 0 },
      seed: 7,
    });
    try {
      const after = async (policy: string) =>
        byTask((await call(next, 'GET', `/v1/curriculum?policy=${policy}`)).json.tasks);
      assert.deepEqual(keep(await after('ckpt-1')), keep(before.ckpt));
      assert.deepEqual(keep(await after('grpo')), keep(before.grpo));
      assert.equal((await after('grpo')).mid.trials, 2);
    } finally {
      await next.close();
    }
    await appendFile(path.join(dataDir, 'grades.jsonl'), '{"task": "mid", "model": nul\n');
    const lines = (await readFile(path.join(dataDir, 'grades.jsonl'), 'utf8')).trim().split('\n').length;
    await assert.rejects(
      startServer({ provider: new DockerProvider(), tasks: served, dataDir }),
      new RegExp(`grades\\.jsonl: line ${lines} is not JSON`),
    );
  });
});

describe("serve: the curriculum's settings on the command line", () => {
  it("reads --band, --explore, --forget and --prior-weight into the curriculum's settings", () => {
    assert.deepEqual(curriculumFlags({ band: '0.2,0.6', explore: '0', forget: '1', priorWeight: '4' }), {
      lo: 0.2,
      hi: 0.6,
      explore: 0,
      decay: 1,
      priorTrials: 4,
    });
    assert.deepEqual(curriculumFlags({ band: '0.3:0.7' }), { lo: 0.3, hi: 0.7 }, 'the separator select takes');
    assert.deepEqual(curriculumFlags({}), {});
  });

  it('refuses bad values with exit 2 and an error naming the flag, before touching the engine', async () => {
    const task = await trivialTask();
    for (const [flag, value, says] of [
      ['--band', '0.8,0.2', /--band 0\.8,0\.2: need 0 <= LO < HI <= 1/],
      ['--band', '0.5', /--band 0\.5: give two rates LO:HI/],
      ['--explore', '1.5', /--explore: /],
      ['--forget', '0', /--forget: /],
      ['--prior-weight', 'lots', /--prior-weight lots: not a number/],
    ] as const) {
      const r = await runCli(['serve', '--tasks', task, flag, value, '--data-dir', await tempDir()]);
      assert.equal(r.status, 2, `${flag} ${value}: ${r.stderr}`);
      assert.match(r.stderr, says);
    }
  });
});
