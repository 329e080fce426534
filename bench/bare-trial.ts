/**
 * The engine work of one trial with none of the harness around it, for the benchmarks to measure
 * the harness against: create, start, one attached shell carrying the commands, then the grading
 * protections by the cheapest sequence known on a local engine (or, unprotected, the tests run in
 * the agent's own container); removals.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { cgroupFreezer } from '../src/sandbox/docker/freezer.js';
import { holdFrozen, holdPlace } from '../src/sandbox/docker/hold.js';
import { measureLayer } from '../src/sandbox/docker/layer-copy.js';
import { containerSpec, verifierSpec } from '../src/sandbox/docker/provider.js';
import { packDir } from '../src/sandbox/tar.js';
import type { Task } from '../src/task/task.js';
import { cappedOutput } from '../src/verifier/test-output.js';

const run = promisify(execFile);

export interface BareOptions {
  /** With the grading protections (default true). */
  protect?: boolean;
  /** Model replies instead of the reference solution: each waits `latencyMs`, then runs one command (not the last, which ends the turn). */
  turns?: number;
  latencyMs?: number;
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

/** The same engine work a trial does, with none of the harness around it. */
export async function bareTrial(docker: Docker, task: Task, image: string, options: BareOptions = {}): Promise<void> {
  const protect = options.protect ?? true;
  const c = await docker.createContainer(containerSpec(task, image));
  await c.start();
  const sh = await bareShell(docker, c);
  await sh.run('mkdir -p /logs/agent /logs/verifier');
  await sh.run(`base64 -d <<'EOF' | tar -x -C / -f -\n${await tarBase64(task.solutionDir!, '/solution')}\nEOF`);
  if (options.turns === undefined) {
    await sh.run('bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1');
  } else {
    // A model-bound agent: each turn waits for its reply, then runs one command; the last reply says it is done.
    for (let i = 0; i < options.turns; i++) {
      await new Promise((r) => setTimeout(r, options.latencyMs ?? 0));
      if (i < options.turns - 1) await sh.run(`echo step ${i}`);
    }
  }
  if (protect) {
    // The same guarantees as the harness, by the cheapest sequence known on a local engine: a
    // verifier container created from the image in the agent's network and pids, running the
    // tests as its own process with their output capped (the harness's own command for it); the
    // agent's layer measured against the disk and scan limits and copied into the verifier's layer
    // while the agent's cgroup is frozen, its processes that are not services held in a frozen
    // child cgroup under the same freeze until the tests end (changes listed from that copy);
    // /tests and /logs/verifier made in the layer; the verifier started and waited for (it stops
    // with its command) before its logs are read from its layer.
    sh.close();
    const tests = cappedOutput('bash /tests/test.sh', '/logs/verifier/test-stdout.txt');
    const v = await docker.createContainer(verifierSpec(task, image, c.id, {}, { command: tests, env: {} }));
    const upper = async (x: Docker.Container): Promise<string> =>
      ((await x.inspect()) as unknown as { GraphDriver: { Data: { UpperDir: string } } }).GraphDriver.Data.UpperDir;
    const [from, to] = [await upper(c), await upper(v)];
    const pid = (await c.inspect()).State.Pid;
    const place = await holdPlace(pid, c.id);
    const freezer = place?.freezer ?? (await cgroupFreezer(pid, c.id));
    await (freezer ? freezer.freeze() : c.pause());
    const copy = async (): Promise<void> => {
      await measureLayer(from, { maxChanges: 200_000, maxBytes: 10 * 1024 ** 3 });
      await run('cp', ['-a', '--preserve=xattr', '-T', from, to]);
    };
    const [, hold] = await Promise.all([copy(), place ? holdFrozen(place, []) : null]);
    await (freezer ? freezer.thaw() : c.unpause());
    await readdir(to, { recursive: true });
    await cp(task.testsDir, path.join(to, 'tests'), { recursive: true });
    await mkdir(path.join(to, 'logs/verifier'), { recursive: true });
    await v.start();
    await v.wait({ condition: 'not-running' });
    await hold?.release();
    for (const f of await readdir(path.join(to, 'logs/verifier'))) await readFile(path.join(to, 'logs/verifier', f));
    await v.remove({ force: true, v: true });
  } else {
    await sh.run(`base64 -d <<'EOF' | tar -x -C / -f -\n${await tarBase64(task.testsDir, '/tests')}\nEOF`);
    await sh.run('bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1');
    await sh.run('tar -c -C /logs -f - verifier | base64');
  }
  sh.close();
  await c.remove({ force: true, v: true });
}
