import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BACKGROUND_LAG, EngineTurns } from '../src/sandbox/docker/turns.js';

/** A request that records when it ran and finishes when told. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe('engine turns (the order an engine serves heavy requests)', () => {
  it('serves the trial that began waiting first, whatever order its requests arrive in', async () => {
    const turns = new EngineTurns(1);
    const ran: string[] = [];
    const busy = gate();
    const first = turns.run(turns.place(), () => busy.promise); // holds the only turn
    const early = turns.place();
    const late = turns.place();
    // The later trial asks first, the earlier one after: the earlier one still goes first.
    const a = turns.run(late, async () => void ran.push('late'));
    const b = turns.run(early, async () => void ran.push('early'));
    busy.open();
    await Promise.all([first, a, b]);
    assert.deepEqual(ran, ['early', 'late']);
  });

  it('puts background requests behind trials that arrive soon after them, but not behind every later one', async () => {
    const turns = new EngineTurns(1);
    const ran: string[] = [];
    const busy = gate();
    const holding = turns.run(turns.place(), () => busy.promise);
    const removal = turns.run(turns.place(true), async () => void ran.push('background'));
    const all = [holding, removal];
    // Trials that began waiting right after the background request: they go first.
    for (let i = 0; i < BACKGROUND_LAG - 1; i++)
      all.push(turns.run(turns.place(), async () => void ran.push(`soon ${i}`)));
    // Trials that came much later: the background request is not held back behind them.
    for (let i = 0; i < 3; i++) all.push(turns.run(turns.place(), async () => void ran.push(`later ${i}`)));
    busy.open();
    await Promise.all(all);
    assert.equal(ran.indexOf('background'), BACKGROUND_LAG - 1, ran.join(', '));
    assert.deepEqual(ran.slice(-3), ['later 0', 'later 1', 'later 2']);
  });

  it('serves no more requests at once than its concurrency, and takes a new one', async () => {
    const turns = new EngineTurns(2);
    let now = 0;
    let most = 0;
    const request = async (): Promise<void> => {
      now += 1;
      most = Math.max(most, now);
      await new Promise((r) => setTimeout(r, 5));
      now -= 1;
    };
    await Promise.all(Array.from({ length: 12 }, () => turns.run(turns.place(), request)));
    assert.equal(most, 2);
    turns.concurrency = 3;
    most = 0;
    await Promise.all(Array.from({ length: 12 }, () => turns.run(turns.place(), request)));
    assert.equal(most, 3);
  });
});
