/**
 * Harness cost per oracle trial on a cached trivial task, against the bare Engine API operations
 * the trial performs (create, start, put logs dirs, put solution, exec solve.sh, put tests,
 * exec test.sh, get /logs/verifier, remove), measured interleaved in the same run.
 *
 *   npm run bench            (or: node dist/bench/trial-overhead.js [iterations])
 *
 * Prints both medians and their ratio; the target is a ratio of at most 1.5.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { oracleAgent } from '../src/agent/oracle.js';
import { containerSpec, DockerProvider } from '../src/sandbox/docker/provider.js';
import { packDir, packEntries } from '../src/sandbox/docker/tar.js';
import { loadTask } from '../src/task/load.js';
import type { Task } from '../src/task/task.js';
import { runTrial } from '../src/trial/run.js';

const iterations = Number(process.argv[2] ?? 15);

async function makeTrivialTask(dir: string): Promise<void> {
  const files: Record<string, string> = {
    'task.toml': '[task]\nname = "bench-trivial"\n[verifier]\ntimeout_sec = 30\n[agent]\ntimeout_sec = 30\n',
    'instruction.md': 'Write hello into /app/out.txt.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'solution/solve.sh': '#!/bin/bash\necho hello > /app/out.txt\n',
    'tests/test.sh': '#!/bin/bash\n[ "$(cat /app/out.txt)" = hello ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
  };
  for (const [rel, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), text, { mode: 0o755 });
  }
}

async function bareExec(docker: Docker, c: Docker.Container, cmd: string[]): Promise<number | null> {
  const ex = await c.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = (await ex.start({ hijack: true, stdin: false })) as unknown as Readable;
  await new Promise<void>((resolve) => {
    docker.modem.demuxStream(stream, process.stdout, process.stderr);
    stream.on('end', resolve);
  });
  return (await ex.inspect()).ExitCode;
}

/** The same engine work a trial does, with none of the harness around it. */
async function bareTrial(docker: Docker, task: Task, image: string): Promise<void> {
  const c = await docker.createContainer(containerSpec(task, image));
  await c.start();
  await c.putArchive(await packEntries([{ path: '/logs/agent' }, { path: '/logs/verifier' }]), { path: '/' });
  await c.putArchive(packDir(task.solutionDir!, '/solution') as unknown as NodeJS.ReadableStream, { path: '/' });
  await bareExec(docker, c, ['bash', '/solution/solve.sh']);
  await c.putArchive(packDir(task.testsDir, '/tests') as unknown as NodeJS.ReadableStream, { path: '/' });
  await bareExec(docker, c, ['/bin/sh', '-c', 'bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1']);
  const tar = (await c.getArchive({ path: '/logs/verifier' })) as unknown as Readable;
  for await (const _ of tar) void _;
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
    }
    const h = median(harness);
    const b = median(bare);
    console.log(`oracle trial on a cached trivial task, ${iterations} interleaved runs each`);
    console.log(`  harness (runTrial)        median ${h.toFixed(0)} ms`);
    console.log(`  bare Engine API sequence  median ${b.toFixed(0)} ms`);
    console.log(`  ratio harness/bare        ${(h / b).toFixed(2)}  (target <= 1.5)`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();
