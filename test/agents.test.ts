import assert from 'node:assert/strict';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { createAgent } from '../src/agent/registry.js';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';
import { docker, EXAMPLES, tempDir, trivialTask } from './helpers.js';
import { CONTEXT_FULL_REPLIES } from './support/context-full-replies.js';
import { ScriptedModelServer, type ScriptStep } from './support/scripted-model-server.js';
import { bash, BASH_SOLVES, TERMINUS_SOLVES, turn } from './support/scripts.js';

const servers: ScriptedModelServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

const SECRET = 'sk-live-TESTKEY-0123456789abcdef';
process.env.TG_AGENT_TEST_KEY = SECRET;

async function run(
  agentName: 'terminus' | 'bash-tool',
  taskDir: string,
  script: ScriptStep[],
  model: Record<string, unknown> = {},
) {
  const server = new ScriptedModelServer({ m: script });
  servers.push(server);
  const baseUrl = await server.start();
  const { agent, secrets } = createAgent({
    name: agentName,
    model: { baseUrl, model: 'm', apiKeyEnv: 'TG_AGENT_TEST_KEY', backoffBaseSec: 0.01, ...model },
  });
  const out = await tempDir();
  const result = await runTrial({ task: await loadTask(taskDir), agent, provider: docker(), outDir: out, secrets });
  const dir = path.join(out, result.trialId);
  const read = async (rel: string) => JSON.parse(await readFile(path.join(dir, rel), 'utf8'));
  return { result, dir, read, server };
}

const observations = (messages: Array<{ role: string; content: string | null }>) =>
  messages.filter((m) => m.role === 'user' || m.role === 'tool').map((m) => m.content ?? '');

