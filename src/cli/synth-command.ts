import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { holdJobFolder } from '../job/job.js';
import { ModelConfigSchema, type ModelConfig } from '../model/config.js';
import { resolveBuildNetwork } from '../sandbox/docker/build-network.js';
import { readExemplars } from '../synth/exemplar.js';
import { formatFunnel } from '../synth/funnel.js';
import type { SynthReport } from '../synth/schema.js';
import { preflightModels } from '../model/preflight.js';
import { table } from './table.js';
import { Generator } from '../synth/generator.js';
import { readSeeds, synthesize, type SynthEvent } from '../synth/synth.js';
import { TermgradeError } from '../util/errors.js';
import { poolEventLine } from './job-progress.js';
import { admissionStore } from '../verifier/protection-store.js';
import { EXIT, handleSignals } from './signals.js';
import { enginesFromFlags } from '../sandbox/pool/engine-spec.js';
import { createProvider } from '../sandbox/registry.js';

export interface SynthFlags {
  seeds?: string;
  exemplars?: string[];
  model: string;
  out: string;
  engine?: string[];
  buildNetwork?: string;
  candidatesPerSeed: number;
  maxRounds: number;
  maxTokens: number;
  concurrency?: number;
  modelConcurrency: number;
  maxMalformed: number;
  repeat: number;
  probes: 'none' | 'fast' | 'all';
  /** --admission-dir: where admission records of admitted tasks are written (see admissionStore). */
  admissionDir?: string;
  pool?: string[];
  json?: boolean;
  jsonl?: boolean;
  quiet?: boolean;
  /** --candidates: the per-candidate table after the funnel. */
  candidates?: boolean;
  /** --no-preflight sets it false: skip asking the generator's endpoint for its model list. */
  preflight?: boolean;
}

/** A model configuration file (JSON, the ModelConfig shape): errors name the file and the field. */
async function readModelConfig(file: string): Promise<ModelConfig> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new TermgradeError('usage', `--model ${file}: not a readable JSON file (${(err as Error).message})`);
  }
  const parsed = ModelConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TermgradeError('usage', `--model ${file}: field ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  return parsed.data;
}

export async function synthCommand(flags: SynthFlags): Promise<number> {
  const log = (msg: string): void => {
    if (!flags.quiet) process.stderr.write(`${msg}\n`);
  };
  if (!flags.seeds && !flags.exemplars?.length)
    throw new TermgradeError('usage', 'synth needs --seeds FILE or --exemplars DIR... (or both)');
  const seedsFile = flags.seeds;
  const seeds = !seedsFile
    ? []
    : await readSeeds(seedsFile).catch((err: unknown) => {
        if (err instanceof TermgradeError) throw err;
        throw new TermgradeError('usage', `--seeds ${seedsFile}: ${(err as Error).message}`);
      });
  // Bad exemplar folders are bad input, said before any engine is contacted.
  if (flags.exemplars) await readExemplars(flags.exemplars);
  const config = await readModelConfig(flags.model);
  // Like run: a refused key, an unknown model or an endpoint that does not answer is said (exit 2)
  // before any engine is contacted or any image built.
  if (flags.preflight !== false) for (const w of await preflightModels([config])) log(`warning: ${w}`);
  const outDir = path.resolve(flags.out);
  const held = await holdJobFolder(path.join(outDir, '.synth'), `synth job in ${outDir}`);
  const provider = createProvider({
    engines: enginesFromFlags(flags.engine) ?? [],
    buildNetwork: resolveBuildNetwork(flags.buildNetwork),
    onEvent: (e) => log(poolEventLine(e)),
  });
  for (const w of await provider.ping()) log(`warning: ${w}`);
  const removed = await provider.cleanup();
  if (removed) log(`removed ${removed} container(s) left by earlier runs that were killed`);
  const signals = handleSignals(provider, log);
  const onEvent = (e: SynthEvent): void => {
    if (flags.jsonl) process.stdout.write(`${JSON.stringify(e)}\n`);
    else if (e.type === 'job-start' && e.resuming > 0)
      log(
        `resuming ${e.resuming} candidate${e.resuming === 1 ? '' : 's'}${e.waitingOnGenerator ? ` (${e.waitingOnGenerator} waited on the generator)` : ''} of ${e.candidates}`,
      );
    else if (e.type === 'candidate-waiting')
      log(`${e.candidate} round ${e.round}: ${e.stage} waits on the generator, not rejected (${e.why})`);
    else if (e.type === 'stage-done')
      log(
        `${e.candidate} round ${e.round}: ${e.stage} ${e.outcome}${e.reasons.length ? ` (${e.reasons.join(', ')})` : ''}`,
      );
    else if (e.type === 'candidate-done')
      log(`${e.candidate}: ${e.status}${e.reasons.length ? ` (${e.reasons.join(', ')})` : ''}`);
  };
  let report;
  try {
    report = await synthesize({
      seeds,
      generator: new Generator(config, { concurrency: flags.modelConcurrency, maxMalformed: flags.maxMalformed }),
      provider,
      outDir,
      candidatesPerSeed: flags.candidatesPerSeed,
      maxRounds: flags.maxRounds,
      maxTokensPerCandidate: flags.maxTokens,
      concurrency: flags.concurrency ?? provider.capacity ?? 2,
      repeat: flags.repeat,
      probes: flags.probes,
      protection: admissionStore({ admissionDir: flags.admissionDir }),
      pool: flags.pool,
      exemplars: flags.exemplars,
      signal: signals.signal,
      onEvent,
    });
  } finally {
    await provider.closeAll();
    signals.dispose();
    await held.release();
  }
  if (flags.jsonl) process.stdout.write(`${JSON.stringify({ type: 'funnel', report })}\n`);
  else if (flags.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else process.stdout.write(`${formatFunnel(report)}\n`);
  if (flags.candidates && !flags.json && !flags.jsonl) process.stdout.write(`\n${candidatesTable(report)}\n`);
  const interrupted = signals.exitCode();
  if (interrupted !== null) return interrupted;
  // An outage is infrastructure: the job is not done, and nothing was decided for those candidates.
  if (report.waitingOnGenerator > 0) {
    log(
      `${report.waitingOnGenerator} candidate(s) wait on the generator (${config.baseUrl} did not answer); run the same command again when it is back`,
    );
    return EXIT.engine;
  }
  return report.unfinished === 0 && report.admitted > 0 ? EXIT.ok : EXIT.rejected;
}

/** `--candidates`: one row per candidate, its seed, state, rounds, stage and reason. */
export function candidatesTable(r: SynthReport): string {
  return table(
    ['candidate', 'seed', 'state', 'rounds', 'stage', 'tests', 'reason'],
    r.candidateList.map((c) => [
      c.candidate,
      c.seed,
      c.state,
      c.rounds,
      c.stage ?? '-',
      c.tests,
      c.reason ?? (c.path ? `admitted: ${c.path}` : '-'),
    ]),
  );
}
