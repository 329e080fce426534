/**
 * `termgrade serve` at scale, on a lightweight task (memory_mb 64), side by side in one run:
 * S sessions asked for at once (capacity above S) on a server with no warm sandboxes, then on
 * one whose W warm sandboxes were filled before the burst. For each: sessions started per second
 * (S over the wall time of the burst), start latency p50 / p99, exec round trip p50 / p99 (E calls
 * on every live session, all at once), server RSS and heap per live session (after a collection,
 * against the idle server), the containers' own memory (their memory cgroups' usage, read from
 * /sys/fs/cgroup), sessions that did not start (at the start deadline, say) and containers left
 * after the server stops (must be 0). The warm fill is waited for up to 10 minutes. With `pool`, the same
 * again over a pool of two engines: this machine's engine and a second dockerd started here (its
 * own data root, exec root, socket and pid file; bridge and iptables off), removed at the end.
 *
 *   node --expose-gc dist/bench/serve-scale.js [S=256] [W=S] [E=4] [pool]
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { EnginePool } from '../src/sandbox/pool/provider.js';
import type { SandboxProvider } from '../src/sandbox/sandbox.js';
import { startServer, type RunningServer } from '../src/serve/server.js';
import { LABEL_SERVER, LABEL_WARM } from '../src/serve/sessions.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { startEngines, type TestEngine } from '../test/support/engines.js';
import { writeTask } from './write-task.js';
import { client, memory, quantile } from './serve-client.js';

const S = Number(process.argv[2] ?? 256);
const W = Number(process.argv[3] ?? S);
const E = Number(process.argv[4] ?? 4);
const withPool = process.argv[5] === 'pool';
const FILL_MS = 600_000;

const ms = (n: number): string => (n >= 1000 ? `${(n / 1000).toFixed(2)} s` : `${n.toFixed(0)} ms`);
const mb = (n: number): string => `${(n / 2 ** 20).toFixed(2)} MiB`;

/** A container's memory use as its cgroup counts it (v1 or v2, cgroupfs or systemd layout); null if not found. */
function cgroupMemory(id: string): number | null {
  for (const file of [
    `/sys/fs/cgroup/memory/docker/${id}/memory.usage_in_bytes`,
    `/sys/fs/cgroup/docker/${id}/memory.current`,
    `/sys/fs/cgroup/system.slice/docker-${id}.scope/memory.current`,
  ])
    if (existsSync(file)) return Number(readFileSync(file, 'utf8').trim());
  return null;
}

/** This server's containers on every engine, running ones only unless `all`; warm ones only with `warm`. */
async function containers(engines: Docker[], server: RunningServer, warm: boolean, all = false): Promise<string[]> {
  const label = [`${LABEL_SERVER}=${server.sessions.serverId}`, ...(warm ? [`${LABEL_WARM}=true`] : [])];
  const lists = await Promise.all(engines.map((d) => d.listContainers({ all, filters: { label } })));
  return lists.flat().map((c) => c.Id);
}

interface Figures {
  startsPerSec: number;
  start: [number, number];
  exec: [number, number];
  rssPerSession: number;
  heapPerSession: number;
  containerMem: { median: number; read: number } | null;
  /** Sessions refused or failed to start (503 at the start deadline, say), and the first such answer. */
  failed: number;
  firstFailure: string | null;
  warmFilled: number;
  fillSec: number | null;
  warmServed: number;
  left: number;
}

/** One burst of S sessions on a fresh server with `warm` sandboxes filled first. */
async function burst(provider: SandboxProvider, engines: Docker[], taskDir: string, warm: number): Promise<Figures> {
  const work = await mkdtemp(path.join(tmpdir(), 'termgrade-serve-scale-data-'));
  const t = performance.now();
  const server = await startServer({
    provider,
    tasks: await loadServedTasks([taskDir]),
    dataDir: work,
    maxSessions: S + 4,
    idleTtlSec: 3600,
    warm,
  });
  const call = client(server);
  let fillSec: number | null = null;
  let warmFilled = 0;
  if (warm > 0) {
    // Bounded: a warm start that failed is not started again until asked for, so the fill may stay short.
    while ((warmFilled = (await containers(engines, server, true)).length) < warm && performance.now() - t < FILL_MS)
      await new Promise((r) => setTimeout(r, 250));
    fillSec = (performance.now() - t) / 1000;
  }
  const idle = memory();
  const t0 = performance.now();
  const failures: string[] = [];
  const tried = await Promise.all(
    Array.from({ length: S }, async () => {
      const s = performance.now();
      try {
        const r = await call('POST', '/v1/sessions', { task: 'light' });
        return [{ id: r.session_id as string, ms: performance.now() - s }];
      } catch (err) {
        failures.push((err as Error).message);
        return [];
      }
    }),
  );
  const started = tried.flat();
  const wall = (performance.now() - t0) / 1000;
  const loaded = memory();
  const ids = await containers(engines, server, false);
  const mem = ids.map(cgroupMemory).filter((m): m is number => m !== null);
  mem.sort((a, b) => a - b);
  const execs: number[] = [];
  await Promise.all(
    started.map(async ({ id }) => {
      for (let i = 0; i < E; i++) {
        const s = performance.now();
        const r = await call('POST', `/v1/sessions/${id}/exec`, { command: `echo ${i}` });
        if (r.output !== `${i}\n`) throw new Error(`session ${id}: exec answered ${JSON.stringify(r)}`);
        execs.push(performance.now() - s);
      }
    }),
  );
  const health = await call('GET', '/healthz');
  await Promise.all(started.map((x) => call('DELETE', `/v1/sessions/${x.id}`)));
  await server.close();
  const left = (await containers(engines, server, false, true)).length;
  await rm(work, { recursive: true, force: true });
  const starts = started.map((x) => x.ms).sort((a, b) => a - b);
  execs.sort((a, b) => a - b);
  return {
    failed: failures.length,
    firstFailure: failures[0] ?? null,
    warmFilled,
    startsPerSec: started.length / wall,
    start: [quantile(starts, 0.5), quantile(starts, 0.99)],
    exec: [quantile(execs, 0.5), quantile(execs, 0.99)],
    rssPerSession: (loaded.rss - idle.rss) / started.length,
    heapPerSession: (loaded.heap - idle.heap) / started.length,
    containerMem: mem.length ? { median: quantile(mem, 0.5), read: mem.length } : null,
    fillSec,
    warmServed: health.warm.started_warm,
    left,
  };
}

