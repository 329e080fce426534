/**
 * The engine work of one trial with none of the harness around it, for the benchmarks to measure
 * the harness against: create, start, one attached shell carrying the commands, then grading with
 * the same guarantees as the harness's, each written out here by hand as the fewest raw steps
 * that give it (or, unprotected, the tests run in the agent's own container); removals.
 *
 * Written apart from the harness on purpose (none of its grading code is called): a baseline
 * that ran the harness's own functions would carry their waste too and hide it from the ratio.
 * Only the container specs are shared (the same containers, limits and namespaces).
 */
import { execFile, spawn } from 'node:child_process';
import { cp, mkdir, readdir, readFile, readlink, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { containerSpec, verifierSpec } from '../src/sandbox/docker/provider.js';
import { packDir } from '../src/sandbox/tar.js';
import type { Task } from '../src/task/task.js';

const run = promisify(execFile);

export interface BareOptions {
  /** With the grading guarantees (default true). */
  protect?: boolean;
  /** Model replies instead of the reference solution: each waits `latencyMs`, then runs one command (not the last, which ends the turn). */
  turns?: number;
  latencyMs?: number;
  /** Receives the milliseconds of each step of the protected grading, by name. */
  onStep?: (step: string, ms: number) => void;
}

/** A bare attached shell: write a command, read until its end marker. No wrapper, no bounds. */
export async function bareShell(
  docker: Docker,
  c: Docker.Container,
): Promise<{ run: (cmd: string) => Promise<void>; close: () => void }> {
  const ex = await c.exec({ Cmd: ['/bin/sh'], AttachStdin: true, AttachStdout: true, AttachStderr: true });
  const stream = await ex.start({ hijack: true, stdin: true });
  let buf = '';
  let wake: (() => void) | null = null;
  const sink = new Writable({ write: (chunk: Buffer, _e, done) => ((buf += chunk.toString()), wake?.(), done()) });
  docker.modem.demuxStream(stream, sink, sink);
  let n = 0;
  return {
    run: async (cmd) => {
      const mark = `__done_${n++}__`;
      stream.write(`${cmd}\necho ${mark}\n`);
      while (!buf.includes(mark)) await new Promise<void>((r) => (wake = r));
      buf = '';
    },
    close: () => stream.destroy(),
  };
}

async function tarBase64(dir: string, dest: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of packDir(dir, dest)) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('base64');
}

/** The container's cgroup folder and how to freeze it (cgroup v1's freezer or v2's cgroup.freeze). */
async function cgroupOf(pid: number): Promise<{ dir: string; file: string; on: string; off: string }> {
  const lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
  const v1 = lines.map((l) => /^\d+:freezer:(\/.*)$/.exec(l)?.[1]).find(Boolean);
  if (v1) return { dir: `/sys/fs/cgroup/freezer${v1}`, file: 'freezer.state', on: 'FROZEN', off: 'THAWED' };
  const v2 = lines.map((l) => /^0::(\/.*)$/.exec(l)?.[1]).find(Boolean)!;
  return { dir: `/sys/fs/cgroup${v2}`, file: 'cgroup.freeze', on: '1', off: '0' };
}

async function freeze(g: { dir: string; file: string; on: string }): Promise<void> {
  const state = g.file === 'freezer.state' ? `${g.dir}/freezer.state` : `${g.dir}/cgroup.events`;
  const frozen = (s: string): boolean => (g.file === 'freezer.state' ? s.trim() === 'FROZEN' : /^frozen 1$/m.test(s));
  for (;;) {
    await writeFile(`${g.dir}/${g.file}`, g.on);
    if (frozen(await readFile(state, 'utf8'))) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Inodes of the listening sockets of the network namespace of `pid`. */
async function listening(pid: number): Promise<Set<string>> {
  const out = new Set<string>();
  for (const [t, st] of [
    ['tcp', '0A'],
    ['tcp6', '0A'],
    ['udp', '07'],
    ['udp6', '07'],
  ]) {
    for (const l of (await readFile(`/proc/${pid}/net/${t}`, 'utf8')).split('\n').slice(1)) {
      const f = l.trim().split(/\s+/);
      if (f[3] === st) out.add(f[9]!);
    }
  }
  for (const l of (await readFile(`/proc/${pid}/net/unix`, 'utf8')).split('\n').slice(1)) {
    const f = l.trim().split(/\s+/);
    if (f.length >= 7 && parseInt(f[3]!, 16) & 0x10000) out.add(f[6]!);
  }
  return out;
}

/** Whether `pid` holds one of `inodes` open. */
async function holdsAny(pid: number, inodes: Set<string>): Promise<boolean> {
  for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [])) {
    const m = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''));
    if (m && inodes.has(m[1]!)) return true;
  }
  return false;
}

const procsOf = async (dir: string): Promise<number[]> =>
  (await readFile(`${dir}/cgroup.procs`, 'utf8')).split('\n').filter(Boolean).map(Number);

