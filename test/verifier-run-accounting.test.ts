/**
 * One accounting rule on both ways of running test.sh: a failure the sandbox's content can cause
 * (the verifier's folders or start) is graded 0 as grading_blocked when the engine still answers;
 * an engine failure while test.sh runs (the wait on the verifier's own process, like an exec that
 * fails) is thrown as it is: infrastructure, never a 0 charged to the model. The snapshot here is a
 * stand-in for a backend's (only its runVerifier differs between the cases); the real engine's
 * folder-breaking attack is in the attack suite.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Sandbox, SandboxSnapshot, VerifierRun } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import { GradingStepError } from '../src/util/errors.js';
import { gradeSandbox } from '../src/verifier/verify.js';
import { tempDir, trivialTask } from './helpers.js';

/** A verifier box whose logs hold reward 1. */
const box = {
  async copyOut(_from: string, to: string) {
    await writeFile(path.join(to, 'reward.txt'), '1\n');
  },
  async close() {},
} as unknown as Sandbox;

function sandboxWith(runVerifier: () => Promise<VerifierRun>): Sandbox {
  const snap: SandboxSnapshot = {
    changes: async () => [],
    env: async () => ({ PATH: '/usr/bin:/bin' }),
    readFile: async () => null,
    startVerifier: async () => {
      throw new Error('not used: runVerifier is offered');
    },
    runVerifier,
    discard: async () => undefined,
  };
  return { snapshot: async () => snap } as unknown as Sandbox;
}

const healthy = { health: async () => ({ ok: true, detail: 'the engine answers' }) };

describe('accounting of a verifier run as its own process', () => {
  it('a run to its end is graded from its logs', async () => {
    const task = await loadTask(await trivialTask());
    const v = await gradeSandbox(
      sandboxWith(async () => ({ box, exitCode: 0, timedOut: false, durationMs: 1 })),
      task,
      { hostLogsDir: await tempDir() },
      healthy,
    );
    assert.equal(v.reward, 1);
  });

  it("a start the sandbox's content broke is graded 0 (grading_blocked) while the engine answers", async () => {
    const task = await loadTask(await trivialTask());
    const v = await gradeSandbox(
      sandboxWith(async () => {
        throw new GradingStepError('the verifier sandbox did not start test.sh', new Error('not a directory: /app'));
      }),
      task,
      { hostLogsDir: await tempDir() },
      healthy,
    );
    assert.deepEqual([v.reward, v.error?.class], [0, 'grading_blocked']);
  });

  it('an engine failure while test.sh runs is thrown (infrastructure), not graded 0', async () => {
    const task = await loadTask(await trivialTask());
    const waitFailed = new Error('(HTTP code 500) server error - wait: connection reset');
    await assert.rejects(
      gradeSandbox(
        sandboxWith(async () => {
          throw waitFailed;
        }),
        task,
        { hostLogsDir: await tempDir() },
        healthy,
      ),
      (err) => err === waitFailed,
    );
  });
});
