import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { z } from 'zod';
import { checkTasks, readDuplicateKey } from '../check/check.js';
import type { ProtectionStore } from '../verifier/protection-store.js';
import { DuplicateIndex, type DuplicateCandidate } from '../check/duplicates.js';
import type { ProbeLevel } from '../check/probes.js';
import type { ModelError } from '../model/errors.js';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import { CancelledError, TermgradeError, errorMessage, isEngineLost } from '../util/errors.js';
import { mapPool } from '../util/pool.js';
import { makeScrub, scrubValue } from '../util/scrub.js';
import { partHash, publish, writeCandidate, type TaskLimits } from './assemble.js';
import { funnel } from './funnel.js';
import { isEndpointOutage, isFatalModelError, REPORT_EXAMPLES, type Generator } from './generator.js';
import { readExemplars } from './exemplar.js';
import { lintEnvironment } from './lint.js';
import { recordEnvironmentState, runSolution } from './observe.js';
import { FIRST_PLAN, repairPlan, routeFailure } from './route.js';
import {
  EnvironmentPartSchema,
  InstructionPartSchema,
  ScenarioSchema,
  SolutionPartSchema,
  TestsPartSchema,
  type CandidateState,
  type Seed,
  type StageName,
  type SynthReport,
} from './schema.js';
import { SynthStore, type StageRecord } from './store.js';

export interface SynthOptions {
  /** Seeds with their ids resolved (see readSeeds). */
  seeds: Array<{ id: string; seed: Seed }>;
  generator: Generator;
  provider: SandboxProvider;
  /** Admitted task folders go here; the job's store and work folders under `.synth/`. */
  outDir: string;
  candidatesPerSeed?: number;
  /** Repair rounds per candidate after the first pass (default 3). */
  maxRounds?: number;
  /** Generator tokens (prompt + completion) one candidate may use, repairs included (default 400,000). */
  maxTokensPerCandidate?: number;
  /** Candidates worked on at once (default 2). */
  concurrency?: number;
  /** Oracle runs in admission (check's --repeat; default 2). */
  repeat?: number;
  /** Admission's probes (default all: weak tests too). */
  probes?: ProbeLevel;
  /** Where admission records the protected set of each task it admits (admissionStore), as `check` does. */
  protection?: ProtectionStore;
  limits?: Partial<TaskLimits>;
  /** Existing task folders an admitted candidate must not duplicate. */
  pool?: string[];
  /**
   * Existing task folders used as seeds (see readExemplar): each is summarised into its seed, and
   * is part of the pool an admitted candidate must not duplicate.
   */
  exemplars?: string[];
  signal?: AbortSignal;
  onEvent?: (event: SynthEvent) => void;
}

export type SynthEvent =
  | { type: 'stage-start'; candidate: string; stage: StageName; round: number }
  | {
      type: 'stage-done';
      candidate: string;
      stage: StageName;
      round: number;
      outcome: 'passed' | 'failed';
      durationMs: number;
      reasons: string[];
    }
  | { type: 'candidate-done'; candidate: string; status: 'admitted' | 'rejected'; rounds: number; reasons: string[] }
  /** The job starts: how many candidates an earlier run left unfinished and this one takes up. */
  | { type: 'job-start'; candidates: number; resuming: number; waitingOnGenerator: number }
  /** A generation stage found the generator's endpoint down (after retries): left unfinished, not rejected. */
  | { type: 'candidate-waiting'; candidate: string; stage: StageName; round: number; why: string };

/** What a stage's run decided, before it is recorded. */
interface StageOutcome {
  outcome: 'passed' | 'failed';
  state: CandidateState;
  usage?: { calls: number; malformed: number; prompt: number; completion: number; costUsd: number | null };
  detail: Record<string, unknown>;
}

/** The evidence of an admissible task whose test.sh printed no per-test line termgrade reads. */
const NO_TEST_REPORT = `test.sh printed no per-test result termgrade can read: print one line per test exactly like "${REPORT_EXAMPLES[0]}" or "${REPORT_EXAMPLES[1]}"`;

export const candidateId = (seedId: string, i: number, perSeed: number): string =>
  perSeed === 1 ? seedId : `${seedId}-${i + 1}`;

