import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { nopAgent, oracleAgent } from '../../src/agent/oracle.js';
import type { SandboxProvider } from '../../src/sandbox/sandbox.js';
import { loadTask } from '../../src/task/load.js';
import { runTrial } from '../../src/trial/run.js';
import { TrialResultSchema } from '../../src/trial/schema.js';
import { makeTask, tempDir } from '../helpers.js';

const reward = (cond: string, extra = ''): string =>
  `#!/bin/bash\n. /tests/lib.sh\nif ${cond}; then pass; echo '{"reward": 1${extra}}' > /logs/verifier/reward.json; else fail; echo '{"reward": 0}' > /logs/verifier/reward.json; fi\n`;

/**
 * A three-step task in Harbor's layout, inside a dataset folder: each step builds on the files the
 * agent left in the one sandbox; step 2's tests also check that step 1's verifier wrote nothing
 * the agent's sandbox kept (each grading is its own sandbox from its own snapshot); step 3's
 * reference solution is wrong on purpose (reward 0), and it uses the task's shared tests/test.sh.
 * `minReward` sets step 1's gate.
 */
export async function multiStepTask(options: { minReward?: number } = {}): Promise<string> {
  const root = await makeTask({
    'dataset.toml': '[dataset]\nname = "fixtures/multi"\nversion = "0.3.0"\n',
    'multi/task.toml': [
      'schema_version = "1.4"',
      'multi_step_reward_strategy = "mean"',
      'artifacts = ["/app/log.txt", { source = "/app/notes", destination = "notes-copy" }]',
      '[task]\nname = "fixtures/multi-step"\nversion = "2.1.0"',
      '[agent]\ntimeout_sec = 60',
      '[verifier]\ntimeout_sec = 60',
      '[[verifier.collect]]\ncommand = "mkdir -p /logs/artifacts && wc -l < /app/log.txt > /logs/artifacts/lines.txt"',
      `[[steps]]\nname = "01-create"\n${options.minReward === undefined ? '' : `min_reward = ${options.minReward}\n`}`,
      '[[steps]]\nname = "02-append"\n[steps.agent]\ntimeout_sec = 30',
      '[[steps]]\nname = "03-finish"',
      '',
    ].join('\n'),
    'multi/environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'multi/tests/lib.sh': 'pass() { echo "PASSED t.py::test_step"; }\nfail() { echo "FAILED t.py::test_step - no"; }\n',
    'multi/tests/test.sh': reward('[ "$(tail -n1 /app/log.txt 2>/dev/null)" = three ]'),
    'multi/steps/01-create/instruction.md': 'Write the line "one" into /app/log.txt.\n',
    'multi/steps/01-create/solution/solve.sh':
      '#!/bin/bash\nmkdir -p /app/notes && echo one > /app/log.txt && echo a > /app/notes/a.txt\n',
    'multi/steps/01-create/tests/test.sh':
      reward('[ "$(cat /app/log.txt 2>/dev/null)" = one ]', ', "quality": 0.5') + 'touch /app/verifier-mark\n',
    'multi/steps/02-append/instruction.md': 'Append the line "two" to /app/log.txt.\n',
    'multi/steps/02-append/solution/solve.sh': '#!/bin/bash\necho two >> /app/log.txt\n',
    'multi/steps/02-append/tests/test.sh': reward(
      '[ "$(cat /app/log.txt | tr "\\n" ,)" = one,two, ] && [ ! -e /app/verifier-mark ]',
    ),
    'multi/steps/03-finish/instruction.md': 'Append the line "three" to /app/log.txt.\n',
    'multi/steps/03-finish/solution/solve.sh': '#!/bin/bash\necho four >> /app/log.txt\n',
  });
  return path.join(root, 'multi');
}

/** How the fake provider grades the fixture: what its scripts give on a real backend, step by step. */
export const FAKE_STEP_GRADES = [1, 1, 0];

/**
 * A multi-step task graded step by step, as every backend must: the steps run in order in one
 * sandbox, each graded on the protected path (one snapshot per step), the task's reward the mean
 * of the steps', versions recorded. `scripted`: the backend runs the task's scripts (not the fake).
 */
