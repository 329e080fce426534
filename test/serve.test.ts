import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { loadAgentModule } from '../src/agent/registry.js';
import { CLI, ROOT, tempDir, trivialTask } from './helpers.js';
import { bash } from './support/scripts.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';

async function call(base: string, method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any; headers: Headers }> {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null, headers: res.headers };
}

describe('termgrade serve (real HTTP, real sandboxes)', () => {
  let server: RunningServer;
  let base: string;
  let taskDir: string;
  let prepared: Array<Promise<unknown>>;
  before(async () => {
    taskDir = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n[verifier]\ntimeout_sec = 30\n' });
    const broken = await trivialTask({ 'task.toml': '[task]\nname = "broken"\n', 'environment/Dockerfile': 'FROM debian:bookworm-slim\nRUN exit 4\n' });
    const fresh = await trivialTask({ 'task.toml': '[task]\nname = "fresh"\n', 'environment/Dockerfile': `FROM debian:bookworm-slim\nRUN echo ${Date.now()}-${process.pid} > /stamp\nWORKDIR /app\n` });
    // Every image a session asked for, to show concurrent sessions share one build.
    const provider = new DockerProvider();
    const prepare = provider.prepare.bind(provider);
    prepared = [];
    provider.prepare = (task, options) => {
      const p = prepare(task, options);
      if (task.name === 'fresh') prepared.push(p);
      return p;
    };
    server = await startServer({ provider, tasks: await loadServedTasks([taskDir, broken, fresh]), dataDir: await tempDir(), maxSessions: 3, idleTtlSec: 60 });
    base = server.url;
  });
  after(() => server.close());

  it('lists its tasks and answers health and metrics', async () => {
    const tasks = await call(base, 'GET', '/v1/tasks');
    assert.equal(tasks.status, 200);
    assert.deepEqual(tasks.json.tasks.map((t: { task: string }) => t.task).sort(), ['broken', 'fresh', 'hello']);
    assert.equal((await call(base, 'GET', '/healthz')).json.ok, true);
    const metrics = await fetch(`${base}/metrics`).then((r) => r.text());
    assert.match(metrics, /^termgrade_sandboxes_live \d+$/m);
  });

  it('a session solves the task: exec, verify (reward 1, acc, tests), then the session is gone', async () => {
    const s = await call(base, 'POST', '/v1/sessions', { task: 'hello' });
    assert.equal(s.status, 201, JSON.stringify(s.json));
    assert.match(s.json.instruction, /hello/);
    assert.equal(s.json.tools[0].function.name, 'bash');
    const id = s.json.session_id;
    const ex = await call(base, 'POST', `/v1/sessions/${id}/exec`, { command: 'echo hello > /app/out.txt; echo done; exit 3' });
    assert.deepEqual(ex.json, { output: 'done\n', exit_code: 3, timed_out: false, truncated: false });
    const slow = await call(base, 'POST', `/v1/sessions/${id}/exec`, { command: 'sleep 30', timeout_sec: 1 });
    assert.equal(slow.json.timed_out, true);
    const v = await call(base, 'POST', `/v1/sessions/${id}/verify`);
    assert.equal(v.status, 200);
    assert.equal(v.json.reward, 1);
    assert.equal(v.json.status, 'graded');
    assert.deepEqual(v.json.metrics, { acc: 1, pass_rate: 1, tests_passed: 1, tests_total: 1 });
    assert.deepEqual(v.json.tests, [{ name: 't.py::test_hello', status: 'passed' }]);
    assert.deepEqual((await call(base, 'POST', `/v1/sessions/${id}/verify`)).json, v.json, 'verify again: the same grade');
    const after = await call(base, 'POST', `/v1/sessions/${id}/exec`, { command: 'true' });
    assert.equal(after.status, 410);
    assert.equal(after.json.error.code, 'gone');
    assert.equal((await call(base, 'DELETE', `/v1/sessions/${id}`)).status, 204);
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
      ['GET', '/v1/nothing', undefined, 404, 'not_found'],
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
    const [a, b, c] = await Promise.all([call(base, 'POST', `/v1/sessions/${id}/verify`), call(base, 'POST', `/v1/sessions/${id}/verify`), call(base, 'POST', `/v1/sessions/${id}/exec`, { command: 'true' })]);
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
    assert.deepEqual(made.map((m) => m.status), [201, 201, 201]);
    const images = (await Promise.all(prepared)) as Array<{ image: string; cached: boolean; durationMs: number }>;
    assert.equal(images.length, 3);
    assert.equal(images[0]!.cached, false, 'the image was built for these sessions');
    assert.ok(images.every((p) => p.image === images[0]!.image && p.durationMs === images[0]!.durationMs), 'one build, shared by all three');
    const over = await call(base, 'POST', '/v1/sessions', { task: 'hello' });
    assert.equal(over.status, 429);
    assert.equal(over.json.error.code, 'over_capacity');
    assert.ok(Number(over.headers.get('retry-after')) > 0);
    for (const m of made) assert.equal((await call(base, 'DELETE', `/v1/sessions/${m.json.session_id}`)).status, 204);
    assert.equal((await call(base, 'POST', '/v1/sessions', { task: 'hello' })).status, 201, 'room again once released');
  });
});