function freshState(id: string, seedId: string, seed: Seed): CandidateState {
  return {
    id,
    seedId,
    seed,
    status: 'active',
    plan: [...FIRST_PLAN],
    round: 0,
    parts: {},
    hashes: {},
    image: null,
    environmentState: null,
    solutionState: null,
    failure: null,
    repairs: [],
    tokens: { prompt: 0, completion: 0 },
    costUsd: null,
    rejected: [],
    tests: [],
    admittedPath: null,
    waiting: null,
  };
}

const GENERATION = {
  scenario: ScenarioSchema,
  environment: EnvironmentPartSchema,
  instruction: InstructionPartSchema,
  solution: SolutionPartSchema,
  tests: TestsPartSchema,
} as const;
type GeneratedStage = keyof typeof GENERATION;
const isGeneration = (s: StageName): s is GeneratedStage => s in GENERATION;

/**
 * From seeds to admitted task folders. Every candidate walks its plan of stages (scenario ->
 * environment -> lint -> build -> observe -> instruction -> solution -> execute -> tests -> check
 * -> write); each finished stage is recorded with the candidate's new state in one transaction, so
 * a job killed at any moment resumes at the stage it was in and never records a stage twice. A
 * failed stage is routed to the part at fault, which alone is regenerated with the failure's
 * evidence, within `maxRounds` and the token budget.
 */
export async function synthesize(options: SynthOptions): Promise<SynthReport> {
  const outDir = path.resolve(options.outDir);
  const workRoot = path.join(outDir, '.synth');
  await mkdir(workRoot, { recursive: true });
  const store = SynthStore.open(path.join(workRoot, 'synth.db'));
  const started = performance.now();
  let elapsedAdded = false;
  const addElapsed = (): void => {
    if (!elapsedAdded) store.addElapsed(performance.now() - started);
    elapsedAdded = true;
  };
  try {
    const perSeed = options.candidatesPerSeed ?? 1;
    store.setMeta('model', options.generator.config.model);
    const seeds = await withExemplars(options.seeds, options.exemplars ?? []);
    const earlier = store.candidates().filter((c) => c.status === 'active');
    options.onEvent?.({
      type: 'job-start',
      candidates: seeds.length * perSeed,
      resuming: earlier.length,
      waitingOnGenerator: earlier.filter((c) => c.waiting !== null).length,
    });
    store.addCandidates(
      seeds.flatMap(({ id, seed }) =>
        Array.from({ length: perSeed }, (_, i) => freshState(candidateId(id, i, perSeed), id, seed)),
      ),
    );
    const pool = [...(options.pool ?? []), ...(options.exemplars ?? [])];
    const runner = new CandidateRunner({ ...options, pool }, store, outDir, workRoot);
    const active = store.candidates().filter((c) => c.status === 'active');
    await mapPool(active, options.concurrency ?? 2, (c) => runner.advance(c), options.signal);
    addElapsed();
    return funnel(store.candidates(), store.stages(), outDir, {
      elapsedMs: store.elapsedMs(),
      resumed: earlier.length,
    });
  } finally {
    // An interrupted or failed run's time counts too.
    addElapsed();
    store.close();
  }
}

class CandidateRunner {
  private readonly limits: TaskLimits;
  private readonly emit: (e: SynthEvent) => void;
  /** Admission's last step runs one candidate at a time, so two new duplicates cannot both get in. */
  private writing: Promise<unknown> = Promise.resolve();
  private index: Promise<DuplicateIndex> | null = null;
  /** Why the generator was last found down in this run (null: not down, or it answered since). */
  private generatorDown: string | null = null;

  constructor(
    private readonly options: SynthOptions,
    private readonly store: SynthStore,
    private readonly outDir: string,
    private readonly workRoot: string,
  ) {
    this.limits = {
      agentTimeoutSec: options.limits?.agentTimeoutSec ?? 120,
      verifierTimeoutSec: options.limits?.verifierTimeoutSec ?? 120,
    };
    this.emit = options.onEvent ?? (() => {});
  }

  private taskDir(c: CandidateState): string {
    return path.join(this.workRoot, 'work', c.id, 'task');
  }

