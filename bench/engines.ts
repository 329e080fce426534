/**
 * Scale-out across Docker engines, on a model-latency-bound workload (a scripted model answering
 * each turn after a fixed delay, bash-tool, real containers): the same job on one engine of
 * capacity C and on three engines of capacity C each, side by side in one run. The ideal ratio
 * of their throughputs is 3 (three times the sandboxes at once). Also printed: the scheduler's
 * own cost per trial (a job on the fake provider, no engine or model at all).
 *
 *   node dist/bench/engines.js [capacity] [latencyMs] [turns]
 *
 * The three engines are extra dockerd on this machine (own data and exec roots), started here and
 * removed at the end; on two cores they share the CPU, so this measures the pool, not more hardware.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import Docker from 'dockerode';
import { connectEngine } from '../src/sandbox/pool/engine-connect.js';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob } from '../src/job/run-job.js';
import { EnginePool } from '../src/sandbox/pool/provider.js';
import type { SandboxProvider } from '../src/sandbox/sandbox.js';
import { startEngines, startSshEngine } from '../test/support/engines.js';
import { FakeProvider } from '../test/support/fake-provider.js';
import { ScriptedModelServer } from '../test/support/scripted-model-server.js';
import { bash } from '../test/support/scripts.js';
import { writeTask } from './write-task.js';

const capacity = Number(process.argv[2] ?? 4);
const latencyMs = Number(process.argv[3] ?? 1500);
const turns = Number(process.argv[4] ?? 4);

const work = await mkdtemp(path.join(tmpdir(), 'termgrade-engines-'));
const server = new ScriptedModelServer({
  '*': (_i, body) => {
    const done = body.messages.filter((m) => m.role === 'assistant').length;
    const step = done + 1 < turns ? bash(`echo step ${done}`) : bash('echo TERMGRADE_TASK_COMPLETE');
    return { ...step, delayMs: latencyMs } as typeof step;
  },
});
const engines = await startEngines(3);
try {
  const baseUrl = await server.start();
  await writeTask(path.join(work, 'tasks', 'scale'), {
    'task.toml': '[task]\nname = "scale"\n',
    'instruction.md': 'Say hello.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'solution/solve.sh': '#!/bin/bash\ntrue\n',
    'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
  });
  const run = async (
    name: string,
    provider: SandboxProvider,
    k: number,
    agent: 'bash-tool' | 'oracle' = 'bash-tool',
    concurrency?: number,
  ): Promise<{ wall: number; completed: number }> => {
    const spec = parseSpec(
      {
        name,
        tasks: { paths: [path.join(work, 'tasks')] },
        agents: [agent === 'bash-tool' ? { agent, model: { baseUrl, model: 'm' } } : { agent }],
        k,
        concurrency,
      },
      'bench',
    );
    const job = await openJob(spec, path.join(work, 'jobs'));
    const t = performance.now();
    const summary = await runJob({ spec, tasks: job.tasks, store: job.store, provider, jobDir: job.jobDir });
    const wall = (performance.now() - t) / 1000;
    await job.close();
    if (summary.completed !== k) throw new Error(`${name}: ${summary.completed} of ${k} trials completed`);
    return { wall, completed: summary.completed };
  };
  const spec = (i: number) => ({ name: `e${i + 1}`, host: engines[i]!.host, capacity, labels: {} });
  const one = new EnginePool([spec(0)]);
  const three = new EnginePool([spec(0), spec(1), spec(2)]);
  // Warm-up: the image built on e1 and copied to e2 and e3, so both measured jobs start equal.
  await run('warm-one', one, capacity);
  await run('warm-three', three, 3 * capacity);
  const n = 12 * capacity;
  const a = await run('one-engine', one, n);
  const b = await run('three-engines', three, n);
  await Promise.all([one.closeAll(), three.closeAll()]);
  const trialAlone = (latencyMs * turns) / 1000;
  console.log(
    `scripted model: ${latencyMs} ms per turn, ${turns} turns per trial (bash-tool, real containers); ${n} trials per job`,
  );
  console.log(
    `  1 engine,  capacity ${capacity}: ${a.wall.toFixed(1)} s, ${(n / a.wall).toFixed(3)} trials/s (ideal ${(capacity / trialAlone).toFixed(3)})`,
  );
  console.log(
    `  3 engines, capacity ${capacity} each: ${b.wall.toFixed(1)} s, ${(n / b.wall).toFixed(3)} trials/s (ideal ${((3 * capacity) / trialAlone).toFixed(3)})`,
  );
  console.log(`  throughput ratio 3 engines / 1 engine: ${(a.wall / b.wall).toFixed(2)}  (ideal 3)`);

  // The scheduler alone: trials on the fake provider (no engine, no model), many at once.
  const fakeTrials = 2000;
  const fake = await run('scheduler-only', new FakeProvider(), fakeTrials, 'oracle', 16);
  console.log(
    `  scheduler's own cost: ${((fake.wall * 1000) / fakeTrials).toFixed(2)} ms per trial (${fakeTrials} trials on the fake provider at concurrency 16, recording included)`,
  );

  // An engine over ssh: dockerode's own transport (an ssh connection per request) against the
  // tunnel the pool uses (one ssh connection, a channel per HTTP connection), side by side.
  const sshd = await startSshEngine(engines[0]!.socket);
  try {
    const url = new URL(sshd.host);
    const perRequest = new Docker({
      protocol: 'ssh',
      host: url.hostname,
      port: Number(url.port),
      username: 'root',
      sshOptions: { privateKey: readFileSync(sshd.keyFile) },
    });
    const tunnel = connectEngine({ host: sshd.host, sshKey: sshd.keyFile, capacity: 1, labels: {} });
    const perCall = async (d: Docker): Promise<number> => {
      await d.ping();
      const t = performance.now();
      for (let i = 0; i < 20; i++) await d.listContainers();
      return (performance.now() - t) / 20;
    };
    const slow = await perCall(perRequest);
    const fast = await perCall(tunnel.docker);
    tunnel.close();
    console.log(
      `  an engine over ssh, per API call: dockerode's ssh transport ${slow.toFixed(0)} ms, the pool's tunnel ${fast.toFixed(1)} ms (ratio ${(slow / fast).toFixed(0)})`,
    );
  } finally {
    sshd.stop();
  }
} finally {
  await server.close();
  await Promise.all(engines.map((e) => e.destroy()));
  await rm(work, { recursive: true, force: true });
}
