/**
 * serve's 429 counts the engines' capacity, not only --max-sessions: on an engine pool smaller than
 * --max-sessions, a session past the pool's room is refused at once (429, retry later) instead of
 * waiting for a slot until its start deadline (503). A group larger than the server's capacity is
 * refused for the same reason (429 with Retry-After, as the README documents), its message saying
 * it never fits here. The fake provider (no engine) stands in for a pool: what is tested is the
 * server's bookkeeping, not a backend.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SessionAnswerSchema } from '../src/serve/contract.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';

/** A provider that holds two sandboxes at once, as an engine pool of capacity 2 does. */
class TwoSlots extends FakeProvider {
  readonly capacity = 2;
}

async function serverWith(provider: FakeProvider, maxSessions: number): Promise<RunningServer> {
  const task = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
  return startServer({ provider, tasks: await loadServedTasks([task]), dataDir: await tempDir(), maxSessions });
}

const caller = (server: RunningServer) => async (method: string, url: string, body?: unknown) => {
  const res = await fetch(`${server.url}${url}`, {
    method,
    headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), json: text ? JSON.parse(text) : null };
};

describe('serve: capacity', () => {
  it('refuses with 429 past the engines capacity when it is below --max-sessions, and a group above it with 429 and Retry-After', async () => {
    const server = await serverWith(new TwoSlots(), 8);
    const call = caller(server);
    try {
      const a = await call('POST', '/v1/sessions', { task: 'hello' });
      const b = await call('POST', '/v1/sessions', { task: 'hello' });
      assert.deepEqual([a.status, b.status], [201, 201]);
      const c = await call('POST', '/v1/sessions', { task: 'hello' });
      assert.deepEqual(
        [c.status, c.json.error.code, c.retryAfter],
        [429, 'over_capacity', '5'],
        JSON.stringify(c.json),
      );
      assert.match(c.json.error.message, /all 2 sandboxes are in use/);
      const group = await call('POST', '/v1/groups', { task: 'hello', n: 3 });
      assert.deepEqual([group.status, group.json.error.code], [429, 'over_capacity'], JSON.stringify(group.json));
      assert.equal(group.retryAfter, '5', 'Retry-After on every 429');
      assert.match(
        group.json.error.message,
        /more than this server's capacity \(2: .*never fits here; ask for at most 2/,
      );
      await call('DELETE', `/v1/sessions/${a.json.session_id}`);
      const d = await call('POST', '/v1/sessions', { task: 'hello' });
      assert.equal(d.status, 201, 'room again once one is removed');
    } finally {
      await server.close();
    }
  });

  it('n above --max-sessions is 429 with Retry-After for a group, a member group and an episode group; n above 256 stays 400', async () => {
    const server = await serverWith(new FakeProvider(), 3);
    const call = caller(server);
    try {
      const episode = { agent: 'bash-tool', model: { model: 'policy' } };
      for (const body of [
        { task: 'hello', n: 4 },
        { task: 'hello', n: 4, group_id: 'g-big', member: true },
        { task: 'hello', n: 4, episode },
      ]) {
        const r = await call('POST', '/v1/groups', body);
        assert.deepEqual(
          [r.status, r.json.error.code, r.retryAfter],
          [429, 'over_capacity', '5'],
          JSON.stringify(body),
        );
        assert.match(r.json.error.message, /4 sandboxes at once: more than this server's capacity \(3/);
      }
      assert.equal(server.sessions.live(), 0, 'nothing was started');
      const tooMany = await call('POST', '/v1/groups', { task: 'hello', n: 257 });
      assert.deepEqual([tooMany.status, tooMany.json.error.code], [400, 'bad_request'], 'a request outside the limits');
    } finally {
      await server.close();
    }
  });

  it('every session object has the same fields: a session, each member of a group, a member claimed by id', async () => {
    const server = await serverWith(new FakeProvider(), 8);
    const call = caller(server);
    try {
      const one = await call('POST', '/v1/sessions', { task: 'hello' });
      const group = await call('POST', '/v1/groups', { task: 'hello', n: 2 });
      const member = await call('POST', '/v1/groups', { task: 'hello', n: 2, group_id: 'g-m', member: true });
      assert.deepEqual([one.status, group.status, member.status], [201, 201, 201]);
      const { group_id: _g, member: _m, ...claimed } = member.json as Record<string, unknown>;
      const sessions = [one.json, ...group.json.sessions, claimed];
      const keys = Object.keys(SessionAnswerSchema.shape).sort();
      for (const s of sessions) {
        assert.deepEqual(Object.keys(s).sort(), keys, JSON.stringify(s));
        SessionAnswerSchema.parse(s);
        assert.deepEqual([s.served_by, s.forked_from], ['named', null]);
      }
    } finally {
      await server.close();
    }
  });
});
