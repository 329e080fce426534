import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { judge } from '../src/check/verdict.js';
import type { TrialErrorClass, TrialResult } from '../src/trial/schema.js';
import { trialResultFixture } from './helpers.js';

/** A trial of task x with this reward, these tests (pytest's -rA report) and these error classes. */
function trial(
  reward: number | null,
  tests: Array<'passed' | 'failed'>,
  errorClasses: TrialErrorClass[] = [],
): TrialResult {
  const errors = errorClasses.map((c) => ({ class: c, message: c, phase: 'verification' as const }));
  return trialResultFixture({
    reward,
    tests: tests.map((status, i) => ({ name: `t${i}`, status, durationMs: null, message: null })),
    testsSource: 'pytest-rA',
    error: errors[0] ?? null,
    errors,
  });
}

const pass = trial(1, ['passed', 'passed']);
const fail = trial(0, ['passed', 'failed']);
const nopFail = trial(0, ['failed', 'failed']);

describe('admission rule', () => {
  it('admits a task whose oracle always passes and whose nop fails', () => {
    assert.deepEqual(judge([pass, pass], nopFail), []);
  });

  it('rejects an oracle that fails every time', () => {
    assert.deepEqual(judge([fail, fail], nopFail), ['oracle_failed']);
  });

  it('rejects reward 1 with a failing test as oracle_failed', () => {
    assert.deepEqual(judge([trial(1, ['passed', 'failed'])], nopFail), ['oracle_failed']);
  });

  it('calls disagreement flaky, not oracle_failed', () => {
    assert.deepEqual(judge([pass, fail], nopFail), ['flaky']);
  });

  it('rejects a nop that passes', () => {
    assert.deepEqual(judge([pass, pass], trial(1, [])), ['nop_passed']);
  });

  it('maps verifier errors and timeouts to their codes, also from the nop run', () => {
    assert.deepEqual(judge([trial(null, [], ['verifier_no_reward'])], nopFail), ['verifier_error']);
    assert.deepEqual(judge([trial(null, [], ['verifier_timeout'])], nopFail), ['timeout']);
    assert.deepEqual(judge([trial(0, [], ['agent_timeout'])], nopFail), ['timeout']);
    assert.deepEqual(judge([pass], trial(null, [], ['verifier_bad_reward'])), ['verifier_error']);
  });

  it('rejects a run whose infrastructure failed through its retries as infra_error, never as flakiness or a wrong answer', () => {
    // Each of these was rejected before as flaky + build_failed, oracle_failed, verifier_error, build_failed.
    assert.deepEqual(judge([pass, trial(null, [], ['environment_error'])], nopFail), ['infra_error']);
    assert.deepEqual(judge([trial(null, [], ['internal_error'])], nopFail), ['infra_error']);
    assert.deepEqual(judge([trial(null, [], ['verifier_crash'])], nopFail), ['infra_error']);
    assert.deepEqual(judge([pass], trial(null, [], ['environment_error'])), ['infra_error']);
    // A wrong answer beside a lost run is still a wrong answer; an image that did not build is still that.
    assert.deepEqual(judge([fail, trial(null, [], ['environment_error'])], nopFail), ['infra_error', 'oracle_failed']);
    assert.deepEqual(judge([trial(null, [], ['build_failed'])], nopFail), ['build_failed']);
    // A run graded in spite of an engine error (lost at teardown) was decided by the task.
    assert.deepEqual(judge([pass, pass], trial(0, ['failed'], ['environment_error'])), []);
  });

  it('reports several reasons in a fixed order', () => {
    assert.deepEqual(judge([pass, trial(null, [], ['verifier_timeout'])], trial(1, [])), [
      'nop_passed',
      'flaky',
      'timeout',
    ]);
  });
});
