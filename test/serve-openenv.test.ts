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
import { type OpenEnvObservationT as Observation } from '../src/serve/openenv-contract.js';
import { tempDir, trivialTask } from './helpers.js';
import { OpenEnvHttpClient, OpenEnvHttpError, OpenEnvWsClient, OpenEnvWsError } from './support/openenv-client.js';

async function refusal(p: Promise<unknown>): Promise<OpenEnvHttpError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OpenEnvHttpError) return err;
    throw err;
  }
  assert.fail('the server accepted it');
}

async function wsRefusal(p: Promise<unknown>): Promise<OpenEnvWsError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OpenEnvWsError) return err;
    throw err;
  }
  assert.fail('the server accepted it');
}

/** Whether the container still exists, waiting up to a minute for it to go (the release runs after the close). */
async function goneWithin(docker: Docker, id: string): Promise<boolean> {
  for (let i = 0; i < 120; i += 1) {
    const left = await docker.listContainers({ all: true, filters: { id: [id] } });
    if (left.length === 0) return true;
    await new Promise((r) => setTimeout(r, 500));
  }
  return false;
}

describe('serve: OpenEnv protocol (real HTTP, real sandboxes)', () => {
  let server: RunningServer;
  let dataDir: string;
  const docker = new Docker();
  const client = (): OpenEnvHttpClient<Observation> =>
    new OpenEnvHttpClient<Observation>(`${server.url}/openenv`, server.token);
  before(async () => {
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n[verifier]\ntimeout_sec = 30\n' });
    dataDir = await tempDir();
    server = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([hello]),
      dataDir,
      maxSessions: 3,
      idleTtlSec: 120,
      seed: 7,
    });
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
    assert.deepEqual(await env.state(), {
      episode_id: env.episode,
      step_count: 0,
      task: 'hello',
      served_by: 'named',
      done: false,
      reward: null,
    });
    const wrote = await env.step({ command: 'echo hello > /app/out.txt; echo wrote; echo oops >&2; exit 3' });
    assert.deepEqual(
      [wrote.observation.output, wrote.observation.exit_code, wrote.done, wrote.reward],
      ['wrote\noops\n', 3, false, null],
    );
    const read = await env.step({ command: 'cat /app/out.txt' });
    assert.equal(
      read.observation.output,
      'hello\n',
      'the second step sees what the first wrote: one sandbox per episode',
    );
    assert.equal((await env.state()).step_count, 2);
    const end = await env.step({ submit: true });
    assert.deepEqual([end.done, end.reward, end.observation.grade!.status], [true, 1, 'graded']);
    assert.deepEqual(end.observation.grade!.tests, [{ name: 't.py::test_hello', status: 'passed' }]);
    const state = await env.state();
    assert.deepEqual([state.step_count, state.done, state.reward], [2, true, 1]);
    assert.equal((await refusal(env.step({ command: 'true' }))).status, 409, 'a done episode takes no more steps');
    const sessionsLeft = await docker.listContainers({ all: true, filters: { label: ['io.termgrade.session'] } });
    const grades = (await readFile(path.join(dataDir, 'grades.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      grades.map((g) => [g.task, g.config, g.reward, g.served_by]),
      [['hello', 'serve/ckpt-1', 1, 'named']],
    );
    assert.ok(
      !sessionsLeft.some(
        (c) => c.Labels['io.termgrade.session'] && grades[0].trial_id === `session:${c.Labels['io.termgrade.session']}`,
      ),
      'the graded sandbox was removed',
    );
  });

  it('"auto" (the default task) comes from the curriculum; max_steps grades after that many commands; the curriculum counts it', async () => {
    const env = client();
    const first = await env.reset({ policy: 'ckpt-2', max_steps: 1 });
    assert.equal(first.observation.task, 'hello');
    assert.equal((await env.state()).served_by, 'auto');
    const only = await env.step({ command: 'echo nope > /app/out.txt' });
    assert.deepEqual(
      [only.done, only.reward, only.observation.output, only.observation.grade!.status],
      [true, 0, '', 'graded'],
    );
    const view = await fetch(`${server.url}/v1/curriculum?policy=ckpt-2`, {
      headers: { authorization: `Bearer ${server.token}` },
    }).then((r) => r.json());
    assert.deepEqual(
      view.tasks.map((t: { task: string; trials: number; successes: number }) => [t.task, t.trials, t.successes]),
      [['hello', 1, 0]],
    );
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
    const noEpisode = await refusal(
      new OpenEnvHttpClient(`${server.url}/openenv`, server.token).step({ command: 'ls' }),
    );
    assert.equal(noEpisode.status, 400);
    assert.match(noEpisode.body.error.message, /episode_id: required/);
    const unknown = await fetch(`${server.url}/openenv/state?episode_id=nobody`, {
      headers: { authorization: `Bearer ${server.token}` },
    });
    assert.equal(unknown.status, 404);
    const anon = await refusal(new OpenEnvHttpClient(`${server.url}/openenv`, 'wrong').reset({ task: 'hello' }));
    assert.equal(anon.status, 401);
    const unknownTask = await refusal(env.reset({ task: 'nope' }));
    assert.equal(unknownTask.status, 404);
    const schema = await env.schema();
    assert.ok(
      JSON.stringify(schema.action).includes('"submit"') && JSON.stringify(schema.action).includes('"command"'),
    );
    assert.ok(schema.state.properties.step_count && schema.observation.properties.output);
    assert.equal((await env.step({ submit: true })).done, true);
  });

  it("over /ws (OpenEnv's stock client route) one connection holds an episode: reset, steps, state, submit with reward 1", async () => {
    const env = await OpenEnvWsClient.connect<Observation>(`${server.url}/openenv`, server.token);
    assert.deepEqual(await env.state(), { episode_id: null, step_count: 0 }, 'no episode before the first reset');
    const first = await env.reset({ task: 'hello', policy: 'ws-1' });
    assert.deepEqual(
      [first.done, first.reward, first.observation.instruction],
      [false, null, 'Write hello into /app/out.txt.\n'],
    );
    const wrote = await env.step({ command: 'echo hello > /app/out.txt; echo wrote; exit 2' });
    assert.deepEqual([wrote.observation.output, wrote.observation.exit_code, wrote.done], ['wrote\n', 2, false]);
    const read = await env.step({ command: 'cat /app/out.txt' });
    assert.equal(
      read.observation.output,
      'hello\n',
      'the second step sees what the first wrote: one sandbox per connection',
    );
    const state = await env.state();
    assert.deepEqual(
      [state.episode_id, state.step_count, state.task, state.done],
      [first.observation.episode_id, 2, 'hello', false],
    );
    const end = await env.step({ submit: true });
    assert.deepEqual([end.done, end.reward, end.observation.grade!.status], [true, 1, 'graded']);
    assert.deepEqual(
      (await wsRefusal(env.step({ command: 'true' }))).data.code,
      'EXECUTION_ERROR',
      'a done episode takes no more steps',
    );
    await env.close();
    const grades = (await readFile(path.join(dataDir, 'grades.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      grades.filter((g) => g.config === 'serve/ws-1').map((g) => [g.task, g.reward, g.served_by]),
      [['hello', 1, 'named']],
    );
  });

  it("/ws answers a bad message with OpenEnv's error shape and keeps the connection", async () => {
    const env = await OpenEnvWsClient.connect<Observation>(`${server.url}/openenv`, server.token);
    const notJson = await env.send('{"type": "reset"');
    assert.equal(notJson.type, 'error');
    assert.equal(notJson.data.code, 'INVALID_JSON');
    assert.match(notJson.data.message, /^Invalid JSON: /);
    assert.deepEqual(await env.send('{"type": "jump"}'), {
      type: 'error',
      data: { message: 'Unknown message type: jump', code: 'UNKNOWN_TYPE' },
    });
    const early = await wsRefusal(env.step({ command: 'ls' }));
    assert.deepEqual(
      [early.data.code, early.data.message],
      ['EXECUTION_ERROR', 'no episode on this connection: send a reset first'],
    );
    const unknownTask = await wsRefusal(env.reset({ task: 'nope' }));
    assert.equal(unknownTask.data.code, 'EXECUTION_ERROR');
    assert.match(unknownTask.data.message, /nope/);
    await env.reset({ task: 'hello' });
    const bad = await wsRefusal(env.step({ cmd: 'ls' }));
    assert.deepEqual([bad.data.code, bad.data.message], ['VALIDATION_ERROR', 'Invalid message']);
    assert.ok(Array.isArray(bad.data.errors) && bad.data.errors.length > 0 && bad.data.errors[0].loc[0] === 'data');
    const extra = await env.send(JSON.stringify({ type: 'state', data: {} }));
    assert.deepEqual(
      [extra.type, extra.data.code],
      ['error', 'VALIDATION_ERROR'],
      "messages admit no extra fields, as OpenEnv's",
    );
    const badReset = await wsRefusal(env.reset({ task: 'hello', max_steps: -1 }));
    assert.equal(badReset.data.code, 'VALIDATION_ERROR');
    assert.equal(
      (await env.step({ command: 'echo still here' })).observation.output,
      'still here\n',
      'the episode survives the bad messages',
    );
    await env.close();
  });

  it('/ws refuses an upgrade with no token, a wrong one, a foreign Host or Origin (as the HTTP face does)', async () => {
    const base = `${server.url}/openenv`;
    const none = await OpenEnvWsClient.connect(base, null).then(
      () => assert.fail('connected with no token'),
      (e: unknown) => e,
    );
    assert.ok(none instanceof OpenEnvHttpError && none.status === 401, String(none));
    assert.equal(none.body.error.code, 'unauthorized');
    const wrong = await OpenEnvWsClient.connect(base, 'wrong').then(
      () => assert.fail('connected with a wrong token'),
      (e: unknown) => e,
    );
    assert.ok(wrong instanceof OpenEnvHttpError && wrong.status === 401, String(wrong));
    const host = await OpenEnvWsClient.connect(base, server.token, { headers: { host: 'evil.example' } }).then(
      () => assert.fail('connected'),
      (e: unknown) => e,
    );
    assert.ok(host instanceof OpenEnvHttpError && host.status === 403, String(host));
    const origin = await OpenEnvWsClient.connect(base, server.token, { origin: 'http://evil.example' }).then(
      () => assert.fail('connected'),
      (e: unknown) => e,
    );
    assert.ok(origin instanceof OpenEnvHttpError && origin.status === 403, String(origin));
  });

  it('/ws: the socket dropped mid-episode removes its sandbox; a second reset on a connection removes the first', async () => {
    const env = await OpenEnvWsClient.connect<Observation>(`${server.url}/openenv`, server.token);
    await env.reset({ task: 'hello' });
    // Docker names a container's host after its id: the sandbox says which container it is.
    const firstId = (await env.step({ command: 'hostname' })).observation.output.trim();
    assert.match(firstId, /^[0-9a-f]{12}$/);
    assert.equal(
      (await docker.listContainers({ all: true, filters: { id: [firstId] } })).length,
      1,
      'the sandbox is a live container',
    );
    await env.reset({ task: 'hello' });
    const secondId = (await env.step({ command: 'hostname' })).observation.output.trim();
    assert.notEqual(secondId, firstId);
    assert.ok(await goneWithin(docker, firstId), 'a reset on the connection removed the episode before it');
    await env.step({ command: 'echo half-way > /app/out.txt' });
    env.socket.terminate();
    assert.ok(await goneWithin(docker, secondId), "the dropped connection's sandbox was removed");
    const health = await fetch(`${server.url}/healthz`).then((r) => r.json());
    assert.equal(health.live, 0, 'no session left alive');
  });
});
