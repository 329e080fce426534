import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ModelConfigSchema, type ModelConfigInput } from '../src/model/config.js';
import { ModelClient } from '../src/model/client.js';
import { ModelError } from '../src/model/errors.js';
import { CONTEXT_FULL_REPLIES, NOT_CONTEXT_FULL } from './support/context-full-replies.js';
import { ScriptedModelServer, type ScriptStep } from './support/scripted-model-server.js';

const servers: ScriptedModelServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

async function setup(steps: ScriptStep[], config: Partial<ModelConfigInput> = {}) {
  const server = new ScriptedModelServer({ m: steps });
  servers.push(server);
  const baseUrl = await server.start();
  const client = new ModelClient(
    ModelConfigSchema.parse({ baseUrl, model: 'm', backoffBaseSec: 0.01, backoffMaxSec: 0.05, ...config }),
    { random: () => 0.5 },
  );
  return { server, client };
}

const ok: ScriptStep = { reply: { content: 'fine', usage: { prompt: 100, completion: 10, cached: 40 } } };
const ask = (client: ModelClient) => client.complete({ messages: [{ role: 'user', content: 'hi' }] });

describe('model client', () => {
  it('sends the model, sampling and extra body fields, and reads usage and cost', async () => {
    process.env.TG_TEST_KEY = 'sk-test-secret-123';
    const { server, client } = await setup([ok], {
      apiKeyEnv: 'TG_TEST_KEY',
      temperature: 0.7,
      topP: 0.9,
      maxTokens: 256,
      extraBody: { top_k: 20 },
      price: { input: 1, cachedInput: 0.5, output: 2 },
    });
    const c = await ask(client);
    assert.equal(c.content, 'fine');
    assert.deepEqual(c.usage, { prompt: 100, cached: 40, completion: 10 });
    assert.ok(Math.abs(c.costUsd! - (60 * 1 + 40 * 0.5 + 10 * 2) / 1e6) < 1e-15);
    const body = server.requests[0]!.body;
    assert.equal(body.temperature, 0.7);
    assert.equal(body.top_p, 0.9);
    assert.equal(body.max_tokens, 256);
    assert.equal(body.top_k, 20);
    assert.equal(server.requests[0]!.headers.authorization, 'Bearer sk-test-secret-123');
  });

  it('retries a 429, honouring Retry-After', async () => {
    const { server, client } = await setup([{ fault: 'rate_limit', retryAfterSec: 0 }, ok]);
    const c = await ask(client);
    assert.equal(c.content, 'fine');
    assert.deepEqual(c.retries, [{ kind: 'rate_limit', waitMs: 0 }]);
    assert.equal(server.requests.length, 2);
  });

  it('retries 500 and 503 with backoff', async () => {
    const { client } = await setup([{ fault: 'server_error' }, { fault: 'server_error', status: 503 }, ok]);
    const c = await ask(client);
    assert.deepEqual(
      c.retries.map((r) => r.kind),
      ['transient', 'overloaded'],
    );
    assert.ok(c.retries.every((r) => r.waitMs > 0 && r.waitMs <= 50));
  });

  it('gives up on a hang at the client timeout, and retries', async () => {
    const { client } = await setup([{ fault: 'hang', ms: 5000 }, ok], { requestTimeoutSec: 0.3 });
    const started = Date.now();
    const c = await ask(client);
    assert.equal(c.retries[0]!.kind, 'timeout');
    assert.ok(Date.now() - started < 4000);
  });

  it('retries a malformed body', async () => {
    const { client } = await setup([{ fault: 'malformed' }, ok]);
    assert.equal((await ask(client)).retries[0]!.kind, 'transient');
  });

  it('stops after the retry bound, saying how many attempts it made', async () => {
    const { server, client } = await setup(
      [{ fault: 'server_error' }, { fault: 'server_error' }, { fault: 'server_error' }, ok],
      { maxRetries: 2 },
    );
    await assert.rejects(
      ask(client),
      (e: ModelError) => e.kind === 'transient' && e.attempts === 3 && /after 3 attempts/.test(e.message),
    );
    assert.equal(server.requests.length, 3);
  });

  for (const [fault, kind] of [
    ['context_length', 'context_length'],
    ['auth', 'auth'],
    ['not_found', 'not_found'],
  ] as const) {
    it(`does not retry ${fault}`, async () => {
      const { server, client } = await setup([{ fault }, ok]);
      await assert.rejects(ask(client), (e: ModelError) => e.kind === kind);
      assert.equal(server.requests.length, 1);
    });
  }

  for (const r of CONTEXT_FULL_REPLIES) {
    it(`reads a full context in ${r.server}'s words (HTTP ${r.status}) as context_length, not retried, its words kept`, async () => {
      const { server, client } = await setup([{ fault: 'error', status: r.status, body: r.body }, ok]);
      await assert.rejects(ask(client), (e: ModelError) => {
        assert.equal(e.kind, 'context_length', e.message);
        assert.equal(e.status, r.status);
        assert.doesNotMatch(e.message, /no body/, "the server's words were lost");
        return true;
      });
      assert.equal(server.requests.length, 1);
    });
  }

  for (const r of NOT_CONTEXT_FULL) {
    it(`keeps ${r.server} (HTTP ${r.status}) as ${r.kind}`, async () => {
      const { client } = await setup([{ fault: 'error', status: r.status, body: r.body }, ok], { maxRetries: 0 });
      await assert.rejects(ask(client), (e: ModelError) => e.kind === r.kind);
    });
  }

  it('treats a refusal as fatal', async () => {
    const { client } = await setup([{ reply: { content: '', finishReason: 'content_filter' } }]);
    await assert.rejects(ask(client), (e: ModelError) => e.kind === 'refusal');
  });

  it('keeps token ids and logprobs when the server returns them', async () => {
    const { client } = await setup([
      { reply: { content: 'abc', tokenIds: true, usage: { prompt: 3, completion: 2 } } },
    ]);
    const c = await ask(client);
    assert.deepEqual(c.promptTokenIds, [1000, 1001, 1002]);
    assert.deepEqual(c.completionTokenIds, [5000, 5001]);
    assert.deepEqual(c.logprobs, [-0.01, -0.02]);
  });

  it('returns tool calls with their JSON arguments as text', async () => {
    const { client } = await setup([
      { reply: { toolCalls: [{ name: 'bash', arguments: '{"command":"ls"}', id: 'call_1' }] } },
    ]);
    const c = await ask(client);
    assert.deepEqual(c.toolCalls, [{ id: 'call_1', name: 'bash', arguments: '{"command":"ls"}' }]);
    assert.equal(c.finishReason, 'tool_calls');
  });
});
