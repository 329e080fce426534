/**
 * Branching a live sandbox (Sandbox.fork, issue 37) against the way without it: n fresh sandboxes
 * of the same task, each replaying the parent's commands (files written, 20 MB of data made, a
 * service started and answering). Both ways run their n at once on the local engine; a child is
 * ready when its service answers.
 *
 *   node dist/bench/fork.js [n=8] [rounds=3]
 *
 * Prints, per way: per-child ready latency p50/p99 (a fork's children are all handed out together,
 * so each counts the whole fork), CPU per child of the engine's daemons (dockerd, containerd; the
 * per-container shims are not counted: they exit with their container) and of this process with
 * its children (cp, find), memory per child (its cgroup's usage) and disk per child (the
 * engine's SizeRw), and the load average before and after.
 */
import { readFile, readdir } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { acquireSandbox } from '../src/sandbox/lease.js';
import type { Sandbox } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import type { Task } from '../src/task/task.js';
import { writeTask } from './write-task.js';

const n = Number(process.argv[2] ?? 8);
const rounds = Number(process.argv[3] ?? 3);

const SERVER = `use IO::Socket::INET; my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 8080, Listen => 5, ReuseAddr => 1) or die; while (my $c = $s->accept) { open(my $f, '<', '/app/greeting'); print $c scalar <$f>; close $c }`;

/** The parent's episode so far: what a fresh sandbox replays to reach the same state. */
const COMMANDS = [
  'echo from parent > /app/notes.txt && echo parent > /app/greeting',
  `cat > /app/srv.pl <<'PL'\n${SERVER}\nPL`,
  'head -c 20000000 /dev/urandom > /app/data.bin && mkdir -p /app/src && for i in $(seq 200); do echo "line $i" > /app/src/f$i.txt; done',
  'cd /app && (nohup perl srv.pl > /app/srv.log 2>&1 &)',
];
const ANSWERS = `for i in $(seq 100); do perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new("127.0.0.1:8080") or exit 1; print <$c>' && exit 0; sleep 0.1; done; exit 1`;

async function replay(box: Sandbox): Promise<void> {
  for (const c of COMMANDS) {
    const r = await box.exec(['bash', '-c', c], { timeoutSec: 120 });
    if (r.exitCode !== 0) throw new Error(`${c.slice(0, 40)}: exit ${r.exitCode}: ${r.stderr.text}`);
  }
  const up = await box.exec(['bash', '-c', ANSWERS], { timeoutSec: 60 });
  if (up.stdout.text !== 'parent\n') throw new Error(`the service does not answer: ${up.stdout.text}${up.stderr.text}`);
}

/** CPU seconds (user + system) of the processes named, from /proc. */
async function cpuOf(names: string[]): Promise<number> {
  let ticks = 0;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    if (!names.includes(comm)) continue;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(f[11]) + Number(f[12]);
  }
  return ticks / 100;
}

/** This process's CPU seconds with its waited-for children's (cp, find). */
async function selfCpu(): Promise<number> {
  const f = (await readFile('/proc/self/stat', 'utf8')).split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
}

/** A container's memory use (bytes) from its cgroup (v1 or v2) on this machine. */
async function memoryOf(provider: DockerProvider, id: string): Promise<number> {
  const pid = (await provider.docker.getContainer(id).inspect()).State.Pid;
  const cg = await readFile(`/proc/${pid}/cgroup`, 'utf8');
  const v1 = /^\d+:memory:(\/.*)$/m.exec(cg)?.[1];
  if (v1) return Number(await readFile(`/sys/fs/cgroup/memory${v1}/memory.usage_in_bytes`, 'utf8'));
  const v2 = /^0::(\/.*)$/m.exec(cg)![1]!;
  return Number(await readFile(`/sys/fs/cgroup${v2}/memory.current`, 'utf8'));
}

const diskOf = async (provider: DockerProvider, id: string): Promise<number> =>
  // dockerode's types give inspect({ size }) only a callback overload; it returns a promise as well.
  // eslint-disable-next-line @typescript-eslint/await-thenable
  ((await provider.docker.getContainer(id).inspect({ size: true } as never)) as unknown as { SizeRw?: number })
    .SizeRw ?? 0;

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