  async advance(c: CandidateState): Promise<void> {
    let state = c;
    while (state.status === 'active' && state.plan.length > 0) {
      if (this.options.signal?.aborted) return;
      const stage = state.plan[0]!;
      const startedAt = new Date().toISOString();
      const t0 = performance.now();
      this.emit({ type: 'stage-start', candidate: state.id, stage, round: state.round });
      let result: StageOutcome;
      try {
        result = await this.run(stage, structuredClone(state));
      } catch (err) {
        // Stopping: the stage is not recorded, so a resumed job runs it (once) again.
        if (err instanceof CancelledError || this.options.signal?.aborted) return;
        if (err instanceof GeneratorOutage) return void this.leaveWaiting(state, stage, err.message);
        throw err;
      }
      const durationMs = performance.now() - t0;
      // Nothing the store keeps may hold the generator's key (a model can echo what it was sent).
      const scrub = makeScrub([this.options.generator.secret()]);
      const next = { ...scrubValue(result.state, scrub), waiting: null };
      const u = result.usage;
      if (u) {
        next.tokens = { prompt: next.tokens.prompt + u.prompt, completion: next.tokens.completion + u.completion };
        if (u.costUsd !== null) next.costUsd = (next.costUsd ?? 0) + u.costUsd;
      }
      const record: StageRecord = {
        candidateId: state.id,
        round: state.round,
        stage,
        outcome: result.outcome,
        startedAt,
        durationMs,
        calls: u?.calls ?? 0,
        malformed: u?.malformed ?? 0,
        promptTokens: u?.prompt ?? 0,
        completionTokens: u?.completion ?? 0,
        costUsd: u?.costUsd ?? null,
        detail: scrubValue(result.detail, scrub),
      };
      this.store.recordStage(record, next);
      const reasons = (result.detail.reasons as string[] | undefined) ?? [];
      this.emit({
        type: 'stage-done',
        candidate: state.id,
        stage,
        round: state.round,
        outcome: result.outcome,
        durationMs,
        reasons,
      });
      if (next.status !== 'active')
        this.emit({
          type: 'candidate-done',
          candidate: next.id,
          status: next.status,
          rounds: next.round,
          reasons: next.rejected,
        });
      state = next;
    }
  }

  /**
   * The generator's endpoint did not answer (after the client's retries): an outage, not the
   * candidate's outcome. Its stage is not recorded (it runs again on resume); its state says what
   * it waits on, for the funnel.
   */
  private leaveWaiting(state: CandidateState, stage: StageName, why: string): void {
    const scrub = makeScrub([this.options.generator.secret()]);
    this.store.saveState({ ...state, waiting: { on: 'generator', why: scrub(why) } });
    this.emit({ type: 'candidate-waiting', candidate: state.id, stage, round: state.round, why: scrub(why) });
  }

  private run(stage: StageName, s: CandidateState): Promise<StageOutcome> {
    if (isGeneration(stage)) return this.generate(stage, s);
    switch (stage) {
      case 'lint':
        return Promise.resolve(this.lint(s));
      case 'build':
        return this.build(s);
      case 'observe':
        return this.observe(s);
      case 'execute':
        return this.execute(s);
      case 'check':
        return this.check(s);
      case 'write':
        return this.write(s);
    }
  }

  private passed(s: CandidateState, detail: Record<string, unknown> = {}): StageOutcome {
    s.plan.shift();
    return { outcome: 'passed', state: s, detail };
  }

  /** A failed stage: routed to the part at fault and planned for repair, or the candidate rejected. */
  private failed(
    s: CandidateState,
    stage: StageName,
    reasons: string[],
    evidence: string[],
    extra: Record<string, unknown> = {},
  ): StageOutcome {
    const part = routeFailure(stage, reasons, evidence);
    const maxRounds = this.options.maxRounds ?? 3;
    const detail = { reasons, evidence, routedTo: part, ...extra };
    if (part === null) return this.reject(s, ['not_repairable', ...reasons], detail);
    if (s.round >= maxRounds) return this.reject(s, ['rounds_exhausted', ...reasons], detail);
    s.round += 1;
    s.repairs.push({ round: s.round, part, reasons });
    s.failure = { stage, reasons, evidence: evidence.map((e) => e.slice(0, 2000)).slice(0, 40), part };
    s.plan = repairPlan(part, new Set(Object.keys(s.parts)));
    return { outcome: 'failed', state: s, detail };
  }