function report(name: string, warm: number, f: Figures): void {
  console.log(
    `${name}, warm ${warm}${f.fillSec !== null ? ` (${f.warmFilled} running after ${f.fillSec.toFixed(1)} s of filling)` : ''}:`,
  );
  console.log(
    `  ${S} sessions asked at once, ${S - f.failed} started: ${f.startsPerSec.toFixed(1)} started/s; start p50 ${ms(f.start[0])}, p99 ${ms(f.start[1])}; ${f.warmServed} served warm`,
  );
  if (f.failed) console.log(`  ${f.failed} not started; the first answer: ${f.firstFailure}`);
  console.log(`  exec round trip (${E} on each live session, all at once): p50 ${ms(f.exec[0])}, p99 ${ms(f.exec[1])}`);
  console.log(
    `  per live session: server RSS ${mb(f.rssPerSession)}, heap ${mb(f.heapPerSession)}; container memory (cgroup) median ${f.containerMem ? `${mb(f.containerMem.median)} (${f.containerMem.read} read)` : 'not readable'}`,
  );
  console.log(`  containers left after stop: ${f.left}`);
}

/** A few sessions on their own server, so the image is built (on a pool: shipped) and code paths compiled before timing. */
async function warmUp(provider: SandboxProvider, taskDir: string, dataDir: string): Promise<void> {
  const server = await startServer({ provider, tasks: await loadServedTasks([taskDir]), dataDir, maxSessions: 8 });
  const call = client(server);
  const ids = await Promise.all(
    Array.from({ length: 8 }, async () => (await call('POST', '/v1/sessions', { task: 'light' })).session_id as string),
  );
  await Promise.all(ids.map((id) => call('DELETE', `/v1/sessions/${id}`)));
  await server.close();
}

const work = await mkdtemp(path.join(tmpdir(), 'termgrade-serve-scale-'));
let extra: TestEngine[] = [];
let failed = false;
try {
  const taskDir = path.join(work, 'light');
  await writeTask(taskDir, {
    'task.toml': '[task]\nname = "light"\n[environment]\nmemory_mb = 64\n',
    'instruction.md': 'Nothing.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
  });
  const runs: Array<{ name: string; provider: () => SandboxProvider; engines: Docker[] }> = [
    { name: '1 engine', provider: () => new DockerProvider(), engines: [new Docker()] },
  ];
  if (withPool) {
    extra = await startEngines(1);
    const half = Math.ceil((S + 4) / 2);
    runs.push({
      name: '2 engines (pool)',
      provider: () =>
        new EnginePool([
          { name: 'main', host: 'unix:///var/run/docker.sock', capacity: half, labels: {} },
          { name: 'e1', host: extra[0]!.host, capacity: half, labels: {} },
        ]),
      engines: [new Docker(), extra[0]!.docker],
    });
  }
  for (const r of runs) {
    // The image built (and, on a pool, shipped) before anything is timed.
    await warmUp(r.provider(), taskDir, path.join(work, 'warmup'));
    const cold = await burst(r.provider(), r.engines, taskDir, 0);
    report(r.name, 0, cold);
    const hot = await burst(r.provider(), r.engines, taskDir, W);
    report(r.name, W, hot);
    console.log(
      `  ${r.name}: warm / cold  starts per second ${(hot.startsPerSec / cold.startsPerSec).toFixed(1)}x, start p50 ${(hot.start[0] / cold.start[0]).toFixed(2)}x, p99 ${(hot.start[1] / cold.start[1]).toFixed(2)}x`,
    );
    failed ||= cold.left + hot.left + hot.failed > 0;
  }
} finally {
  await Promise.all(extra.map((e) => e.destroy()));
  await rm(work, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
