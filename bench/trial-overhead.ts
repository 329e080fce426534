/**
 * Harness cost per oracle trial on a cached trivial task, against the bare Engine API operations
 * the trial performs (create, start, one attached shell carrying the commands, then the grading
 * protections: a verifier container in the agent's network and pids given a copy of the agent's
 * layer measured and taken while it is frozen, the agent's processes that are not services held
 * under the same freeze until the tests end, its changes listed, tests placed in its layer, the
 * tests run as its own process with their output capped, logs read from its layer once it
 * stopped; removals; see bare-trial.ts), measured interleaved in the same run. A
 * third sequence, the same without the protections (tests run in the agent's own container), shows
 * what they cost.
 *
 *   npm run bench            (or: node dist/bench/trial-overhead.js [iterations])
 *
 * Prints the medians, the ratios harness / bare (target <= 1.1) and harness / bare without the
 * protections (target <= 2), the machine's load average at the start and the end, and where the
 * time goes: the harness's phases (from each result) beside the bare sequence's steps.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { writeTask } from './write-task.js';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { oracleAgent } from '../src/agent/oracle.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { bareTrial } from './bare-trial.js';
import { loadTask } from '../src/task/load.js';
import { runTrial } from '../src/trial/run.js';

const iterations = Number(process.argv[2] ?? 15);

function makeTrivialTask(dir: string): Promise<void> {
  return writeTask(dir, {
    'task.toml': '[task]\nname = "bench-trivial"\n[verifier]\ntimeout_sec = 30\n[agent]\ntimeout_sec = 30\n',
    'instruction.md': 'Write hello into /app/out.txt.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'solution/solve.sh': '#!/bin/bash\necho hello > /app/out.txt\n',
    'tests/test.sh':
      '#!/bin/bash\n[ "$(cat /app/out.txt)" = hello ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
  });
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
    const phases: Record<string, number[]> = {};
    const steps: Record<string, number[]> = {};
    const load = loadavg();
    // One warm-up of each, then interleave so drift on a shared machine hits both alike.
    await bareTrial(provider.docker, task, image);
    await runTrial({ task, agent: oracleAgent, provider, outDir: path.join(work, 'trials') });
    for (let i = 0; i < iterations; i++) {
      let t = performance.now();
      const r = await runTrial({ task, agent: oracleAgent, provider, outDir: path.join(work, 'trials') });
      harness.push(performance.now() - t);
      if (r.reward !== 1) throw new Error(`oracle trial failed: ${JSON.stringify(r.error)}`);
      for (const [k, v] of Object.entries(r.phases)) (phases[k] ??= []).push(v.durationMs);
      t = performance.now();
      await bareTrial(provider.docker, task, image, { onStep: (s, ms) => (steps[s] ??= []).push(ms) });
      bare.push(performance.now() - t);
      t = performance.now();
      await bareTrial(provider.docker, task, image, { protect: false });
      unprotected.push(performance.now() - t);
    }
    const h = median(harness);
    const b = median(bare);
    const u = median(unprotected);
    const end = loadavg();
    const avg = (l: number[]): string => l.map((x) => x.toFixed(2)).join(' ');
    console.log(`oracle trial on a cached trivial task, ${iterations} interleaved runs each`);
    console.log(`  load average (1, 5, 15 min): ${avg(load)} at the start, ${avg(end)} at the end`);
    console.log(`  harness (runTrial)                         median ${h.toFixed(0)} ms`);
    console.log(`  bare Engine API sequence                   median ${b.toFixed(0)} ms`);
    console.log(`  bare, without the grading protections      median ${u.toFixed(0)} ms`);
    console.log(`  ratio harness/bare                         ${(h / b).toFixed(2)}  (target <= 1.1)`);
    console.log(`  ratio harness/bare without protections     ${(h / u).toFixed(2)}  (target <= 2)`);
    console.log(`  grading protections, bare cost             ${(b - u).toFixed(0)} ms per trial`);
    const show = (xs: Record<string, number[]>): string =>
      Object.entries(xs)
        .map(([k, v]) => `${k} ${median(v).toFixed(0)}`)
        .join(', ');
    console.log(`  harness phases, median ms: ${show(phases)}`);
    console.log(`  bare steps, median ms:     ${show(steps)}`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();
