/**
 * Tree-shaped episodes (issue 37): the served model runs to a branch point, the sandbox and the
 * conversation are forked into n branches, each runs to the end and is graded. Against a scripted
 * OpenAI-compatible endpoint on loopback that returns chat-template token ids and logprobs, in
 * real containers over real HTTP; and `run-trial --branch-at` through the real binary.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { servedModels } from '../src/cli/serve-command.js';
import { branchPointOf, TreeAnswerSchema, type TreeAnswer } from '../src/serve/tree.js';
import { treeStreams } from '../src/serve/token-stream.js';
import { gradeOf, UNPROTECTED } from '../src/serve/grade.js';
import { CLI, tempDir, trivialTask } from './helpers.js';
import { bash } from './support/scripts.js';
import { assistantIds, promptIds, ScriptedModelServer, type ChatRequest } from './support/scripted-model-server.js';
import { serveCall } from './support/serve-call.js';

const KEY_VAR = 'TERMGRADE_TEST_TREE_KEY';

/** The command the policy runs at turn k (from 0) of a conversation; `solve` picks the branch's turn. */
function commandAt(acted: number, solve: boolean): string {
  if (acted === 0) return 'echo shared > /app/prefix.txt';
  if (acted === 1) return 'cat /app/prefix.txt';
  // The branch's first own turn reads the prefix's file (the fork carried it) and answers.
  if (acted === 2) return `cat /app/prefix.txt; echo ${solve ? 'hello' : 'goodbye'} > /app/out.txt`;
  return 'echo TERMGRADE_TASK_COMPLETE';
}

const templated = (command: string) => {
  const s = bash(command);
  return 'reply' in s ? { reply: { ...s.reply, content: 'step', tokenIds: 'template' as const } } : s;
};

/** Branch 0 of a tree (its trainer session id ends in ".b0") solves; any other branch does not. */
function bySession(_i: number, body: ChatRequest) {
  const acted = body.messages.filter((m) => m.role === 'assistant').length;
  return templated(commandAt(acted, String(body.session_id ?? '').endsWith('.b0')));
}

/** Without session ids (run-trial): the first branch to ask solves, the next does not. */
function byOrder(): (i: number, body: ChatRequest) => ReturnType<typeof templated> {
  let firstOwn = 0;
  return (_i, body) => {
    const acted = body.messages.filter((m) => m.role === 'assistant').length;
    return templated(commandAt(acted, acted === 2 ? firstOwn++ === 0 : false));
  };
}

interface Stream {
  ids: number[];
  loss_mask: number[];
  logprobs: Array<number | null>;
}

describe("a tree's streams and branch point (pure)", () => {
  const turn = (p: number[], c: number[]) => ({
    prompt_token_ids: p,
    completion_token_ids: c,
    logprobs: c.map(() => -1),
  });
  it('gives each branch only what follows the prefix, and refuses a branch whose prompt rewrote the prefix', () => {
    const t = treeStreams([turn([1], [2])], [[turn([1, 2, 3], [4])], [turn([1, 9, 3], [5])]]);
    assert.deepEqual(t.prefix.stream?.ids, [1, 2]);
    assert.deepEqual(t.branches[0]!.stream, { ids: [3, 4], loss_mask: [0, 1], logprobs: [null, -1] });
    assert.match(String(t.branches[1]!.problem), /turn 2: .* at token 1/);
  });
  it('counts a branch point all-same only when every branch was graded', () => {
    const graded = (r: number) => gradeOf(r, null, [], UNPROTECTED);
    const infra = gradeOf(null, 'environment_error', [], UNPROTECTED);
    assert.deepEqual(
      [branchPointOf(2, ['a', 'b'], [graded(0), graded(0)])].map((p) => [p.all_same, p.all_zero, p.all_one]),
      [[true, true, false]],
    );
    const p = branchPointOf(2, ['a', 'b'], [graded(0), infra]);
    assert.deepEqual([p.graded, p.all_same, p.all_zero, p.all_one], [1, null, null, null]);
  });
});

