import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import { readParquet } from 'parquet-wasm';
import { parse as parseToml } from 'smol-toml';
import { createAgent } from '../src/agent/registry.js';
import { oracleAgent } from '../src/agent/oracle.js';
import { exportSelection, type VerlRow } from '../src/export/tasks.js';
import { exportTrials, type TrialRowOut } from '../src/export/trials.js';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob } from '../src/job/run-job.js';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';
import { docker, tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';
import { bash } from './support/scripts.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';

/** Read back with a different Parquet implementation (parquet-wasm, via Arrow) than the writer. */
async function readRows<Row>(file: string): Promise<Row[]> {
  const table = tableFromIPC(readParquet(new Uint8Array(await readFile(file))).intoIPCStream());
  return table
    .toArray()
    .map((r) => JSON.parse(JSON.stringify(r.toJSON(), (_k, v) => (typeof v === 'bigint' ? Number(v) : v))) as Row);
}

/** A chat message of a trial row, as far as these tests read it (the row types it `Record<string, unknown>`). */
interface RowMessage {
  role: string;
  tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}
type TrialRowRead = Omit<TrialRowOut, 'messages'> & { messages: RowMessage[] };

describe('termgrade export', () => {
  const model = new ScriptedModelServer({
    m: [bash('echo hello > /app/out.txt'), bash('echo TERMGRADE_TASK_COMPLETE')],
  });
  after(() => model.close());

  it('writes trials as a Parquet dataset: record, tests, messages ready for a chat template, ATIF; read back by another implementation', async () => {
    const runs = await tempDir();
    const task = await loadTask(await trivialTask());
    const baseUrl = await model.start();
    const { agent } = createAgent({ name: 'bash-tool', model: { baseUrl, model: 'm' } });
    await runTrial({ task, agent, provider: docker(), outDir: runs });
    await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: runs });
    const out = await tempDir();
    const r = await exportTrials([runs], out);
    assert.equal(r.rows, 2);
    const rows = await readRows<TrialRowRead>(path.join(out, 'data', 'trials.parquet'));
    const tool = rows.find((x) => x.agent === 'bash-tool')!;
    assert.equal(tool.reward, 1);
    assert.equal(tool.status, 'graded');
    assert.deepEqual(tool.tests, [{ name: 't.py::test_hello', status: 'passed', message: null }]);
    assert.deepEqual(
      tool.messages.map((m) => m.role),
      ['system', 'user', 'assistant', 'tool', 'assistant', 'tool'],
    );
    const call = tool.messages[2]!.tool_calls![0]!;
    assert.equal(call.function.name, 'bash');
    assert.equal(typeof call.function.arguments, 'string', 'arguments stay JSON text');
    assert.deepEqual(JSON.parse(call.function.arguments), { command: 'echo hello > /app/out.txt' });
    assert.equal(tool.messages[3]!.tool_call_id, call.id);
    assert.equal(JSON.parse(tool.tools!)[0].function.name, 'bash');
    assert.equal(JSON.parse(tool.trajectory!).schema_version.startsWith('ATIF'), true);
    assert.ok(tool.input_tokens! > 0 && tool.output_tokens! > 0);
    const oracle = rows.find((x) => x.agent === 'oracle')!;
    assert.deepEqual(oracle.messages, []);
    assert.match(await readFile(path.join(out, 'README.md'), 'utf8'), /2 trials of 2 configuration/);
  });

  it('exports a job folder, with trials that have no reward as null (never 0), JSONL on request', async () => {
    const jobsDir = await tempDir();
    const spec = parseSpec(
      {
        name: 'exp',
        tasks: {
          paths: [
            await trivialTask({ 'task.toml': '[task]\nname = "a"\n' }),
            await trivialTask({ 'task.toml': '[task]\nname = "b"\n' }),
          ],
        },
        agents: [{ agent: 'oracle' }],
        k: 2,
        infraRetries: 0,
      },
      'test',
    );
    const opened = await openJob(spec, jobsDir);
    try {
      await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider: new FakeProvider({ startFails: (t) => t.name === 'b' }),
        jobDir: opened.jobDir,
      });
    } finally {
      await opened.close();
    }
    const out = await tempDir();
    await exportTrials([path.join(jobsDir, 'exp')], out);
    const rows = await readRows<TrialRowRead>(path.join(out, 'data', 'trials.parquet'));
    assert.deepEqual(rows.map((x) => [x.task, x.attempt, x.reward, x.status]).sort(), [
      ['a', 0, 1, 'graded'],
      ['a', 1, 1, 'graded'],
      ['b', 0, null, 'infra'],
      ['b', 1, null, 'infra'],
    ]);
    const jsonl = await tempDir();
    await exportTrials([path.join(jobsDir, 'exp')], jsonl, { format: 'jsonl' });
    assert.equal((await readFile(path.join(jsonl, 'data', 'trials.jsonl'), 'utf8')).trim().split('\n').length, 4);
  });

  it("writes a selection as Harbor task folders carrying their rate, and verl's RL rows", async () => {
    const tasksDir = await tempDir();
    for (const name of ['t1', 't2', 't3']) {
      const src = await trivialTask({ 'task.toml': `[task]\nname = "${name}"\n\n[metadata]\ndifficulty = "medium"\n` });
      await (await import('node:fs/promises')).cp(src, path.join(tasksDir, name), { recursive: true });
    }
    const selection = await tempDir();
    await mkdir(selection, { recursive: true });
    await writeFile(
      path.join(selection, 'manifest.json'),
      JSON.stringify({
        model: 'bash-tool/m1',
        training: [
          { task: 't1', trials: 8, successes: 4, rate: 0.5, interval: [0.2, 0.8] },
          { task: 't2', trials: 8, successes: 3, rate: 0.375, interval: [0.12, 0.7] },
        ],
        validation: [{ task: 't3', trials: 8, successes: 2, rate: 0.25, interval: [0.05, 0.6], target: 0.25 }],
      }),
    );
    const out = await tempDir();
    const counts = await exportSelection(selection, [tasksDir], out);
    assert.deepEqual(counts, { train: 2, validation: 1 });
    const toml = parseToml(await readFile(path.join(out, 'train', 't1', 'task.toml'), 'utf8')) as {
      metadata: { difficulty?: unknown; termgrade?: Record<string, unknown> };
    };
    assert.equal(toml.metadata.difficulty, 'medium', 'existing metadata kept');
    assert.deepEqual(
      { ...toml.metadata.termgrade },
      { rate: 0.5, interval: [0.2, 0.8], trials: 8, successes: 4, config: 'bash-tool/m1', split: 'train' },
    );
    await loadTask(path.join(out, 'validation', 't3'));
    const rows = await readRows<VerlRow>(path.join(out, 'rl', 'train.parquet'));
    assert.equal(rows.length, 2);
    assert.deepEqual(rows[0]!.prompt, [{ role: 'user', content: 'Write hello into /app/out.txt.\n' }]);
    assert.equal(rows[0]!.agent_name, 'termgrade_agent');
    assert.deepEqual(rows[0]!.reward_model, { style: 'rule', ground_truth: 't1' });
    assert.equal(rows[0]!.extra_info.rate, 0.5);
    assert.equal(rows[0]!.extra_info.k, 8);
    assert.equal(rows[0]!.extra_info.split, 'train');
    assert.equal(rows[0]!.extra_info.task_dir, path.join(out, 'train', 't1'));
  });
});
