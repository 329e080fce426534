import { existsSync } from 'node:fs';
import path from 'node:path';
import { nopAgent, oracleAgent } from '../agent/oracle.js';
import type { Task } from '../task/task.js';
import { accountingOf, DEFAULT_INFRA_RETRIES } from '../trial/accounting.js';
import { runTrial } from '../trial/run.js';
import type { TrialResult } from '../trial/schema.js';
import { clipMessage } from '../util/clip.js';
import { CancelledError, errorMessage } from '../util/errors.js';
import { readTextIfThere } from '../util/files.js';
import { mergeStepRecords, type ProtectionRecord } from '../verifier/protection.js';
import { downloadFailure } from '../verifier/toolchain/needs.js';
import { describeCommands, type VerifierPlan } from '../verifier/toolchain/plan.js';
import type { CheckEvent, CheckOptions } from './options.js';
import { TaskProber } from './probes.js';
import type { CheckedTask } from './schema.js';
import { judge, oracleRunPassed, type ReasonCode } from './verdict.js';

/** One task's check once its image is built: what its runs read and where they write. */
export interface CheckContext {
  taskPath: string;
  task: Task;
  plan: VerifierPlan;
  options: CheckOptions;
  result: CheckedTask;
  emit: (event: CheckEvent) => void;
  /** The admission record of the first passing oracle run (what the verifier touched): the hack probes' targets. */
  record?: ProtectionRecord | null;
}

/** A task folder's name as a file name. */
export const safeName = (p: string): string => path.basename(p).replace(/[^A-Za-z0-9._-]+/g, '-') || 'task';

/** A task that asks for the internet, checked with `--network NAME`: its trials join NAME. */
export const checkedOnline = (ctx: Pick<CheckContext, 'task' | 'options'>): boolean =>
  Boolean(ctx.options.network && ctx.task.limits.network);

/**
 * One admission trial, offline (network null) unless the task asks for the internet and check
 * was given `--network NAME` (run --network's isolation rules apply to NAME). The reference
 * solution's grading records the task's protected set (kept once it passed). A run whose
 * infrastructure failed (the one accounting rule, accountingOf) says nothing of the task: it is
 * run again, up to DEFAULT_INFRA_RETRIES times, as a job's slot is by default; the last run is judged, so a
 * failure that persists still rejects (fail closed), its earlier runs named in the details. A
 * cancel is thrown.
 */
async function checkTrial(ctx: CheckContext, agent: typeof oracleAgent, attempt: number): Promise<TrialResult> {
  const { result } = ctx;
  for (let runs = 1; ; runs++) {
    const r = await checkTrialOnce(ctx, agent, attempt);
    const infra = accountingOf(r.reward, r.error?.class) === 'infra';
    if (!infra || runs > DEFAULT_INFRA_RETRIES || ctx.options.signal?.aborted) {
      result.trials.push(r.trialId);
      if (r.errors.some((e) => e.class === 'cancelled')) throw new CancelledError('check');
      for (const e of r.errors) result.details.push(`${agent.name} run ${attempt + 1}: ${e.class}: ${e.message}`);
      return r;
    }
    result.details.push(
      `${agent.name} run ${attempt + 1}: the infrastructure failed (${r.error!.class}: ${clipMessage(r.error!.message)}; trial ${r.trialId}), run again`,
    );
  }
}

async function checkTrialOnce(ctx: CheckContext, agent: typeof oracleAgent, attempt: number): Promise<TrialResult> {
  const { task, options } = ctx;
  const recorded: { record: ProtectionRecord | null } = { record: null };
  // Recorded to be kept (a protection store) or for the hack probes (level all) to find their targets.
  const wanted = agent === oracleAgent && (options.protection !== undefined || options.probes === 'all');
  const r = await runTrial({
    task,
    agent,
    provider: options.provider,
    outDir: path.join(options.outDir, 'trials'),
    attempt,
    timeouts: options.timeouts,
    signal: options.signal,
    network: checkedOnline(ctx) ? options.network! : null,
    prepare: () =>
      options.provider.prepare(task, {
        signal: options.signal,
        forceBuild: options.forceBuild,
        agentLayer: agent.imageLayer,
      }),
    // A multi-step task's steps each make a record: one record of them all (see mergeStepRecords).
    onProtectionRecord: wanted ? (rec) => (recorded.record = mergeStepRecords(recorded.record, rec)) : undefined,
  });
  if (recorded.record && oracleRunPassed(r)) {
    ctx.record ??= recorded.record;
    await options.protection?.save(recorded.record);
  }
  return r;
}

/**
 * The reference solution's runs (`repeat`, at least one). Once runs disagree the task is flaky;
 * more runs would not change the verdict. A timeout is not repeated either: every repeat would cost
 * the full timeout again.
 */
