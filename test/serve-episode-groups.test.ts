/**
 * GRPO groups of episodes: `POST /v1/groups` with `episode` runs n bash-tool episodes of one task
 * at once against a served model (a scripted endpoint on loopback whose answer depends on the
 * trainer session id each episode carries), in real sandboxes. The group answers every episode and
 * the rewards in order, is counted per task when all outcomes agree, takes capacity for all n
 * before any starts, and is idempotent by group_id.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { servedModels } from '../src/cli/serve-command.js';
import { tempDir, trivialTask } from './helpers.js';
import { bash } from './support/scripts.js';
import { ScriptedModelServer, type ChatRequest } from './support/scripted-model-server.js';
import { serveCall } from './support/serve-call.js';

const KEY_VAR = 'TERMGRADE_TEST_EPISODE_GROUPS_KEY';

/** Solves the task when the trainer session id ends in "-solve"; otherwise writes the wrong text. */
function policy(_index: number, body: ChatRequest): ReturnType<typeof bash> {
  const acted = body.messages.filter((m) => m.role === 'assistant').length;
  if (acted > 0) return bash('echo TERMGRADE_TASK_COMPLETE');
  const solve = String(body.session_id ?? '').endsWith('-solve');
  return bash(`echo ${solve ? 'hello' : 'goodbye'} > /app/out.txt`);
}

