/**
 * What check's probes cost, measured side by side in one run:
 * 1. `check --probes all` against `--probes none` on the bundled examples (ratio of wall times),
 *    and the hack probes' share: per task, the files played on, the gradings and their time (also
 *    on the three hack fixtures of test/fixtures/probes, whose tests import or run a module);
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
import type { CheckReport } from '../src/check/schema.js';
import { findDuplicates } from '../src/check/duplicates.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { findTaskDirs } from '../src/task/load.js';
import { writeTask } from './write-task.js';

const n = Number(process.argv[2] ?? 10);
const examples = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'examples', 'tasks');
const work = await mkdtemp(path.join(tmpdir(), 'termgrade-probe-bench-'));
const provider = new DockerProvider();

let last: CheckReport | null = null;

async function timed(dirs: string[], probes: 'none' | 'fast' | 'all', admitAll = true): Promise<number> {
  const t = performance.now();
  const r = await checkTasks(dirs, {
    provider,
    outDir: path.join(work, `out-${probes}-${dirs.length}-${Date.now()}`),
    probes,
    concurrency: 2,
  });
  last = r;
  if (admitAll && r.summary.admissible !== dirs.length)
    throw new Error(`expected every task admissible, got ${JSON.stringify(r.summary.reasons)}`);
  return (performance.now() - t) / 1000;
}

/** The hack probes' cost per task of the last check: files played on, gradings, seconds. */
function hackCost(): void {
  let total = 0;
  for (const t of last!.tasks) {
    const ms = t.hacks.reduce((a, h) => a + h.ms, 0);
    total += ms;
    const files = [...new Set(t.hacks.map((h) => h.target))];
    console.log(
      `  ${t.name.padEnd(18)} ${(ms / 1000).toFixed(1).padStart(5)} s  ${String(t.hacks.length).padStart(2)} gradings  ${files.join(' ') || '(no file the tests run or import)'}  ${t.verdict}${t.reasons.length ? ` ${t.reasons.join(',')}` : ''}`,
    );
  }
  console.log(`  mean per task      ${(total / 1000 / last!.tasks.length).toFixed(1)} s`);
}

try {
  const ex = await findTaskDirs([examples]);
  await timed(ex, 'none'); // images built and cached before timing
  const none = await timed(ex, 'none');
  // Not required to admit all: the hack probes reject what today's grading lets a hack pass.
  const all = await timed(ex, 'all', false);
  console.log(`bundled examples (${ex.length} tasks), check wall time`);
  console.log(`  --probes none   ${none.toFixed(1)} s`);
  console.log(`  --probes all    ${all.toFixed(1)} s`);
  console.log(`  ratio all/none  ${(all / none).toFixed(2)}`);
  for (const t of last!.tasks.filter((t) => t.verdict === 'rejected'))
    console.log(`  rejected by --probes all: ${t.name} (${t.reasons.join(', ')})`);
  console.log('hack probes (reward_hackable) per task, in that --probes all run');
  hackCost();
  const fixtures = ['hack_equal', 'hack_types', 'hack_resist'].map((f) =>
    path.join(examples, '..', '..', 'test', 'fixtures', 'probes', f),
  );
  await timed(fixtures, 'none', false); // images built before timing
  const fx = await timed(fixtures, 'all', false);
  console.log(
    `hack fixtures (${fixtures.length} tasks whose tests import or run a module), --probes all ${fx.toFixed(1)} s`,
  );
  hackCost();

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
