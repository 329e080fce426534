import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JobTally } from '../src/cli/job-progress.js';
import type { JobEvent } from '../src/job/events.js';

describe('the progress tally', () => {
  it('counts a trial an interrupt cancelled as not run, not done (as the summary does)', () => {
    const tally = new JobTally();
    const slot = (task: string) => ({ config: 'c', task, attempt: 0 });
    const done = (task: string, status: 'completed' | 'error' | 'not_run'): JobEvent => ({
      type: 'trial-done',
      trialId: task,
      slot: slot(task),
      status,
      reward: status === 'completed' ? 1 : null,
      errorClass: status === 'not_run' ? 'cancelled' : status === 'error' ? 'environment_error' : null,
      infraAttempts: 1,
      durationMs: 1000,
      outputTokens: 0,
      costUsd: null,
    });
    const events: JobEvent[] = [
      {
        type: 'job-start',
        job: 'j',
        configs: ['c'],
        tasks: 3,
        total: 3,
        pending: 3,
        pendingByConfig: { c: 3 },
        concurrency: 3,
      },
      ...['a', 'b', 'x'].map((t): JobEvent => ({ type: 'trial-start', trialId: t, slot: slot(t) })),
      done('a', 'completed'),
      done('b', 'error'),
      done('x', 'not_run'),
    ];
    for (const e of events) tally.update(e);
    const c = tally.counters.get('c')!;
    assert.deepEqual([c.done, c.failed, c.running, c.total], [2, 1, 0, 3]);
  });
});