export function multiStepBehaviour(
  label: string,
  provider: () => SandboxProvider,
  options: { scripted: boolean; snapshots?: () => number; failingFirstStep?: () => SandboxProvider },
): void {
  describe(`multi-step tasks (${label})`, () => {
    it("runs the steps in order in one sandbox, grades each on its own snapshot, and rewards the task with the steps' mean", async () => {
      const task = await loadTask(await multiStepTask());
      assert.deepEqual(
        task.steps?.map((s) => s.name),
        ['01-create', '02-append', '03-finish'],
      );
      const out = await tempDir();
      const snapshotsBefore = options.snapshots?.() ?? 0;
      const r = await runTrial({ task, agent: oracleAgent, provider: provider(), outDir: out });
      if (options.snapshots) assert.equal(options.snapshots() - snapshotsBefore, 3, 'one grading (snapshot) per step');
      assert.deepEqual(
        r.steps.map((s) => [s.name, s.reward]),
        [
          ['01-create', 1],
          ['02-append', 1],
          ['03-finish', 0],
        ],
        JSON.stringify(r.errors),
      );
      assert.ok(Math.abs(r.reward! - 2 / 3) < 1e-9, `the mean of the steps' rewards, got ${r.reward}`);
      assert.equal(r.passed, false);
      assert.equal(r.taskVersion, '2.1.0');
      assert.deepEqual(r.dataset, { name: 'fixtures/multi', version: '0.3.0' });
      assert.equal(
        r.steps.some((s) => s.stoppedTrial),
        false,
      );
      const stored = TrialResultSchema.parse(
        JSON.parse(await readFile(path.join(out, r.trialId, 'result.json'), 'utf8')),
      );
      assert.deepEqual(stored.steps, r.steps);
      if (options.scripted) {
        // The step's named rewards are kept; a key a step lacks counts 0 in the mean.
        assert.deepEqual(r.steps[0]!.rewards, { reward: 1, quality: 0.5 });
        assert.ok(Math.abs(r.rewards.quality! - 0.5 / 3) < 1e-9, JSON.stringify(r.rewards));
        assert.deepEqual(
          r.tests.map((t) => [t.name, t.status]),
          [
            ['01-create/t.py::test_step', 'passed'],
            ['02-append/t.py::test_step', 'passed'],
            ['03-finish/t.py::test_step', 'failed'],
          ],
        );
        // Each step's logs and artifacts are its own, copied out with its verifier's logs.
        const stepDir = path.join(out, r.trialId, 'steps', '02-append');
        assert.equal(JSON.parse(await readFile(path.join(stepDir, 'verifier', 'reward.json'), 'utf8')).reward, 1);
        assert.equal(
          (await readFile(path.join(stepDir, 'artifacts', 'logs', 'artifacts', 'lines.txt'), 'utf8')).trim(),
          '2',
          "the collect hook ran after step 2's tests",
        );
        assert.equal(await readFile(path.join(stepDir, 'artifacts', 'app', 'log.txt'), 'utf8'), 'one\ntwo\n');
        assert.equal(await readFile(path.join(stepDir, 'artifacts', 'notes-copy', 'a.txt'), 'utf8'), 'a\n');
        assert.deepEqual(
          r.steps[1]!.collected?.hooks.map((h) => h.exitCode),
          [0],
        );
        assert.ok(
          r.steps[1]!.collected?.artifacts.every((a) => a.ok),
          JSON.stringify(r.steps[1]!.collected),
        );
      }
    });

    it('stops after a step that misses its min_reward, and rewards only the steps graded', async () => {
      const task = await loadTask(await multiStepTask({ minReward: 1 }));
      // A backend that runs the scripts fails step 1 for the nop agent; the fake, told to grade it 0.
      const p = options.scripted ? provider() : options.failingFirstStep!();
      const r = await runTrial({
        task,
        agent: options.scripted ? nopAgent : oracleAgent,
        provider: p,
        outDir: await tempDir(),
      });
      assert.deepEqual(
        r.steps.map((s) => [s.name, s.reward, s.stoppedTrial]),
        [['01-create', 0, true]],
      );
      assert.equal(r.reward, 0);
    });
  });
}
