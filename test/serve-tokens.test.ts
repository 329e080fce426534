/**
 * Token exactness across turns: a multi-turn bash-tool episode against an endpoint that returns
 * token ids and logprobs rendered by a chat template (the scripted model server's), in a real
 * sandbox over real HTTP. Joining the episode's turns (observation tokens masked) must give the
 * conversation's token stream exactly: the ids the endpoint would give for the whole final
 * conversation, the policy's own tokens unmasked in order with their logprobs.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { servedModels } from '../src/cli/serve-command.js';
import { joinTurns } from '../src/serve/token-stream.js';
import { tempDir, trivialTask } from './helpers.js';
import { bash } from './support/scripts.js';
import { assistantIds, promptIds, ScriptedModelServer } from './support/scripted-model-server.js';
import { type ServeReply } from './support/serve-call.js';

const KEY_VAR = 'TERMGRADE_TEST_TOKENS_KEY';

describe('serve: token ids across the turns of an episode', () => {
  let server: RunningServer;
  let model: ScriptedModelServer;
  before(async () => {
    process.env[KEY_VAR] = `key-${process.pid}`;
    const templated = (s: ReturnType<typeof bash>) =>
      'reply' in s ? { reply: { ...s.reply, content: 'step', tokenIds: 'template' as const } } : s;
    model = new ScriptedModelServer({
      policy: [
        bash('echo hello > /app/out.txt'),
        bash('cat /app/out.txt; ls /app'),
        bash('echo TERMGRADE_TASK_COMPLETE'),
      ].map(templated),
    });
    const url = await model.start();
    const models = await servedModels({
      model: [`policy@${url}`],
      apiKeyEnv: KEY_VAR,
      requestTimeout: 120,
      modelRetries: 0,
    });
    const task = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n[verifier]\ntimeout_sec = 30\n' });
    server = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([task]),
      dataDir: await tempDir(),
      models,
    });
  });
  after(async () => {
    await server.close();
    await model.close();
  });

  it("joins the turns into the conversation's exact stream, observations masked, the policy's ids and logprobs in order", async () => {
    const res = await fetch(`${server.url}/v1/episodes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${server.token}` },
      body: JSON.stringify({ task: 'hello', agent: 'bash-tool', model: { model: 'policy' }, episode_id: 'tok-1' }),
    });
    const ep = (await res.json()) as ServeReply;
    assert.equal(res.status, 200, JSON.stringify(ep));
    assert.equal(ep.reward, 1);
    assert.equal(ep.turns.length, 3);
    assert.equal(ep.token_stream_problem, null);
    const stream = ep.token_stream as { ids: number[]; loss_mask: number[]; logprobs: Array<number | null> };
    // The whole conversation as the endpoint saw it last, and the reply it gave.
    const last = model.requests.at(-1)!.body;
    const finalReply = assistantIds({
      role: 'assistant',
      content: 'step',
      tool_calls: [
        { function: { name: 'bash', arguments: JSON.stringify({ command: 'echo TERMGRADE_TASK_COMPLETE' }) } },
      ],
    });
    assert.deepEqual(stream.ids, [...promptIds(last.messages), ...finalReply]);
    assert.equal(stream.loss_mask.length, stream.ids.length);
    // The unmasked tokens are exactly the completions, in order, with their logprobs.
    const produced = stream.ids.filter((_, i) => stream.loss_mask[i] === 1);
    assert.deepEqual(
      produced,
      ep.turns.flatMap((t) => t.completion_token_ids!),
    );
    assert.deepEqual(
      stream.logprobs.filter((_, i) => stream.loss_mask[i] === 1),
      ep.turns.flatMap((t) => t.logprobs!),
    );
    assert.ok(stream.logprobs.every((l, i) => (stream.loss_mask[i] === 1) === (l !== null)));
    // Each masked run is what the environment said between two calls: the tool's output is in it.
    const observed = String.fromCodePoint(...stream.ids.filter((id, i) => stream.loss_mask[i] === 0 && id < 200_000));
    assert.match(observed, /hello\nout\.txt/);
  });

  it('refuses to join turns whose prompts do not extend the stream so far (re-tokenised), or that carry no ids', () => {
    const turn = (p: number[], c: number[]) => ({
      prompt_token_ids: p,
      completion_token_ids: c,
      logprobs: c.map(() => -0.5),
    });
    assert.deepEqual(joinTurns([turn([1, 2], [3]), turn([1, 2, 3, 4], [5])]).stream?.loss_mask, [0, 0, 1, 0, 1]);
    assert.match(String(joinTurns([turn([1, 2], [3]), turn([1, 2, 9, 4], [5])]).problem), /turn 2: .* at token 2/);
    assert.match(
      String(
        joinTurns([turn([1, 2], [3]), { prompt_token_ids: null, completion_token_ids: [4], logprobs: null }]).problem,
      ),
      /turn 2: .*no token ids/,
    );
    assert.deepEqual(
      joinTurns([{ prompt_token_ids: [1], completion_token_ids: [2, 3], logprobs: [-1] }]).stream?.logprobs,
      [null, null, null],
      'logprobs that did not come back whole are not invented',
    );
  });
});