async function oracleRuns(ctx: CheckContext): Promise<TrialResult[]> {
  const { result } = ctx;
  const repeat = Math.max(1, ctx.options.repeat ?? 2);
  const runs: TrialResult[] = [];
  for (let i = 0; i < repeat; i++) {
    ctx.emit({ type: 'phase', path: ctx.taskPath, phase: 'oracle', run: i + 1 });
    const r = await checkTrial(ctx, oracleAgent, i);
    runs.push(r);
    if (!oracleRunPassed(r)) {
      // Name what failed, with pytest's own words where it gave some (a collection error names the missing module).
      const failed = r.tests
        .filter((t) => t.status !== 'passed' && t.status !== 'skipped')
        .map((t) => (t.message ? `${t.name} (${clipMessage(t.message)})` : t.name));
      result.details.push(
        `oracle run ${i + 1}: reward ${r.reward ?? 'none'}${failed.length ? `, failed: ${failed.join(', ')}` : ''}`,
      );
    }
    const passes = runs.filter(oracleRunPassed).length;
    if (passes > 0 && passes < runs.length) break;
    if (r.errors.some((e) => e.class === 'agent_timeout' || e.class === 'verifier_timeout')) break;
  }
  result.oracle = {
    runs: runs.length,
    passed: runs.filter(oracleRunPassed).length,
    rewards: runs.map((r) => r.reward),
  };
  result.tests = [...new Set(runs.flatMap((r) => r.tests.map((t) => t.name)))];
  return runs;
}

/** The verifier log of a run kept under the check's trials. */
const verifierLog = (ctx: CheckContext, r: TrialResult | undefined): Promise<string | null> =>
  r
    ? readTextIfThere(path.join(ctx.options.outDir, 'trials', r.trialId, 'verifier', 'test-stdout.txt'))
    : Promise.resolve(null);

/** The way forward for a verifier that fetches what the offline toolchain cannot serve. */
const NEEDS_NETWORK_NEXT_STEP =
  'ask for Python requirements through `uvx -w NAME pytest ...` or `pip install NAME` (served from Debian or --verifier-wheels DIR) or install them in the Dockerfile, or check the task online with --network NAME (an isolated network, as run --network takes)';

/** What the offline toolchain says of itself in a verifier log: what it served, and why it could not. */
const TOOLCHAIN_SAYS = /^termgrade offline verifier toolchain: (.*)$/gm;

/**
 * What stood in for what the task asked: the toolchain's own words in the oracle's log (with
 * Debian's versions); the plan's reading of test.sh when there is no log.
 */
async function substitutions(ctx: CheckContext, runs: TrialResult[]): Promise<string[]> {
  if (ctx.plan.kind !== 'toolchain' || !ctx.task.verifierLayer) return [];
  const log = await verifierLog(ctx, runs[0]);
  // No log: the plan's reading. A log without these lines: the toolchain served nothing (it refused).
  if (log === null) return ctx.plan.substituted;
  return [
    ...new Set(
      [...log.matchAll(TOOLCHAIN_SAYS)]
        .map((m) => /^served (.*) with (.*)$/.exec(m[1]!))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => `${m[1]} -> ${m[2]}`),
    ),
  ];
}

/**
 * An oracle that failed because test.sh could not fetch its tools: named as such, with the
 * commands, when the verifier's log confirms a download failed, or when the offline toolchain
 * said what it could not serve (a requirement Debian has no package of), with the next step.
 */
async function blameNetwork(ctx: CheckContext, reasons: ReasonCode[], runs: TrialResult[]): Promise<void> {
  const { plan, task } = ctx;
  const blamed = reasons.find((r) => r === 'oracle_failed' || r === 'verifier_error');
  if (plan.kind === 'offline' || !blamed) return;
  const log = await verifierLog(
    ctx,
    runs.find((r) => !oracleRunPassed(r)),
  );
  const unserved = [...(log ?? '').matchAll(TOOLCHAIN_SAYS)].map((m) => m[1]!).find((m) => !m.startsWith('served '));
  // Served by the toolchain (a needs-network task graded offline has the fetch settings alone).
  const served = plan.kind === 'toolchain' && task.verifierLayer !== undefined;
  if (served && unserved) {
    reasons.splice(reasons.indexOf(blamed), 1, 'verifier_needs_network');
    ctx.result.details.push(
      `verifier_needs_network: the offline verifier toolchain could not serve what test.sh asks: ${unserved}`,
    );
    return;
  }
  if (served && plan.aptPackages.length === 0) return;
  const seen = log ? downloadFailure(log) : null;
  if (!seen) {
    // Not confirmed by the log (a fetcher missing from the image says nothing of the network): the reason stands, the way forward is named.
    if (plan.kind === 'needs-network' && !checkedOnline(ctx))
      ctx.result.details.push(
        `${blamed}: test.sh also fetches what the offline toolchain cannot serve (${plan.unmet.join('; ')}); if that is why, next step: ${NEEDS_NETWORK_NEXT_STEP}`,
      );
    return;
  }
  reasons.splice(reasons.indexOf(blamed), 1, 'verifier_needs_network');
  const why = checkedOnline(ctx)
    ? ` (checked online on network ${ctx.options.network}: the fetch failed there; give NAME a way out, a router or proxy container of your own)`
    : plan.kind === 'needs-network'
      ? ` (the offline toolchain cannot serve it: ${plan.unmet.join('; ')}; next step: ${NEEDS_NETWORK_NEXT_STEP})`
      : served
        ? ` (the offline toolchain served uvx, but not the apt package(s) ${plan.aptPackages.join(', ')}, which the image lacks; next step: install them in the task's Dockerfile, or check it online with --network NAME)`
        : ' (the offline toolchain was turned off)';
  ctx.result.details.push(
    `verifier_needs_network: test.sh fetches from the network: ${describeCommands(plan.commands)}${why}; its log shows: ${seen}`,
  );
}

