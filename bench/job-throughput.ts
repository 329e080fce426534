/**
 * Job throughput against the ideal: with a scripted model answering each turn after a fixed
 * latency, one trial alone takes T seconds; at concurrency C the ideal is C / T trials per second.
 * The runner's throughput over a job of 8 C trials is printed as a ratio of that ideal.
 *
 *   node dist/bench/job-throughput.js [latencyMs] [turns] [concurrency]
 *
 * Targets: sustained >= 0.85 and whole job (fill-up and drain included) >= 0.95 at concurrency 16.
 * The same job is then run as bare engine calls (bench/bare-trial.ts), with the grading
 * protections and without, against their own ideal: what the engine on these cores allows at all,
 * and the harness's throughput against the bare sequence that gives its guarantees.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { writeTask } from './write-task.js';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openJob } from '../src/job/job.js';
import { runJob } from '../src/job/run-job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { median } from '../src/stats/summary.js';
import { ScriptedModelServer } from '../test/support/scripted-model-server.js';
import { bash } from '../test/support/scripts.js';
import { loadTask } from '../src/task/load.js';
import { bareTrial } from './bare-trial.js';

const latencyMs = Number(process.argv[2] ?? 2000);
const turns = Number(process.argv[3] ?? 6);
const concurrency = Number(process.argv[4] ?? 16);

const work = await mkdtemp(path.join(tmpdir(), 'termgrade-throughput-'));
const server = new ScriptedModelServer({
  // Each trial: turns-1 commands, then the completion marker; every reply after `latencyMs`.
  '*': (_i, body) => {
    const done = body.messages.filter((m) => m.role === 'assistant').length;
    const step = done + 1 < turns ? bash(`echo step ${done}`) : bash('echo TERMGRADE_TASK_COMPLETE');
    return { ...step, delayMs: latencyMs } as typeof step;
  },
});
try {
  const baseUrl = await server.start();
  await writeTask(path.join(work, 'tasks', 'throughput'), {
    'task.toml': '[task]\nname = "throughput"\n',
    'instruction.md': 'Say hello.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'solution/solve.sh': '#!/bin/bash\ntrue\n',
    'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
  });
  const provider = new DockerProvider();
  const run = async (name: string, k: number, c: number) => {
    const spec = parseSpec(
      {
        name,
        tasks: { paths: [path.join(work, 'tasks')] },
        agents: [{ agent: 'bash-tool', model: { baseUrl, model: 'm' } }],
        k,
        concurrency: c,
      },
      'bench',
    );
    const job = await openJob(spec, path.join(work, 'jobs'));
    const t = performance.now();
    const starts: number[] = [];
    const ends: number[] = [];
    const summary = await runJob({
      spec,
      tasks: job.tasks,
      store: job.store,
      provider,
      jobDir: job.jobDir,
      onEvent: (e) => {
        if (e.type === 'trial-start') starts.push(performance.now());
        if (e.type === 'trial-done') ends.push(performance.now());
      },
    });
    const wall = (performance.now() - t) / 1000;
    const durations = [...job.store.listTrials()].map((r) => r.duration_ms! / 1000);
    const phases: Record<string, number[]> = {};
    const setups: Array<{ at: string; s: number }> = [];
    for (const dir of [...job.store.listTrials()].map((r) => r.trial_dir!)) {
      const result = JSON.parse(await readFile(path.join(dir, 'result.json'), 'utf8')) as {
        startedAt: string;
        phases: Record<string, { durationMs: number }>;
      };
      setups.push({ at: result.startedAt, s: (result.phases.environment_setup?.durationMs ?? 0) / 1000 });
      for (const [k, v] of Object.entries(result.phases)) (phases[k] ??= []).push(v.durationMs / 1000);
    }
    await job.close();
    if (summary.completed !== k) throw new Error(`${name}: ${summary.completed} of ${k} trials completed`);
    // Steady state: from the first completion to the last start, the job is neither filling up nor
    // draining; completions per second in that window are the runner's sustained throughput.
    const from = Math.min(...ends);
    const to = Math.max(...starts);
    const steady = to > from ? ends.filter((x) => x >= from && x <= to).length / ((to - from) / 1000) : Number.NaN;
    // Where a whole job loses time against the ideal: filling the first wave, the gap between a
    // trial ending and the next one starting in its place, and what runs after the last trial.
    const fill = (starts[Math.min(c, starts.length) - 1]! - t) / 1000;
    const gaps = starts.slice(c).map((s) => (s - Math.max(...ends.filter((e) => e <= s))) / 1000);
    const tail = (t + wall * 1000 - Math.max(...ends)) / 1000;
    setups.sort((a, b) => (a.at < b.at ? -1 : 1));
    const setupMean = setups.reduce((a, x) => a + x.s, 0) / setups.length;
    const firstWaveSetup = setups.slice(0, c).reduce((a, x) => a + x.s, 0) / Math.min(c, setups.length);
    const spread = (xs: number[]): string => {
      const v = [...xs].sort((a, b) => a - b);
      const q = (f: number): string => v[Math.min(v.length - 1, Math.floor(f * v.length))]!.toFixed(2);
      return `p50 ${q(0.5)} p90 ${q(0.9)} max ${v[v.length - 1]!.toFixed(2)}`;
    };
    const detail = `trial ${spread(durations)}; ${Object.entries(phases)
      .map(([k, v]) => `${k} ${spread(v)}`)
      .join('; ')}`;
    return {
      detail,
      wall,
      steady,
      durations,
      setupMean,
      firstWaveSetup,
      fill,
      gap: gaps.length ? median(gaps) : 0,
      tail,
      phases: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, v.reduce((a, b) => a + b, 0) / v.length])),
    };
  };
  await run('warm-up', 1, 1); // builds the image
  const alone = await run('alone', 3, 1);
  const T = median(alone.durations);
  const n = 8 * concurrency;
  const loaded = await run('loaded', n, concurrency);
  const actual = n / loaded.wall;
  const ideal = concurrency / T;
  console.log(`scripted model: ${latencyMs} ms per turn, ${turns} turns per trial (bash-tool, real containers)`);
  console.log(`  one trial alone: median ${T.toFixed(2)} s`);
  console.log(
    `  ${n} trials at concurrency ${concurrency}: ${loaded.wall.toFixed(1)} s wall, median trial ${median(loaded.durations).toFixed(2)} s`,
  );
  const show = (p: Record<string, number>) =>
    Object.entries(p)
      .map(([k, v]) => `${k} ${v.toFixed(2)}`)
      .join(', ');
  console.log(`  mean phase seconds alone:  ${show(alone.phases)}`);
  console.log(`  mean phase seconds loaded: ${show(loaded.phases)}`);
  console.log(`  spread of seconds loaded: ${loaded.detail}`);
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(
    `  mean trial ${mean(loaded.durations).toFixed(2)} s loaded, ${mean(alone.durations).toFixed(2)} s alone; mean environment_setup loaded ${loaded.setupMean.toFixed(2)} s, first wave ${loaded.firstWaveSetup.toFixed(2)} s`,
  );
  console.log(
    `  first wave started after ${loaded.fill.toFixed(2)} s; median gap from a trial's end to the next start ${(loaded.gap * 1000).toFixed(0)} ms; ${loaded.tail.toFixed(2)} s after the last trial`,
  );
  console.log(`  ideal ${ideal.toFixed(3)} trials/s (concurrency / trial duration alone)`);
  console.log(
    `  sustained throughput (first completion to last start) ${loaded.steady.toFixed(3)} trials/s: ratio ${(loaded.steady / ideal).toFixed(3)}  (target >= 0.85)`,
  );
  console.log(
    `  whole job, fill-up and drain included ${actual.toFixed(3)} trials/s: ratio ${(actual / ideal).toFixed(3)}  (target >= 0.95)`,
  );
  // The same job as bare engine calls (bench/bare-trial.ts: the same containers, turns and grading
  // protections, no harness): what this engine on these cores allows at all, against the same ideal.
  const task = await loadTask(path.join(work, 'tasks', 'throughput'));
  const { image } = await provider.prepare(task);
  // The same job as bare engine calls, with the grading protections and without (tests in the agent's own container).
  const bareJob = async (protect: boolean): Promise<{ alone: number; wall: number }> => {
    const alone: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t = performance.now();
      await bareTrial(provider.docker, task, image, { turns, latencyMs, protect });
      alone.push((performance.now() - t) / 1000);
    }
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < n) await bareTrial(provider.docker, task, image, { turns, latencyMs, protect });
      }),
    );
    return { alone: median(alone), wall: (performance.now() - t0) / 1000 };
  };
  for (const protect of [true, false]) {
    const bare = await bareJob(protect);
    const what = protect ? 'with the grading protections' : "without them (tests in the agent's container)";
    console.log(
      `  bare engine calls, same job, ${what}: one alone ${bare.alone.toFixed(2)} s; ${n} at concurrency ${concurrency} ${bare.wall.toFixed(1)} s wall: ratio ${(n / bare.wall / (concurrency / bare.alone)).toFixed(3)} of its ideal`,
    );
    if (protect)
      console.log(
        `  harness throughput / bare throughput with the same guarantees ${(actual / (n / bare.wall)).toFixed(3)}`,
      );
  }
} finally {
  await server.close();
  await rm(work, { recursive: true, force: true });
}