describe('serve: groups of episodes', () => {
  let server: RunningServer;
  let model: ScriptedModelServer;
  let start: () => Promise<RunningServer>;
  const docker = new Docker();
  before(async () => {
    process.env[KEY_VAR] = `key-${process.pid}`;
    model = new ScriptedModelServer({ policy });
    const url = await model.start();
    const models = await servedModels({
      model: [`policy@${url}`],
      apiKeyEnv: KEY_VAR,
      requestTimeout: 120,
      modelRetries: 0,
    });
    const task = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n[verifier]\ntimeout_sec = 30\n' });
    const other = await trivialTask({ 'task.toml': '[task]\nname = "other"\n[verifier]\ntimeout_sec = 30\n' });
    const tasks = await loadServedTasks([task, other]);
    const dataDir = await tempDir();
    start = () => startServer({ provider: new DockerProvider(), tasks, dataDir, models, maxSessions: 3 });
    server = await start();
  });
  after(async () => {
    await server.close();
    await model.close();
  });

  const call = serveCall(() => server);

  const groupsOf = async (policyLabel: string) =>
    (await call('GET', `/v1/curriculum?policy=${policyLabel}`)).json.tasks.find((t) => t.task === 'hello')!.groups;

  it('runs n episodes of one task, answers each and the rewards in order, and counts a group whose outcomes all agree', async () => {
    const episode = { agent: 'bash-tool', model: { model: 'policy' } };
    const mixed = await call('POST', '/v1/groups', {
      task: 'hello',
      n: 3,
      policy: 'grpo',
      group_id: 'g-mixed',
      episode: { ...episode, session_ids: ['t-solve', 't-miss', 't2-solve'] },
    });
    assert.equal(mixed.status, 200, JSON.stringify(mixed.json));
    assert.deepEqual(mixed.json.rewards, [1, 0, 1]);
    assert.deepEqual(mixed.json.statuses, ['graded', 'graded', 'graded']);
    assert.deepEqual(
      mixed.json.episodes.map((e: { episode_id: string; task: string }) => [e.episode_id, e.task]),
      [
        ['g-mixed.0', 'hello'],
        ['g-mixed.1', 'hello'],
        ['g-mixed.2', 'hello'],
      ],
    );
    // Each episode's model calls carried its own trainer session id.
    const sessionsSeen = new Set(model.requests.map((r) => r.body.session_id));
    assert.deepEqual([...sessionsSeen].sort(), ['t-miss', 't-solve', 't2-solve']);
    const view = await call('GET', '/v1/groups/g-mixed');
    assert.deepEqual(
      [
        view.json.kind,
        view.json.done,
        view.json.rewards,
        view.json.episodes.map((e: { episode_id: string }) => e.episode_id),
      ],
      ['episodes', true, [1, 0, 1], ['g-mixed.0', 'g-mixed.1', 'g-mixed.2']],
    );
    assert.deepEqual(await groupsOf('grpo'), { total: 1, all_zero: 0, all_one: 0 });

    const zeros = await call('POST', '/v1/groups', { task: 'hello', n: 2, policy: 'grpo', episode });
    assert.equal(zeros.status, 200, JSON.stringify(zeros.json));
    assert.deepEqual(zeros.json.rewards, [0, 0]);
    assert.match(zeros.json.group_id, /^grp-/);
    assert.deepEqual(await groupsOf('grpo'), { total: 2, all_zero: 1, all_one: 0 });
    assert.equal(server.sessions.live(), 0, 'every slot the groups took was given back');
  });

  it('a repeated call with the same group_id answers from the records and runs nothing again', async () => {
    const before = model.requests.length;
    const again = await call('POST', '/v1/groups', {
      task: 'hello',
      n: 3,
      policy: 'grpo',
      group_id: 'g-mixed',
      episode: { agent: 'bash-tool', model: { model: 'policy' }, session_ids: ['t-solve', 't-miss', 't2-solve'] },
    });
    assert.equal(again.status, 200, JSON.stringify(again.json));
    assert.deepEqual(again.json.rewards, [1, 0, 1]);
    assert.equal(model.requests.length, before, 'no model call: the episodes were answered from their records');
    assert.deepEqual(await groupsOf('grpo'), { total: 2, all_zero: 1, all_one: 0 }, 'not counted twice');
    const other = await call('POST', '/v1/groups', {
      task: 'hello',
      n: 2,
      group_id: 'g-mixed',
      episode: { agent: 'bash-tool', model: { model: 'policy' } },
    });
    assert.equal(other.status, 409, JSON.stringify(other.json));
    const otherTask = await call('POST', '/v1/groups', {
      task: 'not-hello',
      n: 3,
      group_id: 'g-mixed',
      episode: { agent: 'bash-tool', model: { model: 'policy' } },
    });
    assert.equal(otherTask.status, 409, JSON.stringify(otherTask.json));
  });

  it('an episode id answers only for its own task, and a group the server forgot keeps its task from the records', async () => {
    const before = model.requests.length;
    const episode = { agent: 'bash-tool', model: { model: 'policy' } };
    const single = await call('POST', '/v1/episodes', { task: 'other', episode_id: 'g-mixed.0', ...episode });
    assert.equal(single.status, 409, JSON.stringify(single.json));
    assert.match(single.json.error.message, /of task hello, not other/);
    // A new server on the same data folder has no group book: the records still name the task.
    await server.close();
    server = await start();
    const named = await call('POST', '/v1/groups', { task: 'other', n: 3, group_id: 'g-mixed', episode });
    assert.equal(named.status, 409, JSON.stringify(named.json));
    assert.match(named.json.error.message, /group "g-mixed" is of task hello, not other/, 'the group, not an episode');
    for (let i = 0; i < 4; i += 1) {
      const auto = await call('POST', '/v1/groups', { task: 'auto', n: 3, group_id: 'g-mixed', episode });
      assert.equal(auto.status, 200, JSON.stringify(auto.json));
      assert.equal(auto.json.task, 'hello');
      assert.deepEqual(auto.json.rewards, [1, 0, 1]);
    }
    assert.equal(model.requests.length, before, 'nothing ran');
  });

  it('refuses, before any episode starts, a group that does not fit, an unknown model, or ids that do not match n', async () => {
    const before = model.requests.length;
    const episode = { agent: 'bash-tool', model: { model: 'policy' } };
    const big = await call('POST', '/v1/groups', { task: 'hello', n: 4, episode });
    assert.deepEqual([big.status, big.json.error.code], [429, 'over_capacity'], JSON.stringify(big.json));
    const one = await call('POST', '/v1/sessions', { task: 'hello' });
    assert.equal(one.status, 201);
    const full = await call('POST', '/v1/groups', { task: 'hello', n: 3, episode });
    assert.deepEqual([full.status, full.json.error.code], [429, 'over_capacity']);
    await call('DELETE', `/v1/sessions/${one.json.session_id}`);
    const unknown = await call('POST', '/v1/groups', {
      task: 'hello',
      n: 2,
      episode: { ...episode, model: { model: 'x' } },
    });
    assert.equal(unknown.status, 400, JSON.stringify(unknown.json));
    const ids = await call('POST', '/v1/groups', { task: 'hello', n: 2, episode: { ...episode, session_ids: ['a'] } });
    assert.equal(ids.status, 400);
    assert.match(ids.json.error.message, /session_ids/);
    // The oracle runs the task's own solution: a reward no policy earned never reaches the curriculum.
    for (const agent of ['oracle', 'nop']) {
      const r = await call('POST', '/v1/groups', { task: 'hello', n: 2, episode: { ...episode, agent } });
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.match(r.json.error.message, /not policies/);
      const single = await call('POST', '/v1/episodes', { task: 'hello', ...episode, agent });
      assert.equal(single.status, 400, JSON.stringify(single.json));
    }
    const stray = await call('POST', '/v1/groups', { task: 'hello', n: 2, group_id: 'g-x' });
    assert.equal(stray.status, 400);
    assert.equal(model.requests.length, before, 'nothing ran');
    assert.equal(server.sessions.live(), 0);
    const left = await docker.listContainers({ all: true, filters: { label: ['io.termgrade.session'] } });
    assert.equal(left.filter((c) => c.Labels['io.termgrade.session'] === one.json.session_id).length, 0);
  });
});
