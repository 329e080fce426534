/**
 * What `synth` costs, measured in one run on real Docker with the scripted generator (a loopback
 * test double; its replies take ~milliseconds, so generator time here is the harness's own plus
 * HTTP, not a model's):
 * - candidates per hour, end to end (the first and later runs share base layers; each candidate's
 *   environment is its own image);
 * - the share of stage time per stage;
 * - the harness's own cost per candidate (the Dockerfile refusal, writing admitted folders, the
 *   store write and scheduling between stages, generator request/parse) against the builds and
 *   sandbox runs it orchestrates (build, observe, execute, check).
 *
 * - where check's time goes: its build, oracle runs, do-nothing run and probes (from each
 *   check.json and its trials' result.json), and each trial's phases.
 *
 *   node dist/bench/synth.js [N] [--engine SPEC ...] [--extra-engines K] [--concurrency A,B,...]
 *     (default N = 6; 1000 for the full mix; several concurrencies run the same job side by side,
 *      one after the other in this process, each on fresh folders; --extra-engines K starts K
 *      dockerd on this machine (own data and exec roots, the base image copied in), runs on them,
 *      and removes them at the end)
 *
 * The mix, repeated: good, build_error, wrong_solution, weak_tests, good, never_builds.
 */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { ModelConfigSchema } from '../src/model/config.js';
import { formatFunnel } from '../src/synth/funnel.js';
import { Generator } from '../src/synth/generator.js';
import { synthesize, type SynthEvent } from '../src/synth/synth.js';
import { startEngines } from '../test/support/engines.js';
import { ScriptedModelServer } from '../test/support/scripted-model-server.js';
import { scriptedGenerator, seedFor, type CandidateKind } from '../test/support/scripted-generator.js';
import { enginesFromFlags } from '../src/sandbox/pool/engine-spec.js';
import { createProvider } from '../src/sandbox/registry.js';

const args = process.argv.slice(2);
const flag = (name: string): string[] => args.flatMap((a, i) => (args[i - 1] === name ? [a] : []));
const engines = flag('--engine');
const extraEngines = Number(flag('--extra-engines')[0] ?? 0);
const n = Number(
  args.find((a, i) => /^\d+$/.test(a) && !['--engine', '--concurrency', '--extra-engines'].includes(args[i - 1]!)) ?? 6,
);
const MIX: CandidateKind[] = ['good', 'build_error', 'wrong_solution', 'weak_tests', 'good', 'never_builds'];
const ENGINE_STAGES = new Set(['build', 'observe', 'execute', 'check']);
const GENERATION_STAGES = new Set(['scenario', 'environment', 'instruction', 'solution', 'tests']);

/** Where one check's time went, read from its check.json and its trials' result.json. */
interface CheckProfile {
  checks: number;
  totalMs: number;
  buildMs: number;
  oracleMs: number;
  nopMs: number;
  probeMs: number;
  oracleRuns: number;
  phases: Record<string, number>;
}

interface CheckJson {
  tasks: Array<{
    durationMs: number;
    buildMs: number | null;
    probeMs: number | null;
    oracle: { runs: number };
    trials: string[];
  }>;
}
interface TrialJson {
  durationMs: number;
  phases?: Record<string, { durationMs?: number }>;
}

async function readJson<T>(file: string): Promise<T> {
  return JSON.parse(await readFile(file, 'utf8')) as T;
}

async function checkProfile(workDir: string): Promise<CheckProfile> {
  const p: CheckProfile = {
    checks: 0,
    totalMs: 0,
    buildMs: 0,
    oracleMs: 0,
    nopMs: 0,
    probeMs: 0,
    oracleRuns: 0,
    phases: {},
  };
  for (const candidate of await readdir(workDir)) {
    for (const dir of (await readdir(path.join(workDir, candidate))).filter((d) => d.startsWith('check-'))) {
      const checkDir = path.join(workDir, candidate, dir);
      const report = await readJson<CheckJson>(path.join(checkDir, 'check.json'));
      for (const t of report.tasks) {
        p.checks++;
        p.totalMs += t.durationMs;
        p.buildMs += t.buildMs ?? 0;
        p.probeMs += t.probeMs ?? 0;
        p.oracleRuns += t.oracle.runs;
        for (const [i, id] of t.trials.entries()) {
          const r = await readJson<TrialJson>(path.join(checkDir, 'trials', id, 'result.json'));
          if (i < t.oracle.runs) p.oracleMs += r.durationMs;
          else p.nopMs += r.durationMs;
          for (const [phase, timing] of Object.entries(r.phases ?? {}))
            p.phases[phase] = (p.phases[phase] ?? 0) + (timing.durationMs ?? 0);
        }
      }
    }
  }
  return p;
}

