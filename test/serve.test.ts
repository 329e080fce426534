import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { loadAgentModule } from '../src/agent/registry.js';
import { servedModels } from '../src/cli/serve-command.js';
import type { ServedModel } from '../src/serve/models.js';
import { CLI, ROOT, runCli, tempDir, trivialTask } from './helpers.js';
import { rawRequest } from './support/raw-http.js';
import { type ServeReply } from './support/serve-call.js';
import { RecordingListener } from './support/recording-listener.js';
import { bash } from './support/scripts.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';

/** A server as its clients know it: the address and the bearer token (printed, or given). */
interface Target {
  url: string;
  token?: string;
}

async function call(
  target: Target,
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: ServeReply; headers: Headers }> {
  const res = await fetch(`${target.url}${url}`, {
    method,
    headers: {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(target.token ? { authorization: `Bearer ${target.token}` } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : null) as ServeReply, headers: res.headers };
}

describe('termgrade serve (real HTTP, real sandboxes)', () => {
  let server: RunningServer;
  let base: Target;
  let taskDir: string;
  let prepared: Array<Promise<unknown>>;
  before(async () => {
    taskDir = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n[verifier]\ntimeout_sec = 30\n' });
    const broken = await trivialTask({
      'task.toml': '[task]\nname = "broken"\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\nRUN exit 4\n',
    });
    const fresh = await trivialTask({
      'task.toml': '[task]\nname = "fresh"\n',
      'environment/Dockerfile': `FROM debian:bookworm-slim\nRUN echo ${Date.now()}-${process.pid} > /stamp\nWORKDIR /app\n`,
    });
    // Every image a session asked for, to show concurrent sessions share one build.
    const provider = new DockerProvider();
    const prepare = provider.prepare.bind(provider);
    prepared = [];
    provider.prepare = (task, options) => {
      const p = prepare(task, options);
      if (task.name === 'fresh') prepared.push(p);
      return p;
    };
    server = await startServer({
      provider,
      tasks: await loadServedTasks([taskDir, broken, fresh]),
      dataDir: await tempDir(),
      maxSessions: 3,
      idleTtlSec: 60,
    });
    base = server;
  });
  after(() => server.close());

  it('lists its tasks and answers health and metrics', async () => {
    const tasks = await call(base, 'GET', '/v1/tasks');
    assert.equal(tasks.status, 200);
    assert.deepEqual(tasks.json.tasks.map((t: { task: string }) => t.task).sort(), ['broken', 'fresh', 'hello']);
    assert.equal((await call(base, 'GET', '/healthz')).json.ok, true);
    const metrics = await fetch(`${base.url}/metrics`, { headers: { authorization: `Bearer ${base.token}` } }).then(
      (r) => r.text(),
    );
    assert.match(metrics, /^termgrade_sandboxes_live \d+$/m);
  });

  it('a session solves the task: exec, verify (reward 1, acc, tests), then the session is gone', async () => {
    const s = await call(base, 'POST', '/v1/sessions', { task: 'hello' });
    assert.equal(s.status, 201, JSON.stringify(s.json));
    assert.match(s.json.instruction, /hello/);
    assert.equal(s.json.tools[0]!.function.name, 'bash');
    const id = s.json.session_id;
    const ex = await call(base, 'POST', `/v1/sessions/${id}/exec`, {
      command: 'echo hello > /app/out.txt; echo done; exit 3',
    });
    assert.deepEqual(ex.json, { output: 'done\n', exit_code: 3, timed_out: false, truncated: false });
    const slow = await call(base, 'POST', `/v1/sessions/${id}/exec`, { command: 'sleep 30', timeout_sec: 1 });
    assert.equal(slow.json.timed_out, true);
    // A JSON content type with no body at all, as many HTTP clients send a bodiless POST.
    const v = await call(base, 'POST', `/v1/sessions/${id}/verify`, undefined, { 'content-type': 'application/json' });
    assert.equal(v.status, 200, JSON.stringify(v.json));
    assert.equal(v.json.reward, 1);
    assert.equal(v.json.status, 'graded');
    assert.deepEqual(v.json.metrics, { acc: 1, pass_rate: 1, tests_passed: 1, tests_total: 1 });
    assert.deepEqual(v.json.tests, [{ name: 't.py::test_hello', status: 'passed' }]);
    assert.deepEqual(
      (await call(base, 'POST', `/v1/sessions/${id}/verify`)).json,
      v.json,
      'verify again: the same grade',
    );
    const after = await call(base, 'POST', `/v1/sessions/${id}/exec`, { command: 'true' });
    assert.equal(after.status, 410);
    assert.equal(after.json.error.code, 'gone');
    assert.equal((await call(base, 'DELETE', `/v1/sessions/${id}`)).status, 204);
    const twice = await call(base, 'DELETE', `/v1/sessions/${id}`);
    assert.deepEqual(
      [twice.status, twice.json.error.code],
      [410, 'gone'],
      'a second delete is 410, as the README says',
    );
  });

  it('a session that does nothing fails the task, and a deleted session is gone', async () => {
    const id = (await call(base, 'POST', '/v1/sessions', { task: 'hello' })).json.session_id;
    const v = await call(base, 'POST', `/v1/sessions/${id}/verify`);
    assert.equal(v.json.reward, 0);
    assert.equal(v.json.metrics.acc, 0);
    const other = (await call(base, 'POST', '/v1/sessions', { task: 'hello' })).json.session_id;
    assert.equal((await call(base, 'DELETE', `/v1/sessions/${other}`)).status, 204);
    const r = await call(base, 'POST', `/v1/sessions/${other}/exec`, { command: 'true' });
    assert.equal(r.status, 410);
  });

  it('answers every mistake with its error code, as JSON', async () => {
    const cases: Array<[string, string, unknown, number, string]> = [
      ['POST', '/v1/sessions', { task: 'nope' }, 404, 'not_found'],
      ['POST', '/v1/sessions', '{"task": ', 400, 'bad_request'],
      ['POST', '/v1/sessions', { task: 'hello', extra: 1 }, 400, 'bad_request'],
      ['POST', '/v1/sessions/unknown/exec', { command: 'true' }, 404, 'not_found'],
      ['POST', '/v1/sessions/hello/verify', '{"broken', 400, 'bad_request'],
      ['GET', '/v1/nothing', undefined, 404, 'not_found'],
      // A body over serve's 2 MiB limit is refused for its size (413), as a model server would.
      ['POST', '/v1/sessions/unknown/exec', { command: 'x'.repeat(2 * 1024 * 1024 + 1) }, 413, 'too_large'],
    ];
    for (const [method, url, body, status, code] of cases) {
      const r = await call(base, method, url, body);
      assert.equal(r.status, status, `${method} ${url} ${JSON.stringify(body)}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.code, code);
      assert.equal(typeof r.json.error.message, 'string');
    }
  });

  it('a verify already running is a conflict (409), for verify and exec alike', async () => {
    const id = (await call(base, 'POST', '/v1/sessions', { task: 'hello' })).json.session_id;
    const [a, b, c] = await Promise.all([
      call(base, 'POST', `/v1/sessions/${id}/verify`),
      call(base, 'POST', `/v1/sessions/${id}/verify`),
      call(base, 'POST', `/v1/sessions/${id}/exec`, { command: 'true' }),
    ]);
    assert.equal(a.status, 200);
    assert.deepEqual([b.status, b.json.error.code, c.status, c.json.error.code], [409, 'conflict', 409, 'conflict']);
  });

  it('a sandbox that cannot be made is 503 with Retry-After, and takes no capacity', async () => {
    const r = await call(base, 'POST', '/v1/sessions', { task: 'broken' });
    assert.equal(r.status, 503);
    assert.equal(r.json.error.code, 'unavailable');
    assert.match(r.json.error.message, /broken/);
    assert.ok(Number(r.headers.get('retry-after')) > 0);
    assert.equal(server.sessions.live(), 0);
  });

  it('refuses sessions over capacity with 429 and Retry-After, and concurrent sessions share one image build', async () => {
    const made = await Promise.all([1, 2, 3].map(() => call(base, 'POST', '/v1/sessions', { task: 'fresh' })));
    assert.deepEqual(
      made.map((m) => m.status),
      [201, 201, 201],
    );
    const images = (await Promise.all(prepared)) as Array<{ image: string; cached: boolean; durationMs: number }>;
    assert.equal(images.length, 3);
    assert.equal(images[0]!.cached, false, 'the image was built for these sessions');
    assert.ok(
      images.every((p) => p.image === images[0]!.image && p.durationMs === images[0]!.durationMs),
      'one build, shared by all three',
    );
    const over = await call(base, 'POST', '/v1/sessions', { task: 'hello' });
    assert.equal(over.status, 429);
    assert.equal(over.json.error.code, 'over_capacity');
    assert.ok(Number(over.headers.get('retry-after')) > 0);
    for (const m of made) assert.equal((await call(base, 'DELETE', `/v1/sessions/${m.json.session_id}`)).status, 204);
    assert.equal((await call(base, 'POST', '/v1/sessions', { task: 'hello' })).status, 201, 'room again once released');
  });
});

/** GET /metrics as text. */
async function metricsOf(t: Target): Promise<string> {
  return fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${t.token}` } }).then((r) => r.text());
}

describe('serve: episodes against the models the server allows', () => {
  let server: RunningServer;
  let model: ScriptedModelServer;
  let recorder: RecordingListener;
  let recorderUrl: string;
  let parent: string;
  let dataDir: string;
  let modelUrl: string;
  let models: ServedModel[];
  let taskDir: string;
  // The server's own secrets: its bearer token, and the key it sends to its model endpoint.
  const SERVER_TOKEN_VAR = 'TG_TEST_SERVE_TOKEN';
  const MODEL_KEY_VAR = 'TG_TEST_MODEL_KEY';
  process.env[SERVER_TOKEN_VAR] = `server-own-token-${process.pid}-${Date.now()}`;
  process.env[MODEL_KEY_VAR] = `model-key-${process.pid}-${Date.now()}`;
  const serverToken = process.env[SERVER_TOKEN_VAR]!;
  const target = (): Target => ({ url: server.url, token: serverToken });
  const episodeBody = {
    task: 'hello',
    agent: 'bash-tool',
    model: { model: 'good', temperature: 1 },
    session_id: 'trainer-42',
    episode_id: 'ep-1',
    policy: 'step-100',
  };
  before(async () => {
    taskDir = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    parent = await tempDir();
    dataDir = path.join(parent, 'data');
    const withIds = (s: ReturnType<typeof bash>) => ('reply' in s ? { reply: { ...s.reply, tokenIds: true } } : s);
    model = new ScriptedModelServer({
      good: [bash('echo hello > /app/out.txt'), bash('echo TERMGRADE_TASK_COMPLETE')].map(withIds),
      down: [{ fault: 'auth' }],
      writer: [{ reply: { content: '```bash\necho hello > /app/out.txt\n```' } }],
      // An endpoint that takes the request and never answers.
      dead: () => ({ fault: 'hang', ms: 600_000 }),
    });
    modelUrl = await model.start();
    recorder = new RecordingListener();
    recorderUrl = await recorder.start();
    // As `serve --model NAME@URL ... --api-key-env VAR --model-retries 2` gives them.
    models = await servedModels({
      model: ['good', 'down', 'writer', 'dead'].map((n) => `${n}@${modelUrl}`),
      apiKeyEnv: MODEL_KEY_VAR,
      requestTimeout: 600,
      modelRetries: 2,
    });
    server = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([taskDir]),
      dataDir,
      maxSessions: 4,
      token: serverToken,
      models,
    });
  });
  after(async () => {
    await server.close();
    await model.close();
    await recorder.close();
  });

  it("runs a bash-tool episode: reward, messages, per-turn token ids, the session id and the server's key on every call; idempotent by episode_id", async () => {
    const r = await call(target(), 'POST', '/v1/episodes', episodeBody);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.reward, 1);
    assert.equal(r.json.metrics.acc, 1);
    assert.equal(r.json.turns.length, 2);
    for (const t of r.json.turns)
      assert.ok(
        t.completion_token_ids!.length > 0 &&
          t.logprobs!.length === t.completion_token_ids!.length &&
          t.prompt_token_ids!.length > 0,
      );
    assert.ok(
      r.json.messages.some(
        (m: { role: string; tool_calls?: unknown[] }) => m.role === 'assistant' && m.tool_calls?.length,
      ),
    );
    assert.equal(model.requests.length, 2);
    for (const q of model.requests) {
      assert.equal(q.headers['x-session-id'], 'trainer-42');
      assert.equal((q.body as { session_id?: string }).session_id, 'trainer-42');
      assert.equal(q.headers.authorization, `Bearer ${process.env[MODEL_KEY_VAR]}`);
    }
    const again = await call(target(), 'POST', '/v1/episodes', episodeBody);
    assert.deepEqual(again.json, r.json);
    assert.equal(model.requests.length, 2, 'the same episode id ran once');
    assert.match(await metricsOf(target()), /^termgrade_episodes_running 0$/m, 'a finished episode left memory');
    const grades = (await readFile(path.join(dataDir, 'grades.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      grades.map((g) => [g.task, g.config, g.reward]),
      [['hello', 'serve/step-100', 1]],
    );
    // The record reads like any other: stats, and drift by policy label.
    const stats = JSON.parse(
      spawnSync(process.execPath, [CLI, 'stats', path.join(dataDir, 'grades.jsonl'), '--json'], { encoding: 'utf8' })
        .stdout,
    );
    assert.equal(stats.configs[0].config, 'serve/step-100');
    assert.equal(stats.configs[0].pass1.mean, 1);
    const drift = spawnSync(process.execPath, [CLI, 'drift', dataDir, '--json', '--min-trials', '1'], {
      encoding: 'utf8',
    });
    assert.equal(drift.status, 0, drift.stderr);
    assert.deepEqual(
      JSON.parse(drift.stdout).rows.map((r: { policy: string; task: string; verdict: string }) => [
        r.policy,
        r.task,
        r.verdict,
      ]),
      [['step-100', 'hello', 'always_solved']],
    );
  });

  it('answers a finished episode from disk: a new server on the same data folder gives the same result without running it', async () => {
    const before = model.requests.length;
    const recorded = await call(target(), 'POST', '/v1/episodes', episodeBody);
    const next = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([taskDir]),
      dataDir,
      token: serverToken,
      models,
    });
    try {
      const again = await call({ url: next.url, token: serverToken }, 'POST', '/v1/episodes', episodeBody);
      assert.equal(again.status, 200, JSON.stringify(again.json));
      assert.deepEqual(again.json, recorded.json);
      assert.equal(model.requests.length, before, 'nothing ran again');
      assert.match(await metricsOf({ url: next.url, token: serverToken }), /^termgrade_episodes_started_total 0$/m);
    } finally {
      await next.close();
    }
  });

  it('refuses a model, endpoint or key variable the server does not allow (400 naming the allowed set): nothing reaches another address, no server secret leaves', async () => {
    const before = model.requests.length;
    const refused: Array<[unknown, RegExp]> = [
      [{ base_url: recorderUrl, model: 'good' }, /model\.base_url: .*"good" is served at/],
      [{ base_url: recorderUrl }, /model\.base_url: .*served: "good" at .*"down" at/],
      [
        { model: 'good', api_key_env: SERVER_TOKEN_VAR },
        new RegExp(`model\\.api_key_env: .*allowed: ${MODEL_KEY_VAR}`),
      ],
      [{ model: 'good', api_key_env: 'HOME' }, new RegExp(`model\\.api_key_env: .*allowed: ${MODEL_KEY_VAR}`)],
      [{ model: recorderUrl }, /model\.model: .* is not served here \(served: "good", "down", "writer", "dead"\)/],
      [{ model: 'gpt-4o' }, /not served here \(served: "good", "down", "writer", "dead"\)/],
      [{}, /model\.model: name one of the models this server serves: "good", "down", "writer", "dead"/],
      [{ model: 'good', request_timeout_sec: 601 }, /model\.request_timeout_sec: at most 600/],
      [{ model: 'good', max_retries: 3 }, /model\.max_retries: at most 2/],
    ];
    for (const [m, message] of refused) {
      const r = await call(target(), 'POST', '/v1/episodes', { task: 'hello', agent: 'bash-tool', model: m });
      assert.equal(r.status, 400, `${JSON.stringify(m)}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.code, 'bad_request');
      assert.match(r.json.error.message, message);
      assert.ok(
        !r.json.error.message.includes(serverToken) && !r.json.error.message.includes(process.env[MODEL_KEY_VAR]!),
        'no secret in an error',
      );
    }
    // An older client repeating the server's own endpoint and key variable is served.
    const legacy = await call(target(), 'POST', '/v1/episodes', {
      task: 'hello',
      agent: 'bash-tool',
      model: { model: 'down', base_url: modelUrl, api_key_env: MODEL_KEY_VAR },
    });
    assert.equal(legacy.status, 200, JSON.stringify(legacy.json));
    assert.equal(model.requests.length, before + 1, 'only the allowed episode called the model');
    assert.deepEqual(recorder.requests, [], 'nothing reached an address the server does not allow');
    for (const q of model.requests)
      assert.ok(!JSON.stringify(q).includes(serverToken), "the server's own token never left it");
  });

  it('an endpoint that refuses the key is an infrastructure failure: reward null, never 0', async () => {
    const r = await call(target(), 'POST', '/v1/episodes', {
      task: 'hello',
      agent: 'terminus',
      model: { model: 'down' },
    });
    assert.equal(r.status, 200);
    assert.equal(r.json.reward, null);
    assert.equal(r.json.status, 'infra');
    assert.equal(r.json.error_class, 'model_unavailable');
  });

  it('an episode against a dead endpoint is cut short by request_timeout_sec and max_retries', async () => {
    const before = model.requests.filter((q) => q.body.model === 'dead').length;
    // Without them this request waits 600 s per call, three calls: the test would time out.
    const r = await call(target(), 'POST', '/v1/episodes', {
      task: 'hello',
      agent: 'bash-tool',
      model: { model: 'dead', request_timeout_sec: 1, max_retries: 0 },
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual([r.json.reward, r.json.status, r.json.error_class], [null, 'infra', 'model_unavailable']);
    assert.equal(model.requests.filter((q) => q.body.model === 'dead').length - before, 1, 'one request, no retry');
  });

  it('serves a custom agent the server loaded, and refuses an agent it does not know with 400', async () => {
    const unknown = await call(target(), 'POST', '/v1/episodes', {
      task: 'hello',
      agent: 'one-shot',
      model: { model: 'writer' },
    });
    assert.equal(unknown.status, 400);
    assert.match(JSON.stringify(unknown.json), /unknown agent/);
    await loadAgentModule(path.join(ROOT, 'examples', 'agents', 'one-shot.mjs'));
    const r = await call(target(), 'POST', '/v1/episodes', {
      task: 'hello',
      agent: 'one-shot',
      model: { model: 'writer' },
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.reward, 1);
  });

  it('identifiers are names: ".", "..", "a/b" and the like are 400, and nothing next to or inside the data folder is removed', async () => {
    const next = path.join(parent, 'canary-next-to-data.txt');
    const inside = path.join(dataDir, 'canary-inside-data.txt');
    const earlier = path.join(dataDir, 'episodes', 'ep-1', 'episode.json');
    await writeFile(next, 'keep');
    await writeFile(inside, 'keep');
    const earlierText = await readFile(earlier, 'utf8');
    const before = model.requests.length;
    const bad = [
      '.',
      '..',
      'a/b',
      '../data',
      '../..',
      '/tmp',
      'a\\b',
      '',
      '-a',
      '.hidden',
      'a'.repeat(129),
      'a b',
      'a\u0000b',
      '%2e%2e',
    ];
    for (const id of bad) {
      for (const field of ['episode_id', 'session_id']) {
        const r = await call(target(), 'POST', '/v1/episodes', {
          task: 'hello',
          agent: 'bash-tool',
          model: { model: 'good' },
          [field]: id,
        });
        assert.equal(r.status, 400, `${field} ${JSON.stringify(id)}: ${JSON.stringify(r.json)}`);
        assert.match(r.json.error.message, new RegExp(`^${field}: must be a letter or digit`));
      }
    }
    // Session ids in the path, sent as a hostile client would (no normalising of "..").
    for (const p of ['/v1/sessions/%2E%2E', '/v1/sessions/%2e', '/v1/sessions/..%2F..%2Fdata', '/v1/sessions/a%2Fb']) {
      for (const [method, suffix] of [
        ['DELETE', ''],
        ['POST', '/verify'],
      ] as const) {
        const r = await rawRequest(server.url, method, `${p}${suffix}`, { authorization: `Bearer ${serverToken}` });
        assert.equal(r.status, 400, `${method} ${p}${suffix}: ${JSON.stringify(r.json)}`);
        assert.match(r.json.error.message, /session id .* must be a letter or digit/);
      }
    }
    assert.equal(await readFile(next, 'utf8'), 'keep');
    assert.equal(await readFile(inside, 'utf8'), 'keep');
    assert.equal(await readFile(earlier, 'utf8'), earlierText, 'an earlier episode is untouched');
    assert.equal(model.requests.length, before, 'no episode ran');
  });
});

describe('serve: the model configuration', () => {
  it('reads --model-config (TOML or JSON), each model with its own key variable; a bad file or flag is exit 2 naming it', async () => {
    const dir = await tempDir();
    const toml = path.join(dir, 'models.toml');
    await writeFile(
      toml,
      '[[models]]\nname = "policy"\nbase_url = "http://127.0.0.1:8000/v1"\nmodel = "Qwen/Qwen3-8B"\napi_key_env = "VLLM_KEY"\n\n[[models]]\nname = "judge"\nbase_url = "https://api.example/v1"\nmax_retries = 1\n',
    );
    const models = await servedModels({
      modelConfig: toml,
      model: ['extra@http://127.0.0.1:9000/v1'],
      apiKeyEnv: 'OPENAI_API_KEY',
      requestTimeout: 30,
      modelRetries: 4,
    });
    assert.deepEqual(
      models.map((m) => [m.name, m.model, m.base_url, m.api_key_env, m.request_timeout_sec, m.max_retries]),
      [
        ['extra', 'extra', 'http://127.0.0.1:9000/v1', 'OPENAI_API_KEY', 30, 4],
        ['policy', 'Qwen/Qwen3-8B', 'http://127.0.0.1:8000/v1', 'VLLM_KEY', 30, 4],
        ['judge', 'judge', 'https://api.example/v1', 'OPENAI_API_KEY', 30, 1],
      ],
    );
    const json = path.join(dir, 'models.json');
    await writeFile(json, JSON.stringify({ models: [{ name: 'a', base_url: 'file:///etc/passwd' }] }));
    const bad = await runCli(['serve', '--tasks', await trivialTask(), '--model-config', json]);
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, new RegExp(`${json.replace(/[.]/g, '\\.')}: models\\.0\\.base_url: `));
    const twice = await runCli([
      'serve',
      '--tasks',
      await trivialTask(),
      '--model',
      `policy@http://127.0.0.1:1/v1`,
      '--model-config',
      toml,
    ]);
    assert.equal(twice.status, 2, twice.stderr);
    assert.match(twice.stderr, /model "policy" is configured twice/);
    const flag = await runCli(['serve', '--tasks', await trivialTask(), '--model', 'no-url-here']);
    assert.equal(flag.status, 2, flag.stderr);
    assert.match(flag.stderr, /--model no-url-here: expected NAME@URL/);
  });
});

describe('serve: binding and lifecycle', () => {
  it('refuses a non-loopback bind without a token, and checks the token when there is one', async () => {
    const tasks = await loadServedTasks([await trivialTask()]);
    await assert.rejects(
      startServer({ provider: new DockerProvider(), tasks, dataDir: await tempDir(), host: '0.0.0.0' }),
      /needs a bearer token/,
    );
    const server = await startServer({
      provider: new DockerProvider(),
      tasks,
      dataDir: await tempDir(),
      token: 's3cret-token',
    });
    try {
      assert.equal(server.tokenGenerated, false);
      assert.equal((await call(server, 'GET', '/v1/tasks', undefined, { authorization: '' })).status, 401);
      assert.equal((await call(server, 'GET', '/v1/tasks', undefined, { authorization: 'Bearer wrong' })).status, 401);
      assert.equal(
        (await call(server, 'GET', '/v1/tasks', undefined, { authorization: 'Bearer s3cret-token' })).status,
        200,
      );
      assert.equal((await call({ url: server.url }, 'GET', '/healthz')).status, 200, 'health needs no token');
    } finally {
      await server.close();
    }
  });

  it('without a token on loopback, one is generated and required', async () => {
    const server = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([await trivialTask()]),
      dataDir: await tempDir(),
    });
    try {
      assert.equal(server.tokenGenerated, true);
      assert.ok(server.token.length >= 32);
      const open = await call({ url: server.url }, 'GET', '/v1/tasks');
      assert.deepEqual([open.status, open.json.error.code], [401, 'unauthorized']);
      assert.equal((await call(server, 'GET', '/v1/tasks')).status, 200);
    } finally {
      await server.close();
    }
  });

  it('refuses a foreign Host (DNS rebinding) or Origin with 403, even with the token; names given with allowedHosts are served', async () => {
    const server = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([await trivialTask()]),
      dataDir: await tempDir(),
      allowedHosts: ['trainer.example'],
    });
    try {
      const port = new URL(server.url).port;
      const auth = { authorization: `Bearer ${server.token}` };
      const cases: Array<[Record<string, string>, number]> = [
        [{ host: `127.0.0.1:${port}` }, 200],
        [{ host: `localhost:${port}` }, 200],
        [{ host: `trainer.example:${port}` }, 200],
        [{ host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}` }, 200],
        [{ host: `trainer.example`, origin: 'https://trainer.example' }, 200],
        [{ host: `attacker.example:${port}` }, 403],
        [{ host: `127.0.0.1.attacker.example:${port}` }, 403],
        [{ host: `127.0.0.1:${port}`, origin: 'http://attacker.example' }, 403],
        [{ host: `127.0.0.1:${port}`, origin: `http://localhost:${Number(port) + 1}` }, 403],
        [{ host: `127.0.0.1:${port}`, origin: 'null' }, 403],
      ];
      for (const [headers, status] of cases) {
        for (const p of ['/v1/tasks', '/healthz']) {
          const r = await rawRequest(server.url, 'GET', p, { ...auth, ...headers });
          assert.equal(r.status, status, `${p} ${JSON.stringify(headers)}: ${JSON.stringify(r.json)}`);
          if (status === 403) assert.equal(r.json.error.code, 'forbidden');
        }
      }
      const r = await rawRequest(
        server.url,
        'POST',
        '/v1/sessions',
        { ...auth, host: `attacker.example:${port}` },
        JSON.stringify({ task: 'nope' }),
      );
      assert.match(r.json.error.message, /Host "attacker\.example:\d+" is not an address this server answers to/);
    } finally {
      await server.close();
    }
  });

  it('expires an idle session and removes its sandbox', async () => {
    const server = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' })]),
      dataDir: await tempDir(),
      idleTtlSec: 1,
    });
    try {
      const id = (await call(server, 'POST', '/v1/sessions', { task: 'hello' })).json.session_id;
      await new Promise((r) => setTimeout(r, 2500));
      const r = await call(server, 'POST', `/v1/sessions/${id}/exec`, { command: 'true' });
      assert.equal(r.status, 410);
      assert.match(r.json.error.message, /expired/);
      assert.equal(
        (await new Docker().listContainers({ all: true, filters: { label: [`io.termgrade.session=${id}`] } })).length,
        0,
      );
    } finally {
      await server.close();
    }
  });

  it('a killed server leaves no sandbox behind once the next one starts', async () => {
    const taskDir = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const child = spawn(
      process.execPath,
      [CLI, 'serve', '--tasks', taskDir, '--port', '0', '--data-dir', await tempDir()],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const first = await new Promise<string>((resolve, reject) => {
      child.stdout.once('data', (d: Buffer) => resolve(d.toString()));
      child.once('exit', (code) => reject(new Error(`serve exited ${code}`)));
    });
    // Started without --token-env: the line carries the token generated for this run.
    const printed = JSON.parse(first) as { url: string; token: string };
    assert.ok(printed.token.length >= 32, first);
    const id = (await call(printed, 'POST', '/v1/sessions', { task: 'hello' })).json.session_id as string;
    const engine = new Docker();
    const mine = () => engine.listContainers({ all: true, filters: { label: [`io.termgrade.session=${id}`] } });
    assert.equal((await mine()).length, 1);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    assert.equal((await mine()).length, 1, 'a killed server cannot clean up after itself');
    const next = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([taskDir]),
      dataDir: await tempDir(),
    });
    await next.close();
    assert.equal((await mine()).length, 0);
  });

  it('a port already in use is bad input for serve and view: exit 2, the port named, no crash file', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = String((holder.address() as AddressInfo).port);
    const crashFiles = async () => (await readdir(tmpdir())).filter((f) => f.startsWith('termgrade-crash-'));
    const crashesBefore = await crashFiles();
    try {
      const jobs = await tempDir();
      const runs = [
        await runCli(['serve', '--tasks', await trivialTask(), '--port', port, '--data-dir', await tempDir()]),
        await runCli(['view', await trivialTask(), '--port', port, '--jobs-dir', jobs]),
      ];
      for (const r of runs) {
        assert.equal(r.status, 2, r.stderr);
        assert.match(r.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
        assert.doesNotMatch(r.stderr, /internal error/);
      }
      assert.deepEqual(await crashFiles(), crashesBefore, 'no crash file');
    } finally {
      holder.close();
    }
  });
});
