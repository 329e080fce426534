/**
 * serve's 429 counts the engines' capacity, not only --max-sessions: on an engine pool smaller than
 * --max-sessions, a session past the pool's room is refused at once (429, retry later) instead of
 * waiting for a slot until its start deadline (503). The fake provider (no engine) stands in for a
 * pool: what is tested is the server's bookkeeping, not a backend.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';

/** A provider that holds two sandboxes at once, as an engine pool of capacity 2 does. */
class TwoSlots extends FakeProvider {
  readonly capacity = 2;
}

describe('serve: capacity', () => {
  it('refuses with 429 past the engines capacity when it is below --max-sessions, and 400 for a group above it', async () => {
    const task = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const server = await startServer({
      provider: new TwoSlots(),
      tasks: await loadServedTasks([task]),
      dataDir: await tempDir(),
      maxSessions: 8,
    });
    const call = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(`${server.url}${url}`, {
        method,
        headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : null };
    };
    try {
      const a = await call('POST', '/v1/sessions', { task: 'hello' });
      const b = await call('POST', '/v1/sessions', { task: 'hello' });
      assert.deepEqual([a.status, b.status], [201, 201]);
      const c = await call('POST', '/v1/sessions', { task: 'hello' });
      assert.deepEqual([c.status, c.json.error.code], [429, 'over_capacity'], JSON.stringify(c.json));
      assert.match(c.json.error.message, /all 2 sandboxes are in use/);
      const group = await call('POST', '/v1/groups', { task: 'hello', n: 3 });
      assert.equal(group.status, 400, JSON.stringify(group.json));
      assert.match(group.json.error.message, /more than this server's capacity \(2\)/);
      await call('DELETE', `/v1/sessions/${a.json.session_id}`);
      const d = await call('POST', '/v1/sessions', { task: 'hello' });
      assert.equal(d.status, 201, 'room again once one is removed');
    } finally {
      await server.close();
    }
  });
});
