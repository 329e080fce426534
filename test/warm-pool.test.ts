/**
 * The warm pool's bookkeeping on the fake provider (no engine): a warm start that fails leaves the
 * pool at once, so whoever comes for that image starts cold instead of claiming a failure, and the
 * next plan starts a replacement; started ones stay until claimed, and closeAll removes the rest.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WarmPool } from '../src/job/warm-pool.js';
import { loadTask } from '../src/task/load.js';
import { trivialTask, until } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';

/** Waits (bounded) until `done` holds; the failure names what never happened. */
describe('warm pool', () => {
  it('drops a failed warm start from its pool, so a claim finds nothing and the next plan starts a new one', async () => {
    let fail = true;
    const provider = new FakeProvider({ startFails: () => fail });
    const task = await loadTask(await trivialTask());
    const line = [{ key: 'img', task, prepared: await provider.prepare(task) }];
    const pool = new WarmPool(provider, new AbortController().signal);
    pool.plan(line);
    assert.equal(pool.size('img'), 1, 'held while starting');
    await until('a failed start to leave the pool', () => pool.size('img') === 0);
    assert.equal(pool.claim('img'), null, 'nothing to claim: the caller starts cold');
    fail = false;
    pool.plan(line);
    assert.equal(pool.size('img'), 1, 'the next plan starts a replacement');
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(pool.size('img'), 1, 'a start that succeeds is held until claimed');
    const warm = pool.claim('img');
    assert.ok(warm);
    await (await warm.sandbox).close();
    pool.plan(line);
    await pool.closeAll();
    assert.equal(pool.size(), 0);
  });

  it('stopped while its starts are under way, closeAll still waits for each container the engine makes, and removes it', async () => {
    // The fake engine, like a real one, finishes a start it began even after the caller gave up.
    const provider = new FakeProvider({ startMs: 200 });
    const task = await loadTask(await trivialTask());
    const line = [{ key: 'img', task, prepared: await provider.prepare(task) }];
    const stop = new AbortController();
    const pool = new WarmPool(provider, stop.signal);
    pool.plan([...line, ...line]);
    await new Promise((r) => setTimeout(r, 20));
    stop.abort();
    // As in `run`, closeAll comes later (after the running trials end), once every start has rejected.
    await new Promise((r) => setTimeout(r, 20));
    await pool.closeAll();
    assert.equal(provider.starts, 2, 'closeAll returned before the engine finished the starts');
    assert.equal(provider.open, 0, 'a container made after the stop is removed');
  });
});