describe('agents on real containers with a scripted model', () => {
  for (const agentName of ['terminus', 'bash-tool'] as const) {
    for (const task of ['csv-summary', 'log-errors']) {
      it(`${agentName} solves ${task}: reward 1, completed, records written`, async () => {
        const script = (agentName === 'terminus' ? TERMINUS_SOLVES : BASH_SOLVES)[task]!;
        const { result, read } = await run(agentName, path.join(EXAMPLES, task), script);
        assert.equal(result.reward, 1, JSON.stringify(result.error));
        assert.equal(result.exitReason, 'completed');
        assert.equal(result.agent.model, 'm');
        assert.equal(result.turns, script.length);
        const traj = await read('agent/trajectory.json');
        assert.equal(traj.schema_version, 'ATIF-v1.7');
        assert.deepEqual(
          traj.steps.map((s: { step_id: number }) => s.step_id),
          traj.steps.map((_: unknown, i: number) => i + 1),
        );
        assert.equal(traj.final_metrics.total_prompt_tokens, result.tokens!.input);
        assert.equal(traj.final_metrics.total_completion_tokens, result.tokens!.output);
        const messages = await read('agent/messages.json');
        assert.equal(messages[0].role, 'system');
        assert.equal(messages.filter((m: { role: string }) => m.role === 'assistant').length, script.length);
        if (agentName === 'bash-tool') {
          const call = messages.find((m: { tool_calls?: unknown }) => m.tool_calls);
          assert.equal(typeof call.tool_calls[0].function.arguments, 'string');
          assert.equal((await read('agent/tools.json'))[0].function.name, 'bash');
        }
      });
    }
  }

  it('a wrong answer gets 0 with the failing test named', async () => {
    const { result } = await run('bash-tool', path.join(EXAMPLES, 'log-errors'), [
      bash('echo "db 1" > /app/errors.txt'),
      bash('echo TERMGRADE_TASK_COMPLETE'),
    ]);
    assert.equal(result.reward, 0);
    assert.equal(result.error, null);
    const failed = result.tests.filter((t) => t.status === 'failed').map((t) => t.name);
    assert.ok(
      failed.some((n) => n.endsWith('test_counts')),
      failed.join(', '),
    );
  });

  it('terminus: parse errors are re-prompted (nothing run), repairs are warned about, completion needs two confirmations in a row', async () => {
    const good = turn([{ keystrokes: 'echo hello > /app/out.txt\n', duration: 0.2 }]);
    const script: ScriptStep[] = [
      { reply: { content: 'I think I should list the files first.' } },
      { reply: { content: 'Here you go: ' + (good as { reply: { content: string } }).reply.content } },
      turn([], true),
      turn([{ keystrokes: 'cat /app/out.txt\n', duration: 0.2 }]),
      turn([], true),
      turn([], true),
    ];
    const { result, read } = await run('terminus', await trivialTask(), script);
    assert.equal(result.reward, 1);
    assert.equal(result.exitReason, 'completed');
    assert.equal(result.turns, 6);
    const obs = observations(await read('agent/messages.json'));
    assert.match(obs[1]!, /could not be read: no JSON object found/);
    assert.match(obs[2]!, /Warnings: extra text around the JSON object was ignored/);
    assert.match(obs[3]!, /Are you sure\?/);
    assert.doesNotMatch(obs[4]!, /Are you sure\?/);
    assert.match(obs[5]!, /Are you sure\?/);
  });

  it('terminus: too many unreadable replies end the episode, and the sandbox is still graded', async () => {
    const junk: ScriptStep = { reply: { content: 'no json here' } };
    const { result } = await run('terminus', await trivialTask(), [junk, junk, junk, junk, junk]);
    assert.equal(result.exitReason, 'parse_errors');
    assert.equal(result.reward, 0);
  });

  it('terminus: an output cut at the token limit runs nothing and asks for less', async () => {
    const script: ScriptStep[] = [
      {
        reply: {
          content: JSON.stringify({
            analysis: 'x',
            plan: 'y',
            commands: [{ keystrokes: 'echo hello > /app/out.txt\n' }],
            task_complete: false,
          }),
          finishReason: 'length',
        },
      },
      turn([], true),
      turn([], true),
    ];
    const { result, read } = await run('terminus', await trivialTask(), script);
    assert.equal(result.reward, 0, 'the cut reply was not executed');
    assert.match(observations(await read('agent/messages.json'))[1]!, /cut off by the output token limit/);
  });

  it('both agents truncate long output to 5,000 + 5,000 bytes with a note', async () => {
    const long = "for x in A:6000 B:20000 C:6000; do head -c ${x#*:} /dev/zero | tr '\\0' ${x%:*}; done; echo\n";
    const t = await run('terminus', await trivialTask(), [
      turn([{ keystrokes: long, duration: 3 }]),
      turn([], true),
      turn([], true),
    ]);
    const tObs = observations(await t.read('agent/messages.json'))[1]!;
    assert.match(tObs, /\[\.\.\. output truncated: \d+ bytes omitted \.\.\.\]/);
    assert.ok(tObs.length < 10_500, `terminus observation is ${tObs.length} chars`);
    const b = await run('bash-tool', await trivialTask(), [bash(long.trim()), bash('echo TERMGRADE_TASK_COMPLETE')]);
    const bObs = observations(await b.read('agent/messages.json'))[1]!;
    assert.ok(
      bObs.startsWith(`exit code: 0\n${'A'.repeat(5000)}\n[... output truncated: 22001 bytes omitted ...]\n`),
      bObs.slice(0, 100),
    );
    assert.ok(bObs.endsWith(`${'C'.repeat(4999)}\n`));
    assert.match(bObs, /\[\.\.\. output truncated: 22001 bytes omitted \.\.\.\]/);
  });

  it('bash-tool: replies without a tool call are re-prompted, then end the episode', async () => {
    const talk: ScriptStep = { reply: { content: 'Let me think about it.' } };
    const { result, read } = await run('bash-tool', await trivialTask(), [talk, talk, talk]);
    assert.equal(result.exitReason, 'parse_errors');
    assert.match(observations(await read('agent/messages.json'))[1]!, /Use the bash tool/);
  });

  it('an agent timeout ends the run, the partial work is graded and the records are kept', async () => {
    const dir = await trivialTask({ 'task.toml': '[agent]\ntimeout_sec = 3\n[verifier]\ntimeout_sec = 30\n' });
    const script: ScriptStep[] = [
      turn([{ keystrokes: 'echo hello > /app/out.txt\n', duration: 0.3 }]),
      turn([{ keystrokes: 'sleep 100\n', duration: 30 }]),
    ];
    const { result, read } = await run('terminus', dir, script);
    assert.equal(result.exitReason, 'agent_timeout');
    assert.equal(result.error?.class, 'agent_timeout');
    assert.equal(result.reward, 1, 'what was done before the timeout is graded');
    assert.equal(result.turns, 2);
    assert.equal((await read('agent/trajectory.json')).final_metrics.total_steps, 4);
  });

  it('model faults: transient ones are retried inside the trial; an endpoint that fails for good is an infrastructure failure with no reward', async () => {
    const ok = await run('bash-tool', await trivialTask(), [
      { fault: 'rate_limit', retryAfterSec: 0 },
      { fault: 'server_error' },
      { fault: 'malformed' },
      { fault: 'reset' },
      bash('echo hello > /app/out.txt'),
      bash('echo TERMGRADE_TASK_COMPLETE'),
    ]);
    assert.equal(ok.result.reward, 1);
    assert.equal(ok.result.exitReason, 'completed');
    // The work was done, but the endpoint's failure says nothing about the model: no grade at all.
    for (const fault of [{ fault: 'auth' }, { fault: 'not_found' }] as ScriptStep[]) {
      const bad = await run('bash-tool', await trivialTask(), [bash('echo hello > /app/out.txt'), fault]);
      assert.equal(bad.result.exitReason, 'model_error');
      assert.equal(bad.result.error?.class, 'model_unavailable');
      assert.equal(bad.result.reward, null);
      assert.equal(bad.result.phases.verification, undefined);
    }
    const exhausted = await run(
      'terminus',
      await trivialTask(),
      [{ fault: 'rate_limit', retryAfterSec: 0 }, { fault: 'server_error', status: 502 }, { fault: 'reset' }],
      { maxRetries: 2 },
    );
    assert.equal(exhausted.result.error?.class, 'model_unavailable');
    assert.equal(exhausted.result.reward, null);
  });

  it('bounds a huge model reply and refuses malformed usage counts (retried as a malformed response)', async () => {
    const huge = `echo hello > /app/out.txt # ${'x'.repeat(20 * 1024 * 1024)}`;
    const r = await run('bash-tool', await trivialTask(), [
      {
        reply: {
          toolCalls: [{ name: 'bash', arguments: JSON.stringify({ command: 'true' }) }],
          usage: { prompt: -500, completion: 'lots' },
        },
      },
      { reply: { content: huge } },
      bash('echo hello > /app/out.txt'),
      bash('echo TERMGRADE_TASK_COMPLETE'),
    ]);
    assert.equal(r.result.reward, 1);
    assert.ok(Number.isInteger(r.result.tokens!.input) && r.result.tokens!.input >= 0, JSON.stringify(r.result.tokens));
    assert.ok(
      Number.isInteger(r.result.tokens!.output) && r.result.tokens!.output >= 0,
      JSON.stringify(r.result.tokens),
    );
    assert.equal(r.result.turns, 3, 'the reply with malformed usage was retried, not taken as a turn');
    let size = 0;
    const walk = async (d: string): Promise<void> => {
      for (const e of await readdir(d, { withFileTypes: true })) {
        if (e.isDirectory()) await walk(path.join(d, e.name));
        else size += (await stat(path.join(d, e.name))).size;
      }
    };
    await walk(r.dir);
    assert.ok(size < 4 * 1024 * 1024, `trial folder is ${size} bytes`);
    const steps = (await r.read('agent/trajectory.json')).steps as Array<{ extra?: { reply_chars_cut?: number } }>;
    assert.ok(
      steps.some((s) => (s.extra?.reply_chars_cut ?? 0) > 20_000_000),
      'the cut is recorded',
    );
  });

  it("a refusal is the model's own doing: graded", async () => {
    const r = await run('bash-tool', await trivialTask(), [{ fault: 'refusal' }]);
    assert.equal(r.result.error?.class, 'model_error');
    assert.equal(r.result.reward, 0);
  });

  it('a hang past the request timeout is retried', async () => {
    const { result } = await run(
      'bash-tool',
      await trivialTask(),
      [{ fault: 'hang', ms: 10_000 }, bash('echo hello > /app/out.txt'), bash('echo TERMGRADE_TASK_COMPLETE')],
      { requestTimeoutSec: 0.5 },
    );
    assert.equal(result.reward, 1);
  });

  it('terminus: a context-length error makes it summarise and carry on', async () => {
    const script: ScriptStep[] = [
      turn([{ keystrokes: 'echo hello > /app/out.txt\n', duration: 0.2 }]),
      { fault: 'context_length' },
      { reply: { content: 'Summary: wrote hello to /app/out.txt; nothing left to do.' } },
      turn([], true),
      turn([], true),
    ];
    const { result, read, server } = await run('terminus', await trivialTask(), script);
    assert.equal(result.exitReason, 'completed');
    assert.equal(result.reward, 1);
    const traj = await read('agent/trajectory.json');
    assert.ok(traj.steps.some((s: { extra?: { summary?: boolean } }) => s.extra?.summary));
    const afterSummary = server.requests[3]!.body.messages;
    assert.equal(afterSummary.length, 2, 'history replaced by the summary');
    assert.match(String(afterSummary[1]!.content), /Summary: wrote hello/);
  });

  it('keeps vLLM token ids and logprobs per turn in the trajectory', async () => {
    const withIds = (s: ScriptStep): ScriptStep => ('reply' in s ? { reply: { ...s.reply, tokenIds: true } } : s);
    const { read } = await run(
      'bash-tool',
      await trivialTask(),
      [bash('echo hello > /app/out.txt'), bash('echo TERMGRADE_TASK_COMPLETE')].map(withIds),
    );
    const agentSteps = (await read('agent/trajectory.json')).steps.filter(
      (s: { source: string }) => s.source === 'agent',
    );
    assert.ok(
      agentSteps.every(
        (s: { metrics: { completion_token_ids: number[]; logprobs: number[]; prompt_token_ids: number[] } }) =>
          s.metrics.completion_token_ids.length > 0 &&
          s.metrics.logprobs.length === s.metrics.completion_token_ids.length &&
          s.metrics.prompt_token_ids.length > 0,
      ),
    );
  });

  it('writes the API key into no file of the trial, even when the server echoes it back', async () => {
    const { result, dir } = await run('bash-tool', await trivialTask(), [
      bash(`echo ${SECRET} is not for you; echo hello > /app/out.txt`),
      { fault: 'auth' },
    ]);
    assert.equal(result.exitReason, 'model_error');
    assert.ok(!JSON.stringify(result).includes(SECRET), 'the returned record (what the store keeps) is scrubbed too');
    const files: string[] = [];
    const walk = async (d: string): Promise<void> => {
      for (const e of await readdir(d, { withFileTypes: true })) {
        if (e.isDirectory()) await walk(path.join(d, e.name));
        else files.push(path.join(d, e.name));
      }
    };
    await walk(dir);
    assert.ok(files.length >= 4, files.join(' '));
    for (const f of files) assert.ok(!(await readFile(f, 'utf8')).includes(SECRET), `${f} holds the key`);
    assert.match(await readFile(path.join(dir, 'result.json'), 'utf8'), /\[REDACTED\]/);
  });
});