describe('serve: tree-shaped episodes (real containers, scripted endpoint)', () => {
  let server: RunningServer;
  let model: ScriptedModelServer;
  before(async () => {
    process.env[KEY_VAR] = `key-${process.pid}`;
    model = new ScriptedModelServer({ policy: bySession });
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
      maxSessions: 6,
    });
  });
  after(async () => {
    await server.close();
    await model.close();
  });

  const call = serveCall(() => server);

  /** The requests one trainer session id made, in order. */
  const callsOf = (session: string) => model.requests.filter((r) => r.body.session_id === session).map((r) => r.body);

  /** Checks one tree against the endpoint's own record of what it was sent and what it answered. */
  function checkTree(tree: TreeAnswer, session: string): void {
    assert.equal(tree.kind, 'tree');
    assert.equal(tree.reached, true);
    assert.equal(tree.prefix.turns.length, 2);
    // The prefix ran once: two model calls under the tree's own session id, never replayed per branch.
    const prefixCalls = callsOf(session);
    assert.equal(prefixCalls.length, 2);
    const prefix = tree.prefix.token_stream as Stream;
    const turn2Reply = assistantIds({
      role: 'assistant',
      content: 'step',
      tool_calls: [{ function: { name: 'bash', arguments: JSON.stringify({ command: commandAt(1, false) }) } }],
    });
    assert.deepEqual(prefix.ids, [...promptIds(prefixCalls[1]!.messages), ...turn2Reply]);
    for (const [j, b] of tree.branches.entries()) {
      assert.equal(b.episode_id, `${tree.episode_id}.b${j}`);
      assert.equal(b.token_stream_problem, null);
      const own = b.token_stream as Stream;
      const calls = callsOf(`${session}.b${j}`);
      assert.equal(calls.length, 2, 'each branch made its own two calls, continuing the conversation');
      const finalReply = assistantIds({
        role: 'assistant',
        content: 'step',
        tool_calls: [{ function: { name: 'bash', arguments: JSON.stringify({ command: commandAt(3, false) }) } }],
      });
      // The prefix's stream then the branch's own part is exactly the branch's whole conversation.
      assert.deepEqual([...prefix.ids, ...own.ids], [...promptIds(calls[1]!.messages), ...finalReply]);
      // The prefix's tokens are not repeated in the branch's part (the concatenation above), nor in its turns.
      assert.ok(b.turns.every((t: object) => !('prompt_token_ids' in t)));
      assert.equal(b.turns.length, 2);
      // The policy's own tokens, unmasked, in order with their logprobs: exactly the branch's completions.
      assert.deepEqual(
        own.ids.filter((_, i) => own.loss_mask[i] === 1),
        b.turns.flatMap((t) => t.completion_token_ids ?? []),
      );
      assert.deepEqual(
        own.logprobs.filter((_, i) => own.loss_mask[i] === 1),
        b.turns.flatMap((t) => t.logprobs ?? []),
      );
      assert.ok(own.logprobs.every((l, i) => (own.loss_mask[i] === 1) === (l !== null)));
      // The fork carried the prefix's file: the branch's first command read it.
      assert.match(JSON.stringify(b.messages), /shared/);
    }
    assert.deepEqual(tree.rewards, [1, 0]);
    assert.deepEqual(
      tree.branches.map((b) => [b.reward, b.status]),
      [
        [1, 'graded'],
        [0, 'graded'],
      ],
    );
    assert.deepEqual(tree.branch_points, [
      {
        after_turn: 2,
        episode_ids: [`${tree.episode_id}.b0`, `${tree.episode_id}.b1`],
        rewards: [1, 0],
        statuses: ['graded', 'graded'],
        graded: 2,
        all_same: false,
        all_zero: false,
        all_one: false,
      },
    ]);
  }

  it('a group of tree-shaped episodes: the prefix once, each branch exact, rewards 1 and 0 per tree, every branch graded into the curriculum', async () => {
    const res = await call('POST', '/v1/groups', {
      task: 'hello',
      n: 2,
      policy: 'tree',
      group_id: 'tree-g',
      episode: {
        agent: 'bash-tool',
        model: { model: 'policy' },
        session_ids: ['t0', 't1'],
        branch: { n: 2, at_turn: 2 },
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assert.deepEqual(res.json.rewards, [
      [1, 0],
      [1, 0],
    ]);
    checkTree(TreeAnswerSchema.parse(res.json.episodes[0]), 't0');
    checkTree(TreeAnswerSchema.parse(res.json.episodes[1]), 't1');
    // Each branch is a rollout of the task for the curriculum; the group of trees is one GRPO group.
    const hello = (await call('GET', '/v1/curriculum?policy=tree')).json.tasks.find((t) => t.task === 'hello')!;
    assert.deepEqual([hello.trials, hello.successes], [4, 2]);
    assert.deepEqual(hello.groups, { total: 1, all_zero: 0, all_one: 0 });
    const view = await call('GET', '/v1/groups/tree-g');
    assert.deepEqual([view.json.done, view.json.rewards], [true, [1, 0, 1, 0]]);
    assert.equal(server.sessions.live(), 0, 'every slot the trees took was given back');
  });

  it('a lone tree branching at a command; answered again from its record; an agent that cannot branch is 400', async () => {
    const body = {
      task: 'hello',
      agent: 'bash-tool',
      model: { model: 'policy' },
      session_id: 'lone',
      episode_id: 'lone-tree',
      policy: 'lone',
      branch: { n: 2, at_command: '^cat /app/prefix' },
    };
    const res = await call('POST', '/v1/episodes', body);
    assert.equal(res.status, 200, JSON.stringify(res.json));
    checkTree(TreeAnswerSchema.parse(res.json), 'lone');
    // A lone tree is the group of its branch point.
    const groups = (await call('GET', '/v1/curriculum?policy=lone')).json.tasks[0]!.groups;
    assert.deepEqual(groups, { total: 1, all_zero: 0, all_one: 0 });
    const calls = model.requests.length;
    const again = await call('POST', '/v1/episodes', body);
    assert.deepEqual([again.status, again.json.rewards, model.requests.length], [200, [1, 0], calls]);
    const terminus = await call('POST', '/v1/episodes', { ...body, agent: 'terminus', episode_id: 'no-tree' });
    assert.equal(terminus.status, 400, JSON.stringify(terminus.json));
    assert.match(terminus.json.error.message, /cannot branch/);
    assert.equal(server.sessions.live(), 0);
  });
});

describe('run-trial --branch-at (the real binary, real containers)', () => {
  let model: ScriptedModelServer;
  let url: string;
  before(async () => {
    model = new ScriptedModelServer({ policy: byOrder() });
    url = await model.start();
  });
  after(() => model.close());

  it('forks after turn 2 into 2 branches, grades each as a trial linked to its prefix, prints the rewards', async () => {
    const task = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n[verifier]\ntimeout_sec = 30\n' });
    const out = await tempDir();
    const run = await promisify(execFile)(
      process.execPath,
      [
        CLI,
        'run-trial',
        task,
        '--agent',
        'bash-tool',
        '--model',
        'policy',
        '--base-url',
        url,
        '--api-key-env',
        KEY_VAR,
        '--admission-dir',
        await tempDir(),
        '--out',
        out,
        '--branch-at',
        '2',
        '--branches',
        '2',
      ],
      { env: { ...process.env, [KEY_VAR]: 'k' } },
    ).catch((err: { code?: number; stdout?: string; stderr?: string }) => err);
    const text = `${run.stdout ?? ''}${run.stderr ?? ''}`;
    assert.match(text, /forked after turn 2 into 2 branches/, text);
    assert.match(text, /rewards: (1 0|0 1)\n/, text);
    // Four model calls for the prefix's two turns and each branch's two: the prefix is never replayed.
    assert.equal(model.requests.length, 2 + 2 * 2);
    const folders = (await readdir(out)).sort();
    const prefix = folders.find((f) => !f.includes('.b'))!;
    assert.deepEqual(folders, [prefix, `${prefix}.b0`, `${prefix}.b1`]);
    const tree = JSON.parse(await readFile(path.join(out, prefix, 'tree.json'), 'utf8'));
    assert.deepEqual([tree.branches, tree.prefix_turns, tree.reached], [[`${prefix}.b0`, `${prefix}.b1`], 2, true]);
    await assert.rejects(readFile(path.join(out, prefix, 'result.json')), 'the prefix alone is not a trial');
    const results = await Promise.all(
      [0, 1].map(async (j) => JSON.parse(await readFile(path.join(out, `${prefix}.b${j}`, 'result.json'), 'utf8'))),
    );
    assert.deepEqual(results.map((r) => r.reward).sort(), [0, 1]);
    for (const [j, r] of results.entries()) {
      assert.deepEqual(r.branch, { prefix, index: j, of: 2, atTurn: 2 });
      assert.equal(r.turns, 4, 'a branch trial records its whole path: the prefix and its own turns');
    }
    const wrong = await promisify(execFile)(process.execPath, [CLI, 'run-trial', task, '--branch-at', '2']).catch(
      (err: { code?: number; stderr?: string }) => err,
    );
    assert.equal((wrong as { code?: number }).code, 2);
    assert.match(String((wrong as { stderr?: string }).stderr), /--branch-at and --branches go together/);
  });
});
