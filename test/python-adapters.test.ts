import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { readFile } from 'node:fs/promises';
import { ScriptedModelServer } from './support/scripted-model-server.js';
import { ROOT, runCli, tempDir, trivialTask } from './helpers.js';

/** Runs one of test/python's files with the machine's python3; its exit code and output. */
async function python(file: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn('python3', [path.join(ROOT, 'test', 'python', file)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, output };
}

const SOLVE =
  '<tool_call>\n{"name": "bash", "arguments": {"command": "echo hello > /app/out.txt"}}\n</tool_call><|end|>';

/** The Python client and verl loop (integrations/) against a live server, run by the machine's python3. */
describe('python adapters against termgrade serve', () => {
  let server: RunningServer;
  let dataDir: string;
  const model = new ScriptedModelServer({
    solver: [{ reply: { content: SOLVE } }, { reply: { content: 'Done.<|end|>' } }],
    'solver-again': [{ reply: { content: SOLVE } }, { reply: { content: 'Done.<|end|>' } }],
    quitter: [{ reply: { content: 'I give up.<|end|>' } }],
  });
  let modelUrl: string;
  before(async () => {
    modelUrl = await model.start();
    dataDir = await tempDir();
    const task = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    server = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([task]),
      dataDir,
      maxSessions: 4,
    });
  });
  after(async () => {
    await server.close();
    await model.close();
  });

  it('the client and the verl agent loop pass their tests, a curriculum group graded 1 and 0 with its label', async () => {
    const { code, output } = await python('test_adapter.py', {
      TERMGRADE_URL: server.url,
      TERMGRADE_TOKEN: server.token,
      SCRIPTED_MODEL_URL: modelUrl,
    });
    assert.equal(code, 0, output);
    assert.match(output, /python adapter tests: 14 ok of 14/);
    const grades = (await readFile(path.join(dataDir, 'grades.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { model?: string; reward?: number | null; group_id?: string | null });
    // the group's two members and the third rollout the loop ran outside the group, all labelled
    const labelled = grades.filter((g) => g.model === 'e2e/ckpt-5');
    assert.deepEqual(labelled.map((g) => g.reward).sort(), [0, 1, 1], JSON.stringify(grades));
    assert.deepEqual(
      labelled.map((g) => g.group_id ?? null).sort(),
      [null, 'uid-e2e-1', 'uid-e2e-1'],
      JSON.stringify(labelled),
    );
    // drift reads the label: the checkpoint's rollouts are its own row, apart from the other policies'
    const drift = await runCli(['drift', dataDir, '--json', '--min-trials', '1']);
    assert.equal(drift.status, 0, drift.stderr);
    const rows = (JSON.parse(drift.stdout) as { rows: { policy: string; task: string; n: number; c: number }[] }).rows;
    const mine = rows.filter((r) => r.policy === 'e2e/ckpt-5');
    assert.deepEqual(
      mine.map((r) => [r.task, r.n, r.c]),
      [['hello', 3, 2]],
      JSON.stringify(rows),
    );
    assert.ok(
      rows.some((r) => r.policy !== 'e2e/ckpt-5'),
      'the other tests graded under other labels',
    );
  });

  it("a verl step with failed rollouts merges, trains only on graded rows, and the README command passes verl's checks", async () => {
    for (const [file, summary] of [
      ['test_verl_training.py', /verl training tests: 17 ok of 17/],
      ['test_verl_config.py', /verl config tests: 6 ok of 6/],
    ] as const) {
      const { code, output } = await python(file, {});
      assert.equal(code, 0, output);
      assert.match(output, summary);
    }
  });
});