/**
 * A full context is the agent's own limit in every server's words: the agent summarises or ends,
 * and the sandbox is graded (its partial work counts), never an endpoint outage with no reward.
 */
describe("a full context in any server's words is graded", { concurrency: 4 }, () => {
  // One task folder for all (its image is built once); each trial has its own server and folder.
  const task = trivialTask();
  // Each server's words end to end once, the agents taking turns: reading the words is the model
  // client's, the same for both agents (model-client.test reads every reply), and what an agent does
  // once the client says the context is full is its own, so each agent meets half the servers.
  CONTEXT_FULL_REPLIES.forEach((r, i) => {
    const full: ScriptStep = { fault: 'error', status: r.status, body: r.body };
    const agentName = i % 2 === 0 ? 'terminus' : 'bash-tool';
    it(`${agentName}, ${r.server} (HTTP ${r.status}): ends on its context, graded`, async () => {
      // terminus asks for a summary after the first full context; that does not fit either.
      const script: ScriptStep[] =
        agentName === 'terminus'
          ? [turn([{ keystrokes: 'echo hello > /app/out.txt\n', duration: 0.2 }]), full, full]
          : [bash('echo hello > /app/out.txt'), full];
      const { result, server } = await run(agentName, await task, script);
      assert.equal(result.exitReason, 'context_exhausted', JSON.stringify(result.errors));
      assert.ok(
        !result.errors.some((e) => e.class === 'model_unavailable' || e.class === 'model_error'),
        JSON.stringify(result.errors),
      );
      assert.equal(result.reward, 1, 'the work done before the context filled is graded');
      assert.equal(server.requests.length, script.length, 'a full context is not retried');
    });
  });
});