describe('serve: episodes against a scripted model endpoint', () => {
  let server: RunningServer;
  let model: ScriptedModelServer;
  let dataDir: string;
  let baseUrl: string;
  before(async () => {
    const taskDir = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    dataDir = await tempDir();
    server = await startServer({ provider: new DockerProvider(), tasks: await loadServedTasks([taskDir]), dataDir, maxSessions: 4 });
    const withIds = (s: ReturnType<typeof bash>) => ('reply' in s ? { reply: { ...s.reply, tokenIds: true } } : s);
    model = new ScriptedModelServer({ good: [bash('echo hello > /app/out.txt'), bash('echo TERMGRADE_TASK_COMPLETE')].map(withIds), down: [{ fault: 'auth' }] });
    baseUrl = await model.start();
  });
  after(async () => {
    await server.close();
    await model.close();
  });

  it('runs a bash-tool episode: reward, messages, per-turn token ids, the session id on every call; idempotent by episode_id', async () => {
    const body = { task: 'hello', agent: 'bash-tool', model: { base_url: baseUrl, model: 'good', temperature: 1 }, session_id: 'trainer-42', episode_id: 'ep-1', policy: 'step-100' };
    const r = await call(server.url, 'POST', '/v1/episodes', body);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.reward, 1);
    assert.equal(r.json.metrics.acc, 1);
    assert.equal(r.json.turns.length, 2);
    for (const t of r.json.turns) assert.ok(t.completion_token_ids.length > 0 && t.logprobs.length === t.completion_token_ids.length && t.prompt_token_ids.length > 0);
    assert.ok(r.json.messages.some((m: { role: string; tool_calls?: unknown[] }) => m.role === 'assistant' && m.tool_calls?.length));
    assert.equal(model.requests.length, 2);
    for (const q of model.requests) {
      assert.equal(q.headers['x-session-id'], 'trainer-42');
      assert.equal((q.body as { session_id?: string }).session_id, 'trainer-42');
    }
    const again = await call(server.url, 'POST', '/v1/episodes', body);
    assert.deepEqual(again.json, r.json);
    assert.equal(model.requests.length, 2, 'the same episode id ran once');
    const grades = (await readFile(path.join(dataDir, 'grades.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(grades.map((g) => [g.task, g.config, g.reward]), [['hello', 'serve/step-100', 1]]);
    // The record reads like any other: stats, and drift by policy label.
    const stats = JSON.parse(spawnSync(process.execPath, [CLI, 'stats', path.join(dataDir, 'grades.jsonl'), '--json'], { encoding: 'utf8' }).stdout);
    assert.equal(stats.configs[0].config, 'serve/step-100');
    assert.equal(stats.configs[0].pass1.mean, 1);
    const drift = spawnSync(process.execPath, [CLI, 'drift', dataDir, '--json', '--min-trials', '1'], { encoding: 'utf8' });
    assert.equal(drift.status, 0, drift.stderr);
    assert.deepEqual(JSON.parse(drift.stdout).rows.map((r: { policy: string; task: string; verdict: string }) => [r.policy, r.task, r.verdict]), [['step-100', 'hello', 'always_solved']]);
  });

  it('an endpoint that refuses the key is an infrastructure failure: reward null, never 0', async () => {
    const r = await call(server.url, 'POST', '/v1/episodes', { task: 'hello', agent: 'terminus', model: { base_url: baseUrl, model: 'down' } });
    assert.equal(r.status, 200);
    assert.equal(r.json.reward, null);
    assert.equal(r.json.status, 'infra');
    assert.equal(r.json.error_class, 'model_unavailable');
  });

  it('serves a custom agent the server loaded, and refuses an agent it does not know with 400', async () => {
    const unknown = await call(server.url, 'POST', '/v1/episodes', { task: 'hello', agent: 'one-shot', model: { base_url: baseUrl, model: 'good' } });
    assert.equal(unknown.status, 400);
    assert.match(JSON.stringify(unknown.json), /unknown agent/);
    await loadAgentModule(path.join(ROOT, 'examples', 'agents', 'one-shot.mjs'));
    const script = new ScriptedModelServer({ writer: [{ reply: { content: '```bash\necho hello > /app/out.txt\n```' } }] });
    const url = await script.start();
    try {
      const r = await call(server.url, 'POST', '/v1/episodes', { task: 'hello', agent: 'one-shot', model: { base_url: url, model: 'writer' } });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.reward, 1);
    } finally {
      await script.close();
    }
  });
});

describe('serve: binding and lifecycle', () => {
  it('refuses a non-loopback bind without a token, and checks the token when there is one', async () => {
    const tasks = await loadServedTasks([await trivialTask()]);
    await assert.rejects(startServer({ provider: new DockerProvider(), tasks, dataDir: await tempDir(), host: '0.0.0.0' }), /needs a bearer token/);
    const server = await startServer({ provider: new DockerProvider(), tasks, dataDir: await tempDir(), token: 's3cret-token' });
    try {
      assert.equal((await call(server.url, 'GET', '/v1/tasks')).status, 401);
      assert.equal((await call(server.url, 'GET', '/v1/tasks', undefined, { authorization: 'Bearer wrong' })).status, 401);
      assert.equal((await call(server.url, 'GET', '/v1/tasks', undefined, { authorization: 'Bearer s3cret-token' })).status, 200);
      assert.equal((await call(server.url, 'GET', '/healthz')).status, 200, 'health needs no token');
    } finally {
      await server.close();
    }
  });

  it('expires an idle session and removes its sandbox', async () => {
    const server = await startServer({ provider: new DockerProvider(), tasks: await loadServedTasks([await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' })]), dataDir: await tempDir(), idleTtlSec: 1 });
    try {
      const id = (await call(server.url, 'POST', '/v1/sessions', { task: 'hello' })).json.session_id;
      await new Promise((r) => setTimeout(r, 2500));
      const r = await call(server.url, 'POST', `/v1/sessions/${id}/exec`, { command: 'true' });
      assert.equal(r.status, 410);
      assert.match(r.json.error.message, /expired/);
      assert.equal((await new Docker().listContainers({ all: true, filters: { label: [`io.termgrade.session=${id}`] } })).length, 0);
    } finally {
      await server.close();
    }
  });

  it('a killed server leaves no sandbox behind once the next one starts', async () => {
    const taskDir = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const child = spawn(process.execPath, [CLI, 'serve', '--tasks', taskDir, '--port', '0', '--data-dir', await tempDir()], { stdio: ['ignore', 'pipe', 'pipe'] });
    const first = await new Promise<string>((resolve, reject) => {
      child.stdout.once('data', (d: Buffer) => resolve(d.toString()));
      child.once('exit', (code) => reject(new Error(`serve exited ${code}`)));
    });
    const url = JSON.parse(first).url as string;
    const id = (await call(url, 'POST', '/v1/sessions', { task: 'hello' })).json.session_id as string;
    const engine = new Docker();
    const mine = () => engine.listContainers({ all: true, filters: { label: [`io.termgrade.session=${id}`] } });
    assert.equal((await mine()).length, 1);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    assert.equal((await mine()).length, 1, 'a killed server cannot clean up after itself');
    const next = await startServer({ provider: new DockerProvider(), tasks: await loadServedTasks([taskDir]), dataDir: await tempDir() });
    await next.close();
    assert.equal((await mine()).length, 0);
  });
});
