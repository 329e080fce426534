/**
 * What TB2's fetching lines cost an offline grade: the verification time of Terminal-Bench 2's
 * template test.sh as written (apt-get update, apt-get install curl, the uv installer through curl,
 * then uvx pytest) against the same test.sh with those lines removed, both graded offline through
 * the verifier toolchain on the same image, interleaved. A third sequence grades the template
 * without the toolchain's offline fetch settings (OFFLINE_FETCH_ENV): what it cost before them.
 *
 *   node dist/bench/offline-fetch.js [iterations]      (default 5; target ratio <= 1.5)
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { oracleAgent } from '../src/agent/oracle.js';
import { DockerProvider } from '../src/sandbox/docker/provider.js';
import { loadTask } from '../src/task/load.js';
import type { Task } from '../src/task/task.js';
import { runTrial } from '../src/trial/run.js';
import { verifierNeeds } from '../src/verifier/toolchain/needs.js';
import { asGraded } from '../src/verifier/toolchain/plan.js';
import { OFFLINE_FETCH_ENV } from '../src/verifier/toolchain/recipe.js';

const iterations = Number(process.argv[2] ?? 5);
const fixture = path.resolve(
  path.dirname(new URL(import.meta.url).pathname),
  '..',
  '..',
  'test',
  'fixtures',
  'tb2',
  'word-count',
);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** test.sh less the lines that fetch (the ones verifierNeeds names, uvx's own run kept) and `source` of uv's env. */
function withoutFetchLines(script: string): string {
  const needs = verifierNeeds(script);
  const drop = new Set(needs.commands.filter((c) => c.kind !== 'uv').map((c) => c.line));
  return script
    .split('\n')
    .filter((l, i) => !drop.has(i + 1) && !/^source \$HOME\/\.local\/bin\/env/.test(l))
    .join('\n');
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(tmpdir(), 'termgrade-offline-fetch-'));
  try {
    await cp(fixture, path.join(work, 'as-written'), { recursive: true });
    await cp(fixture, path.join(work, 'stripped'), { recursive: true });
    const script = await readFile(path.join(fixture, 'tests', 'test.sh'), 'utf8');
    await writeFile(path.join(work, 'stripped', 'tests', 'test.sh'), withoutFetchLines(script));
    const written = await asGraded(await loadTask(path.join(work, 'as-written')), null);
    if (!written.verifierLayer) throw new Error('the template is not graded through the toolchain');
    // The stripped copy has nothing left to fetch: it gets the same image and env as the template.
    const stripped: Task = {
      ...(await loadTask(path.join(work, 'stripped'))),
      verifierLayer: written.verifierLayer,
      config: written.config,
    };
    const noEnv = Object.fromEntries(
      Object.entries(written.config.verifier.env).filter(([k]) => !(k in OFFLINE_FETCH_ENV)),
    );
    const before: Task = {
      ...written,
      config: { ...written.config, verifier: { ...written.config.verifier, env: noEnv } },
    };
    const provider = new DockerProvider();
    await provider.ping();
    const grade = async (task: Task): Promise<number> => {
      const r = await runTrial({
        task,
        agent: oracleAgent,
        provider,
        outDir: path.join(work, 'trials'),
        network: null,
      });
      if (r.reward !== 1) throw new Error(`oracle trial of ${task.name} failed: ${JSON.stringify(r.errors)}`);
      return r.phases.verification!.durationMs;
    };
    const times = { written: [] as number[], stripped: [] as number[], before: [] as number[] };
    await grade(written); // the images built and cached before timing
    await grade(stripped);
    for (let i = 0; i < iterations; i++) {
      times.written.push(await grade(written));
      times.stripped.push(await grade(stripped));
      times.before.push(await grade(before));
    }
    const w = median(times.written);
    const s = median(times.stripped);
    const b = median(times.before);
    console.log(
      `TB2 template (test/fixtures/tb2/word-count), offline oracle grades, ${iterations} interleaved runs each`,
    );
    console.log(`  verification, test.sh as written                      median ${w.toFixed(0)} ms`);
    console.log(`  verification, the same without its fetching lines     median ${s.toFixed(0)} ms`);
    console.log(`  verification as written, without OFFLINE_FETCH_ENV    median ${b.toFixed(0)} ms`);
    console.log(`  ratio as written / without fetching lines             ${(w / s).toFixed(2)}  (target <= 1.5)`);
    console.log(`  ratio before the offline fetch settings               ${(b / s).toFixed(2)}`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

await main();