  private reject(s: CandidateState, reasons: string[], detail: Record<string, unknown>): StageOutcome {
    s.status = 'rejected';
    s.rejected = [...new Set(reasons)];
    s.plan = [];
    return { outcome: 'failed', state: s, detail };
  }

  private request(stage: GeneratedStage, s: CandidateState): Record<string, unknown> {
    const p = s.parts;
    const repair = s.failure && s.failure.part === stage ? { failure: s.failure, previous: p[stage] ?? null } : null;
    const base = { stage, candidate: s.id, round: s.round, seed: s.seed, repair };
    switch (stage) {
      case 'scenario':
        return base;
      case 'environment':
        return { ...base, scenario: p.scenario };
      case 'instruction':
        return { ...base, scenario: p.scenario, environment: p.environment, environmentState: s.environmentState };
      case 'solution':
        return {
          ...base,
          scenario: p.scenario,
          environment: p.environment,
          environmentState: s.environmentState,
          instruction: p.instruction,
        };
      case 'tests':
        return {
          ...base,
          scenario: p.scenario,
          environmentState: s.environmentState,
          instruction: p.instruction,
          solution: p.solution,
          solutionState: s.solutionState,
        };
    }
  }

  private async generate(stage: GeneratedStage, s: CandidateState): Promise<StageOutcome> {
    const budget = this.options.maxTokensPerCandidate ?? 400_000;
    const spent = s.tokens.prompt + s.tokens.completion;
    if (spent >= budget)
      return this.reject(s, ['budget_exhausted'], {
        reasons: ['budget_exhausted'],
        evidence: [`${spent} generator tokens spent of ${budget}`],
      });
    // Down a moment ago: asked once, cheaply, whether it is back before a call that would spend
    // the client's retries.
    if (this.generatorDown !== null) {
      if (!(await this.options.generator.answers())) throw new GeneratorOutage(this.generatorDown);
      this.generatorDown = null;
    }
    let got;
    try {
      got = await this.options.generator.generate(
        stage,
        GENERATION[stage] as z.ZodType,
        this.request(stage, s),
        this.options.signal,
      );
    } catch (err) {
      if (err instanceof CancelledError) throw err;
      if (isFatalModelError(err)) throw new GeneratorRefused(err, `${s.id}'s ${stage}`, this.options.generator);
      if (isEndpointOutage(err)) {
        this.generatorDown = `the generator did not answer (${errorMessage(err)}); run the same command again`;
        throw new GeneratorOutage(this.generatorDown);
      }
      return this.reject(s, ['generator_error'], { reasons: ['generator_error'], evidence: [errorMessage(err)] });
    }
    const usage = {
      calls: got.calls,
      malformed: got.malformed,
      prompt: got.usage.prompt,
      completion: got.usage.completion,
      costUsd: got.costUsd,
    };
    if (got.value === null)
      return {
        ...this.reject(s, ['generator_malformed'], { reasons: ['generator_malformed'], evidence: [got.problem ?? ''] }),
        usage,
      };
    (s.parts as Record<string, unknown>)[stage] = got.value;
    s.hashes[stage] = partHash(got.value);
    if (s.failure?.part === stage) s.failure = null;
    return { ...this.passed(s, { hash: s.hashes[stage] }), usage };
  }

  private lint(s: CandidateState): StageOutcome {
    const problems = lintEnvironment(s.parts.environment!);
    return problems.length ? this.failed(s, 'lint', ['dockerfile_invalid'], problems) : this.passed(s);
  }

  private async build(s: CandidateState): Promise<StageOutcome> {
    const task = await writeCandidate(this.taskDir(s), s, this.options.generator.config.model, this.limits);
    try {
      const prepared = await this.options.provider.prepare(task, { signal: this.options.signal, forceBuild: true });
      s.image = prepared.image;
      return this.passed(s, { image: prepared.image, cached: prepared.cached });
    } catch (err) {
      await this.unlessEngineDown(err);
      const log = (err as { log?: string }).log ?? '';
      return this.failed(s, 'build', ['build_failed'], [errorMessage(err), ...log.trim().split('\n').slice(-30)]);
    }
  }

