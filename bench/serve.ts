/**
 * `termgrade serve` costs, measured side by side in one run:
 * 1. an exec round trip through the server (HTTP on loopback, JSON, the session lookup) against
 *    the same exec called on a sandbox directly, interleaved: medians and their ratio;
 * 2. 64 live sessions held at once, then released: how many containers and how much server heap
 *    are left afterwards (no leak: 0 containers, heap back near where it started).
 *
 *   node dist/bench/serve.js [execs] [sessions]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { median } from '../src/stats/summary.js';
import { loadTask } from '../src/task/load.js';
import { writeTask } from './write-task.js';

const execs = Number(process.argv[2] ?? 40);
const sessions = Number(process.argv[3] ?? 64);

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
  const server = await startServer({ provider, tasks: await loadServedTasks([taskDir]), dataDir: path.join(work, 'data'), maxSessions: sessions + 1, idleTtlSec: 600 });
  const post = async (url: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${server.url}${url}`, { method: 'POST', headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
    return res.json();
  };

  // 1. exec round trip: through the server vs on a sandbox directly.
  const task = await loadTask(taskDir);
  const direct = await provider.start(task, await provider.prepare(task));
  const id = (await post('/v1/sessions', { task: 'bench' })).session_id as string;
  const viaServer: number[] = [];
  const onSandbox: number[] = [];
  for (let i = 0; i < execs + 3; i++) {
    let t = performance.now();
    await post(`/v1/sessions/${id}/exec`, { command: 'echo hi' });
    const a = performance.now() - t;
    t = performance.now();
    await direct.exec(['bash', '-lc', 'echo hi']);
    const b = performance.now() - t;
    if (i >= 3) {
      viaServer.push(a);
      onSandbox.push(b);
    }
  }
  await direct.close();
  await fetch(`${server.url}/v1/sessions/${id}`, { method: 'DELETE' });
  const s = median(viaServer);
  const d = median(onSandbox);
  console.log(`exec round trip, ${execs} interleaved calls each`);
  console.log(`  through serve (HTTP)   median ${s.toFixed(1)} ms`);
  console.log(`  sandbox.exec directly  median ${d.toFixed(1)} ms`);
  console.log(`  ratio serve/direct     ${(s / d).toFixed(2)}`);

  // 2. many live sessions, held and released.
  global.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < sessions; i += 8) {
    const batch = await Promise.all(Array.from({ length: Math.min(8, sessions - i) }, () => post('/v1/sessions', { task: 'bench' })));
    ids.push(...batch.map((b) => b.session_id as string));
  }
  const held = performance.now() - t0;
  const docker = new Docker();
  const live = (await docker.listContainers({ filters: { label: ['io.termgrade.session'] } })).length;
  await Promise.all(ids.map((x) => fetch(`${server.url}/v1/sessions/${x}`, { method: 'DELETE' })));
  const left = (await docker.listContainers({ all: true, filters: { label: ['io.termgrade.session'] } })).length;
  global.gc?.();
  const heapAfter = process.memoryUsage().heapUsed;
  console.log(`${sessions} sessions held at once, then released`);
  console.log(`  started in              ${(held / 1000).toFixed(1)} s (${(held / sessions).toFixed(0)} ms per session)`);
  console.log(`  containers live / left  ${live} / ${left}`);
  console.log(`  server heap before / after  ${(heapBefore / 1e6).toFixed(1)} MB / ${(heapAfter / 1e6).toFixed(1)} MB`);
  await server.close();
} finally {
  await rm(work, { recursive: true, force: true });
}
