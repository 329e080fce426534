/**
 * check --probes all with this build against a baseline build (another worktree's dist), side by
 * side in one run, on the bundled examples and on the test suite's tasks that today's check admits:
 * each side's wall time and every task's verdict, so a false rejection and the cost of the new
 * probes (the traced solution run, the text-kept mutants) show together. Images are built first.
 *
 *   node dist/bench/probes-versus.js BASELINE_DIST     (e.g. /tmp/old/dist)
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkTasks as current } from '../src/check/check.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { findTaskDirs } from '../src/task/load.js';

const baselineDist = process.argv[2];
if (!baselineDist) throw new Error('usage: node dist/bench/probes-versus.js BASELINE_DIST');
const baseline = ((await import(path.resolve(baselineDist, 'src/check/check.js'))) as { checkTasks: typeof current })
  .checkTasks;
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const work = await mkdtemp(path.join(tmpdir(), 'termgrade-probes-versus-'));
const provider = new DockerProvider();

/** Test-suite tasks check admits today (test/probes.test.ts, test/tb2-verifier.test.ts). */
const ADMITTED = [
  ...['move_task', 'archive_task', 'permission_only', 'quoted_text', 'verifier_builds', 'sound_a', 'hack_resist'].map(
    (n) => path.join(root, 'test', 'fixtures', 'probes', n),
  ),
  path.join(root, 'test', 'fixtures', 'tb2', 'word-count'),
];

async function side(check: typeof current, name: string, dirs: string[]): Promise<{ s: number; verdicts: string[] }> {
  const t = performance.now();
  const r = await check(dirs, {
    provider,
    outDir: path.join(work, `${name}-${Date.now()}`),
    probes: 'all',
    concurrency: 2,
    repeat: 1,
  });
  return {
    s: (performance.now() - t) / 1000,
    verdicts: r.tasks.map((x) => `${x.name}: ${x.verdict}${x.reasons.length ? ` (${x.reasons.join(',')})` : ''}`),
  };
}

for (const [label, dirs] of [
  ['bundled examples', await findTaskDirs([path.join(root, 'examples', 'tasks')])],
  ['test-suite tasks admitted today', ADMITTED],
] as const) {
  await current(dirs, { provider, outDir: path.join(work, 'warm'), probes: 'none', repeat: 1, concurrency: 2 });
  const before = await side(baseline, 'baseline', dirs);
  const after = await side(current, 'current', dirs);
  console.log(`${label} (${dirs.length} tasks), check --probes all --repeat 1, wall time`);
  console.log(
    `  baseline ${before.s.toFixed(1)} s   this build ${after.s.toFixed(1)} s   ratio ${(after.s / before.s).toFixed(2)}`,
  );
  for (let i = 0; i < after.verdicts.length; i++)
    console.log(`  ${before.verdicts[i]!.padEnd(50)} | ${after.verdicts[i]}`);
}