  /**
   * A build or an observation that failed because the engine is gone is infrastructure, not the
   * environment's fault: rethrown (a cancel as it is; a lost engine, or one that no longer answers
   * when asked once, as the engine's error), so the stage stays unrecorded, no repair round is
   * spent and the job stops (exit 3); the same command resumes it. Otherwise returns: the
   * environment's failure, for its repair.
   */
  private async unlessEngineDown(err: unknown): Promise<void> {
    if (err instanceof CancelledError || this.options.signal?.aborted || isEngineLost(err)) throw err;
    await this.options.provider.ping();
  }

  private async prepared(s: CandidateState) {
    const task = await writeCandidate(this.taskDir(s), s, this.options.generator.config.model, this.limits);
    // The image is content-addressed: a resumed job finds the one it built.
    return {
      task,
      prepared: await this.options.provider.prepare(task, { signal: this.options.signal, forceBuild: true }),
    };
  }

  private async observe(s: CandidateState): Promise<StageOutcome> {
    try {
      const { task, prepared } = await this.prepared(s);
      s.environmentState = await recordEnvironmentState(
        this.options.provider,
        task,
        prepared,
        s.parts.environment!,
        this.options.signal,
      );
      return this.passed(s, { entries: s.environmentState.tree.length });
    } catch (err) {
      await this.unlessEngineDown(err);
      return this.failed(s, 'observe', ['observe_failed'], [errorMessage(err)]);
    }
  }

  private async execute(s: CandidateState): Promise<StageOutcome> {
    const { task, prepared } = await this.prepared(s);
    const state = await runSolution(this.options.provider, task, prepared, this.options.signal);
    s.solutionState = state;
    const evidence: string[] = [];
    if (state.timedOut) evidence.push(`solve.sh did not finish within ${task.config.agent.timeout_sec} s`);
    else if (state.exitCode !== 0) evidence.push(`solve.sh exited ${state.exitCode}`);
    const touched = new Set(state.changes.filter((c) => c.kind !== 'deleted').map((c) => c.path));
    const missing = s.parts.scenario!.outputs.filter((o) => !touched.has(o));
    if (missing.length)
      evidence.push(`the solution left untouched the outputs the scenario names: ${missing.join(', ')}`);
    if (evidence.length === 0) return this.passed(s, { changes: state.changes.length });
    if (state.stderr.trim()) evidence.push(`stderr: ${state.stderr.trim()}`);
    return this.failed(s, 'execute', ['solution_wrong'], evidence);
  }

  private async check(s: CandidateState): Promise<StageOutcome> {
    const dir = this.taskDir(s);
    await writeCandidate(dir, s, this.options.generator.config.model, this.limits);
    const report = await checkTasks([dir], {
      provider: this.options.provider,
      outDir: path.join(this.workRoot, 'work', s.id, `check-${s.round}`),
      repeat: this.options.repeat ?? 2,
      probes: this.options.probes ?? 'all',
      protection: this.options.protection,
      concurrency: 1,
      signal: this.options.signal,
    });
    if (report.summary.cancelled || this.options.signal?.aborted) throw new CancelledError('check');
    const checked = report.tasks[0]!;
    s.tests = checked.tests;
    const detail = { verdict: checked.verdict, tests: checked.tests.length, findings: checked.findings };
    if (checked.verdict === 'admissible' && checked.tests.length === 0)
      return this.failed(s, 'check', ['no_test_report'], [NO_TEST_REPORT], detail);
    if (checked.verdict === 'admissible') {
      s.plan = ['write'];
      return { outcome: 'passed', state: s, detail };
    }
    return this.failed(
      s,
      'check',
      checked.reasons,
      [
        ...checked.details,
        ...checked.findings.map((f) => `${f.probe}${f.rejects ? '' : ' (warning)'}: ${f.did}: ${f.saw}`),
      ],
      detail,
    );
  }