interface Way {
  latencies: number[];
  engineCpu: number;
  selfCpu: number;
  memory: number[];
  disk: number[];
  children: number;
  /** Milliseconds the parent was frozen, per fork. */
  frozen: number[];
}

async function measure(
  provider: DockerProvider,
  way: Way,
  run: () => Promise<{ boxes: Sandbox[]; ms: number[] }>,
): Promise<void> {
  const e0 = await cpuOf(['dockerd', 'containerd']);
  const s0 = await selfCpu();
  const { boxes, ms } = await run();
  way.engineCpu += (await cpuOf(['dockerd', 'containerd'])) - e0;
  way.selfCpu += (await selfCpu()) - s0;
  way.latencies.push(...ms);
  way.children += boxes.length;
  for (const b of boxes) {
    way.memory.push(await memoryOf(provider, b.id));
    way.disk.push(await diskOf(provider, b.id));
  }
  await Promise.all(boxes.map((b) => b.close()));
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(tmpdir(), 'termgrade-bench-fork-'));
  const provider = new DockerProvider();
  try {
    await writeTask(path.join(work, 'task'), {
      'task.toml': '[task]\nname = "bench-fork"\n[verifier]\ntimeout_sec = 30\n',
      'instruction.md': 'Serve a greeting on 8080.\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
      'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
    });
    const task: Task = await loadTask(path.join(work, 'task'));
    const prepared = await provider.prepare(task);
    const load0 = loadavg();
    const fork: Way = { latencies: [], engineCpu: 0, selfCpu: 0, memory: [], disk: [], children: 0, frozen: [] };
    const fresh: Way = { latencies: [], engineCpu: 0, selfCpu: 0, memory: [], disk: [], children: 0, frozen: [] };
    for (let r = 0; r < rounds; r++) {
      const parent = await acquireSandbox({ provider, task, prepare: prepared });
      try {
        await replay(parent.sandbox);
        await measure(provider, fork, async () => {
          const t = performance.now();
          const made = await parent.sandbox.fork!(n);
          fork.frozen.push(made.frozenMs ?? NaN);
          await Promise.all(
            made.children.map(async (c) => {
              const up = await c.exec(['bash', '-c', ANSWERS], { timeoutSec: 60 });
              if (up.stdout.text !== 'parent\n') throw new Error('a fork does not answer');
            }),
          );
          const ms = performance.now() - t;
          return { boxes: made.children, ms: made.children.map(() => ms) };
        });
      } finally {
        await parent.close();
      }
      await measure(provider, fresh, async () => {
        const made = await Promise.all(
          Array.from({ length: n }, async () => {
            const t = performance.now();
            const lease = await acquireSandbox({ provider, task, prepare: prepared });
            await replay(lease.sandbox);
            return { box: lease.sandbox, ms: performance.now() - t };
          }),
        );
        return { boxes: made.map((m) => m.box), ms: made.map((m) => m.ms) };
      });
    }
    const mib = (b: number): string => (b / 1024 / 1024).toFixed(1);
    const avg = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    const line = (name: string, w: Way): string =>
      `${name.padEnd(28)} ready p50 ${(pct(w.latencies, 50) / 1000).toFixed(2)} s p99 ${(pct(w.latencies, 99) / 1000).toFixed(2)} s | engine CPU ${(w.engineCpu / w.children).toFixed(3)} s/child, harness CPU ${(w.selfCpu / w.children).toFixed(3)} s/child | memory ${mib(avg(w.memory))} MiB/child, disk ${mib(avg(w.disk))} MiB/child`;
    console.log(
      `n = ${n}, ${rounds} rounds; load average before ${load0.map((l) => l.toFixed(2)).join(' ')}, after ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} (2 cores, shared)`,
    );
    console.log(line(`fork of ${n}`, fork));
    console.log(
      `${''.padEnd(28)} the parent frozen ${fork.frozen.map((f) => `${Math.round(f)} ms`).join(', ')} (one fork each round)`,
    );
    console.log(line(`${n} fresh, replayed`, fresh));
  } finally {
    await provider.closeAll();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