/** Entries and bytes of a layer by GNU find; throws past either bound. */
async function measure(upper: string, maxEntries: number, maxBytes: number): Promise<void> {
  const find = spawn('find', ['-P', upper, '-mindepth', '1', '-printf', '%s\\n'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let entries = 0;
  let bytes = 0;
  for await (const chunk of find.stdout as AsyncIterable<Buffer>)
    for (const l of chunk.toString().split('\n'))
      if (l) {
        entries += 1;
        bytes += Number(l);
      }
  if (entries > maxEntries || bytes > maxBytes) throw new Error('past the bounds');
}

/** test.sh with its output written through a FIFO to a reader capped at 8 MiB, given 2 s after test.sh ends. */
const CAPPED_TESTS = [
  'f=/logs/verifier/test-stdout.txt.fifo; mkfifo $f',
  "setsid sh -c 'ulimit -f 16384; cat > /logs/verifier/test-stdout.txt' < $f & r=$!",
  'bash /tests/test.sh > $f 2>&1; c=$?',
  '(sleep 2; kill -9 -$r) & k=$!; wait $r; kill $k; rm $f; exit $c',
].join('\n');

/**
 * Grading with the harness's guarantees, by hand: a verifier container created in the agent's
 * network and pids, running the capped tests as its own process; the agent's cgroup frozen while
 * its layer is measured and copied into the verifier's layer and its processes that hold no
 * listening socket are moved into a frozen child cgroup (held until the tests end); thawed; the
 * copy listed; /tests and /logs/verifier made in the layer; the verifier started and waited for;
 * the hold released; the logs read from the verifier's layer; the verifier removed.
 */
async function protectedGrading(
  docker: Docker,
  c: Docker.Container,
  task: Task,
  image: string,
  step: (s: string) => void,
): Promise<void> {
  const command = { command: CAPPED_TESTS, env: {} };
  const v = await docker.createContainer(verifierSpec(task, image, c.id, {}, command));
  step('create verifier');
  const [ci, vi] = await Promise.all([c.inspect(), v.inspect()]);
  const upper = (i: Docker.ContainerInspectInfo): string =>
    (i as unknown as { GraphDriver: { Data: { UpperDir: string } } }).GraphDriver.Data.UpperDir;
  const [from, to] = [upper(ci), upper(vi)];
  const g = await cgroupOf(ci.State.Pid);
  const held = `${g.dir}/bare-held`;
  step('inspect');
  await mkdir(held);
  await writeFile(`${held}/${g.file}`, g.on);
  await freeze(g);
  step('freeze');
  const sort = async (): Promise<void> => {
    const services = await listening(ci.State.Pid);
    for (const pid of await procsOf(g.dir))
      if (pid !== ci.State.Pid && !(await holdsAny(pid, services)))
        await writeFile(`${held}/cgroup.procs`, String(pid)).catch(() => undefined); // gone meanwhile
  };
  const copy = async (): Promise<void> => {
    await measure(from, 200_000, 10 * 1024 ** 3);
    await run('cp', ['-a', '--preserve=xattr', '-T', from, to]);
  };
  await Promise.all([copy(), sort()]);
  step('measure, copy and hold');
  await writeFile(`${g.dir}/${g.file}`, g.off);
  step('thaw');
  await readdir(to, { recursive: true });
  step('list changes');
  await cp(task.testsDir, path.join(to, 'tests'), { recursive: true });
  await mkdir(path.join(to, 'logs/verifier'), { recursive: true });
  step('place tests');
  await v.start();
  step('start verifier');
  await v.wait({ condition: 'not-running' });
  step('tests run');
  await writeFile(`${held}/${g.file}`, g.off);
  for (const pid of await procsOf(held)) await writeFile(`${g.dir}/cgroup.procs`, String(pid)).catch(() => undefined);
  await rmdir(held).catch(() => undefined); // a process forked meanwhile: removed with the container
  step('release hold');
  for (const f of await readdir(path.join(to, 'logs/verifier'))) await readFile(path.join(to, 'logs/verifier', f));
  step('read logs');
  await v.remove({ force: true, v: true });
  step('remove verifier');
}

/** The same engine work a trial does, with none of the harness around it. */
export async function bareTrial(docker: Docker, task: Task, image: string, options: BareOptions = {}): Promise<void> {
  const protect = options.protect ?? true;
  let t = performance.now();
  const step = (s: string): void => {
    const now = performance.now();
    options.onStep?.(s, now - t);
    t = now;
  };
  const c = await docker.createContainer(containerSpec(task, image));
  await c.start();
  const sh = await bareShell(docker, c);
  await sh.run('mkdir -p /logs/agent /logs/verifier');
  await sh.run(`base64 -d <<'EOF' | tar -x -C / -f -\n${await tarBase64(task.solutionDir!, '/solution')}\nEOF`);
  step('start');
  if (options.turns === undefined) {
    await sh.run('bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1');
  } else {
    // A model-bound agent: each turn waits for its reply, then runs one command; the last reply says it is done.
    for (let i = 0; i < options.turns; i++) {
      await new Promise((r) => setTimeout(r, options.latencyMs ?? 0));
      if (i < options.turns - 1) await sh.run(`echo step ${i}`);
    }
  }
  step('agent');
  if (protect) {
    sh.close();
    await protectedGrading(docker, c, task, image, step);
  } else {
    await sh.run(`base64 -d <<'EOF' | tar -x -C / -f -\n${await tarBase64(task.testsDir, '/tests')}\nEOF`);
    await sh.run('bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1');
    await sh.run('tar -c -C /logs -f - verifier | base64');
    step('tests in the agent container');
  }
  sh.close();
  await c.remove({ force: true, v: true });
  step('remove');
}