  private async write(s: CandidateState): Promise<StageOutcome> {
    const turn = this.writing.then(async () => {
      const index = await this.admittedIndex();
      const mine = await duplicateKey(this.taskDir(s));
      const dup = mine ? index.matches(mine)[0] : undefined;
      if (dup)
        return this.reject(s, ['duplicate'], {
          reasons: ['duplicate'],
          evidence: [`the same task as ${dup.name}: ${dup.why}`],
        });
      s.admittedPath = await publish(this.taskDir(s), this.outDir, s.id);
      s.status = 'admitted';
      if (mine) index.add({ ...mine, name: s.admittedPath });
      return this.passed(s, { path: s.admittedPath });
    });
    // The caller gets this write's failure from `turn`; the queue of writes only needs to go on.
    this.writing = turn.catch(() => undefined);
    return turn;
  }

  /**
   * The tasks a new one must not duplicate (the pool given and every task admitted so far), read
   * from disk once per job and kept in step by each write: comparing one more costs about the
   * tasks sharing its text, not a reading of every admitted folder (quadratic over a large job).
   */
  private admittedIndex(): Promise<DuplicateIndex> {
    if (this.index) return this.index;
    this.index = (async () => {
      const admitted = this.store
        .candidates()
        .filter((c) => c.status === 'admitted' && c.admittedPath)
        .map((c) => c.admittedPath!);
      const index = new DuplicateIndex();
      for (const key of await Promise.all([...(this.options.pool ?? []), ...admitted].map(duplicateKey)))
        if (key) index.add(key);
      return index;
    })();
    // A failed reading is not kept: the next write tries again.
    this.index.catch(() => (this.index = null));
    return this.index;
  }
}

/** The seeds file's seeds and the exemplars' (an id both use is bad input). */
async function withExemplars(seeds: SynthOptions['seeds'], dirs: string[]): Promise<SynthOptions['seeds']> {
  const exemplars = await readExemplars(dirs);
  const ids = new Set(seeds.map((s) => s.id));
  const clash = exemplars.find((e) => ids.has(e.id));
  if (clash) throw new SeedError(`seed id ${clash.id} is both a seeds line and an exemplar folder's: rename one`);
  return [...seeds, ...exemplars];
}

async function duplicateKey(dir: string): Promise<DuplicateCandidate | null> {
  try {
    return await readDuplicateKey(dir);
  } catch (err) {
    // A pool folder that is no task cannot be duplicated; said once, not fatal.
    process.emitWarning(`synth: ${dir} is not a loadable task for the duplicate check: ${errorMessage(err)}`);
    return null;
  }
}

/** Reads a seeds file: one JSON object per line (blank lines skipped); errors name the line. */
export async function readSeeds(file: string): Promise<Array<{ id: string; seed: Seed }>> {
  const { SeedSchema } = await import('./schema.js');
  const text = await readFile(file, 'utf8');
  const out: Array<{ id: string; seed: Seed }> = [];
  const ids = new Set<string>();
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (err) {
      throw new SeedError(`${file}:${i + 1}: not JSON (${(err as Error).message})`);
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
      throw new SeedError(`${file}:${i + 1}: a seed must be a JSON object`);
    const parsed = SeedSchema.safeParse(raw);
    if (!parsed.success)
      throw new SeedError(
        `${file}:${i + 1}: field ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`,
      );
    const id = parsed.data.id ?? `seed-${i + 1}`;
    if (ids.has(id)) throw new SeedError(`${file}:${i + 1}: seed id ${id} is used twice`);
    ids.add(id);
    out.push({ id, seed: parsed.data });
  });
  if (out.length === 0) throw new SeedError(`${file}: no seeds`);
  return out;
}

/** A generation the endpoint could not serve: the candidate waits, it is not rejected. */
class GeneratorOutage extends Error {}

/**
 * The endpoint refused a request as every later one would be refused (see isFatalModelError): the
 * job stops (exit 2, the model error's own code) with the stage unrecorded and nothing rejected.
 */
class GeneratorRefused extends TermgradeError {
  constructor(err: ModelError, what: string, generator: Generator) {
    const scrub = makeScrub([generator.secret()]);
    super(
      err.code,
      `the generator (${generator.config.model} at ${generator.config.baseUrl}) refused ${what} request: ${scrub(err.message)}. The job stopped with no candidate rejected: fix the model configuration or the server, then run the same command again to resume`,
      { cause: err },
    );
  }
}

/** Bad seeds are bad input (exit 2), named by file and line. */
export class SeedError extends TermgradeError {
  constructor(message: string) {
    super('usage', message);
  }
}
