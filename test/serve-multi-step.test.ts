import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { loadServedTasks } from '../src/serve/tasks.js';
import { tempDir, trivialTask } from './helpers.js';
import { multiStepTask } from './support/multi-step.js';

describe('serve and multi-step tasks', () => {
  it('leaves a multi-step task out of what it serves, naming it, and refuses a selection that names one', async () => {
    const multi = await multiStepTask();
    const single = await trivialTask({ 'task.toml': '[task]\nname = "single"\n' });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      const served = await loadServedTasks([multi, single]);
      assert.deepEqual(
        served.map((s) => s.task.name),
        ['single'],
        'sessions serve one instruction graded once: the steps would be lost',
      );
      await new Promise((r) => setImmediate(r));
      assert.ok(
        warnings.some((w) => /multi-step/.test(w) && w.includes('fixtures/multi-step')),
        warnings.join('\n'),
      );
      const selection = await tempDir();
      await mkdir(selection, { recursive: true });
      await writeFile(
        path.join(selection, 'manifest.json'),
        JSON.stringify({ training: [{ task: 'fixtures/multi-step', rate: 0.5 }], validation: [] }),
      );
      await assert.rejects(loadServedTasks([multi, single], selection), /"fixtures\/multi-step" is a multi-step task/);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
