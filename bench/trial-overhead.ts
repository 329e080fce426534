/**
 * Harness cost per oracle trial on a cached trivial task, against the bare Engine API operations
 * the trial performs (create, start, one attached shell carrying the commands, then the grading
 * protections: a verifier container in the agent's network and pids given a copy of the agent's
 * layer taken while it is paused, its changes listed, tests placed in its layer, the tests run
 * there, logs read from its layer after it is killed; removals), measured interleaved in the same run. A
 * third sequence, the same without the protections (tests run in the agent's own container), shows
 * what they cost.
 *
 *   npm run bench            (or: node dist/bench/trial-overhead.js [iterations])
 *
 * Prints the medians and the ratio harness / bare; the target is a ratio of at most 1.1.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import { writeTask } from './write-task.js';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable, type Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { oracleAgent } from '../src/agent/oracle.js';
import { containerSpec, DockerProvider, verifierSpec } from '../src/sandbox/docker/provider.js';
import { cgroupFreezer } from '../src/sandbox/docker/freezer.js';
import { packDir } from '../src/sandbox/docker/tar.js';

const run = promisify(execFile);
import { loadTask } from '../src/task/load.js';
import type { Task } from '../src/task/task.js';
import { runTrial } from '../src/trial/run.js';

const iterations = Number(process.argv[2] ?? 15);

function makeTrivialTask(dir: string): Promise<void> {
  return writeTask(dir, {
    'task.toml': '[task]\nname = "bench-trivial"\n[verifier]\ntimeout_sec = 30\n[agent]\ntimeout_sec = 30\n',
    'instruction.md': 'Write hello into /app/out.txt.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'solution/solve.sh': '#!/bin/bash\necho hello > /app/out.txt\n',
    'tests/test.sh': '#!/bin/bash\n[ "$(cat /app/out.txt)" = hello ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
  });
}

/** A bare attached shell: write a command, read until its end marker. No wrapper, no bounds. */
async function bareShell(docker: Docker, c: Docker.Container): Promise<{ run: (cmd: string) => Promise<void>; close: () => void }> {
  const ex = await c.exec({ Cmd: ['/bin/sh'], AttachStdin: true, AttachStdout: true, AttachStderr: true });
  const stream = (await ex.start({ hijack: true, stdin: true })) as unknown as Duplex;
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
async function bareTrial(docker: Docker, task: Task, image: string, protect = true): Promise<void> {
  const c = await docker.createContainer(containerSpec(task, image));
  await c.start();
  const sh = await bareShell(docker, c);
  await sh.run('mkdir -p /logs/agent /logs/verifier');
  await sh.run(`base64 -d <<'EOF' | tar -x -C / -f -\n${await tarBase64(task.solutionDir!, '/solution')}\nEOF`);
  await sh.run('bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1');
  if (protect) {
    // The same guarantees as the harness, by the cheapest sequence known on a local engine: a
    // verifier container created from the image in the agent's network and pids, running the
    // tests as its own process; the agent's layer copied into its layer while the agent's cgroup
    // is frozen (changes listed from that copy), /tests and /logs/verifier made in the layer; the
    // verifier started and waited for (it stops with its command) before its logs are read from
    // its layer.
    sh.close();
    const command = { command: 'bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1', env: {} };
    const v = await docker.createContainer(verifierSpec(task, image, c.id, {}, command));
    const upper = async (x: Docker.Container): Promise<string> => ((await x.inspect()) as unknown as { GraphDriver: { Data: { UpperDir: string } } }).GraphDriver.Data.UpperDir;
    const [from, to] = [await upper(c), await upper(v)];
    const freezer = await cgroupFreezer((await c.inspect()).State.Pid, c.id);
    await (freezer ? freezer.freeze() : c.pause());
    await run('cp', ['-a', '--preserve=xattr', '-T', from, to]);
    await (freezer ? freezer.thaw() : c.unpause());
    await readdir(to, { recursive: true });
    await cp(task.testsDir, path.join(to, 'tests'), { recursive: true });
    await mkdir(path.join(to, 'logs/verifier'), { recursive: true });
    await v.start();
    await v.wait({ condition: 'not-running' });
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

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(tmpdir(), 'termgrade-bench-'));
  try {
    await makeTrivialTask(path.join(work, 'task'));
    const task = await loadTask(path.join(work, 'task'));
    const provider = new DockerProvider();
    await provider.ping();
    const { image } = await provider.prepare(task); // cached from here on
    const harness: number[] = [];
    const bare: number[] = [];
    const unprotected: number[] = [];
    // One warm-up of each, then interleave so drift on a shared machine hits both alike.
    await bareTrial(provider.docker, task, image);
    await runTrial({ task, agent: oracleAgent, provider, outDir: path.join(work, 'trials') });
    for (let i = 0; i < iterations; i++) {
      let t = performance.now();
      const r = await runTrial({ task, agent: oracleAgent, provider, outDir: path.join(work, 'trials') });
      harness.push(performance.now() - t);
      if (r.reward !== 1) throw new Error(`oracle trial failed: ${JSON.stringify(r.error)}`);
      t = performance.now();
      await bareTrial(provider.docker, task, image);
      bare.push(performance.now() - t);
      t = performance.now();
      await bareTrial(provider.docker, task, image, false);
      unprotected.push(performance.now() - t);
    }
    const h = median(harness);
    const b = median(bare);
    const u = median(unprotected);
    console.log(`oracle trial on a cached trivial task, ${iterations} interleaved runs each`);
    console.log(`  harness (runTrial)                         median ${h.toFixed(0)} ms`);
    console.log(`  bare Engine API sequence                   median ${b.toFixed(0)} ms`);
    console.log(`  bare, without the grading protections      median ${u.toFixed(0)} ms`);
    console.log(`  ratio harness/bare                         ${(h / b).toFixed(2)}  (target <= 1.1)`);
    console.log(`  grading protections, bare cost             ${(b - u).toFixed(0)} ms per trial`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();
