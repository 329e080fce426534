/**
 * `termgrade serve` costs, measured side by side in one run:
 * 1. an exec round trip through the server (HTTP on loopback, token and Host checks, JSON, the
 *    session lookup) against the same exec (same command, same timeout) called on a sandbox
 *    directly, interleaved: medians and their ratio (target <= 1.1);
 * 2. 64 sessions asked for at once: each one's start latency (p50, p99), containers live and left
 *    after they are deleted;
 * 3. server memory (RSS and heap, after a collection) before and after 1,000 episodes: bash-tool
 *    against a scripted model endpoint on loopback, on the fake sandbox provider (the server's own
 *    retention is what is measured, not Docker's), with token ids and logprobs in every reply.
 *
 * RSS is also shown after a second round of as many episodes: native memory (the allocator's high
 * water mark) may stay above the start, but it does not climb with the episode count.
 *
 *   node --expose-gc dist/bench/serve.js [execs] [sessions] [episodes]     (0 skips a part)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { servedModels } from '../src/cli/serve-command.js';
import { startServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { median } from '../src/stats/summary.js';
import { loadTask } from '../src/task/load.js';
import { FakeProvider } from '../test/support/fake-provider.js';
import { ScriptedModelServer } from '../test/support/scripted-model-server.js';
import { bash } from '../test/support/scripts.js';
import { writeTask } from './write-task.js';
import { client, memory, quantile } from './serve-client.js';

const execs = Number(process.argv[2] ?? 200);
const sessions = Number(process.argv[3] ?? 64);
const episodes = Number(process.argv[4] ?? 1000);

const mb = (n: number): string => `${(n / 1e6).toFixed(1)} MB`;

const work = await mkdtemp(path.join(tmpdir(), 'termgrade-serve-bench-'));
try {
  const taskDir = path.join(work, 'task');
  await writeTask(taskDir, {
    'task.toml': '[task]\nname = "bench"\n[environment]\nmemory_mb = 64\n',
    'instruction.md': 'Nothing.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'tests/test.sh': '#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n',
  });
  const provider = new DockerProvider();
  if (execs > 0 && sessions > 0) {
    const server = await startServer({
      provider,
      tasks: await loadServedTasks([taskDir]),
      dataDir: path.join(work, 'data'),
      maxSessions: sessions + 1,
      idleTtlSec: 600,
    });
    const call = client(server);

    // 1. exec round trip: through the server vs on a sandbox directly, the same command and timeout.
    const task = await loadTask(taskDir);
    const direct = await provider.start(task, await provider.prepare(task));
    const id = (await call('POST', '/v1/sessions', { task: 'bench' })).session_id as string;
    const viaServer: number[] = [];
    const onSandbox: number[] = [];
    for (let i = 0; i < execs + 5; i++) {
      let t = performance.now();
      await call('POST', `/v1/sessions/${id}/exec`, { command: 'echo hi' });
      const a = performance.now() - t;
      t = performance.now();
      await direct.exec(['bash', '-lc', 'echo hi'], { timeoutSec: 180 });
      const b = performance.now() - t;
      if (i >= 5) {
        viaServer.push(a);
        onSandbox.push(b);
      }
    }
    await direct.close();
    await call('DELETE', `/v1/sessions/${id}`);
    const s = median(viaServer);
    const d = median(onSandbox);
    console.log(`exec round trip, ${execs} interleaved calls each`);
    console.log(`  through serve (HTTP)   median ${s.toFixed(2)} ms`);
    console.log(`  sandbox.exec directly  median ${d.toFixed(2)} ms`);
    console.log(`  ratio serve/direct     ${(s / d).toFixed(2)}  (target <= 1.10)`);

    // 2. many sessions asked for at once.
    const t0 = performance.now();
    const started = await Promise.all(
      Array.from({ length: sessions }, async () => {
        const t = performance.now();
        const r = await call('POST', '/v1/sessions', { task: 'bench' });
        return { id: r.session_id as string, ms: performance.now() - t };
      }),
    );
    const all = performance.now() - t0;
    const docker = new Docker();
    const live = (await docker.listContainers({ filters: { label: ['io.termgrade.session'] } })).length;
    await Promise.all(started.map((x) => call('DELETE', `/v1/sessions/${x.id}`)));
    const left = (await docker.listContainers({ all: true, filters: { label: ['io.termgrade.session'] } })).length;
    const latencies = started.map((x) => x.ms).sort((a, b) => a - b);
    console.log(`${sessions} sessions asked for at once`);
    console.log(
      `  start latency p50 / p99  ${(quantile(latencies, 0.5) / 1000).toFixed(2)} s / ${(quantile(latencies, 0.99) / 1000).toFixed(2)} s  (all started in ${(all / 1000).toFixed(1)} s)`,
    );
    console.log(`  containers live / left   ${live} / ${left}`);
    await server.close();
  }

  // 3. memory over many episodes (fake sandboxes, a scripted endpoint on loopback).
  const model = new ScriptedModelServer({
    m: (_i, body) => {
      const turns = body.messages.filter((m) => m.role === 'assistant').length;
      const step = turns === 0 ? bash('echo hello > /app/out.txt') : bash('echo TERMGRADE_TASK_COMPLETE');
      return 'reply' in step ? { reply: { ...step.reply, tokenIds: true } } : step;
    },
  });
  const modelUrl = await model.start();
  const fake = new FakeProvider({ grade: () => 1 });
  const epServer = await startServer({
    provider: fake,
    tasks: await loadServedTasks([taskDir]),
    dataDir: path.join(work, 'episodes-data'),
    maxSessions: 16,
    models: await servedModels({
      model: [`m@${modelUrl}`],
      apiKeyEnv: 'TG_BENCH_NO_KEY',
      requestTimeout: 60,
      modelRetries: 0,
    }),
  });
  const ep = client(epServer);
  const runEpisodes = async (n: number, prefix: string): Promise<void> => {
    for (let i = 0; i < n; i += 16) {
      await Promise.all(
        Array.from({ length: Math.min(16, n - i) }, (_, j) =>
          ep('POST', '/v1/episodes', {
            task: 'bench',
            agent: 'bash-tool',
            model: { model: 'm' },
            max_turns: 2,
            episode_id: `${prefix}-${i + j}`,
            session_id: `s-${i + j}`,
          }),
        ),
      );
      // The stand-in endpoint's own log of requests is not the server's memory.
      model.requests.length = 0;
    }
  };
  await runEpisodes(32, 'warm'); // code paths loaded and compiled before the baseline
  const before = memory();
  const t1 = performance.now();
  await runEpisodes(episodes, 'ep');
  const took = performance.now() - t1;
  const after = memory();
  await runEpisodes(episodes, 'more');
  const again = memory();
  const answered = await ep('POST', '/v1/episodes', {
    task: 'bench',
    agent: 'bash-tool',
    model: { model: 'm' },
    episode_id: 'ep-0',
  });
  console.log(
    `${episodes} episodes (bash-tool, 2 turns each with token ids and logprobs; fake sandboxes) in ${(took / 1000).toFixed(1)} s`,
  );
  console.log(
    `  server RSS  before / after / after ${episodes} more  ${mb(before.rss)} / ${mb(after.rss)} / ${mb(again.rss)}`,
  );
  console.log(
    `  server heap before / after / after ${episodes} more  ${mb(before.heap)} / ${mb(after.heap)} / ${mb(again.heap)}  (external ${mb(before.external)} / ${mb(after.external)} / ${mb(again.external)})`,
  );
  console.log(
    `  the first episode answered again from disk: reward ${answered.reward}, ${answered.turns.length} turns`,
  );
  await epServer.close();
  await model.close();
} finally {
  await rm(work, { recursive: true, force: true });
}
