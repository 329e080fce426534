/**
 * A trainer-shaped load on `serve`: B GRPO groups of G sessions asked for at once, each session
 * running E exec calls then verify, as a trainer's rollout step does; bounded (one round) and
 * stopping by itself. Reports group start latency (p50, p99), exec latency (p50, p99), errors,
 * and containers of this server left after it stops (must be 0). With W > 0 the server keeps W warm
 * sandboxes (`--warm W`), filled before the load starts; how many sessions were served warm is shown.
 *
 *   node dist/bench/serve-groups.js [G=8] [B=32] [E=6] [W=0]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { startServer } from '../src/serve/server.js';
import { LABEL_SERVER, LABEL_WARM } from '../src/serve/sessions.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { writeTask } from './write-task.js';
import { client, quantile } from './serve-client.js';

const size = Number(process.argv[2] ?? 8);
const batch = Number(process.argv[3] ?? 32);
const execsEach = Number(process.argv[4] ?? 6);
const warm = Number(process.argv[5] ?? 0);
const secs = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

const work = await mkdtemp(path.join(tmpdir(), 'termgrade-serve-groups-'));
const sessionIds: string[] = [];
try {
  const taskDir = path.join(work, 'task');
  await writeTask(taskDir, {
    'task.toml': '[task]\nname = "bench"\n[environment]\nmemory_mb = 64\n',
    'instruction.md': 'Nothing.\n',
    'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
  });
  const server = await startServer({
    provider: new DockerProvider(),
    tasks: await loadServedTasks([taskDir]),
    dataDir: path.join(work, 'data'),
    maxSessions: size * batch,
    idleTtlSec: 600,
    warm,
  });
  const docker = new Docker();
  const mine = (warmOnly: boolean, all: boolean): Promise<Docker.ContainerInfo[]> =>
    docker.listContainers({
      all,
      filters: {
        label: [`${LABEL_SERVER}=${server.sessions.serverId}`, ...(warmOnly ? [`${LABEL_WARM}=true`] : [])],
      },
    });
  const f0 = Date.now();
  while ((await mine(true, false)).length < warm) await new Promise((r) => setTimeout(r, 250));
  if (warm > 0) console.log(`${warm} warm sandboxes filled in ${secs(Date.now() - f0)}`);
  const call = client(server);
  const starts: number[] = [];
  const execs: number[] = [];
  const errors: string[] = [];
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: batch }, async () => {
      try {
        const s = Date.now();
        const g = await call('POST', '/v1/groups', { task: 'bench', n: size, policy: 'bench' });
        starts.push(Date.now() - s);
        await Promise.all(
          (g.sessions as Array<{ session_id: string }>).map(async ({ session_id: id }) => {
            sessionIds.push(id);
            for (let i = 0; i < execsEach; i += 1) {
              const e = Date.now();
              await call('POST', `/v1/sessions/${id}/exec`, { command: `echo ${i} >> /app/log; wc -l < /app/log` });
              execs.push(Date.now() - e);
            }
            const grade = await call('POST', `/v1/sessions/${id}/verify`);
            if (grade.reward !== 1) errors.push(`session ${id}: reward ${grade.reward} (${grade.status})`);
          }),
        );
        const view = await call('GET', `/v1/groups/${g.group_id}`);
        if (!view.done) errors.push(`group ${g.group_id} not done after every verify`);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }),
  );
  const wall = Date.now() - t0;
  const health = await call('GET', '/healthz');
  await server.close();
  // Every container this server started (warm ones carry no session label: they were started before their session).
  const left = await mine(false, true);
  starts.sort((a, b) => a - b);
  execs.sort((a, b) => a - b);
  console.log(
    `groups of ${size}, ${batch} at once, ${execsEach} exec each: ${sessionIds.length} sessions in ${secs(wall)}`,
  );
  if (starts.length)
    console.log(`group start latency p50 ${secs(quantile(starts, 0.5))}, p99 ${secs(quantile(starts, 0.99))}`);
  if (execs.length)
    console.log(
      `exec latency p50 ${secs(quantile(execs, 0.5))}, p99 ${secs(quantile(execs, 0.99))} (${execs.length} calls)`,
    );
  console.log(
    `session starts: ${health.warm.started_warm} warm, ${health.warm.started_cold} cold (${health.warm.warm_failed} warm failed)`,
  );
  console.log(`errors: ${errors.length}${errors.length ? `\n  ${errors.slice(0, 5).join('\n  ')}` : ''}`);
  console.log(`containers of this server left after it stopped: ${left.length}`);
  process.exitCode = errors.length || left.length ? 1 : 0;
} finally {
  await rm(work, { recursive: true, force: true });
}
