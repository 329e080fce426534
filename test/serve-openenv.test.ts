/**
 * serve's OpenEnv face over real HTTP on loopback, with real sandboxes, driven by a client written
 * from OpenEnv's protocol: reset gives the instruction, step runs a shell command and observes its
 * output, submit (or max_steps) grades and ends the episode, state counts steps; the grade goes
 * to grades.jsonl and the live curriculum like any session's.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { tempDir, trivialTask } from './helpers.js';
import { OpenEnvHttpClient, OpenEnvHttpError } from './support/openenv-client.js';

async function refusal(p: Promise<unknown>): Promise<OpenEnvHttpError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OpenEnvHttpError) return err;
    throw err;
  }
  assert.fail('the server accepted it');
}

describe('serve: OpenEnv protocol (real HTTP, real sandboxes)', () => {
  let server: RunningServer;
  let dataDir: string;
  const docker = new Docker();
  const client = (): OpenEnvHttpClient => new OpenEnvHttpClient(`${server.url}/openenv`, server.token);
  before(async () => {
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n[verifier]\ntimeout_sec = 30\n' });
    dataDir = await tempDir();
    server = await startServer({ provider: new DockerProvider(), tasks: await loadServedTasks([hello]), dataDir, maxSessions: 3, idleTtlSec: 120, seed: 7 });
  });
  after(() => server.close());

  it('reset gives the instruction; each step runs a command and observes its output; submit grades and ends the episode', async () => {
    const env = client();
    assert.deepEqual(await env.health(), { status: 'healthy' });
    const first = await env.reset({ task: 'hello', policy: 'ckpt-1' });
    assert.equal(first.done, false);
    assert.equal(first.reward, null);
    assert.equal(first.observation.instruction, 'Write hello into /app/out.txt.\n');
    assert.equal(first.observation.task, 'hello');
    assert.deepEqual(await env.state(), { episode_id: env.episode, step_count: 0, task: 'hello', served_by: 'named', done: false, reward: null });
    const wrote = await env.step({ command: 'echo hello > /app/out.txt; echo wrote; echo oops >&2; exit 3' });
    assert.deepEqual([wrote.observation.output, wrote.observation.exit_code, wrote.done, wrote.reward], ['wrote\noops\n', 3, false, null]);
    const read = await env.step({ command: 'cat /app/out.txt' });
    assert.equal(read.observation.output, 'hello\n', 'the second step sees what the first wrote: one sandbox per episode');
    assert.equal((await env.state()).step_count, 2);
    const end = await env.step({ submit: true });
    assert.deepEqual([end.done, end.reward, end.observation.grade.status], [true, 1, 'graded']);
    assert.deepEqual(end.observation.grade.tests, [{ name: 't.py::test_hello', status: 'passed' }]);
    const state = await env.state();
    assert.deepEqual([state.step_count, state.done, state.reward], [2, true, 1]);
    assert.equal((await refusal(env.step({ command: 'true' }))).status, 409, 'a done episode takes no more steps');
    const sessionsLeft = await docker.listContainers({ all: true, filters: { label: ['io.termgrade.session'] } });
    const grades = (await readFile(path.join(dataDir, 'grades.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(grades.map((g) => [g.task, g.config, g.reward, g.served_by]), [['hello', 'serve/ckpt-1', 1, 'named']]);
    assert.ok(!sessionsLeft.some((c) => c.Labels['io.termgrade.session'] && grades[0].trial_id === `session:${c.Labels['io.termgrade.session']}`), 'the graded sandbox was removed');
  });

  it('"auto" (the default task) comes from the curriculum; max_steps grades after that many commands; the curriculum counts it', async () => {
    const env = client();
    const first = await env.reset({ policy: 'ckpt-2', max_steps: 1 });
    assert.equal(first.observation.task, 'hello');
    assert.equal((await env.state()).served_by, 'auto');
    const only = await env.step({ command: 'echo nope > /app/out.txt' });
    assert.deepEqual([only.done, only.reward, only.observation.output, only.observation.grade.status], [true, 0, '', 'graded']);
    const view = await fetch(`${server.url}/v1/curriculum?policy=ckpt-2`, { headers: { authorization: `Bearer ${server.token}` } }).then((r) => r.json());
    assert.deepEqual(view.tasks.map((t: { task: string; trials: number; successes: number }) => [t.task, t.trials, t.successes]), [['hello', 1, 0]]);
  });

  it('a reset of a running episode id starts over in a fresh sandbox; the earlier one is removed', async () => {
    const env = client();
    await env.reset({ task: 'hello', episode_id: 'trainer-ep-1' });
    assert.equal(env.episode, 'trainer-ep-1');
    await env.step({ command: 'echo hello > /app/out.txt' });
    const again = await env.reset({ task: 'hello', episode_id: 'trainer-ep-1' });
    assert.equal(again.done, false);
    assert.equal((await env.state()).step_count, 0);
    const look = await env.step({ command: 'cat /app/out.txt 2>&1 || true' });
    assert.match(look.observation.output, /No such file/, 'the new episode does not see the old sandbox');
    assert.equal((await env.step({ submit: true })).reward, 0);
    const health = await fetch(`${server.url}/healthz`).then((r) => r.json());
    assert.equal(health.live, 0, 'no sandbox left alive: the reset one was removed, the graded one too');
  });

  it('refuses a bad action (422, as OpenEnv does), a step naming no episode, an unknown one, and a missing token', async () => {
    const env = client();
    await env.reset({ task: 'hello' });
    const bad = await refusal(env.step({ cmd: 'ls' }));
    assert.equal(bad.status, 422);
    assert.ok(Array.isArray(bad.body.detail) && bad.body.detail.length > 0);
    const noEpisode = await refusal(new OpenEnvHttpClient(`${server.url}/openenv`, server.token).step({ command: 'ls' }));
    assert.equal(noEpisode.status, 400);
    assert.match(noEpisode.body.error.message, /episode_id: required/);
    const unknown = await fetch(`${server.url}/openenv/state?episode_id=nobody`, { headers: { authorization: `Bearer ${server.token}` } });
    assert.equal(unknown.status, 404);
    const anon = await refusal(new OpenEnvHttpClient(`${server.url}/openenv`, 'wrong').reset({ task: 'hello' }));
    assert.equal(anon.status, 401);
    const unknownTask = await refusal(env.reset({ task: 'nope' }));
    assert.equal(unknownTask.status, 404);
    const schema = await env.schema();
    assert.ok(JSON.stringify(schema.action).includes('"submit"') && JSON.stringify(schema.action).includes('"command"'));
    assert.ok(schema.state.properties.step_count && schema.observation.properties.output);
    assert.equal((await env.step({ submit: true })).done, true);
  });
});
