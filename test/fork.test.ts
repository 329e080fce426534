import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { FORK_READY_SEC } from '../src/sandbox/docker/fork.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { acquireSandbox } from '../src/sandbox/lease.js';
import { EnginePool } from '../src/sandbox/pool/provider.js';
import { ForkError } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { SessionAnswerSchema } from '../src/serve/contract.js';
import { LABEL_SERVER } from '../src/serve/sessions.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { makeTask, tempDir } from './helpers.js';

/**
 * Forking a live session (issue 37) on the real Docker engine, through the real HTTP API: the
 * children see the parent's files and reach its service (started again in each), a change in one
 * is seen by no other, each grades on its own, and nothing is left once all are deleted.
 */

/** A line server on 127.0.0.1:PORT answering with /app/greeting as it is at each connection (perl: in debian's base image). */
const server = (port: number): string =>
  `use IO::Socket::INET; my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => ${port}, Listen => 5, ReuseAddr => 1) or die "bind: $!"; while (my $c = $s->accept) { open(my $f, '<', '/app/greeting'); my $g = <$f>; print $c $g; close $c }`;
/** Prints what the server on PORT answers; exits 1 when nothing listens. */
const client = (port: number): string =>
  `perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new("127.0.0.1:${port}") or die "connect: $!\\n"; print <$c>'`;

/** Reward 1 when /app/answer.txt says 42 and the agent's service answers the tests. */
const TEST_SH = `#!/bin/bash
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && ${client(8080)} | grep -q .; then
  echo "PASSED t.py::test_answer"; echo 1 > /logs/verifier/reward.txt
else
  echo "FAILED t.py::test_answer - no"; echo 0 > /logs/verifier/reward.txt
fi
`;

