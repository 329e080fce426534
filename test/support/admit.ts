import assert from 'node:assert/strict';
import { checkTasks } from '../../src/check/check.js';
import { loadTask } from '../../src/task/load.js';
import type { Task } from '../../src/task/task.js';
import type { ProtectionRecord } from '../../src/verifier/protection.js';
import { ProtectionStore } from '../../src/verifier/protection-store.js';
import { docker, tempDir } from '../helpers.js';

/** A task folder admitted by `check` (one oracle run, no probes) into a store of its own: the task and its admission record. */
export async function admitted(dir: string): Promise<{ task: Task; record: ProtectionRecord }> {
  const store = new ProtectionStore(await tempDir());
  const report = await checkTasks([dir], {
    provider: docker(),
    outDir: await tempDir(),
    repeat: 1,
    probes: 'none',
    protection: store,
  });
  assert.deepEqual(report.tasks[0]!.reasons, [], report.tasks[0]!.details.join(' | '));
  const task = await loadTask(dir);
  const record = await store.load(task);
  assert.ok(record, 'check kept an admission record');
  return { task, record };
}
