/**
 * What check's probes cost, measured side by side in one run:
 * 1. `check --probes all` against `--probes none` on the bundled examples (ratio of wall times);
 * 2. how probing grows with the number of tasks: N and 10 N small tasks with `--probes fast`
 *    (time per task should stay flat), and the duplicate scan, the one step that compares every
 *    pair of tasks, on 1,000 and 10,000 instructions.
 *
 *   node dist/bench/probes.js [N]          (default N = 10)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkTasks } from '../src/check/check.js';
import { findDuplicates } from '../src/check/duplicates.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { findTaskDirs } from '../src/task/load.js';
import { writeTask } from './write-task.js';

const n = Number(process.argv[2] ?? 10);
const examples = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'examples', 'tasks');
const work = await mkdtemp(path.join(tmpdir(), 'termgrade-probe-bench-'));
const provider = new DockerProvider();

async function timed(dirs: string[], probes: 'none' | 'fast' | 'all'): Promise<number> {
  const t = performance.now();
  const r = await checkTasks(dirs, {
    provider,
    outDir: path.join(work, `out-${probes}-${dirs.length}-${Date.now()}`),
    probes,
    concurrency: 2,
  });
  if (r.summary.admissible !== dirs.length)
    throw new Error(`expected every task admissible, got ${JSON.stringify(r.summary.reasons)}`);
  return (performance.now() - t) / 1000;
}

try {
  const ex = await findTaskDirs([examples]);
  await timed(ex, 'none'); // images built and cached before timing
  const none = await timed(ex, 'none');
  const all = await timed(ex, 'all');
  console.log(`bundled examples (${ex.length} tasks), check wall time`);
  console.log(`  --probes none   ${none.toFixed(1)} s`);
  console.log(`  --probes all    ${all.toFixed(1)} s`);
  console.log(`  ratio all/none  ${(all / none).toFixed(2)}`);

  const make = async (count: number): Promise<string[]> => {
    const dirs: string[] = [];
    for (let i = 0; i < count; i++) {
      const dir = path.join(work, `tasks-${count}`, `t${i}`);
      await writeTask(dir, {
        'task.toml': `[task]\nname = "t${i}"\n`,
        'instruction.md': `Task number ${i}: write the number ${i * 7919} into /app/out.txt, and nothing else ${'x'.repeat(i % 13)}.\n`,
        'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
        'solution/solve.sh': `#!/bin/bash\necho ${i * 7919} > /app/out.txt\n`,
        'tests/test.sh': `#!/bin/bash\n# task ${i}\nif [ "$(cat /app/out.txt 2>/dev/null)" = "${i * 7919}" ]; then echo "PASSED t.py::test_out"; echo 1 > /logs/verifier/reward.txt; else echo "FAILED t.py::test_out - no"; echo 0 > /logs/verifier/reward.txt; fi\n`,
      });
      dirs.push(dir);
    }
    return dirs;
  };
  const small = await make(n);
  const large = await make(10 * n);
  await timed(small.slice(0, 1), 'none');
  const tSmall = await timed(small, 'fast');
  const tLarge = await timed(large, 'fast');
  console.log(`growth with the number of tasks (--probes fast, concurrency 2)`);
  console.log(`  ${n} tasks    ${tSmall.toFixed(1)} s  (${(tSmall / n).toFixed(2)} s per task)`);
  console.log(`  ${10 * n} tasks   ${tLarge.toFixed(1)} s  (${(tLarge / (10 * n)).toFixed(2)} s per task)`);
  console.log(`  per-task ratio ${10 * n}/${n}   ${(tLarge / (10 * n) / (tSmall / n)).toFixed(2)}`);

  const candidates = (k: number) =>
    Array.from({ length: k }, (_, i) => ({
      name: `t${i}`,
      environment: `e${i}`,
      tests: `t${i}`,
      instruction: `Task ${i}: transform the file number ${i} into the format the tests ask for, keeping order ${i % 97}.`,
    }));
  for (const k of [1000, 10000]) {
    const t = performance.now();
    findDuplicates(candidates(k));
    console.log(`  duplicate scan of ${k} instructions   ${((performance.now() - t) / 1000).toFixed(2)} s`);
  }
} finally {
  await provider.closeAll();
  await rm(work, { recursive: true, force: true });
}