/**
 * The probes for exploitable tasks, on a task the runs admitted. Only what execution confirmed
 * rejects; the rest is a warning, shown but not a reason. A probe that cannot run is named.
 */
async function runProbes(ctx: CheckContext, reasons: ReasonCode[], nop: TrialResult): Promise<void> {
  const { task, options, result } = ctx;
  const level = options.probes ?? 'fast';
  const p0 = performance.now();
  const prober = new TaskProber(
    task,
    options.provider,
    path.join(options.outDir, 'probes', safeName(ctx.taskPath)),
    options.signal,
    options.timeouts?.verifierMultiplier,
  );
  ctx.emit({ type: 'phase', path: ctx.taskPath, phase: 'probes' });
  const nopLogs = path.join(options.outDir, 'trials', nop.trialId, 'verifier');
  const rewardFile = existsSync(path.join(nopLogs, 'reward.json')) ? 'reward.json' : 'reward.txt';
  for (const probe of [
    () => prober.forgeable(rewardFile).then((f) => (f ? [f] : [])),
    () => prober.fromOracle(level, ctx.record ?? null),
    ...(level === 'all' ? [() => prober.agentProcesses(ctx.record ?? null)] : []),
  ]) {
    try {
      result.findings.push(...(await probe()));
    } catch (err) {
      if (err instanceof CancelledError || options.signal?.aborted) throw err;
      result.details.push(`a probe could not run: ${errorMessage(err)}`);
    }
  }
  result.probeMs = performance.now() - p0;
  result.hacks = prober.hackAttempts.map((a) => ({ ...a, ms: Math.round(a.ms) }));
  for (const note of prober.hackNotes) result.details.push(`hack probes: ${note}`);
  if (level === 'all' && !ctx.record)
    result.details.push(
      'hack probes: no trace of what the verifier touched (the backend cannot trace), so every output that is code was played on',
    );
  for (const f of result.findings) {
    if (f.rejects) reasons.push(f.probe);
    result.details.push(`${f.rejects ? '' : 'warning: '}${f.probe}: ${f.did}: ${f.saw}`);
  }
}

/** The oracle runs, the do-nothing run, and (on a task they admit) the probes: the task's reasons, each once. */
export async function checkRuns(ctx: CheckContext): Promise<ReasonCode[]> {
  const { task, options, result } = ctx;
  const runs = await oracleRuns(ctx);
  ctx.emit({ type: 'phase', path: ctx.taskPath, phase: 'nop' });
  const nop = await checkTrial(ctx, nopAgent, 0);
  result.nop = { reward: nop.reward };
  if (nop.passed) result.details.push(`nop: reward ${nop.reward}: the tests pass with no work done`);
  const reasons = judge(runs, nop);
  result.substitutions = await substitutions(ctx, runs);
  await blameNetwork(ctx, reasons, runs);
  const level = options.probes ?? 'fast';
  // The probes replay the task's own solution/ against its own tests/: a multi-step task's steps
  // (each with its solution and tests) are not what they would judge, so they are not run on it.
  const steps = task.steps?.length ?? 0;
  result.probesNotRun = probesNotRun(level, steps, reasons.length > 0);
  if (checkedOnline(ctx) && level !== 'none' && reasons.length === 0) {
    // The probes grade offline: an online verifier would fail them all for want of its network.
    result.probesNotRun = [
      `all probes: the task was checked online (--network ${options.network}), and the probes grade offline`,
    ];
    return [...new Set(reasons)];
  }
  if (steps > 0 && level !== 'none' && reasons.length === 0)
    result.details.push(
      `probes not run: a multi-step task (${steps} steps) is admitted by its oracle and do-nothing runs only`,
    );
  if (reasons.length === 0 && level !== 'none' && steps === 0) await runProbes(ctx, reasons, nop);
  return [...new Set(reasons)];
}

/** The probes left out for this task, each with why. */
function probesNotRun(level: 'none' | 'fast' | 'all', steps: number, rejected: boolean): string[] {
  const fast = ['reward_forgeable', 'solution_leaked', 'verifier_nondeterministic'];
  const all = ['weak_tests', 'reward_hackable'];
  const why = rejected
    ? 'the oracle and do-nothing runs already rejected the task'
    : steps > 0
      ? `a multi-step task (${steps} steps) is judged by its oracle and do-nothing runs only`
      : null;
  if (level === 'none') return [`${[...fast, ...all].join(', ')}: --probes none`];
  if (why) return [`${[...fast, ...(level === 'all' ? all : [])].join(', ')}: ${why}`];
  return level === 'fast' ? [`${all.join(', ')}: --probes fast (--probes all runs them)`] : [];
}