async function call(url: string, token: string, method: string, route: string, body?: unknown) {
  const res = await fetch(`${url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

describe('fork a live session (real HTTP, real containers)', () => {
  let running: RunningServer;
  const engine = new Docker();
  const req = (method: string, route: string, body?: unknown) => call(running.url, running.token!, method, route, body);
  const exec = async (id: string, command: string) => {
    const r = await req('POST', `/v1/sessions/${id}/exec`, { command, timeout_sec: 60 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return r.json as { output: string; exit_code: number };
  };
  /** This server's containers (sessions, forks, verifiers). */
  const containers = async () =>
    engine.listContainers({ all: true, filters: { label: [`${LABEL_SERVER}=${running.sessions.serverId}`] } });

  before(async () => {
    const task = await makeTask({
      'task.toml': '[task]\nname = "forky"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 60\n',
      'instruction.md': 'Start the greeting service on port 8080 and write the answer to /app/answer.txt.\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
      'tests/test.sh': TEST_SH,
    });
    running = await startServer({
      provider: new DockerProvider(),
      tasks: await loadServedTasks([task]),
      dataDir: await tempDir(),
      maxSessions: 6,
      idleTtlSec: 300,
    });
  });
  after(() => running.close());

  it('forks a session that wrote files and started a service into 4: each sees both, is isolated, grades alone; nothing is left', async () => {
    const made = await req('POST', '/v1/sessions', { task: 'forky' });
    const parent = made.json.session_id as string;
    await exec(
      parent,
      `echo from parent > /app/notes.txt && echo parent > /app/greeting && cat > /app/srv.pl <<'PL'\n${server(8080)}\nPL\n` +
        `cd /app && (nohup perl srv.pl > /app/srv.log 2>&1 &) && (sleep 1000 > /dev/null 2>&1 &) && sleep 0.5`,
    );
    assert.equal((await exec(parent, client(8080))).output, 'parent\n', 'the parent serves');

    const forked = await req('POST', `/v1/sessions/${parent}/fork`, { n: 4 });
    assert.equal(forked.status, 201, JSON.stringify(forked.json));
    const kids = (forked.json.sessions as Array<{ session_id: string; forked_from: string; expires_at: string }>).map(
      (s) => s.session_id,
    );
    assert.equal(new Set([...kids, parent]).size, 5, 'each child has its own id');
    // A child is a session like its parent: the same fields, served_by the parent's.
    for (const s of [made.json, ...forked.json.sessions]) {
      assert.deepEqual(Object.keys(s).sort(), Object.keys(SessionAnswerSchema.shape).sort(), JSON.stringify(s));
      SessionAnswerSchema.parse(s);
      assert.equal(s.served_by, 'named');
    }
    assert.equal(made.json.forked_from, null);
    assert.ok(
      forked.json.sessions.every(
        (s: { forked_from: string; expires_at: string }) => s.forked_from === parent && s.expires_at,
      ),
    );
    assert.deepEqual(
      forked.json.carried.services.map((s: { command: string[]; cwd: string; ports: number[] }) => [
        s.command,
        s.cwd,
        s.ports,
      ]),
      [[['perl', 'srv.pl'], '/app', [8080]]],
    );
    assert.ok(forked.json.carried.not_carried.includes('sleep 1000'), JSON.stringify(forked.json.carried));

    // Each child: the parent's files, and its service answering (restarted in it, reading its files).
    for (const k of kids) {
      assert.equal((await exec(k, 'cat /app/notes.txt')).output, 'from parent\n');
      assert.equal((await exec(k, client(8080))).output, 'parent\n', `child ${k} reaches the service`);
      assert.equal(
        (await exec(k, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'sleep 100[0]'")).output,
        '0\n',
        'a non-service is not carried',
      );
    }
    // A change in one child is seen by no sibling, nor by the parent; the parent's later change by no child.
    await exec(kids[2]!, 'echo changed > /app/greeting && touch /app/only-in-2');
    await exec(parent, 'touch /app/after-fork');
    assert.equal((await exec(kids[2]!, client(8080))).output, 'changed\n');
    for (const other of [parent, kids[0]!, kids[1]!, kids[3]!]) {
      assert.equal((await exec(other, client(8080))).output, 'parent\n');
      assert.equal((await exec(other, 'test -e /app/only-in-2; echo $?')).output, '1\n');
    }
    for (const k of kids) assert.equal((await exec(k, 'test -e /app/after-fork; echo $?')).output, '1\n');

    // Capacity counts children: 5 of 6 are in use, so a fork of 2 more does not fit.
    const full = await req('POST', `/v1/sessions/${parent}/fork`, { n: 2 });
    assert.deepEqual([full.status, full.json.error.code], [429, 'over_capacity']);

    // Each child grades on its own: one solved (reward 1), one not (0); the parent too.
    await exec(kids[0]!, 'echo 42 > /app/answer.txt');
    await exec(kids[1]!, 'echo 41 > /app/answer.txt');
    const [g0, g1] = await Promise.all([
      req('POST', `/v1/sessions/${kids[0]}/verify`),
      req('POST', `/v1/sessions/${kids[1]}/verify`),
    ]);
    assert.deepEqual([g0.json.reward, g1.json.reward], [1, 0], JSON.stringify([g0.json, g1.json]));
    assert.equal((await exec(parent, client(8080))).output, 'parent\n', 'the parent runs on');
    assert.equal(
      (await req('POST', `/v1/sessions/${parent}/verify`)).json.reward,
      0,
      'the parent never wrote the answer',
    );

    for (const id of [parent, ...kids]) assert.equal((await req('DELETE', `/v1/sessions/${id}`)).status, 204);
    assert.deepEqual(await containers(), [], 'nothing is left after the parent and children are deleted');
  });

  it('a session whose service cannot be carried is not forked: it says so, and no child is left', async () => {
    const parent = (await req('POST', '/v1/sessions', { task: 'forky' })).json.session_id as string;
    // The service's script is deleted once it runs: the parent serves, a fork could not start it again.
    await exec(
      parent,
      `echo parent > /app/greeting && cat > /tmp/gone.pl <<'PL'\n${server(9090)}\nPL\n` +
        `(nohup perl /tmp/gone.pl > /dev/null 2>&1 &) && sleep 0.5 && rm /tmp/gone.pl`,
    );
    assert.equal((await exec(parent, client(9090))).output, 'parent\n');
    const before = (await containers()).length;
    const began = performance.now();
    const refused = await req('POST', `/v1/sessions/${parent}/fork`, { n: 3 });
    const tookMs = performance.now() - began;
    assert.equal(refused.status, 409, JSON.stringify(refused.json));
    // The cause is known while the parent is frozen: named at once, not after waiting for the service to listen.
    assert.match(
      refused.json.error.message,
      /"perl \/tmp\/gone\.pl" cannot be carried into a fork: the file it runs, \/tmp\/gone\.pl, is gone since it started/,
    );
    assert.ok(
      tookMs < FORK_READY_SEC * 1000,
      `answered in ${Math.round(tookMs)} ms, without waiting ${FORK_READY_SEC} s`,
    );
    assert.equal((await containers()).length, before, 'no child is left, not even a half-made one');
    assert.equal((await exec(parent, client(9090))).output, 'parent\n', 'the parent runs on untouched');
    assert.equal(running.sessions.live(), 1, 'the refused children hold no capacity');
    assert.equal((await req('DELETE', `/v1/sessions/${parent}`)).status, 204);
    assert.deepEqual(await containers(), []);
  });

  it('a group of forks (POST /v1/groups from_session): a service of another user carried, rewards answered together', async () => {
    const parent = (await req('POST', '/v1/sessions', { task: 'forky' })).json.session_id as string;
    await exec(
      parent,
      `echo parent > /app/greeting && chmod 644 /app/greeting && cat > /tmp/srv.pl <<'PL'\n${server(8080)}\nPL\n` +
        `chmod 644 /tmp/srv.pl && cd /tmp && (setpriv --reuid=65534 --regid=65534 --clear-groups nohup perl srv.pl > /dev/null 2>&1 &) && sleep 0.5`,
    );
    const other = await req('POST', '/v1/groups', { task: 'other', n: 2, from_session: parent });
    assert.deepEqual([other.status, other.json.error.message], [409, `session ${parent} is of task forky, not other`]);
    const g = await req('POST', '/v1/groups', { task: 'forky', n: 2, from_session: parent });
    assert.equal(g.status, 201, JSON.stringify(g.json));
    assert.deepEqual(
      g.json.carried.services.map((s: { user: string; cwd: string }) => [s.user, s.cwd]),
      [['65534:65534', '/tmp']],
    );
    const [a, b] = (g.json.sessions as Array<{ session_id: string }>).map((s) => s.session_id) as [string, string];
    assert.equal(
      (
        await exec(
          a,
          `${client(8080)}; stat -c %u /proc/$(cat /proc/[0-9]*/stat | awk '$2 == "(perl)" {print $1; exit}')`,
        )
      ).output,
      'parent\n65534\n',
      'the service runs as its user in the child',
    );
    await exec(a, 'echo 42 > /app/answer.txt');
    assert.equal((await req('POST', `/v1/sessions/${a}/verify`)).json.reward, 1);
    assert.equal((await req('POST', `/v1/sessions/${b}/verify`)).json.reward, 0);
    const view = await req('GET', `/v1/groups/${g.json.group_id}`);
    assert.deepEqual([view.json.done, view.json.rewards], [true, [1, 0]], JSON.stringify(view.json));
    // Members as POST /v1/groups gives them (objects with their id), each with its grade.
    assert.deepEqual(
      view.json.sessions.map((s: { session_id: string; reward: number | null }) => [s.session_id, s.reward]),
      [
        [a, 1],
        [b, 0],
      ],
    );
    assert.equal((await req('DELETE', `/v1/sessions/${parent}`)).status, 204);
    assert.deepEqual(await containers(), []);
  });

  it('refuses a bad fork body and an unknown session', async () => {
    const bad = await req('POST', '/v1/sessions/x/fork', { n: 0 });
    assert.deepEqual([bad.status, bad.json.error.code], [400, 'bad_request']);
    const none = await req('POST', '/v1/sessions/nope/fork', { n: 1 });
    assert.deepEqual([none.status, none.json.error.code], [404, 'not_found']);
  });
});

describe('fork on an engine pool (real engine)', () => {
  it("puts the children on the parent's engine, in slots taken there, and says when they do not fit", async () => {
    const pool = new EnginePool([{ name: 'local', host: 'unix:///var/run/docker.sock', capacity: 3, labels: {} }]);
    after(() => pool.closeAll());
    assert.equal(pool.capabilities.fork, true);
    const task = await loadTask(
      await makeTask({
        'task.toml': '[task]\nname = "forky-pool"\n',
        'instruction.md': 'x\n',
        'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
        'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
      }),
    );
    const parent = await acquireSandbox({ provider: pool, task });
    try {
      await parent.sandbox.putFiles([{ path: '/app/state', content: 'parent\n' }]);
      await assert.rejects(
        parent.sandbox.fork!(3),
        /a fork into 3 runs on its parent's engine local, which has room for 2 more/,
      );
      assert.equal(pool.status()[0]!.inUse, 1, 'a refused fork holds no slot');
      const made = await parent.sandbox.fork!(2);
      assert.deepEqual(
        made.children.map((c) => c.engine),
        ['local', 'local'],
      );
      assert.equal(pool.status()[0]!.inUse, 3, 'each child holds a slot');
      assert.equal((await made.children[1]!.readFile('/app/state', 100))?.toString(), 'parent\n');
      await Promise.all(made.children.map((c) => c.close()));
      assert.equal(pool.status()[0]!.inUse, 1, "a closed child's slot is free again");
    } finally {
      await parent.close();
    }
  });
});

describe('fork refusals known before any child starts (real engine)', () => {
  it('a service whose program was deleted is named, and no child is left', async () => {
    const provider = new DockerProvider();
    after(() => provider.closeAll());
    const task = await loadTask(
      await makeTask({
        'task.toml': '[task]\nname = "forky-gone"\n',
        'instruction.md': 'x\n',
        'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
        'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
      }),
    );
    const parent = await acquireSandbox({ provider, task });
    const mark = `gone-${process.pid}-${Date.now()}`;
    try {
      await parent.sandbox.putFiles([{ path: '/app/srv.pl', content: server(8080) }]);
      const r = await parent.sandbox.exec(
        'cp /usr/bin/perl /tmp/myperl && cd /app && (nohup /tmp/myperl srv.pl > /dev/null 2>&1 &) && sleep 0.5 && rm /tmp/myperl',
      );
      assert.equal(r.exitCode, 0, r.stderr.text);
      await assert.rejects(
        parent.sandbox.fork!(2, { labels: () => ({ 'io.termgrade.test-fork': mark }) }),
        (err: Error) =>
          err instanceof ForkError &&
          /"\/tmp\/myperl srv\.pl" cannot be carried.*\/tmp\/myperl was deleted/.test(err.message),
      );
      const left = await new Docker().listContainers({
        all: true,
        filters: { label: [`io.termgrade.test-fork=${mark}`] },
      });
      assert.deepEqual(left, [], 'no child is left');
      const still = await parent.sandbox.exec(client(8080));
      assert.equal(still.exitCode, 0, `the parent's service still answers: ${still.stderr.text}`);
    } finally {
      await parent.close();
    }
  });
});