/** CPU time every core spent busy since boot, from /proc/stat (Linux); 0 where it cannot be read. */
async function machineBusyMs(): Promise<number> {
  const text = await readFile('/proc/stat', 'utf8').catch(() => '');
  const fields = (text.split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  if (fields.length < 8) return 0;
  const [user, nice, system, , , irq, softirq, steal] = fields as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return ((user + nice + system + irq + softirq + steal) * 1000) / 100; // USER_HZ is 100 on Linux
}

async function runJob(concurrency: number, baseUrl: string): Promise<void> {
  const work = await mkdtemp(path.join(tmpdir(), 'termgrade-synth-bench-'));
  const provider = createProvider({ engines: enginesFromFlags(engines) ?? [] });
  // A candidate's stages run one after another: its span from first start to last end, less its
  // stages' own time, is what recording each stage (the store's transaction) and scheduling cost.
  const firstStart = new Map<string, number>();
  const lastDone = new Map<string, number>();
  let stageMs = 0;
  const onEvent = (e: SynthEvent): void => {
    const now = performance.now();
    if (e.type === 'stage-start' && !firstStart.has(e.candidate)) firstStart.set(e.candidate, now);
    if (e.type === 'stage-done') {
      lastDone.set(e.candidate, now);
      stageMs += e.durationMs;
    }
  };
  try {
    const seeds = Array.from({ length: n }, (_, i) => seedFor(MIX[i % MIX.length]!, i)).map((s) => ({
      id: s.id,
      seed: s,
    }));
    const load0 = loadavg()[0]!;
    const cpu0 = process.cpuUsage();
    const busy0 = await machineBusyMs();
    const t0 = performance.now();
    const report = await synthesize({
      seeds,
      generator: new Generator(ModelConfigSchema.parse({ baseUrl, model: 'scripted', maxRetries: 0 })),
      provider,
      outDir: path.join(work, 'out'),
      maxRounds: 1,
      probes: 'fast',
      concurrency,
      onEvent,
    });
    const wallS = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const processCpuMs = (cpu.user + cpu.system) / 1000;
    const busyMs = (await machineBusyMs()) - busy0;
    const gapsMs = [...lastDone].reduce((acc, [c, end]) => acc + end - firstStart.get(c)!, 0) - stageMs;
    const sum = (pred: (s: string) => boolean): number =>
      report.stages.filter((s) => pred(s.stage)).reduce((a, s) => a + s.wallMs, 0);
    const engineMs = sum((s) => ENGINE_STAGES.has(s));
    const generationMs = sum((s) => GENERATION_STAGES.has(s));
    const ownStagesMs = sum((s) => !ENGINE_STAGES.has(s) && !GENERATION_STAGES.has(s));
    const harnessMs = ownStagesMs + generationMs + gapsMs;
    const prof = await checkProfile(path.join(work, 'out', '.synth', 'work'));
    const s = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
    const share = (ms: number): string => `${((100 * ms) / prof.totalMs).toFixed(0)}%`;
    console.log(formatFunnel(report));
    console.log('');
    console.log(
      `synth bench: ${n} scripted candidates on ${engines.length || 1} engine(s), concurrency ${concurrency}`,
    );
    console.log(
      `  load average              ${load0.toFixed(1)} at start, ${loadavg()[0]!.toFixed(1)} at end (1 min; ${cpus().length} cores)`,
    );
    console.log(`  wall time                 ${wallS.toFixed(1)} s`);
    console.log(`  candidates per hour       ${((n / wallS) * 3600).toFixed(0)}`);
    console.log(`  admitted per hour         ${((report.admitted / wallS) * 3600).toFixed(0)}`);
    console.log(
      `  per candidate, engine work (build, observe, execute, check)   ${(engineMs / n / 1000).toFixed(2)} s`,
    );
    console.log(
      `  per candidate, harness own (lint, write, recording, scripted generator calls)   ${(harnessMs / n / 1000).toFixed(3)} s`,
    );
    console.log(`    of which recording and scheduling between stages   ${(gapsMs / n / 1000).toFixed(3)} s`);
    console.log(`  harness own / engine work  ${(harnessMs / engineMs).toFixed(4)} (target <= 0.10)`);
    // The CPU view: everything this process did, including check's own in-process work (the scan of
    // each snapshot, tar streams to the engine) and the scripted generator server, which shares it.
    console.log(
      `  this process's CPU        ${(processCpuMs / n / 1000).toFixed(2)} s per candidate, ${busyMs > 0 ? ((100 * processCpuMs) / busyMs).toFixed(1) : '?'}% of the machine's busy CPU time (engine, containers and all)`,
    );
    console.log(
      `  time per stage: ${report.stages
        .filter((x) => x.runs)
        .map((x) => `${x.stage} ${(100 * x.timeShare).toFixed(1)}%`)
        .join(', ')}`,
    );
    console.log(
      `  check, ${prof.checks} runs (${s(prof.totalMs)}): build ${share(prof.buildMs)}, oracle ${share(prof.oracleMs)} (${prof.oracleRuns} runs), do-nothing ${share(prof.nopMs)}, probes ${share(prof.probeMs)}; per check ${s(prof.totalMs / Math.max(1, prof.checks))}`,
    );
    const phaseTotal = Object.values(prof.phases).reduce((a, b) => a + b, 0);
    console.log(
      `  check's trials by phase: ${Object.entries(prof.phases)
        .map(([k, v]) => `${k} ${((100 * v) / phaseTotal).toFixed(0)}%`)
        .join(', ')}`,
    );
  } finally {
    await provider.closeAll();
    await rm(work, { recursive: true, force: true });
  }
}

const server = new ScriptedModelServer({ '*': scriptedGenerator() });
const baseUrl = await server.start();
const started = extraEngines > 0 ? await startEngines(extraEngines) : [];
engines.push(...started.map((e, i) => `${e.host},name=x${i + 1},capacity=2`));
try {
  const probe = createProvider({ engines: enginesFromFlags(engines) ?? [] });
  const capacity = probe.capacity ?? 2;
  await probe.closeAll();
  const concurrencies = (flag('--concurrency')[0] ?? String(capacity)).split(',').map(Number);
  for (const c of concurrencies) await runJob(c, baseUrl);
} finally {
  await server.close();
  await Promise.all(started.map((e) => e.destroy()));
}
