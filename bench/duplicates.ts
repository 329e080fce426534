/**
 * What `synth`'s admission step (write) costs as the pool grows, measured side by side in one run
 * on task folders on disk (no engine): each write must refuse a task that duplicates one admitted
 * before it or one of the pool.
 * - re-read: what synth did before, every write reading every admitted folder again (task.toml,
 *   instruction, a walk of the folder, a hash of its tests) and pairing them all;
 * - index: the folders read once per job (the first write) and one index kept in step; a write
 *   reads the new candidate and compares it with the tasks that share its text.
 * Instructions are a generated set's: the same long boilerplate, a short ask of their own.
 *
 *   node dist/bench/duplicates.js [N ...]    (default 100 1000: admitted folders before the writes)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readDuplicateKey } from '../src/check/check.js';
import { DuplicateIndex, findDuplicates } from '../src/check/duplicates.js';
import { writeTask } from './write-task.js';

const sizes = process.argv.slice(2).map(Number);
const WRITES = 20;
const BOILERPLATE =
  'You are in a Debian container with the files under /app. Read the input described below, do exactly what it ' +
  'asks, and write the result where it says; keep every other file as it is and do not use the network.';

const taskFiles = (i: number): Record<string, string> => ({
  'task.toml': `[task]\nname = "t${i}"\n[verifier]\ntimeout_sec = 120\n`,
  'instruction.md': `${BOILERPLATE} Count the lines of /app/data-${i}.csv and write the count to /app/out-${i}.txt.\n`,
  'environment/Dockerfile': `FROM debian:bookworm-slim\nWORKDIR /app\nCOPY data-${i}.csv /app/\n`,
  [`environment/data-${i}.csv`]: Array.from({ length: 20 + (i % 7) }, (_, r) => `${r},${i}`).join('\n'),
  'solution/solve.sh': `#!/bin/bash\nwc -l < /app/data-${i}.csv > /app/out-${i}.txt\n`,
  'tests/test.sh': `#!/bin/bash\n[ "$(cat /app/out-${i}.txt)" = "${20 + (i % 7) - 1}" ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n`,
});

const work = await mkdtemp(path.join(tmpdir(), 'termgrade-dup-bench-'));
try {
  console.log(`duplicate check at admission, ${WRITES} writes after N admitted folders (ms per write)`);
  for (const n of sizes.length ? sizes : [100, 1000]) {
    const root = path.join(work, String(n));
    const dirs: string[] = [];
    for (let i = 0; i < n + WRITES; i++) {
      const dir = path.join(root, `t${i}`);
      await writeTask(dir, taskFiles(i));
      dirs.push(dir);
    }
    // Before: each write reads every admitted folder again and pairs them all.
    let t = performance.now();
    let found = 0;
    for (let w = 0; w < WRITES; w++) {
      const admitted = await Promise.all(dirs.slice(0, n + w).map(readDuplicateKey));
      const mine = await readDuplicateKey(dirs[n + w]!);
      found += findDuplicates([...admitted, mine]).filter((p) => p.b === mine.name).length;
    }
    const reread = (performance.now() - t) / WRITES;
    // Now: one reading (the first write pays it), then the index.
    t = performance.now();
    const index = new DuplicateIndex();
    for (const k of await Promise.all(dirs.slice(0, n).map(readDuplicateKey))) index.add(k);
    const build = performance.now() - t;
    t = performance.now();
    for (let w = 0; w < WRITES; w++) {
      const mine = await readDuplicateKey(dirs[n + w]!);
      found += index.matches(mine).length;
      index.add(mine);
    }
    const indexed = (performance.now() - t) / WRITES;
    console.log(
      `  N = ${String(n).padStart(5)}   re-read ${reread.toFixed(1).padStart(8)}   index ${indexed.toFixed(2).padStart(6)}` +
        `   ratio ${(reread / indexed).toFixed(0).padStart(5)}x   (index built once in ${build.toFixed(0)} ms; duplicates found ${found}, expected 0)`,
    );
  }
} finally {
  await rm(work, { recursive: true, force: true });
}
