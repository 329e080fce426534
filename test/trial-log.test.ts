import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Agent } from '../src/agent/agent.js';
import { oracleAgent } from '../src/agent/oracle.js';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';
import { docker, tempDir, trivialTask } from './helpers.js';

const linesOf = async (trialDir: string): Promise<Array<Record<string, unknown>>> =>
  (await readFile(path.join(trialDir, 'trial.log'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe("a trial's own log (trial.log)", () => {
  it('says each phase with its time, and the end with the reward', async () => {
    const task = await loadTask(await trivialTask());
    const outDir = await tempDir();
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir });
    assert.equal(r.reward, 1);
    const lines = await linesOf(path.join(outDir, r.trialId));
    const messages = lines.map((l) => l.message);
    assert.equal(messages[0], 'trial opened');
    for (const phase of ['environment_setup', 'agent_setup', 'agent_run', 'verification', 'teardown']) {
      assert.ok(messages.includes(`${phase} started`), `${phase} started: ${messages.join(' | ')}`);
      const ended = lines.find((l) => l.message === `${phase} ended`);
      assert.ok(ended && typeof ended.duration_ms === 'number', `${phase} ended with its time`);
    }
    assert.deepEqual(
      lines.filter((l) => l.message === 'trial ended').map((l) => [l.reward, l.error]),
      [[1, null]],
    );
  });

  it('says every error with its class and phase, secrets scrubbed', async () => {
    const task = await loadTask(await trivialTask());
    const outDir = await tempDir();
    const secret = 'sk-trial-log-secret-123456';
    const crashing: Agent = {
      name: 'crashing',
      model: null,
      setup: async () => {},
      run: async () => {
        throw new Error(`the endpoint refused key ${secret}`);
      },
    };
    const r = await runTrial({ task, agent: crashing, provider: docker(), outDir, secrets: [secret] });
    const text = await readFile(path.join(outDir, r.trialId, 'trial.log'), 'utf8');
    assert.ok(!text.includes(secret), 'the key never reaches the log');
    const errors = (await linesOf(path.join(outDir, r.trialId))).filter((l) => l.level === 'error');
    assert.ok(
      errors.some(
        (l) =>
          l.phase === 'agent_run' && l.class === r.errors[0]?.class && /endpoint refused key/.test(String(l.message)),
      ),
      JSON.stringify(errors),
    );
  });
});
